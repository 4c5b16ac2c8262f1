"""The 2BW schedule (pure): every microbatch forwarded and backwarded once with the same weight
version W(t-1); the version exists when first read; at most two versions in flight; no flush
between optimizer steps; M < P - 1 rejected (M = P - 1 is the fewest that works). Proven by
replay for a grid of (P, M, start)."""

from __future__ import annotations

import pytest

from llm_validation.pipeline.schedule import (
    BACKWARD,
    FORWARD,
    STEP,
    check_schedule,
    min_microbatches,
    schedule_2bw,
    validate_pipeline_shape,
    version_of_batch,
    warmup_forwards,
)
from tests.llm_validation.pipeline.timeline_oracle import schedule_timeline, simulate_times


@pytest.mark.parametrize("P", [2, 3, 4, 5])
def test_invariants_hold_for_every_stage_and_resume_point(P):
    for M in range(min_microbatches(P), 2 * P + 2):
        for start in (0, 1, 3):
            for s in range(P):
                out = check_schedule(s, P, M, 5, start)
                assert out["max_versions_in_flight"] <= 2
                assert out["max_in_flight"] == min(warmup_forwards(s, P) + 1, (5 - start) * M)
                assert out["steps"] == 5 - start


@pytest.mark.parametrize("P", [2, 3, 4, 5])
def test_the_step_after_the_forward_that_follows_stage_0s_last_backward(P):
    """``step_after="forward"`` (clipping): every invariant holds, each step precedes the
    first read of the version it writes, and on stage s 2s + 1 actions (s pairs and the
    forward) separate it from its batch's last backward: the slack the norm's reduction uses
    (none with the default placement)."""
    for M in range(P, 2 * P + 2):
        for start in (0, 1, 3):
            for s in range(P):
                out = check_schedule(s, P, M, 5, start, step_after="forward")
                assert out["max_versions_in_flight"] <= 2 and out["steps"] == 5 - start
                assert out["step_lag"] == 2 * s + 1
                assert check_schedule(s, P, M, 5, start)["step_lag"] == 0
    with pytest.raises(ValueError, match="needs microbatches >= stages"):
        schedule_2bw(0, P, P - 1, 3, step_after="forward")
    with pytest.raises(ValueError, match="step_after"):
        schedule_2bw(0, P, P, 3, step_after="later")


def test_batch_t_reads_w_t_minus_1_and_steps_write_w_t_plus_1():
    assert [version_of_batch(t) for t in range(4)] == [0, 0, 1, 2]
    for a in schedule_2bw(0, 3, 3, 4):
        if a.kind in (FORWARD, BACKWARD):
            assert a.version == max(a.batch - 1, 0) and a.batch == a.mb // 3
        else:
            assert a.kind == STEP and a.version == a.batch + 1


def test_no_flush_the_pipeline_fills_once():
    """Unit-time F and B: 2BW takes 2 (T M + P - 1) ticks for T batches (one fill and one drain
    in the whole run), while a flush per batch would cost 2 (M + P - 1) ticks per batch."""
    for P, M, T in [(2, 2, 4), (3, 3, 3), (4, 6, 2)]:
        timed = simulate_times(P, M, T)
        end = max(t for row in timed for a, t in row if a.kind != STEP) + 1
        assert end == 2 * (T * M + P - 1)
        assert end < T * 2 * (M + P - 1)


def test_timeline_marks_steps_and_batches():
    text = schedule_timeline(2, 2, 2)
    assert text.splitlines()[0].startswith("stage 0: a0 a1")
    assert text.count("|") == 4 and "B1" in text


@pytest.mark.parametrize("P,M", [(1, 4), (3, 2), (4, 3)])
def test_pipeline_shape_is_validated(P, M):
    with pytest.raises(ValueError):
        validate_pipeline_shape(P, M)      # the runtime keeps one microbatch of margin


@pytest.mark.parametrize("P,M", [(1, 4), (3, 1), (4, 2), (5, 3)])
def test_schedule_refuses_fewer_than_p_minus_1_microbatches(P, M):
    with pytest.raises(ValueError):
        schedule_2bw(0, P, M, 2)


@pytest.mark.parametrize("P", [2, 3, 4, 6, 8])
def test_m_equals_p_minus_1_needs_only_two_versions(P):
    """The bound is tight: at M = P - 1 stage 0 has P = M + 1 microbatches in flight, spanning
    two batches (two versions), and W(t-1) is written in the pair right before batch t's first
    forward; every invariant of check_schedule holds on every stage."""
    M = min_microbatches(P)
    assert M == P - 1
    outs = [check_schedule(s, P, M, 4) for s in range(P)]
    assert max(o["max_versions_in_flight"] for o in outs) == 2
    assert outs[0]["max_in_flight"] == P
