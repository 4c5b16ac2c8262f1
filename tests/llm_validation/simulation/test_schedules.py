"""Action lists of every schedule: each microbatch forwarded and backwarded once per virtual stage,
steps in order after their microbatches, versions written before they are read (check_plan);
2BW is the runtime's list unchanged; delays and in-flight counts match the known forms."""

from __future__ import annotations

import pytest

from llm_validation.config import pipedream_taus
from llm_validation.pipeline.schedule import schedule_2bw
from llm_validation.simulation.schedules import (
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    SCHEDULES,
    STEP,
    build_plan,
    check_plan,
    stage_delays,
)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_invariants_hold_on_a_grid(schedule):
    for P in range(2, 7):
        for M in range(1, 2 * P + 2):
            if (schedule == "2bw" and M < P - 1) or (schedule == "interleaved-1f1b" and M % P):
                continue
            for T in (1, 3):
                plan = build_plan(schedule, P, M, T, chunks=3)
                out = check_plan(plan)
                assert out["steps"] == [plan.optimizer_steps] * P


def test_2bw_is_the_runtime_schedule():
    plan = build_plan("2bw", 3, 4, 3)
    for d in range(3):
        assert [tuple(a)[:4] for a in plan.actions[d]] == \
            [tuple(a) for a in schedule_2bw(d, 3, 4, 3)]


def test_delays():
    for P in (2, 3, 5):
        M = P + 1
        assert stage_delays(build_plan("2bw", P, M, 3)) == [1] * P
        assert stage_delays(build_plan("pipedream", P, M, 3)) == list(pipedream_taus(P))
        for s in ("gpipe", "1f1b", "zb-h1"):
            assert stage_delays(build_plan(s, P, M, 3)) == [0] * P


def test_in_flight_forms():
    """Peak (microbatch, chunk) activations held: 1F1B and 2BW P - d, GPipe M, ZB-H1 P on
    every device (W holds the activations), interleaved min(2(P-1-d) + (v-1)P + 1, vM)."""
    for P in (2, 4, 5):
        for M in (P, 2 * P):
            peaks = lambda s, **kw: check_plan(build_plan(s, P, M, 2, **kw))["peak_activations"]
            assert peaks("1f1b") == [P - d for d in range(P)]
            assert peaks("2bw") == [P - d for d in range(P)]
            assert peaks("gpipe") == [M] * P
            assert peaks("zb-h1") == [P] * P
            for v in (2, 3):
                assert peaks("interleaved-1f1b", chunks=v) == \
                    [min(2 * (P - 1 - d) + (v - 1) * P + 1, v * M) for d in range(P)]


def test_zb_h1_postpones_d_weight_passes():
    P, M = 4, 6
    plan = build_plan("zb-h1", P, M, 1)
    assert not any(a.kind in (BACKWARD_INPUT, BACKWARD_WEIGHT) for a in plan.actions[0])
    for d, acts in enumerate(plan.actions[1:], start=1):
        assert acts[-1].kind == STEP
        last_i = max(n for n, a in enumerate(acts) if a.kind == BACKWARD_INPUT)
        # after the last I: its own W and the d postponed ones, then the step
        assert [a.kind for a in acts[last_i + 1:-1]] == [BACKWARD_WEIGHT] * (d + 1)


@pytest.mark.parametrize("args,match", [
    (("fifo", 4, 4), "unknown schedule"),
    (("2bw", 4, 2), "microbatches >= stages - 1"),
    (("interleaved-1f1b", 4, 6), "multiple of stages"),
    (("1f1b", 1, 4), "stages must be"),
    (("gpipe", 2, 0), "microbatches must be"),
    (("gpipe", 2, 2, 0), "batches must be"),
])
def test_bad_shapes_are_rejected(args, match):
    with pytest.raises(ValueError, match=match):
        build_plan(*args)
