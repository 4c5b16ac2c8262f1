"""What a run writes, and how it writes it safely: the files beside a run's checkpoints.

Reading order: ``atomic_io`` (atomic JSON/text writes; ``write_json``, ``read_json``),
``folder_lock`` (one writer per folder), ``metrics_rows`` (the two row shapes of
metrics.jsonl), ``provenance`` (versions, platform and commit a run records), ``progress``
(elapsed time and ETA lines), ``run_name`` (how a run is named from its config: sweeps, the
ledger, ``train``'s default folder), ``run_folder`` (what a folder holds and what ``train`` does
with each state), ``tensorboard_log`` (metrics rows as TensorBoard scalars, an optional extra),
``figure_file`` (a figure written to its PNG: folder made, figure closed).
The run directory itself (paths, checkpoints, ``RunResult``) is :mod:`llm_validation.rundir`.
"""
