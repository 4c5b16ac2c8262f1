"""The loop's steady-state clock: steps after the warm-up, excluded spans, a diverged end."""

from __future__ import annotations

import pytest
import torch

from llm_validation.training import steady as timing


def test_steady_clock_counts_steps_after_warmup_and_excludes_spans(monkeypatch):
    """A fake clock: 10 steps of 1 s from step 0, warm-up 2, an excluded 5 s span at step 4
    (an evaluation) and one before the window opens (ignored)."""
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    clock = timing.SteadyClock(torch.device("cpu"), first_step=0, warmup=2)
    for step in range(10):
        clock.step(step)
        if step in (1, 4):
            with clock.excluded():
                now[0] += 5.0
        now[0] += 1.0
    clock.stop(10)
    # steps 2..9 counted: 8 steps in 8 s once the 5 s span is taken out
    assert clock.steps == 8
    assert clock.tokens_per_s(100) == pytest.approx(8 * 100 / 8.0)
    # a diverged run whose step 6 did not finish counts steps 2..5
    clock = timing.SteadyClock(torch.device("cpu"), first_step=0, warmup=2)
    for step in range(7):
        clock.step(step)
        now[0] += 1.0
    clock.stop(6)
    assert clock.steps == 4
    # no step after the warm-up: no rate
    clock = timing.SteadyClock(torch.device("cpu"), first_step=5, warmup=2)
    clock.step(5)
    clock.stop(6)
    assert clock.tokens_per_s(100) is None
