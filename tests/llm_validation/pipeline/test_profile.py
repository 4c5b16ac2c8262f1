"""``--profile``: every stage's action timings land in profile.json, and profiling changes no
number of the run (2BW against the emulator, 1F1B against the synchronous run)."""

from __future__ import annotations

import json

import pytest

from llm_validation.pipeline.profile import ActionTimer, steady_step_time
from llm_validation.run import run
from llm_validation.simulation.profile import read_profile
from tests.llm_validation.helpers import MICRO
from tests.llm_validation.pipeline.support import assert_same_run, emulate, pipe_cfg, small_corpus

PER_STAGE_KEYS = ("forward_s", "backward_s", "recv_wait_s", "send_wait_s", "step_s", "side_s",
                  "activation_bytes", "samples")


def test_steady_step_time_skips_the_warmup():
    clock = [0.0, 5.0, 5.5, 6.0, 6.25, 6.5, 6.75]      # warm-up steps are slow
    assert steady_step_time(clock) == (0.25, 3)
    assert steady_step_time(clock[:4]) == (None, 0)


def test_action_timer_means_are_per_microbatch_and_per_step():
    t = ActionTimer()
    for _ in range(4):
        t.add("forward", 0.5)
        t.add("backward", 1.0)
        t.add("recv_wait", 0.25, count=0)
    t.add("step", 2.0)
    t.add("side", 1.0, count=0)
    m = t.means()
    assert m == {"forward_s": 0.5, "backward_s": 1.0, "recv_wait_s": 0.25, "send_wait_s": 0.0,
                 "step_s": 2.0, "side_s": 1.0, "overhead_s": 0.0, "forward_compute_s": 0.5,
                 "backward_compute_s": 1.0}
    # the loop's untimed rest (12 s of wall, 10 s timed) is bookkeeping: 0.5 s per microbatch,
    # half of it on the forward and half on the backward
    t.add("wall", 12.0)
    m = t.means()
    assert m["overhead_s"] == 0.5 and m["forward_s"] == 0.75 and m["backward_s"] == 1.25
    assert m["forward_compute_s"] == 0.5 and m["backward_compute_s"] == 1.0


@pytest.mark.parametrize("pipeline", ["2bw", "1f1b"])
def test_profile_json_and_unchanged_numbers(tmp_path, pipeline):
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline=pipeline, P=2, M=2, steps=6, profile=True)
    got = run(cfg, progress=False)
    assert got.status == "completed"
    prof = json.loads((tmp_path / "pipe" / "profile.json").read_text())
    assert prof["schema"] == "delaybound.profile" and prof["version"] == 1
    assert prof["schedule"] == pipeline and prof["stages"] == 2
    assert prof["microbatch_tokens"] == 2 * 16 and prof["steps_timed"] == 6 - 3 - 1
    assert prof["step_time_s"] > 0 and prof["tokens_per_s"] == pytest.approx(4 * 16 / prof["step_time_s"])
    assert [s["stage"] for s in prof["per_stage"]] == [0, 1]
    for s in prof["per_stage"]:
        assert set(PER_STAGE_KEYS) <= set(s) and s["forward_s"] > 0 and s["backward_s"] > 0
        assert s["samples"] == 6 * 2 and s["steps_timed"] == 6
    assert prof["per_stage"][0]["activation_bytes"] == 2 * 16 * MICRO.d_model * 4   # float32
    assert prof["per_stage"][1]["activation_bytes"] == 0                           # last stage
    assert read_profile(tmp_path / "pipe").stages == 2     # the simulator reads what we write
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus,
                           pipeline="emulate-2bw" if pipeline == "2bw" else "emulate", M=2))
    assert_same_run(got.run_dir, ref.run_dir, cfg)
