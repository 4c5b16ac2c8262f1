"""The point-to-point side of a ``Schedule2BW`` stage: posted batches, pending sends, reaping.

Every op goes through :func:`.comm.post_batch` (``batch_isend_irecv``, one kind on both ends
of every message: NCCL's rule); sends are held back and posted with the next receive or at a
flush (a step, the end of a call). A receive waits for its own works only: the sends posted
with it stay pending (on gloo one work per op; NCCL returns one work for the group and waits
on the stream), since a peer may be blocked in the clipping norm's all-reduce and post its
receive later. A send posted in call c is waited for at the end of call c +
:data:`SEND_LAG_CALLS`: every receive matching it lies in the peers' segments <= c + 1, which
need nothing this stage sends later, so the wait returns; at most that many calls' sends are
pending, on gloo too (a gloo send never reports completion unwaited). Every host wait has a
deadline whose failure names the peer (:class:`.comm.StageFailure`).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch.distributed as dist

from llm_validation.pipeline.comm import (LOST, TIMEOUT, StageFailure, _AllWorks, is_timeout,
                                          post_batch)

__all__ = ["StageSends", "SEND_LAG_CALLS"]

#: Sends posted in call c are waited for at the end of call c + SEND_LAG_CALLS.
SEND_LAG_CALLS = 2


class StageSends:
    """Mixin of the schedule: needs ``_stage``, ``_timeout``, ``_host_waits``, ``_calls``;
    holds ``_outbox`` (sends held back) and ``_sends`` (posted: (call, works, ops))."""

    _outbox: list
    _sends: deque

    def _wait(self, work: Any, ops: list, what: str) -> None:
        try:
            work.wait(self._timeout if self._host_waits else None)
        except Exception as exc:  # gloo/NCCL raise RuntimeError with the transport's text
            peer = ops[-1].peer if ops else None
            raise StageFailure(self._stage.stage_index, peer,
                               TIMEOUT if is_timeout(exc) else LOST, what,
                               str(exc).splitlines()[0][:300]) from exc

    def _recv(self, ops: list[dist.P2POp], what: str) -> None:
        """Post ``ops`` (receives) in one batch with the sends held back; wait for the
        receives only (the sends stay pending: a peer may be in a clipping wait)."""
        sends, self._outbox = self._outbox, []
        batch = sends + ops
        works = post_batch(batch).works
        if sends and len(works) == len(batch):     # gloo: one work per op (NCCL: one in all)
            self._sends.append((self._calls, _AllWorks(works[:len(sends)]), sends))
            works = works[len(sends):]
        self._wait(_AllWorks(works), ops, what)

    def _flush(self) -> None:
        """Post the sends held back (one batch); keep them until they are reaped."""
        sends, self._outbox = self._outbox, []
        if sends:
            self._sends.append((self._calls, post_batch(sends), sends))

    def _reap(self, upto: int) -> None:
        """Wait for (and forget) the sends posted in calls <= ``upto``, and completed ones."""
        while self._sends and (self._sends[0][0] <= upto or self._sends[0][1].is_completed()):
            _, work, ops = self._sends.popleft()
            self._wait(work, ops, "the delivery of a send")

    @property
    def pending_sends(self) -> int:
        """Batches of sends posted and not yet reaped."""
        return len(self._sends)

