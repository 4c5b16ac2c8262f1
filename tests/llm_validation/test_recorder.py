"""StatsRecorder: the project's statistics from a hand-written loop equal the project's own
loop's on the project's model; geometry inference; bad input; the run directory validates."""

from __future__ import annotations

import json
import math

import pytest
import torch

from llm_validation.config import DataConfig, DelayConfig, OptimConfig, RunConfig, TrainConfig
from llm_validation.records.metrics_rows import TRAIN_KEYS
from llm_validation.recorder import DEFAULT_GEOMETRY, StatsRecorder, infer_geometries
from llm_validation.rundir import read_metrics
from llm_validation.training.data import STREAM_LARGE, STREAM_VAL, WindowSampler, load_corpus
from llm_validation.training.delay import DelayedOptimizer
from llm_validation.training.loop import eval_losses, forward_backward, train
from llm_validation.training.model import Transformer
from llm_validation.training.optim import build_optimizer, lr_factor, set_lr
from tests.llm_validation.helpers import MICRO

#: Recorder vs loop: the same probe code on the same tensors in the same order, so the rows
#: agree bitwise on CPU; the tolerance only admits a last-bit difference from a float64
#: division or square root, should a future change reorder one (a real difference in a
#: statistic is orders of magnitude larger).
RECORDER_RTOL = 1e-12


def _cfg(out, name, tau, lam):
    return TrainConfig(
        model=MICRO, data=DataConfig(seq_len=16),
        optim=OptimConfig(name=name, lr=0.02 if name == "muon" else 3e-3, warmup_steps=2),
        delay=DelayConfig(tau=tau, ef_lambda=lam),
        run=RunConfig(steps=9, batch_size=4, microbatches=2, eval_interval=4, eval_batches=1,
                      stats_interval=2, momentum_error_interval=4, large_batch_factor=2,
                      out_dir=str(out)))


def _recorded(cfg, out):
    """The project's loop re-written as a user would, with the recorder doing the stats."""
    run = cfg.run
    corpus = load_corpus(cfg.data)
    model = Transformer(cfg.model, seed=run.seed)
    opt = DelayedOptimizer.from_config(build_optimizer(model, cfg.optim), cfg)
    sampler = WindowSampler(corpus.train, run.batch_size, cfg.data.seq_len, run.seed)
    large = WindowSampler(corpus.train, run.batch_size * run.large_batch_factor,
                          cfg.data.seq_len, run.seed, STREAM_LARGE)
    val = [WindowSampler(corpus.val, run.batch_size, cfg.data.seq_len, run.seed,
                         STREAM_VAL).batch(0)]
    rec = StatsRecorder(model, opt, out, seed=run.seed, batch_size=run.batch_size,
                        steps=run.steps, seq_len=cfg.data.seq_len, microbatches=run.microbatches,
                        stats_interval=run.stats_interval,
                        momentum_error_interval=run.momentum_error_interval)
    for step in range(run.steps):
        set_lr(opt, lr_factor(step, cfg.optim, run.steps))
        vl = eval_losses(model, val, run.microbatches).mean() \
            if step % run.eval_interval == 0 else None
        x, y = sampler.next()

        def closure(x=x, y=y):
            return forward_backward(model, x, y, run.microbatches,
                                    observe=rec.observe_microbatch)

        def large_closure(step=step):
            xb, yb = large.batch(step)
            return forward_backward(model, xb, yb, run.microbatches * run.large_batch_factor)

        with opt.delayed_weights():
            loss = closure()
        rec.step(loss, closure, val_loss=vl, large_closure=large_closure)
    return rec.finish(val_loss=float(eval_losses(model, val, run.microbatches).mean()))


@pytest.mark.parametrize("name,tau,lam", [("adamw", 1, 1.0), ("muon", 0, 0.0)])
def test_recorder_equals_the_project_loop(tmp_path, one_thread, name, tau, lam):
    cfg = _cfg(tmp_path / "loop", name, tau, lam)
    train(cfg, progress=False)
    result = _recorded(cfg, tmp_path / "rec")
    assert result.status == "completed" and result.steps == cfg.run.steps
    want, got = read_metrics(tmp_path / "loop"), read_metrics(tmp_path / "rec")
    assert [r["kind"] for r in want] == [r["kind"] for r in got]
    measured = set()
    for a, b in zip(want, got):
        for key in TRAIN_KEYS if a["kind"] == "train" else ("step", "val_loss"):
            x, y = a.get(key), b.get(key)
            assert (x is None) == (y is None), (a["step"], key, x, y)
            if isinstance(x, float):
                assert math.isclose(x, y, rel_tol=RECORDER_RTOL, abs_tol=0.0), (key, x, y)
                measured.add(key)
            else:
                assert x == y, (key, x, y)
    # every statistic the recorder promises was measured at some step
    promised = {"grad_norm", "grad_dual_norm", "update_norm", "update_primal_norm",
                "cos_consecutive_update", "ef_drift", "cos_delayed_fresh",
                "rel_err_delayed_fresh", "grad_noise_var", "smoothness_est",
                "star_convex_slack", "momentum_error"}
    assert promised <= measured, promised - measured


def test_plain_optimizer_is_wrapped_and_geometry_inferred(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rec = StatsRecorder(model, opt, tmp_path / "r", seed=3, batch_size=8, stats_interval=1)
    assert {g.name for g in rec.geoms} == {"l2"}
    x, y = torch.randn(8, 4), torch.randn(8, 1)

    def closure():
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss.detach()
    for _ in range(3):
        row = rec.step(closure(), closure)
    assert row["smoothness_est"] > 0 and row["cos_consecutive_update"] is not None
    rec.finish(val_loss=0.5)
    cfg = json.loads((tmp_path / "r" / "config.json").read_text())
    assert cfg["optim"]["name"] == "sgd" and cfg["run"]["steps"] == 3
    assert cfg["model"]["external"] and cfg["delay"]["tau"] == 0
    assert cfg["meta"]["recorder"]["geometry"]["0.weight"] == "l2"


def test_geometry_rules():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    names = {id(p): n for n, p in model.named_parameters()}
    adam = torch.optim.Adam(model.parameters())
    assert {g.name for g in infer_geometries(adam, names).values()} == {"linf"}
    mats = [p for p in model.parameters() if p.ndim == 2]
    muon = torch.optim.Muon(mats)
    assert {g.name for g in infer_geometries(muon, names).values()} == {"spectral"}
    given = infer_geometries(adam, names, {"0.weight": "spectral"})
    assert given[id(model[0].weight)].name == "spectral"
    assert given[id(model[0].bias)].name == "linf"

    class Mine(torch.optim.Optimizer):      # a class this project does not know
        def __init__(self, params):
            super().__init__(params, {})
    assert {g.name for g in infer_geometries(Mine(model.parameters()), names).values()} == \
        {DEFAULT_GEOMETRY}
    with pytest.raises(ValueError, match="needs a matrix"):
        infer_geometries(adam, names, "spectral")


def test_bad_input(tmp_path):
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters())
    with pytest.raises(ValueError, match="batch_size"):
        StatsRecorder(model, opt, tmp_path / "a", seed=0, batch_size=0)
    with pytest.raises(ValueError, match="not parameters of the model"):
        StatsRecorder(torch.nn.Linear(2, 2), opt, tmp_path / "b", seed=0, batch_size=1)
    StatsRecorder(model, opt, tmp_path / "c", seed=0, batch_size=1)
    with pytest.raises(ValueError, match="already holds a run"):
        StatsRecorder(model, opt, tmp_path / "c", seed=0, batch_size=1)
    rec = StatsRecorder(model, opt, tmp_path / "d", seed=0, batch_size=1,
                        momentum_error_interval=1, stats_interval=1)
    with pytest.raises(ValueError, match="large_closure"):
        rec.step(1.0, lambda: 1.0)


def test_divergence_writes_its_row_and_summary(tmp_path):
    model = torch.nn.Linear(2, 1)
    rec = StatsRecorder(model, torch.optim.SGD(model.parameters(), lr=0.1), tmp_path / "r",
                        seed=0, batch_size=1, stats_interval=0)
    x = torch.ones(1, 2)
    model(x).sum().backward()
    with pytest.raises(FloatingPointError, match="non-finite"):
        rec.step(float("nan"), lambda: None)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "diverged"
    assert read_metrics(tmp_path / "r")[-1]["diverged"] is True
