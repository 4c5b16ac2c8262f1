"""The synchronous baselines built on ``torch.distributed.pipelining`` (ScheduleGPipe,
Schedule1F1B) with the same stage split, data and optimizer equal the single-process
synchronous run (tau = 0): losses and final weights bitwise, statistics to a few ulps."""

from __future__ import annotations

import pytest

from llm_validation.run import run as launch
from tests.llm_validation.pipeline.support import (
    assert_diverges_like_the_emulator,
    assert_same_run,
    emulate,
    pipe_cfg,
    small_corpus,
)


pytestmark = pytest.mark.usefixtures("pipeline_env")


@pytest.mark.parametrize("pipeline,P,M", [("gpipe", 2, 2), ("1f1b", 3, 3), ("1f1b", 2, 4)])
def test_sync_pipeline_equals_single_process_sync_run(tmp_path, pipeline, P, M):
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline=pipeline, P=P, M=M)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-sync", M=M))
    got = launch(cfg)
    assert got.status == "completed" and got.final_loss == ref.final_loss
    worst = assert_same_run(got.run_dir, ref.run_dir, cfg)
    assert "smoothness_est" in worst and "grad_noise_var" in worst  # side pass + noise hooks ran


def test_sync_and_2bw_differ(tmp_path):
    """The delay is real: the same run with tau = 1 (2BW) gives other losses than tau = 0."""
    corpus = small_corpus(tmp_path)
    sync = emulate(pipe_cfg(tmp_path / "s", corpus, pipeline="emulate-sync", M=2, steps=3))
    delayed = emulate(pipe_cfg(tmp_path / "d", corpus, pipeline="emulate-2bw", M=2, steps=3))
    assert sync.final_loss != delayed.final_loss


def test_1f1b_with_compute_dtype_boundaries_equals_the_emulator(tmp_path):
    """bf16 activations and gradients through torch's schedule (its stage is told the bf16
    activation shape): bitwise the synchronous emulated run that rounds at the same split."""
    import dataclasses

    from tests.llm_validation.helpers import MICRO

    corpus = small_corpus(tmp_path)
    compute = dataclasses.replace(MICRO, boundary_dtype="compute", boundary_stages=2)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="1f1b", P=2, M=2, steps=4,
                   dtype="bfloat16").replace(model=compute)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-sync", M=2, steps=4,
                           dtype="bfloat16").replace(model=compute))
    assert_same_run(launch(cfg).run_dir, ref.run_dir, cfg)


@pytest.mark.parametrize("log_interval", [1, 3])
def test_sync_divergence_stops_every_stage_at_the_diverged_step(tmp_path, log_interval):
    """Stage 0 steps alongside the last stage here (no 2BW ordering): it waits at the flush for
    the last stage's verdict, so both stop at the diverged step with the emulator's rows."""
    assert_diverges_like_the_emulator(tmp_path, "1f1b", "emulate-sync", P=2, M=2, steps=8,
                                      before=3, checkpoint_interval=0,
                                      log_interval=log_interval)


def test_sync_flush_every_k_steps_gives_the_same_run(tmp_path):
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="1f1b", P=2, M=2, steps=7,
                   checkpoint_interval=4, log_interval=3)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-sync", M=2, steps=7))
    assert_same_run(launch(cfg).run_dir, ref.run_dir, cfg)
