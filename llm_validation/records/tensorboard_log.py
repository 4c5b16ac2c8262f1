"""Metrics rows as TensorBoard scalars (``train --tensorboard DIR``, ``StatsRecorder(...,
tensorboard=DIR)``), through ``torch.utils.tensorboard``: an optional extra (``pip install
'delaybound[tensorboard]'``); without the ``tensorboard`` package a :class:`TensorboardLog`
cannot be made (``ValueError`` saying what to install).

Every finite number of a row becomes the scalar ``<kind>/<key>`` at the row's step (``train/loss``,
``train/grad_noise_var``, ``eval/val_loss``...). metrics.jsonl stays the record; the event files
are a view of it for people who watch runs in TensorBoard.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from llm_validation.rundir import read_metrics

__all__ = ["TensorboardLog", "NOT_SCALARS", "scalars"]

#: Row keys that are bookkeeping, not measurements.
NOT_SCALARS = frozenset({"step", "kind", "diverged"})


def scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """``<kind>/<key>`` -> value for every finite number of a metrics row."""
    kind = row.get("kind", "train")
    return {f"{kind}/{k}": float(v) for k, v in row.items()
            if k not in NOT_SCALARS and isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v)}


class TensorboardLog:
    """A ``SummaryWriter`` on ``log_dir`` fed with metrics rows (module docstring)."""

    def __init__(self, log_dir: str | Path) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ValueError("--tensorboard needs the tensorboard package: pip install "
                             "'delaybound[tensorboard]'") from None
        self.log_dir = Path(log_dir)
        self.writer = SummaryWriter(log_dir=str(self.log_dir))
        self._written: set[tuple[str, int]] = set()

    def row(self, step: int, row: Mapping[str, Any]) -> None:
        """Write one metrics row (the training loop's ``callback(step, row)``)."""
        kind = str(row.get("kind", "train"))
        for tag, value in scalars(row).items():
            self.writer.add_scalar(tag, value, global_step=int(step))
        self._written.add((kind, int(step)))

    def add_run(self, run_dir: str | Path) -> int:
        """Write the rows of ``run_dir``'s metrics.jsonl that did not pass through :meth:`row`
        (a live run's closing eval row; every row of a run that had no callback); returns how
        many."""
        n = 0
        for r in read_metrics(run_dir):
            key = (str(r.get("kind", "train")), int(r["step"]))
            if key in self._written:
                continue
            self.row(key[1], r)
            n += 1
        self.writer.flush()
        return n

    def close(self) -> None:
        self.writer.close()
