"""Metrics of a pipeline run: per-stage partial sums, reduced on stage 0 into metrics rows.

Each stage computes the partial sums of :mod:`llm_validation.training.stats` over its own
parameters with the emulator's own probe (:mod:`llm_validation.training.probe`) restricted to
that stage; the extra gradients it needs come from side passes through the whole pipeline.
The partial sums and the step's scalars stay on the device until a flush (every
``log_interval`` steps, checkpoint steps, the end: :mod:`llm_validation.training.flush`), where
each stage reads them with one copy and sends ``{"step": flush, "rows": [...], "diverged"}`` to
stage 0 on the control group; the last stage's rows hold the training loss, the validation
loss and ``f_x``/``f_y``. Stage 0 reduces the partials
(``stats.reduce_partials``: sums, or max for ``max_*``) BEFORE any square root and writes the
row with ``stats.finalize``, exactly the row the emulated run writes (same keys; values equal
up to the order of floating-point summation across parameters).

With D data-parallel replicas only replica 0's stages report (global ranks 0..P-1): every
replica holds the same averaged gradients and gathered losses, and the microbatch-variance sum
is already summed over the replicas (:mod:`llm_validation.pipeline.replicas`); the row counts
``D * M`` microbatches, the emulator's for the same global batch.
"""

from __future__ import annotations

import time
from typing import Any

from llm_validation.pipeline.comm import StageLink
from llm_validation.pipeline.stage import StageSetup
from llm_validation.records.progress import eta_suffix
from llm_validation.rundir import MetricsWriter, diverged_row, eval_row
from llm_validation.training import stats
from llm_validation.training.flush import SCALARS

__all__ = ["MetricsCollector"]


class MetricsCollector:
    """Stage 0: gathers every stage's message of a flush and writes its metrics rows."""

    def __init__(self, setup: StageSetup, link: StageLink, writer: MetricsWriter) -> None:
        self.setup, self.link, self.writer = setup, link, writer
        self.own: dict[int, dict[str, Any]] = {}    # stage 0's message of each pending flush
        self.rows_written = 0
        self.t0 = time.perf_counter()                # the progress line's ETA clock
        self.last_row: dict[str, Any] | None = None

    def _gather(self, own: dict[str, Any], step: int | str) -> list[dict[str, Any]]:
        msgs = [own]
        for src in range(1, self.setup.stages):
            m = self.link.recv_message(self.link.ranks[src],
                                       f"the rows of step {step} from stage {src}")
            if m.get("step") != step:
                raise RuntimeError(f"stage 0 expected the message of step {step} from stage {src}, "
                                   f"got step {m.get('step')}")
            msgs.append(m)
        return msgs

    def add(self, flush: int, own: dict[str, Any]) -> None:
        """Stage 0's own message of the flush at step ``flush`` (rows are written by
        :meth:`write_through`)."""
        self.own[flush] = own

    def write_through(self, flush: int, lr_of: Any) -> None:
        """Write the rows of every pending flush up to and including step ``flush`` (waits for
        the other stages' messages of those flushes); a diverged flush ends with the diverged
        row of its step."""
        for f in sorted(k for k in self.own if k <= flush):
            msgs = self._gather(self.own.pop(f), f)
            d = msgs[-1].get("diverged")
            for i, last in enumerate(msgs[-1]["rows"]):
                t = last["step"]
                if d is not None and t > d:
                    break
                self._write(t, last, [m["rows"][i] for m in msgs], lr_of(t), t == d)

    def _write(self, t: int, last: dict[str, Any], rows: list[dict[str, Any]], lr: float,
               diverged: bool) -> None:
        """The row of step t from every stage's flushed row (``last``: the last stage's, with
        the loss, validation loss and the pair losses f(x), f(y))."""
        cfg = self.setup.cfg
        if diverged:
            row = diverged_row(t, last["loss"], last.get("val_loss"), lr)
        else:
            part = stats.reduce_partials({k: v for k, v in r.items()
                                          if k != "step" and k not in SCALARS} for r in rows)
            row = stats.finalize(part, step=t, loss=last["loss"], lr=lr,
                                 val_loss=last.get("val_loss"),
                                 microbatches=cfg.run.microbatches * cfg.run.data_parallel,
                                 f_x=last.get("f_x"), f_y=last.get("f_y"))
            row["tokens"] = (t + 1) * cfg.tokens_per_step
        self.writer.write(row)
        self.last_row = row
        steps = cfg.run.steps
        if t % max(1, steps // 20) == 0 or t == steps - 1:
            vl = f" val {row['val_loss']:.4f}" if row.get("val_loss") is not None else ""
            print(f"[train] step {t + 1}/{steps} loss {row['loss']:.4f}{vl} lr {lr:.3g}"
                  + eta_suffix(self.rows_written + 1, steps - t - 1,
                               time.perf_counter() - self.t0),
                  flush=True)
        self.rows_written += 1

    def final(self, done: int, own: dict[str, Any]) -> tuple[float | None, list[dict[str, Any]]]:
        """The closing row ``{step: N, val_loss}`` from the last stage's final message (``own``
        is stage 0's, the last stage's too when P = 1); returns (that loss, every stage's
        final message)."""
        msgs = self._gather(own, "final")
        val = msgs[-1].get("val_loss")
        self.writer.write(eval_row(done, val))
        return val, msgs
