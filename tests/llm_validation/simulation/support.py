"""Test helpers for the simulator: an independent re-derivation of every start time.

:func:`assert_earliest_starts` walks each device's action list in order (no event queue) and
recomputes when each action may start from the recorded spans and transfers: the later of the
device being free and every input (activation, gradient, weight version) having arrived; and
when each message may leave (its producer done, its link free). Every recorded time must equal
the recomputed one exactly (the engine only ever takes maxima and sums of the same numbers).
"""

from __future__ import annotations

from llm_validation.simulation.engine import ALLREDUCE, FLUSH, SEND, UPDATE, SimResult, flush_steps
from llm_validation.simulation.schedules import (
    BACKWARD,
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    FORWARD,
    STEP,
    SYNC_SCHEDULES,
)

_COST = {FORWARD: "forward", BACKWARD: "backward", BACKWARD_INPUT: "backward_input",
         BACKWARD_WEIGHT: "backward_weight"}


def assert_earliest_starts(result: SimResult) -> None:
    plan, costs = result.plan, result.costs
    K = plan.vstages
    spans = {}
    for s in result.spans:
        key = (s.device, s.kind, s.mb, s.step if s.mb < 0 else s.chunk)
        if s.kind == SEND:                     # one after the forward, one after the backward
            key += (s.start,)
        assert key not in spans, f"two spans for {key}"
        spans[key] = s
    # clipping: step t waits for every device's weight gradients of batch t, plus the latency
    clip_at: dict[int, float] = {}
    for s in result.spans:
        if s.kind in (BACKWARD, BACKWARD_WEIGHT):
            clip_at[s.step] = max(clip_at.get(s.step, 0.0), s.end + costs.clip_latency)
    steps = plan.optimizer_steps
    flushes = flush_steps(steps, costs.flush_interval)
    flush = costs.flush or (0.0,) * plan.stages
    arrivals = {(t.what, t.mb, t.vstage): t for t in result.transfers}
    assert len(arrivals) == len(result.transfers), "a message sent twice"
    link_free: dict[tuple[int, int], float] = {}
    for t in sorted(result.transfers, key=lambda t: t.start):
        prev = link_free.get((t.src, t.dst), 0.0)
        chunk = t.vstage // plan.stages
        if t.what == "act":
            producer = spans[(t.src, FORWARD, t.mb, chunk)]
        else:
            producer = spans.get((t.src, BACKWARD, t.mb, chunk)) or \
                spans[(t.src, BACKWARD_INPUT, t.mb, chunk)]
        assert t.start == max(producer.end, prev), f"message {t} left late or too early"
        boundary = costs.boundary[t.vstage if t.what == "act" else t.vstage - 1]
        assert t.end == t.start + boundary + costs.latency
        link_free[(t.src, t.dst)] = t.start + boundary
    for d, acts in enumerate(plan.actions):
        free, lane = 0.0, 0.0
        for a in acts:
            k = plan.vstage(d, a.chunk)
            if a.kind == STEP:
                ar = spans[(d, ALLREDUCE, -1, a.step)]
                up = spans[(d, UPDATE, -1, a.step)]
                if costs.clip:
                    free = max(free, clip_at[a.step])
                t0 = max(free, lane) if costs.overlap_allreduce else free
                assert ar.start == t0 and ar.end == t0 + costs.allreduce[d]
                assert up.start == ar.end and up.end == ar.end + costs.step[d]
                assert result.version_ready[(d, a.version)] == up.end
                if costs.overlap_allreduce:
                    lane = up.end
                else:
                    free = up.end
                if a.step in flushes:      # the flush; the verdict from the last device
                    fl = spans[(d, FLUSH, -1, a.step)]
                    waits = d != plan.stages - 1 and (plan.schedule in SYNC_SCHEDULES
                                                      or a.step == steps - 1)
                    start = free
                    if waits:
                        start = max(free, spans[(plan.stages - 1, FLUSH, -1, a.step)].end)
                    assert fl.start == start and fl.end == start + flush[d], (d, a, fl, start)
                    free = fl.end
                continue
            sp = spans[(d, a.kind, a.mb, a.chunk)]
            ready = [free]
            if a.kind == FORWARD:
                ready.append(result.version_ready[(d, a.version)])
                if k > 0:
                    ready.append(arrivals[("act", a.mb, k - 1)].end)
            elif a.kind in (BACKWARD, BACKWARD_INPUT) and k < K - 1:
                ready.append(arrivals[("grad", a.mb, k + 1)].end)
            assert sp.start == max(ready), (d, a, sp.start, max(ready))
            assert sp.end == sp.start + getattr(costs.vstages[k], _COST[a.kind])
            free = sp.end
            sent = None
            if a.kind == FORWARD and k < K - 1:
                sent = arrivals[("act", a.mb, k)]
            elif a.kind in (BACKWARD, BACKWARD_INPUT) and k > 0:
                sent = arrivals[("grad", a.mb, k)]
            if sent is not None:
                assert sent.start >= sp.end
                if not costs.overlap_p2p:
                    blocked = spans[(d, SEND, a.mb, a.chunk, sp.end)]
                    assert blocked.start == sp.end and blocked.end == sent.end
                    free = sent.end
