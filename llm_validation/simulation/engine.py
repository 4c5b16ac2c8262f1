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

Guarantee: the start times are the unique earliest ones consistent with the per-device order and
the dependencies above (list scheduling of a fixed order). With unit costs they reproduce
:func:`llm_validation.pipeline.schedule.simulate_times` for 2BW exactly; a schedule whose order
cannot make progress raises ``RuntimeError`` (never happens for :func:`.schedules.build_plan`).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from functools import cached_property

from llm_validation.simulation.costs import Costs
from llm_validation.simulation.schedules import (
    BACKWARD,
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    COMPUTE_KINDS,
    FORWARD,
    STEP,
    Plan,
)

__all__ = ["Span", "Transfer", "SimResult", "simulate", "ALLREDUCE", "SEND", "UPDATE"]

#: Span kinds besides the compute kinds: the optimizer update, the gradient all-reduce, and the
#: time a device is blocked in a (non-overlapped) send.
UPDATE, ALLREDUCE, SEND = "S", "AR", "send"
_FREE = "free"


@dataclass(frozen=True)
class Span:
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


@dataclass(frozen=True)
class Transfer:
    """One point-to-point message: ``what`` is ``act`` (forward) or ``grad`` (backward)."""

    src: int
    dst: int
    what: str
    mb: int
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
        return self.device_time(device, (*COMPUTE_KINDS, UPDATE, ALLREDUCE, SEND), side=False)

    @cached_property
    def bubble_fraction(self) -> float:
        """Idle share of the devices' time: ``sum_d (makespan - busy_d) / (P * makespan)``
        (idle first, so integer tick counts give the closed forms' floats exactly)."""
        P = self.plan.stages
        return sum(self.makespan - self.busy(d) for d in range(P)) / (P * self.makespan)

    def step_ends(self, device: int) -> list[float]:
        """Time at which each optimizer step's new weights exist on ``device``."""
        return [self.version_ready[(device, t + 1)] for t in range(self.plan.optimizer_steps)]

    def per_device(self) -> list[dict[str, float]]:
        """Per device: compute, step (update and all-reduce), blocked-send and idle time."""
        rows = []
        for d in range(self.plan.stages):
            rows.append({"device": d, "compute": self.device_time(d, COMPUTE_KINDS),
                         "step": self.device_time(d, (UPDATE, ALLREDUCE), side=None),
                         "send_blocked": self.device_time(d, (SEND,)),
                         "idle": self.makespan - self.busy(d)})
        return rows


def simulate(plan: Plan, costs: Costs) -> SimResult:
    """Run ``plan`` under ``costs`` (see the module docstring)."""
    costs.fits(plan)
    P, K = plan.stages, plan.vstages
    acts = plan.actions
    heap: list[tuple[float, int, int, object]] = []
    order = itertools.count()
    avail: set = {("ver", d, 0) for d in range(P)}
    version_ready = {(d, 0): 0.0 for d in range(P)}
    ptr = [0] * P
    busy = [False] * P
    link_free: dict[tuple[int, int], float] = {}
    lane_free = [0.0] * P
    spans: list[Span] = []
    transfers: list[Transfer] = []
    compute_cost = {
        FORWARD: [c.forward for c in costs.vstages],
        BACKWARD: [c.backward for c in costs.vstages],
        BACKWARD_INPUT: [c.backward_input for c in costs.vstages],
        BACKWARD_WEIGHT: [c.backward_weight for c in costs.vstages],
    }

    def push(t: float, device: int, what: object) -> None:
        heapq.heappush(heap, (t, next(order), device, what))

    def send(d: int, k_from: int, k_to: int, what: str, mb: int, ready: float) -> float:
        dst = plan.device_of(k_to)
        boundary = costs.boundary[min(k_from, k_to)]
        start = max(ready, link_free.get((d, dst), 0.0))
        link_free[(d, dst)] = start + boundary
        arrive = start + boundary + costs.latency
        transfers.append(Transfer(d, dst, what, mb, start, arrive))
        push(arrive, dst, (what, mb, k_from))
        return arrive

    def try_start(d: int, now: float) -> None:
        while not busy[d] and ptr[d] < len(acts[d]):
            a = acts[d][ptr[d]]
            k = plan.vstage(d, a.chunk)
            if a.kind == STEP:
                ar, up = costs.allreduce[d], costs.step[d]
                side = costs.overlap_allreduce
                t0 = max(now, lane_free[d]) if side else now
                spans.append(Span(d, ALLREDUCE, -1, a.step, 0, t0, t0 + ar, side))
                spans.append(Span(d, UPDATE, -1, a.step, 0, t0 + ar, t0 + ar + up, side))
                end = t0 + ar + up
                version_ready[(d, a.version)] = end
                push(end, d, ("ver", d, a.version))
                ptr[d] += 1
                if side:
                    lane_free[d] = end
                    continue
                busy[d] = True
                push(end, d, _FREE)
                return
            if a.kind == FORWARD:
                deps = [("act", a.mb, k - 1)] if k > 0 else []
                deps.append(("ver", d, a.version))
            elif a.kind in (BACKWARD, BACKWARD_INPUT):
                deps = [("grad", a.mb, k + 1)] if k < K - 1 else []
            else:
                deps = []
            if any(dep not in avail for dep in deps):
                return
            end = now + compute_cost[a.kind][k]
            spans.append(Span(d, a.kind, a.mb, a.step, a.chunk, now, end))
            free_at = end
            if a.kind == FORWARD and k < K - 1:
                arrive = send(d, k, k + 1, "act", a.mb, end)
            elif a.kind in (BACKWARD, BACKWARD_INPUT) and k > 0:
                arrive = send(d, k, k - 1, "grad", a.mb, end)
            else:
                arrive = None
            if arrive is not None and not costs.overlap_p2p:
                spans.append(Span(d, SEND, a.mb, a.step, a.chunk, end, arrive))
                free_at = arrive
            busy[d] = True
            ptr[d] += 1
            push(free_at, d, _FREE)

    for d in range(P):
        push(0.0, d, None)
    while heap:
        now, _, d, what = heapq.heappop(heap)
        if what == _FREE:
            busy[d] = False
        elif what is not None:
            avail.add(what)
        try_start(d, now)
    stuck = [d for d in range(P) if ptr[d] < len(acts[d])]
    if stuck:
        d = stuck[0]
        raise RuntimeError(f"schedule {plan.schedule} deadlocks: device {d} waits forever at "
                           f"action {ptr[d]} {acts[d][ptr[d]]}")
    return SimResult(plan=plan, costs=costs, spans=tuple(spans), transfers=tuple(transfers),
                     version_ready=version_ready)
