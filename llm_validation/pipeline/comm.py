"""Point-to-point links between neighbouring pipeline stages, with timeouts that name the peer.

One process per stage and replica; stage ``s`` of a pipeline row is global rank ``ranks[s]``
(``pipeline.mesh``: ``replica * P + s``; just ``s`` without data parallelism), on the row's
process group (gloo on CPU, NCCL on GPUs). Activations go ``s -> s+1``, their gradients ``s+1 -> s``; each direction between two
ranks carries one kind of message, in microbatch order, so no tags are needed (NCCL has none).
Control messages (the partial sums of statistics, sent to stage 0) travel on a separate gloo
group, so they never interleave with activations even under NCCL; a message of any size goes
as chunks of :data:`MESSAGE_BYTES` (the first one says how many bytes follow).

Waits: a peer that died shows up at once as a closed connection (:class:`StageFailure`, kind
``lost``, naming this stage, the peer and the message awaited). A peer that hangs is diagnosed
by the stage's watchdog (:mod:`llm_validation.pipeline.watchdog`): every wait publishes what it
waits on and since when in ``status``, and the watchdog names the hung stage after the hang
deadline unless the stage at the end of the chain of waits is inside a declared long phase
(model build, checkpoint save, ...). ``timeout_s`` is only the transport's backstop (the
process groups' long timeout): a wait that reaches it raises a ``timeout`` StageFailure.

Sends stay alive until they are known complete: on NCCL a completed send is seen with
``is_completed()`` and dropped at the next flush; on gloo a send cannot be polled (its work
reports completion only once waited), so sends are waited for :data:`REAP_LAG_FLUSHES`
flushes later, when the 2BW schedule has made them complete (below); both modes.
"""

from __future__ import annotations

import datetime
import json
import math
import time
from collections import deque
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from llm_validation.pipeline.faults import follow_waits

__all__ = ["StageFailure", "StageLink", "post_batch", "LOST", "TIMEOUT", "MESSAGE_BYTES",
           "REAP_LAG_FLUSHES", "MESSAGE_REAP_LAG", "encode_message", "decode_message",
           "message_chunks", "message_bytes", "is_timeout"]

#: failure kinds in :class:`StageFailure` (the launcher ranks them: a lost connection means the
#: peer process is gone; a timeout means the peer is alive but silent, i.e. hung)
LOST = "lost"
TIMEOUT = "timeout"
#: Size of one chunk of a control message (a flush's rows: ~1.5 kB per row and stage with
#: statistics on); a longer message goes as several chunks, the first carrying the length.
MESSAGE_BYTES = 16384
#: The sends posted before the n-th flush (in grouped mode by it, otherwise one by one since
#: the previous one) are waited for (and freed) at flush n + REAP_LAG_FLUSHES. Why they are
#: complete by then: the executor flushes twice at each STEP, so that is two steps later, and
#: every send posted before STEP t+1 is received before STEP t+2: (a) activations sent to s+1
#: belong to batches <= t+2, which s+1 forwards before the gradients of batch t+2 that s needs
#: for STEP t+2; (b) gradients sent to s-1 belong to batches <= t+1, needed by s-1's STEP t+1,
#: which comes before s-1 forwards the last microbatch of batch t+2 (w <= P-1 < M pairs
#: later), and s has received every activation of batch t+2 before STEP t+2. So the wait
#: returns at once (a side pass's link drains all its sends at its end).
REAP_LAG_FLUSHES = 4
#: Control messages kept in flight per stage before the oldest is waited for (see
#: ``StageLink.send_message`` for why it is delivered by then).
MESSAGE_REAP_LAG = 3


class StageFailure(RuntimeError):
    """A wait on ``peer`` failed on ``stage``: ``kind`` is ``"lost"`` or ``"timeout"``."""

    def __init__(self, stage: int, peer: int | None, kind: str, what: str, detail: str):
        self.stage, self.peer, self.kind, self.what = stage, peer, kind, what
        verb = "timed out waiting for" if kind == TIMEOUT else "lost the connection while waiting for"
        super().__init__(f"stage {stage} {verb} {what}: {detail}")


def is_timeout(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "timed out" in text or "timeout" in text or isinstance(exc, TimeoutError)


class _Pending:
    """An issued non-blocking op with what is needed to wait on it and explain a failure."""

    __slots__ = ("work", "tensor", "peer", "what", "unstage", "flush")

    def __init__(self, work: Any, tensor: Any, peer: int, what: str, unstage: bool = False,
                 flush: int = 0):
        self.work, self.tensor, self.peer, self.what = work, tensor, peer, what
        self.unstage = unstage   # a received host copy to move to the stage's device
        self.flush = flush       # the flush that posted a send (grouped-mode reaping)


class _AllWorks:
    """The works of one batch of p2p ops, waited on as one. Several pendings share it (the
    sends of one flush); it waits once (a gloo work must not be waited on twice)."""

    def __init__(self, works: list) -> None:
        self.works = list(works)
        self.done = False

    def wait(self, timeout: datetime.timedelta | None) -> None:
        if self.done:
            return
        for w in self.works:
            if timeout is None:
                w.wait()
            else:
                w.wait(timeout)
        self.done = True

    def is_completed(self) -> bool:
        return self.done or all(w.is_completed() for w in self.works)


class _KeyWait:
    """A rendezvous-store key awaited like a p2p op (``wait(timeout)``)."""

    def __init__(self, store: Any, key: str) -> None:
        self.store, self.key = store, key

    def wait(self, timeout: datetime.timedelta | None) -> None:
        if timeout is None:
            self.store.wait([self.key])
        else:
            self.store.wait([self.key], timeout)


def post_batch(ops: list) -> _AllWorks:
    """Post ``ops`` (``dist.P2POp``) as one ``batch_isend_irecv``: the one way this module
    posts point-to-point ops, so sender and receiver of every message use the same kind (the
    NCCL rule, :mod:`llm_validation.pipeline.p2p_trace`)."""
    return _AllWorks(dist.batch_isend_irecv(ops))


class StageLink:
    """The communication of one stage: receive buffers, non-blocking sends, bounded waits.

    ``act_shape``/``act_dtype``: the microbatch activation ``h[b, T, C]`` exchanged between every
    pair of neighbours (its gradient has the same shape and dtype). ``group``: the process group
    of the activations (None: the default group); ``control_group``: a gloo group over all ranks
    for the small CPU messages (must differ from ``group``: stage 1 -> 0 also carries gradients).
    ``status``/``store``: the stage's published status (``waiting_on`` is set during waits) and
    the store to follow a chain of waits when one times out (see ``pipeline_faults.follow_waits``).
    ``ranks``: the global rank of each stage of this pipeline row (default ``range(stages)``);
    peers are addressed, published and blamed by global rank.
    ``grouped``: hold sends back and issue them in one ``batch_isend_irecv`` group with the next
    receive, as torch's own schedules do (required with NCCL; gloo sends at once). Every op,
    grouped or not, is posted through :func:`post_batch` (never a plain ``isend``/``irecv``).
    """

    def __init__(
        self,
        *,
        stage: int,
        stages: int,
        device: torch.device,
        act_shape: tuple[int, ...],
        act_dtype: torch.dtype,
        timeout_s: float,
        group: Any = None,
        control_group: Any = None,
        status: dict | None = None,
        store: Any = None,
        grouped: bool = False,
        ranks: tuple[int, ...] | None = None,
        staging: bool = False,
    ):
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.stage, self.stages, self.device = stage, stages, device
        self.act_shape, self.act_dtype = tuple(act_shape), act_dtype
        self.timeout = datetime.timedelta(seconds=float(timeout_s))
        self.group, self.control_group = group, control_group
        self.status, self.store = status, store
        self.grouped, self.staging = grouped, staging
        # the tensors on the wire: host copies when staging (gloo between ranks sharing a GPU)
        self.comm_device = torch.device("cpu") if staging else device
        # gloo (host tensors): bounded host waits; NCCL: wait() only makes the current stream
        # wait (no host busy-wait), hangs are caught by the process group's own timeout
        self.host_waits = self.comm_device.type == "cpu"
        self.staged = {"tensors": 0, "bytes": 0}   # host copies made (both directions)
        self.ranks = tuple(range(stages)) if ranks is None else tuple(ranks)
        if len(self.ranks) != stages:
            raise ValueError(f"ranks={self.ranks} must name one global rank per stage ({stages})")
        self._outbox: list[tuple[Tensor, int, str]] = []   # grouped mode: sends held back
        self._sends: deque[_Pending] = deque()      # activations / gradients
        self._messages: deque[_Pending] = deque()   # control messages
        self._flushes = 0                           # flush() calls so far
        self.sends_peak = 0                         # most sends pending after a flush
        self.message_peak = 0                       # bytes of the largest message sent

    @property
    def pending_sends(self) -> int:
        """Sends posted and not yet known complete (their tensors are kept alive)."""
        return len(self._sends)

    # -- waits ------------------------------------------------------------------------------
    def wait_key(self, key: str, peer: int, what: str) -> bytes:
        """The value of ``key`` in the rendezvous store, waiting (host only, no device work) at
        most ``timeout_s`` for ``peer`` to set it; a timeout is a :class:`StageFailure`
        blaming the end of the wait chain, as for a p2p wait."""
        self._wait(_Pending(_KeyWait(self.store, key), None, peer, what))
        return self.store.get(key)

    def _wait(self, p: _Pending) -> Tensor:
        if self.status is not None:   # read by the watchdog's hang diagnosis
            self.status.update(what=p.what, since=time.time())
            self.status["waiting_on"] = p.peer
        try:
            p.work.wait(self.timeout if self.host_waits or isinstance(p.work, _KeyWait)
                        else None)
        except Exception as exc:  # gloo/NCCL raise RuntimeError with the transport's text
            kind = TIMEOUT if is_timeout(exc) else LOST
            detail = str(exc).splitlines()[0][:300]
            peer = p.peer
            if kind == TIMEOUT and self.store is not None:   # blame the end of the wait chain

                peer, chain = follow_waits(self.store, p.peer, self.stages)
                if len(chain) > 1:
                    detail = (f"stage {p.peer} was itself waiting (chain of waits "
                              f"{' -> '.join(map(str, chain))}); {detail}")
            raise StageFailure(self.stage, peer, kind, p.what, detail) from exc
        finally:
            if self.status is not None:
                self.status["waiting_on"] = None
        return p.tensor

    def _reap(self) -> None:
        """Forget completed sends (keeps their tensors alive until then): those that report
        completion (NCCL) and those posted :data:`REAP_LAG_FLUSHES` flushes ago or earlier
        (complete by the schedule's order; a gloo send cannot report it unwaited)."""
        old = self._flushes - REAP_LAG_FLUSHES
        while self._sends and (self._sends[0].flush <= old
                               or self._sends[0].work.is_completed()):
            self._wait(self._sends.popleft())  # surfaces an error a completed send may carry

    def drain(self) -> None:
        """Issue the sends held back, then wait (bounded) for every send this stage issued."""
        self.flush()
        self.drain_messages()
        while self._sends:
            self._wait(self._sends.popleft())

    def drain_messages(self) -> None:
        """Wait (bounded) for the control messages only (a stopped run may leave activations
        that no stage will receive; its messages must still arrive)."""
        while self._messages:
            self._wait(self._messages.popleft())

    # -- activations (s -> s+1) and their gradients (s+1 -> s) -------------------------------
    def _post_recv(self, src: int, what: str) -> _Pending:
        buf = torch.empty(self.act_shape, dtype=self.act_dtype, device=self.comm_device)
        # grouped mode: the sends held back go out in one batch with this receive (NCCL needs
        # this: two ranks that both block in a send to each other would deadlock)
        sends, self._outbox = self._outbox, []
        ops = [dist.P2POp(dist.isend, t, peer, group=self.group) for t, peer, _ in sends]
        ops.append(dist.P2POp(dist.irecv, buf, src, group=self.group))
        keep = (buf, [t for t, _, _ in sends])     # the send tensors live until the batch is done
        return _Pending(post_batch(ops), keep, src, what, unstage=self.staging)

    def post_recv_activation(self, mb: int) -> _Pending:
        """Post the receive of microbatch ``mb``'s input activation from stage ``s-1``."""
        return self._post_recv(self.ranks[self.stage - 1], f"the activation of microbatch {mb} "
                                                           f"from stage {self.stage - 1}")

    def post_recv_gradient(self, mb: int) -> _Pending:
        """Post the receive of the gradient w.r.t. this stage's output of ``mb`` from ``s+1``."""
        return self._post_recv(self.ranks[self.stage + 1], f"the gradient of microbatch {mb} "
                                                           f"from stage {self.stage + 1}")

    def wait(self, pending: _Pending) -> Tensor:
        """The received tensor of a posted receive, waiting at most ``timeout_s``."""
        out = self._wait(pending)
        out = out[0] if isinstance(out, tuple) else out
        return self._unstage(out) if pending.unstage else out

    def _stage(self, t: Tensor) -> Tensor:
        """A host copy of ``t`` to send (a fresh buffer even when ``t`` is on the host)."""
        host = torch.empty(t.shape, dtype=t.dtype, device=self.comm_device)
        host.copy_(t)
        self._count(host)
        return host

    def _unstage(self, host: Tensor) -> Tensor:
        """A received host tensor on this stage's device (a fresh buffer)."""
        self._count(host)
        out = torch.empty(host.shape, dtype=host.dtype, device=self.device)
        out.copy_(host)
        return out

    def _count(self, t: Tensor) -> None:
        self.staged["tensors"] += 1
        self.staged["bytes"] += t.numel() * t.element_size()

    def send_activation(self, h: Tensor, mb: int) -> None:
        """Send this stage's output ``h`` of ``mb`` to stage ``s+1`` (non-blocking; grouped mode:
        with the next receive or :meth:`flush`)."""
        self._send(h, self.ranks[self.stage + 1],
                   f"the delivery of activation {mb} to stage {self.stage + 1}")

    def send_gradient(self, g: Tensor, mb: int) -> None:
        """Send the gradient w.r.t. this stage's input of ``mb`` to ``s-1`` (as above)."""
        self._send(g, self.ranks[self.stage - 1],
                   f"the delivery of gradient {mb} to stage {self.stage - 1}")

    def _send(self, t: Tensor, peer: int, what: str) -> None:
        t = t.detach().contiguous()
        if t.shape != self.act_shape or t.dtype != self.act_dtype:
            raise ValueError(
                f"stage {self.stage}: {what} has shape {tuple(t.shape)} {t.dtype}, the link carries "
                f"{self.act_shape} {self.act_dtype}"
            )
        if self.staging:
            t = self._stage(t)
        self._outbox.append((t, peer, what))
        if not self.grouped:
            self._post_outbox()
            self._reap()

    def flush(self) -> None:
        """Issue the sends held back, as one batch (the executor calls it at every STEP, twice,
        and at the end of a run: each call is one "flush" of :data:`REAP_LAG_FLUSHES`), then
        drop the sends known complete."""
        self._post_outbox()
        self._flushes += 1
        self._reap()

    def _post_outbox(self) -> None:
        """Post the sends held back as one batch (non-grouped mode: after every send)."""
        sends, self._outbox = self._outbox, []
        if not sends:
            return
        work = post_batch([dist.P2POp(dist.isend, t, peer, group=self.group)
                           for t, peer, _ in sends])
        for t, peer, what in sends:      # each keeps its tensor alive until the batch is done
            self._sends.append(_Pending(work, t, peer, what, flush=self._flushes))
        self.sends_peak = max(self.sends_peak, len(self._sends))

    # -- control messages (statistics and results, to stage 0) -------------------------------
    def send_message(self, obj: dict, dst: int, what: str) -> None:
        """Non-blocking send of a JSON-able dict of any size to rank ``dst`` on the control
        group (:func:`encode_message`'s chunks, posted in order in one batch)."""
        chunks = encode_message(obj)
        self.message_peak = max(self.message_peak, 8 + message_bytes(chunks[0]))
        work = post_batch([dist.P2POp(dist.isend, c, dst, group=self.control_group)
                           for c in chunks])
        self._messages.append(_Pending(work, chunks, dst, what))
        # the control group is gloo even under NCCL: its sends cannot be polled. A stage
        # sends one message per flush; the message of flush f_n is read by stage 0 at its
        # flush f_{n+1} (write_through), which precedes stage 0's forward of batch f_{n+3} >=
        # f_{n+1} + 2, which this stage has received (through the stages between) before its
        # flush f_{n+3}: so messages MESSAGE_REAP_LAG sends old are delivered; wait, free.
        while len(self._messages) > MESSAGE_REAP_LAG:
            self._wait(self._messages.popleft())

    def recv_message(self, src: int, what: str) -> dict:
        """Receive one message from rank ``src`` (waiting as every wait does): the first
        chunk, then the chunks its header announces."""
        first = self._wait(self._post_chunks(src, what, 1))[0]
        more = message_chunks(first) - 1
        rest = self._wait(self._post_chunks(src, what, more)) if more else []
        return decode_message([first, *rest])

    def _post_chunks(self, src: int, what: str, n: int) -> _Pending:
        bufs = [torch.empty(MESSAGE_BYTES, dtype=torch.uint8) for _ in range(n)]
        ops = [dist.P2POp(dist.irecv, b, src, group=self.control_group) for b in bufs]
        return _Pending(post_batch(ops), bufs, src, what)


def encode_message(obj: dict) -> list[Tensor]:
    """``obj`` as JSON in uint8 chunks of :data:`MESSAGE_BYTES`: an 8-byte length, then the
    UTF-8 text, zero padded (floats round-trip exactly; NaN/inf are kept); any size."""
    data = json.dumps(obj).encode()
    n = max(1, math.ceil((len(data) + 8) / MESSAGE_BYTES))
    buf = torch.zeros(n * MESSAGE_BYTES, dtype=torch.uint8)
    buf[:8] = torch.frombuffer(bytearray(len(data).to_bytes(8, "little")), dtype=torch.uint8)
    if data:
        buf[8:8 + len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return list(buf.split(MESSAGE_BYTES))


def message_bytes(first: Tensor) -> int:
    """The length of the text of the message whose first chunk is ``first`` (its header)."""
    return int.from_bytes(first[:8].numpy().tobytes(), "little")


def message_chunks(first: Tensor) -> int:
    """How many chunks the message whose first chunk is ``first`` has (its header)."""
    return max(1, math.ceil((message_bytes(first) + 8) / MESSAGE_BYTES))


def decode_message(chunks: list[Tensor] | Tensor) -> dict:
    """Inverse of :func:`encode_message` (its chunks, or one tensor holding them all)."""
    buf = chunks if isinstance(chunks, Tensor) else torch.cat(list(chunks))
    raw = buf.numpy().tobytes()
    n = int.from_bytes(raw[:8], "little")
    if n + 8 > len(raw):
        raise ValueError(f"control message of {n} bytes but only {len(raw) - 8} received")
    return json.loads(raw[8:8 + n].decode())
