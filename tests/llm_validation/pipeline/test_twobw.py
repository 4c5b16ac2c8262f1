"""The real PipeDream-2BW pipeline (one process per stage, gloo) equals the single-process
emulated run ``DelayedOptimizer(tau=1)``: per-step losses, validation losses and final weights
bitwise (float32 on CPU: the same operations in the same order), statistics to a few ulps."""

from __future__ import annotations

import pytest

from llm_validation.run import run as launch
from llm_validation.rundir import read_metrics
from tests.llm_validation.pipeline.support import (
    assert_diverges_like_the_emulator,
    assert_same_run,
    emulate,
    pipe_cfg,
    small_corpus,
)


pytestmark = pytest.mark.usefixtures("pipeline_env")


@pytest.mark.parametrize("P,M", [(2, 2), (2, 4), (3, 3), (3, 6)])
def test_2bw_equals_emulated_tau1(tmp_path, P, M):
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=P, M=M)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", M=M))
    got = launch(cfg)
    assert got.status == "completed" and got.steps == cfg.run.steps
    assert got.final_loss == ref.final_loss and got.final_val_loss == ref.final_val_loss
    assert got.tokens == ref.tokens and got.n_params == ref.n_params
    worst = assert_same_run(got.run_dir, ref.run_dir, cfg)
    assert "smoothness_est" in worst and "momentum_error" in worst   # the side passes ran


def test_bfloat16_autocast_is_bitwise_too(tmp_path):
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, M=2, dtype="bfloat16")
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", M=2,
                           dtype="bfloat16"))
    assert_same_run(launch(cfg).run_dir, ref.run_dir, cfg)


def test_compute_dtype_boundaries_send_bf16_and_stay_bitwise(tmp_path, monkeypatch):
    """``boundary_dtype = compute`` under bf16 autocast: the P = 2 pipeline equals the emulator
    with the same setting (it rounds at the same split) bitwise, every activation and gradient
    crosses the boundary in bf16 (host staging forced on CPU counts the bytes: 2 per value,
    against 4 with float32 boundaries, ``test_devices.py``), and the rounding changes the run."""
    import dataclasses

    from llm_validation.pipeline.devices import STAGING_ENV
    from tests.llm_validation.helpers import MICRO
    from tests.llm_validation.pipeline.support import assert_staged_bytes

    monkeypatch.setenv(STAGING_ENV, "1")
    corpus = small_corpus(tmp_path)
    compute = dataclasses.replace(MICRO, boundary_dtype="compute", boundary_stages=2)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, M=2, steps=4,
                   dtype="bfloat16").replace(model=compute)
    emu = pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", M=2, steps=4,
                   dtype="bfloat16")
    ref = emulate(emu.replace(model=compute))
    got = launch(cfg)
    assert_same_run(got.run_dir, ref.run_dir, cfg)
    assert_staged_bytes(got.run_dir, cfg, 2)                                # bf16
    plain = emulate(emu.replace(run=dataclasses.replace(emu.run, out_dir=str(tmp_path / "f32"))))
    assert plain.final_loss != ref.final_loss            # the boundary rounding is real


def test_grouped_sends_nccl_code_path_on_gloo(tmp_path, monkeypatch):
    """NCCL needs each receive grouped with the sends before it (batch_isend_irecv, as torch's
    schedules do); that code path, forced on gloo, gives the same run."""
    monkeypatch.setenv("DELAYBOUND_PIPE_GROUPED", "1")
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=3, M=3)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", M=3))
    assert_same_run(launch(cfg).run_dir, ref.run_dir, cfg)


@pytest.mark.parametrize("lam,level", [(1.0, "update"), (0.5, "grad")])
def test_error_feedback_in_the_pipeline_equals_the_emulator(tmp_path, lam, level):
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, M=2, lam=lam, level=level)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", M=2, lam=lam,
                           level=level))
    got = launch(cfg)
    worst = assert_same_run(got.run_dir, ref.run_dir, cfg)
    if level == "update":
        assert "ef_drift" in worst
    no_ef = emulate(pipe_cfg(tmp_path / "plain", corpus, pipeline="emulate-2bw", M=2))
    assert no_ef.final_loss != got.final_loss        # EF changed the trajectory


def test_divergence_stops_like_the_emulator(tmp_path):
    cfg = assert_diverges_like_the_emulator(tmp_path, "2bw", "emulate-2bw", P=2, M=2, steps=8,
                                            before=8)
    assert read_metrics(cfg.run.out_dir)[-1]["diverged"] is True


def test_microbatches_below_stages_are_rejected_before_any_process_starts(tmp_path):
    cfg = pipe_cfg(tmp_path / "x", small_corpus(tmp_path), pipeline="2bw", P=3, M=2)
    with pytest.raises(ValueError, match="microbatches must be an integer >= stages"):
        launch(cfg)
    assert not (tmp_path / "x").exists()


def test_existing_run_directory_is_refused(tmp_path):
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, M=2, steps=2)
    launch(cfg)
    with pytest.raises(ValueError, match="already holds a run"):
        launch(cfg)


def test_a_flush_every_k_steps_gives_the_same_run(tmp_path):
    """``log_interval = 4`` (rows read every 4 steps, at checkpoints and at the end): bitwise
    the emulated run that reads every step."""
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=3, M=3, steps=7,
                   checkpoint_interval=5, log_interval=4)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", M=3, steps=7))
    got = launch(cfg)
    assert got.status == "completed" and got.final_val_loss == ref.final_val_loss
    assert_same_run(got.run_dir, ref.run_dir, cfg)


def test_divergence_found_at_a_later_flush_stops_at_the_diverged_step(tmp_path):
    """The loss diverges before the first flush (step 4 of log_interval 5): every stage stops,
    the rows, status and message are the emulator's, and no checkpoint holds later weights."""
    assert_diverges_like_the_emulator(tmp_path, "2bw", "emulate-2bw", P=3, M=3, steps=10,
                                      before=4, checkpoint_interval=0, log_interval=5)
    ckpts = tmp_path / "pipe" / "checkpoints"
    assert not ckpts.exists() or not any(ckpts.iterdir())
