"""Pipeline schedules as pure action lists: GPipe, 1F1B, interleaved 1F1B, ZB-H1, 2BW, PipeDream.

Algorithm. A schedule is one ordered list of actions per device (stage) ``d = 0..P-1``; a device
runs its list in order, each action as soon as its inputs are there (:mod:`.engine`). The model is
cut into ``K = P * v`` virtual stages; virtual stage ``k`` lives on device ``k % P`` as its chunk
``k // P`` (``v = 1`` except for interleaved 1F1B). Kinds: ``F`` forward, ``B`` full backward,
``I`` backward for the input only and ``W`` backward for the weights only (zero-bubble split),
``S`` optimizer step. Microbatches are numbered globally, ``i = t*M + j``.

- ``gpipe``: per batch all ``F`` then all ``B``, step, flush (Huang et al. 2019).
- ``1f1b``: per batch ``min(P-1-d, M)`` warm-up forwards, ``(F, B)`` pairs, cool-down backwards,
  step, flush (PipeDream-Flush / Megatron's non-interleaved schedule, Narayanan et al. 2021).
- ``interleaved-1f1b``: Megatron's interleaved schedule with ``v`` chunks per device: warm-up
  ``min(2(P-1-d) + (v-1)P, vM)`` chunk-forwards, ``(F, B)`` pairs, cool-down; microbatches in
  groups of ``P`` run through chunk 0, then chunk 1, ... (backward: chunks reversed). ``M`` must
  be a multiple of ``P`` (Narayanan et al., SC 2021, Section 2.2).
- ``zb-h1``: 1F1B's warm-up, then device ``d > 0`` postpones its first ``d`` weight passes ``W``
  (FIFO) to the end of the batch, where they fill the cool-down bubble; device 0 runs full ``B``
  (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, ZB-H1; the order of the authors'
  DeepSpeed ``ZeroBubbleH1Pipeline`` with exact semantics).
- ``2bw``: the runtime's own lists, :func:`llm_validation.pipeline.schedule.schedule_2bw`
  unchanged (1F1B with no flush; batch ``t`` reads ``W(t-1)``).
- ``pipedream``: original PipeDream (Narayanan et al., SOSP 2019): 1F1B with no flush and one
  optimizer step after *every* backward, each microbatch reading the newest weights the device
  has, so device ``d`` reads weights ``P-1-d`` steps old (``config.pipedream_taus``). It takes
  ``M`` optimizer steps per batch of ``M`` microbatches.

Weight versions: an ``F``/``B``/``I``/``W`` action carries the index ``v`` of the weights
``W(v)`` it reads, a step the index it writes. Synchronous schedules: batch ``t`` reads ``W(t)``.

Guarantee: :func:`check_plan` replays every device and asserts that each microbatch is forwarded
once and backwarded once (``B``, or ``I`` then ``W``) per virtual stage with one version, that
steps come in order after the backward passes of their microbatches, and that a version is
written before it is read.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

from llm_validation.pipeline.schedule import (BACKWARD, FORWARD, STEP, min_microbatches,
                                             schedule_2bw, warmup_forwards)

__all__ = [
    "FORWARD",
    "BACKWARD",
    "BACKWARD_INPUT",
    "BACKWARD_WEIGHT",
    "STEP",
    "COMPUTE_KINDS",
    "SCHEDULES",
    "SYNC_SCHEDULES",
    "SimAction",
    "Plan",
    "build_plan",
    "check_plan",
    "stage_delays",
]

BACKWARD_INPUT = "I"
BACKWARD_WEIGHT = "W"
COMPUTE_KINDS = (FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT)
#: Every schedule the simulator knows, in the order of the CLI's choices.
SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "2bw", "pipedream")
#: Those that flush every batch (delay 0).
SYNC_SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1")


class SimAction(NamedTuple):
    """One action: ``kind`` in F/B/I/W/S; ``mb`` global microbatch (-1 for S); ``step`` the
    optimizer step it belongs to; ``version`` the weights read (F/B/I/W) or written (S);
    ``chunk`` the device's model chunk (0 unless interleaved)."""

    kind: str
    mb: int
    step: int
    version: int
    chunk: int = 0


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The action lists of one schedule for a run of ``batches`` batches."""

    schedule: str
    """One of :data:`SCHEDULES`."""
    stages: int
    """Devices P."""
    chunks: int
    """Model chunks per device v (virtual stages K = P v)."""
    microbatches: int
    """Microbatches per batch M."""
    batches: int
    """Batches T (every batch has M microbatches)."""
    actions: tuple[tuple[SimAction, ...], ...]
    """One action list per device."""
    step_after: str = "backward"
    """2BW: where each step sits (``pipeline.schedule.STEP_PLACEMENTS``; ``forward`` when the
    step reduces over the pipeline, global-norm clipping); the others step after the batch."""

    @property
    def vstages(self) -> int:
        """Virtual stages K = P v."""
        return self.stages * self.chunks

    @property
    def optimizer_steps(self) -> int:
        """Optimizer steps of the run: T, or T M for PipeDream (a step per microbatch)."""
        return self.batches * (self.microbatches if self.schedule == "pipedream" else 1)

    def vstage(self, device: int, chunk: int) -> int:
        """Virtual stage of ``chunk`` on ``device``: ``chunk * P + device``."""
        return chunk * self.stages + device

    def device_of(self, vstage: int) -> int:
        """Device holding virtual stage ``vstage``."""
        return vstage % self.stages


def _sync_batches(per_batch, M: int, T: int) -> list[SimAction]:
    """Concatenate a flushing schedule's batches: ``per_batch(t, first_mb)`` gives one batch's
    actions (batch ``t`` reads ``W(t)``), followed by the step that writes ``W(t+1)``."""
    acts: list[SimAction] = []
    for t in range(T):
        acts.extend(per_batch(t, t * M))
        acts.append(SimAction(STEP, -1, t, t + 1))
    return acts


def _gpipe(d: int, P: int, M: int, T: int) -> list[SimAction]:
    def batch(t: int, i0: int) -> list[SimAction]:
        return ([SimAction(FORWARD, i0 + j, t, t) for j in range(M)]
                + [SimAction(BACKWARD, i0 + j, t, t) for j in range(M)])
    return _sync_batches(batch, M, T)


def _one_f_one_b(d: int, P: int, M: int, T: int) -> list[SimAction]:
    w = min(warmup_forwards(d, P), M)

    def batch(t: int, i0: int) -> list[SimAction]:
        out = [SimAction(FORWARD, i0 + j, t, t) for j in range(w)]
        for k in range(M):
            if k + w < M:
                out.append(SimAction(FORWARD, i0 + k + w, t, t))
            out.append(SimAction(BACKWARD, i0 + k, t, t))
        return out
    return _sync_batches(batch, M, T)


def _interleaved(d: int, P: int, M: int, T: int, v: int) -> list[SimAction]:
    total = M * v
    w = min(2 * warmup_forwards(d, P) + (v - 1) * P, total)

    def chunk(k: int, forward: bool) -> int:
        c = (k % (P * v)) // P
        return c if forward else v - 1 - c

    def local_mb(k: int) -> int:
        return (k // (P * v)) * P + k % P

    def batch(t: int, i0: int) -> list[SimAction]:
        def f(k: int) -> SimAction:
            return SimAction(FORWARD, i0 + local_mb(k), t, t, chunk(k, True))

        def b(k: int) -> SimAction:
            return SimAction(BACKWARD, i0 + local_mb(k), t, t, chunk(k, False))
        out = [f(k) for k in range(w)]
        for k in range(total):
            if k + w < total:
                out.append(f(k + w))
            out.append(b(k))
        return out
    return _sync_batches(batch, M, T)


def _zb_h1(d: int, P: int, M: int, T: int) -> list[SimAction]:
    w = min(warmup_forwards(d, P), M)

    def batch(t: int, i0: int) -> list[SimAction]:
        out: list[SimAction] = []
        pending: deque[int] = deque()   # microbatches whose W is postponed, oldest first
        fwd = bwd = 0

        def backward() -> None:
            nonlocal bwd
            if d == 0:                  # nothing to postpone on the first device: a full B
                out.append(SimAction(BACKWARD, i0 + bwd, t, t))
            else:
                out.append(SimAction(BACKWARD_INPUT, i0 + bwd, t, t))
                pending.append(bwd)
            bwd += 1

        def weight() -> None:
            if pending:
                out.append(SimAction(BACKWARD_WEIGHT, i0 + pending.popleft(), t, t))

        for _ in range(w):
            out.append(SimAction(FORWARD, i0 + fwd, t, t))
            fwd += 1
        for _ in range(d):              # the first d pairs postpone their W
            if fwd == M:
                break
            out.append(SimAction(FORWARD, i0 + fwd, t, t))
            fwd += 1
            backward()
        while fwd < M:                  # steady state: F, I, W (the oldest postponed W)
            out.append(SimAction(FORWARD, i0 + fwd, t, t))
            fwd += 1
            backward()
            weight()
        while bwd < M:                  # cool-down: I, W
            backward()
            weight()
        while pending:                  # the postponed W fill the bubble before the step
            weight()
        return out
    return _sync_batches(batch, M, T)


def _two_bw(d: int, P: int, M: int, T: int, step_after: str = "backward") -> list[SimAction]:
    return [SimAction(a.kind, a.mb, a.batch, a.version)
            for a in schedule_2bw(d, P, M, T, step_after=step_after)]


def _pipedream(d: int, P: int, M: int, T: int) -> list[SimAction]:
    n = T * M                           # one optimizer step per microbatch
    w = min(warmup_forwards(d, P), n)
    steps_done = 0
    read: dict[int, int] = {}
    out: list[SimAction] = []

    def fwd(i: int) -> None:
        read[i] = steps_done            # the newest weights on this device
        out.append(SimAction(FORWARD, i, i, steps_done))

    for i in range(w):
        fwd(i)
    for k in range(n):
        if k + w < n:
            fwd(k + w)
        out.append(SimAction(BACKWARD, k, k, read.pop(k)))
        out.append(SimAction(STEP, -1, k, k + 1))
        steps_done += 1
    return out


def _positive_int(name: str, value: object, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")
    return value


def build_plan(schedule: str, stages: int, microbatches: int, batches: int = 1,
               chunks: int = 2, step_after: str = "backward") -> Plan:
    """The action lists of ``schedule`` (see the module docstring) for ``batches`` batches of
    ``microbatches`` microbatches on ``stages`` devices; ``chunks`` is used by interleaved 1F1B
    only, ``step_after`` by 2BW only (:data:`llm_validation.pipeline.schedule.STEP_PLACEMENTS`).
    Raises ``ValueError`` on an unknown schedule or a bad shape (``P >= 2``; 2BW needs
    ``M >= P - 1``, ``M >= P`` with ``step_after="forward"``; interleaved needs ``chunks >= 2``
    and ``M`` a multiple of ``P``)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of {list(SCHEDULES)}")
    P = _positive_int("stages", stages, 2)
    M = _positive_int("microbatches", microbatches, 1)
    T = _positive_int("batches", batches, 1)
    v = 1
    if schedule == "interleaved-1f1b":
        v = _positive_int("chunks", chunks, 2)
        if M % P:
            raise ValueError(f"interleaved-1f1b needs microbatches to be a multiple of stages "
                             f"(Megatron's condition), got M={M}, P={P}")
    if schedule == "2bw" and M < min_microbatches(P):
        raise ValueError(f"2bw needs microbatches >= stages - 1 (two weight versions suffice "
                         f"only then: llm_validation.pipeline.schedule), got M={M}, P={P}")
    build = {"gpipe": _gpipe, "1f1b": _one_f_one_b, "zb-h1": _zb_h1, "2bw": _two_bw,
             "pipedream": _pipedream}
    if schedule == "interleaved-1f1b":
        lists = [_interleaved(d, P, M, T, v) for d in range(P)]
    elif schedule == "2bw":
        lists = [_two_bw(d, P, M, T, step_after) for d in range(P)]
    else:
        lists = [build[schedule](d, P, M, T) for d in range(P)]
    return Plan(schedule=schedule, stages=P, chunks=v, microbatches=M, batches=T,
                actions=tuple(tuple(a) for a in lists),
                step_after=step_after if schedule == "2bw" else "backward")


def stage_delays(plan: Plan) -> list[int]:
    """Gradient delay of each device in optimizer steps: for every backward, the steps written
    on that device between the version it read and its own step (max over the run)."""
    out = []
    for acts in plan.actions:
        delay = 0
        for a in acts:
            if a.kind in (BACKWARD, BACKWARD_INPUT):
                delay = max(delay, a.step - a.version)
        out.append(delay)
    return out


def check_plan(plan: Plan) -> dict[str, list[int]]:
    """Replay every device and assert the invariants of the module docstring. Returns per
    device the peak number of (microbatch, chunk) activations held (from F until B or W) and
    the number of steps."""
    P, K = plan.stages, plan.vstages
    n_mb = plan.batches * plan.microbatches
    per_step = plan.microbatches if plan.schedule != "pipedream" else 1
    peaks, steps = [], []
    for d, acts in enumerate(plan.actions):
        held: dict[tuple[int, int], int] = {}     # (mb, chunk) -> version, until B or W
        need_w: set[tuple[int, int]] = set()
        done: dict[str, set[tuple[int, int]]] = {k: set() for k in COMPUTE_KINDS}
        have = {0}
        next_step, peak = 0, 0
        for a in acts:
            key = (a.mb, a.chunk)
            assert 0 <= a.chunk < plan.chunks, f"device {d}: bad chunk in {a}"
            if a.kind == FORWARD:
                assert key not in done[FORWARD], f"device {d}: {key} forwarded twice"
                assert a.version in have, f"device {d}: F{key} reads W({a.version}) before it exists"
                held[key] = a.version
            elif a.kind in (BACKWARD, BACKWARD_INPUT):
                assert key in held and key not in done[BACKWARD] | done[BACKWARD_INPUT], \
                    f"device {d}: backward of {key} before its forward or twice"
                assert held[key] == a.version, f"device {d}: {key} backward reads another version"
                if a.kind == BACKWARD:
                    del held[key]
                else:
                    need_w.add(key)
            elif a.kind == BACKWARD_WEIGHT:
                assert key in need_w, f"device {d}: W{key} before its I"
                need_w.discard(key)
                del held[key]
            else:
                assert a.kind == STEP and a.step == next_step, \
                    f"device {d}: step {a.step} out of order (expected {next_step})"
                mbs = range(a.step * per_step, (a.step + 1) * per_step)
                assert all((i, c) not in held and (i, c) in done[FORWARD]
                           for i in mbs for c in range(plan.chunks)), \
                    f"device {d}: step {a.step} before the backward of its microbatches"
                have.add(a.version)
                next_step += 1
            if a.kind != STEP:
                done[a.kind].add(key)
            peak = max(peak, len(held))
        expected = {(i, c) for i in range(n_mb) for c in range(plan.chunks)}
        assert done[FORWARD] == expected, f"device {d}: not every microbatch forwarded once"
        assert done[BACKWARD] | done[BACKWARD_INPUT] == expected and not held, \
            f"device {d}: not every microbatch backwarded"
        assert next_step == plan.optimizer_steps, f"device {d}: missing optimizer steps"
        assert K == P * plan.chunks
        peaks.append(peak)
        steps.append(next_step)
    return {"peak_activations": peaks, "steps": steps}
