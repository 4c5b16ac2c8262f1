"""Per-step wall times of a short run and the seconds-per-step model built from them."""

from __future__ import annotations

import pytest

from llm_validation.config import DataConfig, OptimConfig, RunConfig, TrainConfig
from llm_validation.training.timing import StepTimes, time_run
from tests.llm_validation.helpers import MICRO


def _times() -> StepTimes:
    # steps 1..6 with statistics at 3 and 6 (interval 3): plain 1 s, active 4 s, tail 2 s
    return StepTimes(seconds=(1.0, 1.0, 4.0, 1.0, 1.0, 4.0),
                     active=(False, False, True, False, False, True), tail_s=2.0,
                     tokens_per_step=100)


def test_sec_per_step_adds_statistics_evaluation_and_tail():
    t = _times()
    assert t.plain_s == 1.0 and t.active_s == 4.0
    # 1 + (4 - 1)/15 + 2/25 + 2/200
    assert t.sec_per_step(steps=200, stats_interval=15, eval_interval=25) == pytest.approx(
        1.0 + 3.0 / 15 + 2.0 / 25 + 2.0 / 200)
    assert t.sec_per_step(steps=10, stats_interval=0, eval_interval=0) == pytest.approx(1.2)
    assert t.tokens_per_s == pytest.approx(6 * 100 / 14.0)
    with pytest.raises(ValueError, match="steps"):
        t.sec_per_step(steps=0, stats_interval=0, eval_interval=0)


def test_without_statistics_steps_active_falls_back_to_plain():
    t = StepTimes(seconds=(1.0, 3.0), active=(False, False), tail_s=0.5, tokens_per_step=1)
    assert t.active_s == t.plain_s == 2.0


def test_time_run_times_every_step_of_a_real_run(tmp_path):
    cfg = TrainConfig(model=MICRO, data=DataConfig(seq_len=16),
                      optim=OptimConfig(name="muon", lr=0.02),
                      run=RunConfig(steps=50, batch_size=4, microbatches=2, eval_batches=1,
                                    out_dir=str(tmp_path / "never-written")))
    t = time_run(cfg, steps=5, stats_interval=2, eval_interval=0, threads=1)
    assert len(t.seconds) == 4 and t.active == (False, True, False, True)
    assert all(s > 0 for s in t.seconds) and t.tail_s > 0
    assert t.tokens_per_step == 4 * 16
    assert not (tmp_path / "never-written").exists()     # a temporary directory only
    with pytest.raises(ValueError, match="steps >= 2"):
        time_run(cfg, steps=1)

