"""``run(cfg)``: the one place that decides how a configured run executes.

- ``cfg.run.pipeline == "none"``: one process under exact emulated delay
  (:func:`llm_validation.training.loop.train`);
- ``2bw``, ``gpipe``, ``1f1b``: a real multi-process pipeline of ``cfg.run.stages`` stages
  times ``cfg.run.data_parallel`` replicas (:func:`llm_validation.pipeline.launch.launch_pipeline`),
  one process per stage and replica (or, under ``torchrun``, this process is one of the ranks);
- ``"none"`` with ``cfg.run.data_parallel > 1``: the emulated delay and EF on D data-parallel
  processes (:mod:`llm_validation.pipeline.data_parallel`, same launcher).

Before anything is written, the run folder's lock is taken (:mod:`llm_validation.records.folder_lock`:
one writer per run folder; a second ``run`` on the same ``out_dir`` is refused with the holder's
PID; under ``torchrun`` rank 0 holds it for the job). Both write the same run directory
(:mod:`llm_validation.rundir`) and return the same
:class:`llm_validation.rundir.RunResult`. Callers (the CLI, the sweep runner, the demo, the
claims ledger) use this function only.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from llm_validation.config import PIPELINE_KINDS, TrainConfig
from llm_validation.records.folder_lock import folder_lock
from llm_validation.pipeline.emulator_resume import emulator_checkpoint
from llm_validation.pipeline.launch import launch_pipeline
from llm_validation.pipeline.processes import torchrun_env
from llm_validation.rundir import RunResult
from llm_validation.training.loop import train

__all__ = ["run"]


def run(cfg: TrainConfig, *, progress: bool = True,
        callback: Callable[[int, dict[str, Any]], None] | None = None,
        on_start: Callable[[], None] | None = None) -> RunResult:
    """Execute ``cfg`` (see the module docstring). ``progress``: progress lines on stderr;
    ``callback(step, row)`` after every step (emulated runs only; tests interrupt runs with it);
    ``on_start()`` once the run folder is this process's (its lock taken), before anything is
    written: a caller's announcement that must not precede a refusal."""
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"run needs a TrainConfig, got {type(cfg).__name__}")
    if cfg.run.pipeline not in ("none", *PIPELINE_KINDS):
        raise ValueError(f"RunConfig.pipeline={cfg.run.pipeline!r} is not one of "
                         f"{['none', *PIPELINE_KINDS]}")
    emulated = cfg.run.pipeline == "none" and cfg.run.data_parallel == 1
    if callback is not None and not emulated:
        raise ValueError("callback is supported for single-process emulated runs only "
                         "(pipeline='none', data_parallel=1)")
    env = torchrun_env()
    lock = folder_lock(cfg.run.out_dir, "run") if env is None or env["rank"] == 0 \
        else contextlib.nullcontext()
    with lock:
        if on_start is not None:
            on_start()
        if emulated:
            if cfg.run.resume:     # resuming a pipeline's run here: its checkpoint, converted
                emulator_checkpoint(cfg)
            return train(cfg, progress=progress, callback=callback)
        return launch_pipeline(cfg, progress=progress)
