"""Event-driven execution of a schedule's action lists under a cost model.

Algorithm (discrete-event simulation, one replica). Each device runs its action list in order,
one action at a time, and starts an action at the earliest simulated time at which
- the device is free (its previous action, and a blocking send or step, is over);
- the inputs are there: ``F`` of virtual stage ``k > 0`` needs the activation from stage
  ``k - 1``; ``B``/``I`` of stage ``k < K - 1`` needs the gradient from stage ``k + 1``;
- the weights it reads exist on that device: ``W(v)`` is written by the step that makes it
  (``W(0)`` exists at time 0).
A finished ``F`` sends its activation to the next virtual stage and a finished ``B``/``I`` its
input gradient to the previous one over the directed link between the two devices (FIFO, one
message at a time, ``latency + transfer``); a step runs the data-parallel all-reduce, then the
update, blocking the device or beside it (``Costs.overlap_allreduce``). Events (a device gets
free, a message or a version arrives) are processed in time order from a heap; after each, the
device it concerns starts whatever it can.

What the runtime adds to a step (``pipeline.twobw``, ``pipeline.sync``, ``training.flush``):
- clipping (``Costs.clip``): step t also waits for the model's gradient norm, there
  ``clip_latency`` after every device finished its weight gradients of batch t (2BW places the
  step after ``F((t+1)M + P - 1)``, where that has arrived: ``Plan.step_after``);
- the flush (every ``Costs.flush_interval`` steps and the last): a ``FL`` span of ``flush[d]``
  after the update; the last device then publishes the divergence verdict. The synchronous
  schedules act on it at once (every other device's flush waits for it), 2BW only at the last
  step (elsewhere on the previous flush's verdict, already there: no wait);
- the slot copy of 2BW is part of the step's cost (:func:`.costs.model_costs`, or measured).

Guarantee: the start times are the unique earliest ones consistent with the per-device order and
the dependencies above (list scheduling of a fixed order). With unit costs they reproduce
the unit-tick replay of :func:`llm_validation.pipeline.schedule.schedule_2bw` for 2BW exactly
(the tests' oracle); a schedule whose order
cannot make progress raises ``RuntimeError`` (never happens for :func:`.schedules.build_plan`).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from llm_validation.simulation.costs import Costs
from llm_validation.simulation.schedules import (
    BACKWARD,
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    COMPUTE_KINDS,
    FORWARD,
    STEP,
    SYNC_SCHEDULES,
    Plan,
    SimAction,
)

__all__ = ["Span", "Transfer", "SimResult", "simulate", "ALLREDUCE", "SEND", "UPDATE", "FLUSH",
           "flush_steps"]

#: Span kinds besides the compute kinds: the optimizer update, the gradient all-reduce, the
#: time a device is blocked in a (non-overlapped) send, and a metrics flush.
UPDATE, ALLREDUCE, SEND, FLUSH = "S", "AR", "send", "FL"
_FREE = "free"


class Span(NamedTuple):
    """One interval on a device: ``kind`` in F/B/I/W/S/AR/send; ``side`` when it ran beside the
    compute stream (overlapped all-reduce and update)."""

    device: int
    kind: str
    mb: int
    step: int
    chunk: int
    start: float
    end: float
    side: bool = False


class Transfer(NamedTuple):
    """One point-to-point message from virtual stage ``vstage`` on device ``src``: ``what`` is
    ``act`` (forward) or ``grad`` (backward); it occupies the link from ``start`` for the
    transfer time and arrives at ``end`` (after the latency)."""

    src: int
    dst: int
    what: str
    mb: int
    vstage: int
    start: float
    end: float


@dataclass(frozen=True, kw_only=True)
class SimResult:
    """The simulated run: every span and transfer, and the summaries derived from them."""

    plan: Plan
    costs: Costs
    spans: tuple[Span, ...]
    transfers: tuple[Transfer, ...]
    version_ready: dict[tuple[int, int], float] = field(default_factory=dict)
    """(device, v) -> time at which ``W(v)`` exists on the device."""

    @cached_property
    def makespan(self) -> float:
        """Time until every device has finished its last action (the T batches' run time)."""
        return max(s.end for s in self.spans)

    @cached_property
    def _totals(self) -> dict[tuple[int, str, bool], float]:
        out: dict[tuple[int, str, bool], float] = {}
        for s in self.spans:
            key = (s.device, s.kind, s.side)
            out[key] = out.get(key, 0.0) + (s.end - s.start)
        return out

    def device_time(self, device: int, kinds: tuple[str, ...], side: bool | None = False) -> float:
        """Total duration of ``device``'s spans of these kinds (``side``: only those beside the
        compute stream, or only those on it; None: both)."""
        sides = (False, True) if side is None else (side,)
        return sum(self._totals.get((device, k, sd), 0.0) for k in kinds for sd in sides)

    def busy(self, device: int) -> float:
        """Time the device's compute stream is occupied (compute, blocking step, blocked sends)."""
        return self.device_time(device, (*COMPUTE_KINDS, UPDATE, ALLREDUCE, SEND, FLUSH),
                                side=False)

    @cached_property
    def bubble_fraction(self) -> float:
        """Idle share of the devices' time: ``sum_d (makespan - busy_d) / (P * makespan)``
        (idle first, so integer tick counts give the closed forms' floats exactly)."""
        P = self.plan.stages
        return sum(self.makespan - self.busy(d) for d in range(P)) / (P * self.makespan)

    def per_device(self) -> list[dict[str, float]]:
        """Per device: compute, step (update and all-reduce), blocked-send and idle time."""
        rows = []
        for d in range(self.plan.stages):
            rows.append({"device": d, "compute": self.device_time(d, COMPUTE_KINDS),
                         "step": self.device_time(d, (UPDATE, ALLREDUCE, FLUSH), side=None),
                         "send_blocked": self.device_time(d, (SEND,)),
                         "idle": self.makespan - self.busy(d)})
        return rows


def flush_steps(steps: int, interval: int) -> set[int]:
    """The steps that end a metrics flush: every ``interval``-th and the last
    (``training.flush.flush_due`` without checkpoints)."""
    return {t for t in range(steps) if (t + 1) % interval == 0 or t == steps - 1}


def _compile(plan: Plan, costs: Costs) -> list[list[tuple]]:
    """Per device, per action: (action, virtual stage, dependency keys, duration, message) with
    message = (destination device, key announced there, link transfer time) or None; a flush
    is a row (``FLUSH``, step) after its step."""
    P, K = plan.stages, plan.vstages
    steps = plan.optimizer_steps
    flushes = flush_steps(steps, costs.flush_interval)
    flush = costs.flush or (0.0,) * P
    sync = plan.schedule in SYNC_SCHEDULES
    cost = {FORWARD: [c.forward for c in costs.vstages],
            BACKWARD: [c.backward for c in costs.vstages],
            BACKWARD_INPUT: [c.backward_input for c in costs.vstages],
            BACKWARD_WEIGHT: [c.backward_weight for c in costs.vstages]}
    boundary = costs.boundary
    out = []
    for d, acts in enumerate(plan.actions):
        rows = []
        append = rows.append
        nxt, prv = (d + 1) % P, (d - 1) % P        # devices of virtual stages k + 1 and k - 1
        for a in acts:
            kind = a.kind
            k = a.chunk * P + d
            if kind == FORWARD:
                ver = ("ver", d, a.version)
                deps = (("act", a.mb, k - 1), ver) if k > 0 else (ver,)
                msg = (nxt, ("act", a.mb, k), boundary[k]) if k < K - 1 else None
                append((a, k, deps, cost[kind][k], msg))
            elif kind == BACKWARD or kind == BACKWARD_INPUT:
                deps = (("grad", a.mb, k + 1),) if k < K - 1 else ()
                msg = (prv, ("grad", a.mb, k), boundary[k - 1]) if k > 0 else None
                append((a, k, deps, cost[kind][k], msg))
            elif kind == STEP:
                append((a, k, (("clip", a.step),) if costs.clip else (), 0.0, None))
                if a.step in flushes:
                    waits = d != P - 1 and (sync or a.step == steps - 1)
                    append(((FLUSH, a.step), k, (("key", a.step),) if waits else (),
                            flush[d], None))
            else:
                append((a, k, (), cost[kind][k], None))
        out.append(rows)
    assert len(out) == P
    return out


def simulate(plan: Plan, costs: Costs) -> SimResult:
    """Run ``plan`` under ``costs`` (see the module docstring)."""
    costs.fits(plan)
    P = plan.stages
    acts = _compile(plan, costs)
    heap: list[tuple[float, int, int, object]] = []
    order = itertools.count()
    push = heapq.heappush
    avail: set = {("ver", d, 0) for d in range(P)}
    version_ready = {(d, 0): 0.0 for d in range(P)}
    ptr = [0] * P
    busy = [False] * P
    link_free: dict[tuple[int, int], float] = {}
    lane_free = [0.0] * P
    spans: list[Span] = []
    transfers: list[Transfer] = []
    latency, overlap_p2p = costs.latency, costs.overlap_p2p
    need: dict[int, int] = {}          # weight-gradient actions per step, over every device
    for rows in acts:
        for a, *_ in rows:
            if isinstance(a, SimAction) and a.kind in (BACKWARD, BACKWARD_WEIGHT):
                need[a.step] = need.get(a.step, 0) + 1
    got: dict[int, tuple[int, float]] = {}

    def grad_done(step: int, end: float) -> None:
        """Count a finished weight gradient of ``step``; the last announces the clip norm."""
        n, last = got.get(step, (0, 0.0))
        got[step] = (n + 1, max(last, end))
        if n + 1 == need[step] and costs.clip:
            for dev in range(P):
                push(heap, (max(last, end) + costs.clip_latency, next(order), dev,
                            ("clip", step)))

    def try_start(d: int, now: float) -> None:
        rows = acts[d]
        while not busy[d] and ptr[d] < len(rows):
            a, k, deps, dur, msg = rows[ptr[d]]
            if any(dep not in avail for dep in deps):
                return
            if a[0] == FLUSH:
                t = a[1]
                spans.append(Span(d, FLUSH, -1, t, 0, now, now + dur))
                if d == P - 1:                 # the verdict, for the devices that wait on it
                    for dev in range(P - 1):
                        push(heap, (now + dur, next(order), dev, ("key", t)))
                busy[d] = True
                ptr[d] += 1
                push(heap, (now + dur, next(order), d, _FREE))
                return
            if a.kind == STEP:
                ar, up = costs.allreduce[d], costs.step[d]
                side = costs.overlap_allreduce
                t0 = max(now, lane_free[d]) if side else now
                spans.append(Span(d, ALLREDUCE, -1, a.step, 0, t0, t0 + ar, side))
                spans.append(Span(d, UPDATE, -1, a.step, 0, t0 + ar, t0 + ar + up, side))
                end = t0 + ar + up
                version_ready[(d, a.version)] = end
                push(heap, (end, next(order), d, ("ver", d, a.version)))
                ptr[d] += 1
                if side:
                    lane_free[d] = end
                    continue
                busy[d] = True
                push(heap, (end, next(order), d, _FREE))
                return
            end = now + dur
            spans.append(Span(d, a.kind, a.mb, a.step, a.chunk, now, end))
            if a.kind in (BACKWARD, BACKWARD_WEIGHT):
                grad_done(a.step, end)
            free_at = end
            if msg is not None:
                dst, key, boundary = msg
                start = max(end, link_free.get((d, dst), 0.0))
                link_free[(d, dst)] = start + boundary
                arrive = start + boundary + latency
                transfers.append(Transfer(d, dst, key[0], a.mb, k, start, arrive))
                push(heap, (arrive, next(order), dst, key))
                if not overlap_p2p:
                    spans.append(Span(d, SEND, a.mb, a.step, a.chunk, end, arrive))
                    free_at = arrive
            busy[d] = True
            ptr[d] += 1
            push(heap, (free_at, next(order), d, _FREE))

    for d in range(P):
        push(heap, (0.0, next(order), d, None))
    pop = heapq.heappop
    while heap:
        now, _, d, what = pop(heap)
        if what == _FREE:
            busy[d] = False
        elif what is not None:
            avail.add(what)
        try_start(d, now)
    stuck = [d for d in range(P) if ptr[d] < len(acts[d])]
    if stuck:
        d = stuck[0]
        raise RuntimeError(f"schedule {plan.schedule} deadlocks: device {d} waits forever at "
                           f"action {ptr[d]} {acts[d][ptr[d]][0]}")
    return SimResult(plan=plan, costs=costs, spans=tuple(spans), transfers=tuple(transfers),
                     version_ready=version_ready)
