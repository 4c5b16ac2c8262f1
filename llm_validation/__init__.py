"""LLM pretraining under exact emulated delay and on a real multi-process pipeline, and the
validation of the theory's assumptions and predicted trends on those runs.

Layout (``docs/architecture.md`` has one line per module):

- :mod:`config` (frozen run configuration, presets), :mod:`rundir` (the run directory: paths,
  JSON, metrics, checkpoints, ``RunResult``, resume checks), :mod:`run` (``run(cfg)``, the one
  place that chooses the emulated loop or a pipeline);
- :mod:`training` (model, data, optimizers, the delay/EF wrapper, statistics, the step probe,
  the emulated training loop);
- :mod:`pipeline` (schedules, p2p links, executor, the shared stage runtime, 2BW, GPipe/1F1B,
  process launch, faults);
- :mod:`sweep` (grids and the resumable runner); :mod:`validation` (run tables, inference,
  verdicts, assumption / bound / trend checks, plots, report).

Layers inside: config <- rundir <- training <- pipeline <- run <- sweep; validation reads run
directories only (config, rundir).
"""

__all__: list[str] = ["Schedule2BW"]


def __getattr__(name: str):
    """Lazy public API: ``Schedule2BW`` (PipeDream-2BW on torch.distributed.pipelining,
    :mod:`llm_validation.pipeline.schedule2bw`) is imported on first use only."""
    if name == "Schedule2BW":
        from llm_validation.pipeline.schedule2bw import Schedule2BW
        return Schedule2BW
    raise AttributeError(f"module 'llm_validation' has no attribute {name!r}")
