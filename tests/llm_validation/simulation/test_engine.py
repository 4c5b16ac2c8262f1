"""The event-driven engine: exact unit-cost closed forms (1F1B, GPipe, 2BW, ZB-H1, interleaved),
the runtime's own 2BW timeline, a hand-computed run with latency, FIFO links, overlapped
all-reduce, and every start time re-derived independently under random costs."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.llm_validation.pipeline.timeline_oracle import schedule_timeline, simulate_times
from llm_validation.simulation.costs import VStageCost, unit_costs
from llm_validation.simulation.engine import simulate
from llm_validation.simulation.schedules import (
    BACKWARD,
    FORWARD,
    SCHEDULES,
    Plan,
    SimAction,
    build_plan,
)
from llm_validation.simulation.timeline import ascii_timeline
from tests.llm_validation.simulation.support import assert_earliest_starts

#: The brief's grid for the closed forms: P = 2..16, M = P..4P.
GRID = [(P, M) for P in range(2, 17) for M in range(P, 4 * P + 1)]


def _unit(schedule, P, M, T, chunks=2):
    plan = build_plan(schedule, P, M, T, chunks)
    return simulate(plan, unit_costs(plan))


def test_1f1b_bubble_is_exact():
    """Unit costs: a flushing 1F1B batch takes 2(M + P - 1) ticks; bubble (P-1)/(M+P-1)."""
    for P, M in GRID:
        r = _unit("1f1b", P, M, 1)
        assert r.makespan == 2 * (M + P - 1)
        assert r.bubble_fraction == (P - 1) / (M + P - 1)


def test_2bw_run_takes_one_fill_and_one_drain():
    """Unit costs: T batches of 2BW take 2(TM + P - 1) ticks (docs/pipeline.md)."""
    for P, M in GRID:
        T = 2
        r = _unit("2bw", P, M, T)
        assert r.makespan == 2 * (T * M + P - 1)
        assert r.bubble_fraction == (P - 1) / (T * M + P - 1)


def test_other_closed_forms():
    """Per batch: GPipe 2(M+P-1); ZB-H1 2M + (P-1) (F = 1, I = W = 1/2: the bubble shrinks to
    (P-1)(F + I - W)); interleaved with v = 2 chunks 2M + 2(P-1)/v; T flushing batches add up."""
    for P, M in GRID[::7]:
        assert _unit("gpipe", P, M, 2).makespan == 2 * 2 * (M + P - 1)
        assert _unit("zb-h1", P, M, 2).makespan == 2 * (2 * M + P - 1)
        if M % P == 0:
            assert _unit("interleaved-1f1b", P, M, 2).makespan == 2 * (2 * M + (P - 1))


def test_2bw_matches_the_runtime_schedules_own_timeline():
    for P, M, T in [(2, 2, 3), (3, 3, 3), (4, 6, 2), (5, 7, 3)]:
        r = _unit("2bw", P, M, T)
        ref = simulate_times(P, M, T)
        for d in range(P):
            mine = [(s.kind, s.mb, s.start) for s in r.spans
                    if s.device == d and s.kind in (FORWARD, BACKWARD)]
            assert mine == [(a.kind, a.mb, t) for a, t in ref[d] if a.kind in (FORWARD, BACKWARD)]
        assert ascii_timeline(r) == schedule_timeline(P, M, T)


def test_hand_computed_run_with_latency():
    """1F1B, P = 2, M = 4, F = B = 1, latency 0.5 per message (computed by hand): device 0 runs
    F0 F1 at 0, 1; B0 waits for the gradient (1.5 + 1 + 0.5 = 4); ...; the batch ends at 12.
    With blocking sends every sender also waits for delivery: 12.5."""
    plan = build_plan("1f1b", 2, 4, 1)
    costs = dataclasses.replace(unit_costs(plan), latency=0.5)
    r = simulate(plan, costs)
    assert [(s.kind, s.mb, s.start) for s in r.spans if s.device == 0 and s.mb >= 0] == [
        ("F", 0, 0.0), ("F", 1, 1.0), ("B", 0, 4.0), ("F", 2, 5.0), ("B", 1, 6.0),
        ("F", 3, 7.0), ("B", 2, 9.0), ("B", 3, 11.0)]
    assert r.makespan == 12.0
    assert simulate(plan, dataclasses.replace(costs, overlap_p2p=False)).makespan == 12.5


def test_a_link_carries_one_message_at_a_time():
    """GPipe, P = 2, transfers of 2 ticks after forwards of 1: activations arrive at 3, 5, 7."""
    plan = build_plan("gpipe", 2, 3, 1)
    r = simulate(plan, dataclasses.replace(unit_costs(plan), boundary=(2.0,)))
    assert [s.start for s in r.spans if s.device == 1 and s.kind == FORWARD] == [3.0, 5.0, 7.0]


def test_overlapped_allreduce_hides_behind_2bw_but_not_behind_a_flush():
    """All-reduce of A = 3 ticks. Blocking, every step stalls its device: 2BW takes
    2(TM + P - 1) + T A. Beside the compute stream, 2BW hides it (W(t+1) is first read by
    batch t + 2, more than A ticks later) except the last one: 2(TM + P - 1) + A, with a second
    gradient buffer. A flushing 1F1B needs W(t+1) for its next batch: T (2(M + P - 1) + A)
    either way."""
    from llm_validation.simulation.memory import peak_memory
    P, M, T, A = 3, 4, 4, 3.0
    res = {}
    for sch in ("2bw", "1f1b"):
        for overlap in (False, True):
            plan = build_plan(sch, P, M, T)
            costs = dataclasses.replace(unit_costs(plan), allreduce=(A,) * P,
                                        overlap_allreduce=overlap)
            res[sch, overlap] = simulate(plan, costs)
            assert_earliest_starts(res[sch, overlap])
    assert res["2bw", False].makespan == 2 * (T * M + P - 1) + T * A
    assert res["2bw", True].makespan == 2 * (T * M + P - 1) + A
    assert res["1f1b", False].makespan == res["1f1b", True].makespan == T * (2 * (M + P - 1) + A)
    assert [m["grad_buffers"] for m in peak_memory(res["2bw", True])] == [2] * P
    assert [m["grad_buffers"] for m in peak_memory(res["1f1b", True])] == [1] * P


def test_a_deadlocking_order_is_reported():
    acts = ((SimAction(BACKWARD, 0, 0, 0), SimAction(FORWARD, 0, 0, 0)),
            (SimAction(FORWARD, 0, 0, 0), SimAction(BACKWARD, 0, 0, 0)))
    plan = Plan(schedule="1f1b", stages=2, chunks=1, microbatches=1, batches=1, actions=acts)
    with pytest.raises(RuntimeError, match="deadlocks"):
        simulate(plan, unit_costs(plan))


def test_costs_must_fit_the_plan():
    plan = build_plan("1f1b", 2, 2, 1)
    with pytest.raises(ValueError, match="do not fit"):
        simulate(plan, unit_costs(build_plan("1f1b", 3, 3, 1)))


_pos = st.floats(0.05, 3.0, allow_nan=False)
_nonneg = st.floats(0.0, 2.0, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(schedule=st.sampled_from(SCHEDULES), P=st.integers(2, 4), extra=st.integers(0, 4),
       T=st.integers(1, 3), data=st.data(), overlap_p2p=st.booleans(),
       overlap_ar=st.booleans())
def test_every_start_is_the_earliest_possible(schedule, P, extra, T, data, overlap_p2p,
                                              overlap_ar):
    M = P * (1 + extra % 2) if schedule == "interleaved-1f1b" else P + extra
    placement = data.draw(st.sampled_from(("backward", "forward")))
    plan = build_plan(schedule, P, M, T, chunks=2, step_after=placement)
    K = plan.vstages
    vst = tuple(VStageCost(forward=data.draw(_pos), backward=data.draw(_pos),
                           backward_input=data.draw(_pos), backward_weight=data.draw(_pos))
                for _ in range(K))
    costs = dataclasses.replace(
        unit_costs(plan), vstages=vst, boundary=tuple(data.draw(_nonneg) for _ in range(K - 1)),
        step=tuple(data.draw(_nonneg) for _ in range(P)),
        allreduce=tuple(data.draw(_nonneg) for _ in range(P)), latency=data.draw(_nonneg),
        overlap_p2p=overlap_p2p, overlap_allreduce=overlap_ar,
        flush=tuple(data.draw(_nonneg) for _ in range(P)),
        flush_interval=data.draw(st.integers(1, 3)), clip=data.draw(st.booleans()),
        clip_latency=data.draw(_nonneg))
    assert_earliest_starts(simulate(plan, costs))


def test_steps_and_flushes_overlap_in_2bw_and_clipping_needs_the_forward_placement():
    """Unit F and B, a step of 0.5 and a flush of 0.25 ticks on every device: one 2BW batch
    costs 2M + 0.75 in steady state whatever P (the stages' steps overlap: nothing is held
    back; 2M + 0.75 P would be the steps in series), 1F1B 2(M + P - 1) + 0.75. With clipping
    the step after F((t+1)M + P - 1) keeps 2BW's cost, the step after the last backward waits
    P - 1 ticks for stage 0's gradient."""
    from llm_validation.simulation.summary import steady_step_time

    for P, M in [(2, 2), (3, 3), (4, 8)]:
        def costs(clip):
            return lambda plan: dataclasses.replace(unit_costs(plan), step=(0.5,) * P,
                                                    flush=(0.25,) * P, clip=clip)
        for placement in ("backward", "forward"):
            assert steady_step_time("2bw", P, M, 3, 2, costs(False),
                                    step_after=placement) == 2 * M + 0.75
        assert steady_step_time("2bw", P, M, 3, 2, costs(True), step_after="forward") \
            == 2 * M + 0.75
        assert steady_step_time("2bw", P, M, 3, 2, costs(True), step_after="backward") \
            == 2 * M + 0.75 + (P - 1)
        assert steady_step_time("1f1b", P, M, 3, 2, costs(False)) == 2 * (M + P - 1) + 0.75
