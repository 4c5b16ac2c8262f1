"""LLM pretraining under exact emulated delay and on a real multi-process pipeline, and the
validation of the theory's assumptions and predicted trends on those runs.

Public API (stable; docs/api.md), importable from the package top and loaded on first use, so
``import llm_validation`` alone stays cheap (no torch import):

- :class:`DelayedOptimizer` (``training.delay``): exact tau-step gradient delay and Error
  Feedback around any torch optimizer;
- :class:`StatsRecorder` (``recorder``): the project's gradient statistics from any model,
  optimizer and loop, written as a run directory that ``delaybound validate`` reads;
- :func:`validate_runs` (``validation.validate``): the verdicts on run directories (or loaded
  runs), as ``delaybound validate`` prints them;
- :func:`read_metrics` (``rundir``): the rows of a run's ``metrics.jsonl``;
- :class:`Schedule2BW` (``pipeline.schedule2bw``): PipeDream-2BW for any model on
  ``torch.distributed.pipelining`` (docs/schedule2bw.md).

Layout (``docs/architecture.md`` has one line per module):

- :mod:`config` (frozen run configuration, presets), :mod:`rundir` (the run directory: paths,
  JSON, metrics, checkpoints, ``RunResult``, resume checks), :mod:`run` (``run(cfg)``, the one
  place that chooses the emulated loop or a pipeline), :mod:`recorder` (statistics of a loop
  this project did not write);
- :mod:`training` (model, data, optimizers, the delay/EF wrapper, statistics, the step probe,
  the emulated training loop);
- :mod:`pipeline` (schedules, p2p links, executor, the shared stage runtime, 2BW, GPipe/1F1B,
  process launch, faults);
- :mod:`sweep` (grids and the resumable runner); :mod:`validation` (run tables, inference,
  verdicts, assumption / bound / trend checks, figures, report).

Layers inside: config <- rundir <- training <- pipeline <- run <- sweep; validation reads run
directories only (config, rundir).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module that defines it (imported on first access, PEP 562).
_PUBLIC = {"DelayedOptimizer": "llm_validation.training.delay",
           "StatsRecorder": "llm_validation.recorder",
           "validate_runs": "llm_validation.validation.validate",
           "read_metrics": "llm_validation.rundir",
           "Schedule2BW": "llm_validation.pipeline.schedule2bw"}

__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'llm_validation' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
