"""The metrics flush: per-step scalars kept on the device, read every ``log_interval`` steps.

A metrics row needs the step's loss, its learning rate, the gradient norm and (on statistics
steps) every partial sum of :mod:`llm_validation.training.stats`. Read on the host each step,
they cost one host synchronisation per step, which stalls a GPU's launch queue. As torchtitan
and Megatron-LM do (their ``log_freq`` / ``log_interval``), every runtime keeps those scalars on
the device in a :class:`RowBuffer` and reads all buffered steps with ONE copy at a flush.

Algorithm::

    for step t:
        ... forward, backward, optimizer step (W(t+1)) ...
        buffer.add(t, partials, loss=..., f_x=..., f_y=..., val_loss=...)   # device tensors
        if flush_due(t, log_interval, steps, checkpoint_due):
            rows = buffer.flush()                  # one device-to-host copy for all of them
            d = first_nonfinite(rows)              # divergence is found here
            write rows[..d] (row d: the diverged row); stop at d, else checkpoint if due

Assumptions: a flush comes at every checkpoint step and at the last step, so a checkpoint is
written only after every loss up to its step was read finite (never weights that follow a
non-finite loss), and the rows a crash can lose are those after the newest checkpoint, which a
resume rewrites anyway (``rundir.rewrite_metrics_before``).

Guarantee: the rows are bitwise those of ``log_interval = 1`` (each value is read as float64 by
:func:`llm_validation.training.stats.to_host_rows` whichever steps travel together); a run
that diverges at step d writes the same rows (up to and including the diverged row of d), the
same status and message; the steps after d until the flush (at most ``log_interval - 1``) are
computed and dropped. Host reads per step: one at a flush step, none at the others.

Reference: torchtitan ``metrics.log_freq``; Megatron-LM ``--log-interval``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from torch import Tensor

from llm_validation.training.stats import to_host_rows

__all__ = ["RowBuffer", "flush_due", "first_nonfinite", "SCALARS"]

#: The per-step scalars a buffered record holds besides the partial sums (no partial sum is
#: named so: :mod:`llm_validation.training.stats` names them ``*_sq``, ``*_dual_*``, ...).
SCALARS = ("loss", "f_x", "f_y", "val_loss")


def flush_due(step: int, log_interval: int, steps: int, checkpoint_due: bool) -> bool:
    """Whether step ``step`` (0-based) of a run of ``steps`` ends with a flush: every
    ``log_interval`` steps (the end of each window ``(step + 1) % log_interval == 0``), at a
    checkpoint step and at the last step."""
    if log_interval < 1:
        raise ValueError(f"log_interval={log_interval} must be >= 1")
    return (step + 1) % log_interval == 0 or checkpoint_due or step == steps - 1


def first_nonfinite(rows: list[dict[str, Any]]) -> int | None:
    """Index of the first flushed row whose ``loss`` is non-finite (None: all finite or no
    loss on this rank)."""
    for i, row in enumerate(rows):
        loss = row.get("loss")
        if loss is not None and not math.isfinite(loss):
            return i
    return None


class RowBuffer:
    """The records of the steps since the last flush: partial sums and scalars on the device.

    Memory: a few dozen float64 scalars per step, at most ``log_interval`` steps."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def __len__(self) -> int:
        return len(self.records)

    def add(self, step: int, partials: Mapping[str, Any], **scalars: Tensor | float | None
            ) -> None:
        """Keep step ``step``'s ``partials`` and ``scalars`` (:data:`SCALARS`; None: absent)."""
        unknown = set(scalars) - set(SCALARS)
        if unknown:
            raise ValueError(f"RowBuffer.add: unknown scalars {sorted(unknown)}")
        clash = set(partials) & {"step", *SCALARS}
        if clash:
            raise ValueError(f"RowBuffer.add: partial sums named {sorted(clash)}")
        self.records.append({"step": step, **partials, **scalars})

    def flush(self) -> list[dict[str, Any]]:
        """Every buffered record as Python numbers (``step`` an int), read with ONE
        device-to-host copy; the buffer is emptied."""
        steps = [r["step"] for r in self.records]
        rows = to_host_rows([{k: v for k, v in r.items() if k != "step"}
                             for r in self.records])
        self.records = []
        return [{"step": t, **row} for t, row in zip(steps, rows)]
