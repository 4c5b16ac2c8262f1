"""The end of a pipeline stage's step: the metrics flush, the divergence verdict, checkpoints'
``COMPLETE`` markers (:class:`StageFlush`, a part of :class:`pipeline.runtime.StageRun`).

Algorithm (step t of stage s; ``training.flush``: a flush every ``log_interval`` steps, at
checkpoint steps and at the last step)::

    buffer the step's partial sums and scalars (device tensors)
    at a flush:
        rows = one host read of the buffered steps
        last stage: publish the first non-finite step so far (sticky, -1: none) under the
                    flush's key in the rendezvous store
        verdict = that key                      at a sync flush (every flush of GPipe/1F1B; a
                                                checkpoint step or the last step of 2BW)
                = the PREVIOUS flush's key      at any other 2BW flush
        verdict: stop at this step (every stage, the same flush); else checkpoint if due
        send the rows to stage 0, which writes them (up to the diverged step) and, at its
        next flush, the COMPLETE markers of the checkpoints saved since

Why the previous flush's key in 2BW: the last stage publishes it at its step of that batch,
before its next backward, and every other stage reaches this flush only after a backward that
depends (through the gradients it received) on the last stage's later backwards: the key is
there, no stage waits for another's step, and no stage holds a gradient back for it (the old
runtime sent the last microbatch's gradient only after its own step at every flush, which put
the P optimizer steps in series). The price: a divergence stops the run up to one flush window
later (those steps are computed and dropped: the rows, status and message are the
emulator's). At checkpoint steps every stage waits for the current key, so no checkpoint holds
weights that follow a non-finite loss.

Checkpoints and ``COMPLETE``: every stage saves its part at its own flush of the checkpoint
step (a long phase, ``save``, deadline ``io_s``: :mod:`pipeline.watchdog`). No stage holds a
gradient back for its save, so the stages' saves run in parallel (a slow save on one stage
delays its neighbours only through the data they wait for, and they keep waiting while it is
in its phase). Rank 0 writes the ``COMPLETE`` marker of checkpoint t+1 (after its rows up to t
are written) only once every stage's part exists (:func:`checkpoint.mark_complete` checks each
part's metadata, waiting inside the ``complete`` phase if one is missing):

- 2BW: at its NEXT flush, not right after its own save. Stage 0 steps last in every 2BW batch,
  so waiting there would stall the stage that feeds the whole pipeline for the rest of the
  slowest save; by its next flush the parts are there (with the step after the backward:
  stage 0's last backward of batch t+1 follows, through the gradients it received, every
  stage's STEP t and its save), so the marker costs no wait. At the last step: at once.
- the synchronous runtimes (every stage steps after the same flush): at once.

Guarantee: a checkpoint is marked complete only when all its parts exist, whenever a stage
dies; a run stopped between a checkpoint and rank 0's next flush leaves that checkpoint
unmarked and resumes from the one before (bitwise either way, the saves are the same).
"""

from __future__ import annotations

from typing import Any

import torch

from llm_validation.pipeline.checkpoint import mark_complete
from llm_validation.rundir import diverged_message
from llm_validation.training import host_syncs
from llm_validation.training.flush import first_nonfinite, flush_due

__all__ = ["StageFlush", "FLUSH_KEY"]

#: Rendezvous-store key prefix of each flush's verdict (``<prefix>/<step>``: the first step
#: with a non-finite training loss so far, or -1), set by the last stage.
FLUSH_KEY = "delaybound/flush"


class StageFlush:
    """The end-of-step methods of :class:`pipeline.runtime.StageRun` (module docstring); they
    use its attributes (``cfg``, ``ctx``, ``setup``, ``link``, ``rows``, ``collector``, ...)."""

    def flush_due(self, t: int) -> bool:
        """Whether step t ends with a flush (``training.flush.flush_due``): every
        ``log_interval`` steps, at checkpoint steps and at the last step."""
        return flush_due(t, self.cfg.run.log_interval, self.N, self.ckpt_due(t))

    def end_step(self, t: int, part: dict[str, Any], loss: torch.Tensor | None,
                 previous: dict[str, torch.Tensor] | None, f_x: torch.Tensor | None = None,
                 f_y: torch.Tensor | None = None) -> int | None:
        """After step t: buffer the step's partials and scalars (device tensors); at a flush
        read them all with ONE copy (rank 0: first the ``COMPLETE`` markers still pending,
        :meth:`mark_pending_complete`), settle divergence (:meth:`diverged_at`), then the
        checkpoint (if due and no loss diverged; ``previous`` = the version W(t); a ``save``
        phase, in parallel with the other stages'), this stage's message to stage 0, stage 0's
        rows and (synchronous runtimes, 2BW's last step) ``COMPLETE`` marker; a test fault (if
        set). Returns the diverged step (every stage stops there) or None to go on."""
        self.weight_peak = max(self.weight_peak, self.weight_bytes())
        self.rows.add(t, part, loss=loss, f_x=f_x, f_y=f_y, val_loss=self.val_loss.pop(t, None))
        d = None
        if self.flush_due(t):
            self._time("flush", start=True)   # its cost, for the simulator (pipeline.profile)
            rows = self.rows.flush()          # the one host read of the steps since the last
            if self.is_writer:                # checkpoints every stage has finished by now
                self.mark_pending_complete()
            d = self.diverged_at(t, rows)
            due = self.ckpt_due(t) and d is None
            if due:
                self._time("flush", count=0)
                self._time("checkpoint", start=True)
                self.checkpoint(t, previous)
                self._time("checkpoint")
                self._time("flush", start=True)
            self.report(t, rows)
            if self.is_writer:
                last = due or d is not None or t == self.N - 1
                self.collector.write_through(t if last else self.last_flush, self.lr_of)
                if due:
                    self.pending_complete.append(t + 1)
                if due and (t == self.N - 1 or not self.lagged_verdict):
                    self.mark_pending_complete()
            self.last_flush = t
            self._time("flush")
        host_syncs.mark(t)                    # tests: the step's window of host reads
        self.ctx.maybe_inject_fault(t)
        return d

    # ------------------------------------------------------------------------ divergence
    def sync_flush(self, t: int) -> bool:
        """Whether the flush at step t acts on its own verdict (every flush of the synchronous
        runtimes; in 2BW the checkpoint steps and the last step), rather than the previous
        flush's (:meth:`diverged_at`)."""
        return not self.lagged_verdict or self.ckpt_due(t) or t == self.N - 1

    def diverged_at(self, t: int, rows: list[dict[str, Any]]) -> int | None:
        """The divergence verdict every stage acts on at the flush of step t.

        The last stage(s) publish, under a key of this flush, the first step with a non-finite
        loss found so far (sticky; -1 for none). At a sync flush (:meth:`sync_flush`) every
        stage acts on that key, the others waiting for it (the synchronous runtimes' one stall
        per flush; in 2BW only at checkpoint steps and the end, so that no checkpoint holds
        weights that follow a non-finite loss). At any other 2BW flush every stage acts on the
        key of the PREVIOUS flush, which the last stage published at its step of that batch,
        causally before any other stage reaches this flush (:mod:`pipeline.twobw`): no wait,
        and no gradient held back for it. Either way every stage acts on the same key at the
        same flush, so all stop at the same step; the steps past the diverged one (at most two
        flush windows) are computed and dropped. Returns the diverged step or None."""
        key = f"{FLUSH_KEY}/{t}"
        prev = self.last_flush if self.last_flush >= self.start else None
        if self.setup.is_last:
            i = first_nonfinite(rows)
            if i is not None and self.diverged is None:
                self.diverged = rows[i]["step"]
            acted = self.diverged if self.sync_flush(t) else self.verdict_before
            self.verdict_before = self.diverged
            self.ctx.store.set(key, str(-1 if self.diverged is None else self.diverged))
            return acted
        if not self.sync_flush(t):
            if prev is None:
                return None
            key = f"{FLUSH_KEY}/{prev}"
        last = self.link.ranks[self.P - 1]
        self._time("verdict_wait", start=True)
        d = int(self.link.wait_key(key, last, f"the losses of the flush at step {t} "
                                               f"from stage {self.P - 1}").decode())
        self._time("verdict_wait")
        return None if d < 0 else d

    def _time(self, kind: str, start: bool = False, count: int = 1) -> None:
        """``--profile``: start or stop the interval ``kind`` (nothing without a timer)."""
        if self.timer is not None:
            self.timer.start(kind) if start else self.timer.stop(kind, count=count)

    def mark_pending_complete(self) -> None:
        """Rank 0: write the ``COMPLETE`` marker of every checkpoint saved at an earlier flush
        (2BW's stages save at their own step of the batch, which stage 0 does not wait for;
        by the next flush they are done, :func:`checkpoint.mark_complete` waits if not: a long
        phase, ``complete``, deadline ``io_s``, so a slow save elsewhere is not a hang)."""
        if not self.pending_complete:
            return
        with self.ctx.phase("complete"):
            for step in self.pending_complete:
                mark_complete(self.paths, step, self.P, self.D, self.ctx.deadlines.io_s)
        self.pending_complete = []

    def diverged_message(self, d: int) -> str:
        """The run's message once every stage stopped at step d (stage 0 quotes the loss of
        the diverged row it wrote; the others' messages are not reported)."""
        row = self.collector.last_row if self.is_writer and self.collector.last_row else {}
        return diverged_message(row.get("loss"), d)

    def report(self, t: int, rows: list[dict[str, Any]]) -> None:
        """Send (or, on stage 0, keep) this stage's message of the flush at step t: its rows
        (replica 0 only: the other replicas hold the same numbers) and, from the last stage,
        the first non-finite step so far (stage 0 writes no row after it)."""
        if self.d != 0:
            return
        msg: dict[str, Any] = {"step": t, "rows": rows,
                               "diverged": self.diverged if self.setup.is_last else None}
        if self.s == 0:
            self.collector.add(t, msg)
        else:
            self.link.send_message(msg, 0, f"the delivery of the rows of steps up to {t} to "
                                           "stage 0")
