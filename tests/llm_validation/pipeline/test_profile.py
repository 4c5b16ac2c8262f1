"""``--profile``: every stage's action timings land in profile.json, and profiling changes no
number of the run (2BW against the emulator, 1F1B against the synchronous run)."""

from __future__ import annotations

import json
import time

import pytest
import torch

from llm_validation.pipeline.profile import (MAX_PENDING_INTERVALS, ActionTimer, CudaEventClock,
                                             HostClock, clock_for, steady_step_time)
from llm_validation.run import run
from llm_validation.simulation.profile import read_profile
from tests.llm_validation.helpers import MICRO
from tests.llm_validation.pipeline.support import assert_same_run, emulate, pipe_cfg, small_corpus

PER_STAGE_KEYS = ("forward_s", "backward_s", "recv_wait_s", "send_wait_s", "step_s", "side_s",
                  "activation_bytes", "samples")
#: A timed sleep of SLEEP_S must read at least SLEEP_S (a sleep never ends early) and less than
#: SLEEP_S + SLEEP_SLACK_S: the scheduler may wake the process late on a loaded 2-core machine
#: (observed < 5 ms late), but a wrong clock unit (ms for s) or a missed interval is 1000x off.
SLEEP_S = 0.05
SLEEP_SLACK_S = 0.5


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
                 "backward_compute_s": 1.0, "flush_s": 0.0, "flushes": 0}
    # the loop's untimed rest (12 s of wall, 10 s timed) is bookkeeping: 0.5 s per microbatch,
    # half of it on the forward and half on the backward
    t.add("wall", 12.0)
    m = t.means()
    assert m["overhead_s"] == 0.5 and m["forward_s"] == 0.75 and m["backward_s"] == 1.25
    assert m["forward_compute_s"] == 0.5 and m["backward_compute_s"] == 1.0
    # inside the step: a flush (0.75 s, of which 0.25 s waiting for the last stage's verdict)
    # and a checkpoint save (0.5 s); the step's own cost is what remains of the 2 s
    t.add("flush", 0.75)
    t.add("verdict_wait", 0.25)
    t.add("checkpoint", 0.5)
    m = t.means()
    assert m["step_s"] == 0.75 and m["flush_s"] == 0.5 and m["flushes"] == 1


def test_the_clock_follows_the_device():
    assert isinstance(clock_for(torch.device("cpu")), HostClock)
    assert isinstance(clock_for(torch.device("cuda", 0)), CudaEventClock)    # no GPU needed
    assert ActionTimer.for_device(torch.device("cpu")).clock.name == "host"
    assert ActionTimer.for_device(torch.device("cuda")).clock.name == "cuda_events"


def test_host_clock_times_the_interval_between_start_and_stop():
    t = ActionTimer.for_device(torch.device("cpu"))
    for _ in range(2):
        t.start("forward")
        time.sleep(SLEEP_S)
        t.stop("forward")
    t.stop("backward")                      # never started: nothing booked
    t.start("side")
    t.cancel("side")
    t.stop("side")
    assert len(t._marks) == 2                # kept as marks until the totals are read
    m = t.means()
    assert SLEEP_S <= m["forward_s"] < SLEEP_S + SLEEP_SLACK_S
    assert t.counts["forward"] == 2 and t.counts["backward"] == 0
    assert m["backward_s"] == 0.0 and m["side_s"] == 0.0


def test_pending_intervals_are_converted_in_bounded_batches():
    t = ActionTimer()
    for _ in range(MAX_PENDING_INTERVALS + 3):
        t.start("send")
        t.stop("send", count=0)
    assert len(t._marks) == 3 and t._totals["send"] > 0.0
    assert t.totals["send"] > 0.0 and not t._marks


def test_schedule_window_outside_compute_is_communication():
    t = ActionTimer()
    t.add("schedule", 10.0, count=1)        # torch's schedule.step() of one step
    t.add("forward", 3.0, count=2)
    t.add("backward", 5.0, count=2)
    m = t.means()
    assert m["recv_wait_s"] == (10.0 - 3.0 - 5.0) / 2 and m["forward_s"] == 1.5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (CUDA events)")
def test_cuda_events_time_the_kernels_not_their_launch():
    """20 float32 4096^2 matmuls (~tens of ms of GPU work) are launched in well under a
    millisecond: the events' interval lies between the launch time and the time to
    synchronize, where the host clock would have read the launch time."""
    t = ActionTimer.for_device(torch.device("cuda"))
    a = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    host0 = time.perf_counter()
    t.start("forward")
    for _ in range(20):
        a = a @ a / 64.0
    t.stop("forward")
    launched = time.perf_counter() - host0
    torch.cuda.synchronize()
    finished = time.perf_counter() - host0
    m = t.means()                                          # one synchronize, then elapsed_time
    assert t.clock.name == "cuda_events"
    assert launched < m["forward_s"] <= finished, (launched, m["forward_s"], finished)


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
        assert s["samples"] == 6 * 2 and s["steps_timed"] == 6 and s["clock"] == "host"
    assert prof["per_stage"][0]["activation_bytes"] == 2 * 16 * MICRO.d_model * 4   # float32
    assert prof["per_stage"][1]["activation_bytes"] == 0                           # last stage
    assert read_profile(tmp_path / "pipe").stages == 2     # the simulator reads what we write
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus,
                           pipeline="emulate-2bw" if pipeline == "2bw" else "emulate", M=2))
    assert_same_run(got.run_dir, ref.run_dir, cfg)
