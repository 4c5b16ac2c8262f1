"""Global-norm gradient clipping on the real pipelines equals the emulator's, bitwise
(:mod:`llm_validation.pipeline.clipping`): 2BW at P = 2 and 3 and on a P x D = 2 x 2 grid, and
1F1B at P = 2, each against the single-process emulated run with the same ``grad_clip``."""

from __future__ import annotations

import pytest
import torch

from llm_validation.config import OptimConfig
from llm_validation.pipeline.clipping import StageClip, model_param_order
from llm_validation.run import run as launch
from llm_validation.rundir import read_metrics
from llm_validation.training.delay import clip_grads_, clip_scale
from tests.llm_validation.pipeline.support import (assert_same_run, dp_cfgs, emulate, pipe_cfg,
                                                   small_corpus)

#: SGD feels the clipping at once (Muon and Adam are nearly scale-invariant); the threshold
#: sits inside the MICRO run's range of gradient norms, so some steps clip and some do not.
CLIP = 2.0
SGD = OptimConfig(name="sgd", lr=0.3, momentum=0.9, grad_clip=CLIP, schedule="constant")


pytestmark = pytest.mark.usefixtures("pipeline_env")


def _clipped_somewhere(run_dir: str, clip: float = CLIP) -> None:
    norms = [r["grad_norm"] for r in read_metrics(run_dir) if r.get("grad_norm") is not None]
    assert max(norms) > clip, norms            # the clip was active on some step
    assert min(norms) < clip, norms            # ... and not on another (factor exactly 1)


def test_clip_on_2bw_and_1f1b_p2_equals_the_emulator(tmp_path):
    corpus = small_corpus(tmp_path)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", M=2, optim=SGD))
    _clipped_somewhere(ref.run_dir)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, M=2, optim=SGD)
    got = launch(cfg)
    assert got.final_loss == ref.final_loss
    assert_same_run(got.run_dir, ref.run_dir, cfg)
    unclipped = emulate(pipe_cfg(tmp_path / "off", corpus, pipeline="emulate-2bw", M=2,
                                 optim=OptimConfig(name="sgd", lr=0.3, momentum=0.9,
                                                   schedule="constant")))
    assert unclipped.final_loss != got.final_loss        # the clipping changed the run
    sync = pipe_cfg(tmp_path / "sync", corpus, pipeline="1f1b", P=2, M=2, optim=SGD)
    sync_ref = emulate(pipe_cfg(tmp_path / "emu_sync", corpus, pipeline="emulate-sync", M=2,
                                optim=SGD))
    assert_same_run(launch(sync).run_dir, sync_ref.run_dir, sync)


def test_clip_on_2bw_p3_with_flush_windows_and_checkpoints_equals_the_emulator(tmp_path):
    """P = 3 (the step after F((t+1)M + P - 1)), rows flushed every 3 steps, checkpoints."""
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=3, M=3, optim=SGD,
                   log_interval=3, steps=7, checkpoint_interval=4)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", M=3, optim=SGD,
                           steps=7))
    _clipped_somewhere(ref.run_dir)
    got = launch(cfg)
    assert got.status == "completed" and got.final_val_loss == ref.final_val_loss
    assert_same_run(got.run_dir, ref.run_dir, cfg)


def test_clip_on_2bw_p2_x_d2_equals_the_emulator(tmp_path, monkeypatch):
    """Each pipeline row reduces the norm of the replicas' averaged gradient on its own clip
    group (``ordered`` averaging: the emulator's gradient bit for bit)."""
    monkeypatch.setenv("DELAYBOUND_DP_REDUCE", "ordered")
    corpus = small_corpus(tmp_path)
    clip = 2.4           # the larger batch's gradient norms: 2.30-2.53 over the 4 steps
    optim = OptimConfig(name="sgd", lr=0.3, momentum=0.9, grad_clip=clip, schedule="constant")
    cfg, ref_cfg = dp_cfgs(tmp_path, corpus, pipeline="2bw", P=2, D=2, optim=optim, steps=4)
    ref = emulate(ref_cfg)
    _clipped_somewhere(ref.run_dir, clip)
    got = launch(cfg)
    assert got.final_loss == ref.final_loss
    assert_same_run(got.run_dir, ref.run_dir, cfg)


def test_the_norm_vector_is_the_emulators_in_its_optimizer_order():
    """One process, no group: the per-tensor norms land at their places of the emulator's
    optimizer order, and the clip equals torch's clip_grad_norm_ rule."""
    from tests.llm_validation.helpers import MICRO
    from llm_validation.config import DataConfig, RunConfig, TrainConfig

    cfg = TrainConfig(model=MICRO, data=DataConfig(path="x", seq_len=16),
                      optim=OptimConfig(name="muon", lr=0.02),
                      run=RunConfig(steps=1, batch_size=2, microbatches=1))
    order = model_param_order(cfg)
    assert order[0].startswith("blocks.0.") and len(order) == len(set(order))
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(5, generator=gen) * 3, torch.randn(7, generator=gen)]
    clip = StageClip([4, 1], 6, None, torch.device("cpu"))
    sq = clip.squared_norm(grads)
    norms = torch._foreach_norm(grads)
    assert float(sq) == float(torch.stack([n.double() for n in norms]).square().sum())
    want = [g * clip_scale(float(sq) ** 0.5, 0.5) for g in grads]
    clip_grads_(grads, sq, 0.5)
    for g, w in zip(grads, want):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=0)


def test_the_norm_wait_publishes_a_wait_on_the_rows_other_stages(monkeypatch):
    """Merge of issues 31 and 32: the host wait for the clipping norm's all-reduce is a
    published wait on the pipeline row's other stages (as the data-parallel collectives'), so
    the watchdog waits for a stage saving a checkpoint and names a hung one, instead of the
    waiting stage reporting itself stalled; the status is restored after."""
    seen = []

    class Work:
        def wait(self):
            seen.append(dict(clip.status))

    monkeypatch.setattr("llm_validation.pipeline.clipping.dist.all_reduce",
                        lambda v, group=None, async_op=False: Work())
    clip = StageClip([0, 2], 3, object(), torch.device("cpu"))
    clip.status, clip.peers = {"waiting_on": None}, [0, 2]
    grads = [torch.ones(2), torch.ones(3)]
    clip.launch(grads)
    clip.squared_norm(grads)
    assert seen[0]["waiting_on"] == [0, 2] and "clipping norm" in seen[0]["what"]
    assert clip.status["waiting_on"] is None
