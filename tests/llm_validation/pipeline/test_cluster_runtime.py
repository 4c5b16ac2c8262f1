"""The 2BW runtime as a cluster runs it, on CPU/gloo: grouped sends reaped, control messages of
any size, slow checkpoint saves inside their own deadline and in parallel across stages."""

from __future__ import annotations

import pytest

from llm_validation.pipeline.comm import MESSAGE_BYTES, REAP_LAG_FLUSHES
from llm_validation.pipeline.faults import SLOW_SAVE_ENV
from llm_validation.records.atomic_io import read_json
from llm_validation.run import run as launch
from tests.llm_validation.pipeline.support import assert_same_run, emulate, pipe_cfg, small_corpus

#: Sends a stage holds after a flush at most: those of the last REAP_LAG_FLUSHES flushes, each
#: with at most two (a gradient to s-1 and an activation to s+1 held back since the last receive).
SENDS_BOUND = 2 * REAP_LAG_FLUSHES
#: Steps of the grouped run: more than SENDS_BOUND, so the pending sends of the code before
#: reaping (one more per step on every non-first stage: 20 here) exceed the bound.
GROUPED_STEPS = 20
#: The slow-save test: hang deadline (so a stage's own stall limit is 2 x 1.5 = 3 s) and the
#: save delays: stage 0's save outlasts both its own stall limit and stage 1's hang deadline
#: (stage 1 waits on stage 0 meanwhile); stage 1's save lasts long enough that stage 0 (which
#: steps right after receiving the gradient stage 1 sends before saving) starts its save
#: while stage 1's is still running.
SHORT_HANG_S = 1.5
SLOW_SAVES = {0: 4.0, 1: 2.0}


pytestmark = pytest.mark.usefixtures("pipeline_env")


def test_grouped_sends_are_reaped_and_large_messages_arrive(tmp_path, monkeypatch):
    """Guards issue 31, points 1 and 5: in grouped mode (the NCCL code path, forced on gloo)
    the pending sends of every stage stay bounded over many steps (before: one more per step,
    never freed until the end), and a flush of 20 steps with every statistic on (~0.9 kB per
    row) sends stage 0 one message larger than 16 KB (before: ``ValueError`` at that flush)
    that arrives whole: the run is still bitwise the emulator's."""
    monkeypatch.setenv("DELAYBOUND_PIPE_GROUPED", "1")
    corpus = small_corpus(tmp_path)
    kw = dict(M=2, steps=GROUPED_STEPS, log_interval=1000, stats_interval=1,
              momentum_error_interval=0, eval_interval=0, checkpoint_interval=0)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, **kw)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", **kw))
    got = launch(cfg)
    assert_same_run(got.run_dir, ref.run_dir, cfg)
    stages = read_json(f"{got.run_dir}/logs/result.json")["stage_memory"]
    peaks = [m["sends_peak"] for m in stages]
    assert max(peaks) <= SENDS_BOUND < GROUPED_STEPS, peaks
    assert stages[1]["message_peak"] > MESSAGE_BYTES, stages[1]["message_peak"]


def test_a_slow_save_completes_and_the_stages_save_in_parallel(tmp_path, monkeypatch):
    """Guards issue 31, point 2: with a 1.5 s hang deadline (3 s stall limit) a 4 s save on
    stage 0 (longer than both, as a multi-GB save is longer than the old 40 s watchdog) and a
    2 s save on stage 1 complete, because a save is a phase with its own deadline and a peer
    waiting on a saving stage keeps waiting; and the two saves of the checkpoint overlap in
    time (before: stage s saved before sending the gradient stage s-1 needed, one after
    another)."""
    monkeypatch.setenv("DELAYBOUND_PIPE_TIMEOUT_S", str(SHORT_HANG_S))
    monkeypatch.setenv(SLOW_SAVE_ENV, ",".join(f"{r}:{s}" for r, s in SLOW_SAVES.items()))
    corpus = small_corpus(tmp_path)
    kw = dict(M=2, steps=3, checkpoint_interval=0, stats_interval=0, eval_interval=0,
              momentum_error_interval=0)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, **kw)
    got = launch(cfg)
    assert got.status == "completed" and got.steps == 3
    saves = {m["stage"]: m["saves"] for m in
             read_json(f"{got.run_dir}/logs/result.json")["stage_memory"]}
    (step0, a0, b0), = saves[0]
    (step1, a1, b1), = saves[1]
    assert step0 == step1 == 3
    assert b0 - a0 >= SLOW_SAVES[0] and b1 - a1 >= SLOW_SAVES[1]
    assert a0 < b1 and a1 < b0, saves            # the two saves ran at the same time
