"""Delay corrections (DC-ASGD, Nesterov look-ahead), sync start / cooldown, gradient clipping
and ``DelayedOptimizer.from_config``: formulas by hand, hand-written reference loops bitwise,
torch's own clipping, and the config checks."""

from __future__ import annotations

import io
import math

import pytest
import torch

from llm_validation.config import (DataConfig, DelayConfig, OptimConfig, RunConfig,
                                   TrainConfig)
from llm_validation.training.corrections import (
    dcasgd_compensate,
    lookahead_correct,
    lookahead_direction,
)
from llm_validation.training.delay import CLIP_EPS, DelayedOptimizer, clip_scale, effective_tau
from tests.llm_validation.helpers import MICRO, loss_fn, make_batches, params_equal
from tests.llm_validation.training.reference import fresh, ocfg, reference, run_wrapped

#: Our clipping sums the per-tensor float32 norms' squares in float64, torch's clip_grad_norm_
#: in float32: the scale factors agree to float32 round-off of a ~30-term sum.
CLIP_RTOL = 1e-6
#: float64 closed form vs the wrapper in float64: a few ulps per step over 25 steps.
F64_RTOL = 1e-12
#: Windows short enough for the micro model (max_seq_len 32).
SEQ = DataConfig(seq_len=16)

def _taus(model, tau):
    return [tau] * len(list(model.parameters()))


# ------------------------------------------------------------------------------- formulas
def test_correction_formulas_by_hand():
    g, now, read = torch.tensor([1.0, 2.0, -3.0]), torch.tensor([1.0, 1.0, 0.0]), \
        torch.tensor([0.0, 2.0, 0.5])
    # g + c g^2 (now - read), c = 0.5: [1 + 0.5, 2 - 2, -3 - 2.25]
    assert torch.equal(dcasgd_compensate(g, now, read, 0.5), torch.tensor([1.5, 0.0, -5.25]))
    d_prev, v = torch.tensor([1.0, -2.0]), torch.tensor([3.0, 2.0])
    d = lookahead_direction(d_prev, v, 0.75)                  # 0.75 d + 0.25 v
    assert torch.equal(d, torch.tensor([1.5, -1.0]))
    x_base = torch.tensor([10.0, 10.0])                       # x + v with x = [7, 8]
    # x + gamma d + (1 - gamma) v = [7 + 1.125 + 0.75, 8 - 0.75 + 0.5]
    assert torch.equal(lookahead_correct(x_base, v, d, 0.75), torch.tensor([8.875, 7.75]))


def test_effective_tau_table_and_errors():
    got = [effective_tau(t, 2, sync_start=3, sync_cooldown=2, total_steps=10) for t in range(10)]
    assert got == [0, 0, 0, 2, 2, 2, 2, 2, 0, 0]
    assert [effective_tau(t, 1) for t in range(3)] == [1, 1, 1]
    assert effective_tau(5, 1, sync_start=6) == 0 and effective_tau(6, 1, sync_start=6) == 1
    with pytest.raises(ValueError, match="total_steps"):
        effective_tau(0, 1, sync_cooldown=2)
    for bad in ({"step": -1}, {"tau": 1.0}, {"sync_start": True}):
        kw = {"step": 0, "tau": 1, **bad}
        with pytest.raises(ValueError):
            effective_tau(kw["step"], kw["tau"], sync_start=kw.get("sync_start", 0))


# ------------------------------------------------------------------------- sync phases
@pytest.mark.parametrize("tau", [1, 2])
def test_sync_start_and_cooldown_read_points(tau):
    """Steps 0..2 and 8..9 read W(t); the step where the delay switches on reads W(3 - tau)."""
    n, start, cool = 10, 3, 2
    model, base = fresh("adamw")
    opt = DelayedOptimizer(base, tau=tau, sync_start=start, sync_cooldown=cool, total_steps=n)
    history = [[p.detach().clone() for p in opt.params]]
    for t, b in enumerate(make_batches(n)):
        expect = t if t < start or t >= n - cool else t - tau
        assert opt.current_tau == (0 if expect == t else tau)
        assert all(opt.read_index(i) == expect for i in range(len(opt.params)))
        read = [r.clone() for r in opt.read_weights()]
        assert all(torch.equal(r, w) for r, w in zip(read, history[expect]))
        with opt.delayed_weights():
            assert all(torch.equal(p, r) for p, r in zip(opt.params, read))
            loss_fn(model, b).backward()
        opt.step()
        opt.zero_grad()
        history.append([p.detach().clone() for p in opt.params])


@pytest.mark.parametrize("name", ["adamw", "muon"])
def test_sync_phases_match_the_reference_loop_bitwise(name):
    batches = make_batches(9)
    m1, o1 = fresh(name)
    reference(m1, o1, batches, _taus(m1, 2), sync=(2, 3))
    m2, b2 = fresh(name)
    run_wrapped(m2, DelayedOptimizer(b2, tau=2, sync_start=2, sync_cooldown=3,
                                     total_steps=len(batches)), batches)
    assert params_equal(m1, m2)
    m3, b3 = fresh(name)                       # the phases matter
    run_wrapped(m3, DelayedOptimizer(b3, tau=2), batches)
    assert not params_equal(m2, m3)


# ------------------------------------------------------------------------------ DC-ASGD
@pytest.mark.parametrize("name", ["adamw", "sgd"])
@pytest.mark.parametrize("tau", [1, 2])
def test_dcasgd_matches_its_reference_loop_bitwise(name, tau):
    batches, coef = make_batches(8), 2.0
    m1, o1 = fresh(name)
    reference(m1, o1, batches, _taus(m1, tau), dc=coef)
    m2, b2 = fresh(name)
    run_wrapped(m2, DelayedOptimizer(b2, tau=tau, correction="dcasgd", correction_coef=coef),
                batches)
    assert params_equal(m1, m2)
    m3, b3 = fresh(name)                       # and the correction matters
    run_wrapped(m3, DelayedOptimizer(b3, tau=tau), batches)
    assert not params_equal(m2, m3)


def test_dcasgd_with_grad_ef_matches_the_reference_and_vanishes_without_delay():
    batches = make_batches(6)
    m1, o1 = fresh("adamw")
    reference(m1, o1, batches, _taus(m1, 1), dc=3.0, lam=1.0, level="grad")
    m2, b2 = fresh("adamw")
    run_wrapped(m2, DelayedOptimizer(b2, tau=1, ef_lambda=1.0, ef_level="grad",
                                     correction="dcasgd", correction_coef=3.0), batches)
    assert params_equal(m1, m2)
    m3, b3 = fresh("adamw")                    # tau = 0: W(t) - read = 0, the bare optimizer
    run_wrapped(m3, DelayedOptimizer(b3, tau=0, correction="dcasgd", correction_coef=3.0), batches)
    m4, b4 = fresh("adamw")
    run_wrapped(m4, DelayedOptimizer(b4, tau=0), batches)
    assert params_equal(m3, m4)


def test_dcasgd_with_an_external_read_point_equals_the_emulation():
    """A pipeline stage (tau = 0 in the wrapper, the stash outside) passes its read point."""
    batches = make_batches(6)
    m1, b1 = fresh("adamw")
    run_wrapped(m1, DelayedOptimizer(b1, tau=1, correction="dcasgd", correction_coef=2.0), batches)
    m2, b2 = fresh("adamw")
    opt = DelayedOptimizer(b2, tau=0, correction="dcasgd", correction_coef=2.0, external_read=True)
    stash = [p.detach().clone() for p in opt.params]          # W(t - 1), W(-1) = W(0)
    for b in batches:
        now = [p.detach().clone() for p in opt.params]
        with torch.no_grad():
            for p, s in zip(opt.params, stash):
                p.copy_(s)
        loss_fn(m2, b).backward()
        with torch.no_grad():
            for p, c in zip(opt.params, now):
                p.copy_(c)
        with pytest.raises(RuntimeError, match="read_point"):
            opt.step()                           # refused before anything changes
        opt.step(read_point=stash)
        opt.zero_grad()
        stash = now
    assert params_equal(m1, m2)


# ------------------------------------------------------------------- Nesterov look-ahead
@pytest.mark.parametrize("name,tau,lam,level", [("adamw", 1, 0.0, "update"),
                                                ("muon", 1, 0.0, "update"),
                                                ("sgd", 2, 0.0, "update"),
                                                ("adamw", 1, 1.0, "grad")])
def test_nesterov_lookahead_matches_its_reference_loop_bitwise(name, tau, lam, level):
    batches, gamma = make_batches(8), 0.9
    m1, o1 = fresh(name)
    reference(m1, o1, batches, _taus(m1, tau), lam=lam, level=level, gamma=gamma)
    m2, b2 = fresh(name)
    run_wrapped(m2, DelayedOptimizer(b2, tau=tau, ef_lambda=lam, ef_level=level,
                                     correction="nesterov", correction_coef=gamma), batches)
    assert params_equal(m1, m2)
    m3, b3 = fresh(name)
    run_wrapped(m3, DelayedOptimizer(b3, tau=tau, ef_lambda=lam, ef_level=level), batches)
    assert not params_equal(m2, m3)


def test_nesterov_over_plain_sgd_is_ema_nesterov_momentum():
    """v = -eta g: W(t+1) = W(t) - eta ((1 - gamma) g_t + gamma m_t), m_t the EMA of g from 0
    (the momentum of torch.optim.Muon(nesterov=True)), on a float64 quadratic."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(6, 4, generator=gen, dtype=torch.float64)
    b = torch.randn(6, generator=gen, dtype=torch.float64)
    w0 = torch.randn(4, generator=gen, dtype=torch.float64)
    grad = lambda w: a.T @ (a @ w - b)  # noqa: E731
    eta, gamma = 0.05, 0.8
    w = torch.nn.Parameter(w0.clone())
    opt = DelayedOptimizer(torch.optim.SGD([w], lr=eta), tau=0, correction="nesterov",
                           correction_coef=gamma)
    x, m = w0.clone(), torch.zeros(4, dtype=torch.float64)
    for _ in range(25):
        w.grad = grad(w.detach())
        opt.step()
        g = grad(x)
        m = gamma * m + (1 - gamma) * g
        x = x - eta * ((1 - gamma) * g + gamma * m)
    assert torch.allclose(w.detach(), x, rtol=F64_RTOL, atol=0.0)
    assert not torch.allclose(x, w0)


# --------------------------------------------------------------------------- clipping
class _Recorder:
    """A base "optimizer" that records the gradients its step receives (and moves nothing)."""

    def __init__(self, params) -> None:
        self.param_groups = [{"params": list(params)}]
        self.seen: list[torch.Tensor] | None = None

    def step(self) -> None:
        self.seen = [p.grad.clone() for p in self.param_groups[0]["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.param_groups[0]["params"]:
            p.grad = None


def _one_step(clip, reduce_sq=None):
    """(raw gradients, the gradients the base step received, wrapper) of one step."""
    model, _ = fresh("sgd")
    loss_fn(model, make_batches(1)[0]).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    rec = _Recorder(model.parameters())
    opt = DelayedOptimizer(rec, tau=0, grad_clip=clip, reduce_sq=reduce_sq)
    opt.step()
    return grads, rec.seen, opt


def test_grad_clip_equals_torch_clip_grad_norm_():
    grads, applied, opt = _one_step(clip=0.05)
    ref = [g.clone() for g in grads]
    total = float(_torch_clip(ref, 0.05))                        # clips ref in place
    assert total > 0.05                                           # clipping is active
    assert opt.last_grad_norm == pytest.approx(total, rel=CLIP_RTOL)
    assert all(torch.allclose(a, r, rtol=CLIP_RTOL, atol=0.0) for a, r in zip(applied, ref))
    norm = math.sqrt(sum(float(a.double().square().sum()) for a in applied))
    assert norm == pytest.approx(0.05 * total / (total + CLIP_EPS), rel=CLIP_RTOL)


def _torch_clip(grads, max_norm):
    """torch.nn.utils.clip_grad_norm_ on parameters holding ``grads`` (clipped in place)."""
    params = []
    for g in grads:
        p = torch.nn.Parameter(torch.zeros_like(g))
        p.grad = g
        params.append(p)
    return torch.nn.utils.clip_grad_norm_(params, max_norm)


def test_grad_clip_below_the_threshold_is_bitwise_a_no_op():
    grads, applied, opt = _one_step(clip=1e6)
    _, plain, _ = _one_step(clip=0.0)
    assert opt.last_grad_norm is not None and opt.last_grad_norm < 1e6
    assert all(torch.equal(a, b) for a, b in zip(applied, plain))


def test_grad_clip_reduce_sq_hook_sums_over_stages_before_the_root():
    calls = []

    def four_stages(sq):                          # as if 4 stages held this stage's gradient
        calls.append(sq)
        return 4.0 * sq

    grads, applied, opt = _one_step(clip=0.05, reduce_sq=four_stages)
    local = math.sqrt(sum(float(g.double().square().sum()) for g in grads))
    assert len(calls) == 1 and calls[0] == pytest.approx(local ** 2, rel=CLIP_RTOL)
    assert opt.last_grad_norm == pytest.approx(2 * local, rel=CLIP_RTOL)
    scale = clip_scale(2 * local, 0.05)
    assert all(torch.allclose(a, g * scale, rtol=CLIP_RTOL, atol=0.0)
               for a, g in zip(applied, grads))


# ---------------------------------------------------------------- factory and config
def _cfg(**delay):
    return TrainConfig(model=MICRO, data=SEQ, optim=ocfg("adamw", grad_clip=0.5),
                       delay=DelayConfig(**delay), run=RunConfig(steps=7))


def test_from_config_carries_every_knob():
    _, base = fresh("adamw")
    opt = DelayedOptimizer.from_config(base, _cfg(tau=2, ef_lambda=0.5, ef_level="grad",
                                                  sync_start=1, sync_cooldown=2,
                                                  correction="nesterov", correction_coef=0.9))
    assert (opt.tau, opt.ef_lambda, opt.ef_level) == (2, 0.5, "grad")
    assert (opt.sync_start, opt.sync_cooldown, opt.total_steps) == (1, 2, 7)
    assert (opt.correction, opt.correction_coef, opt.grad_clip) == ("nesterov", 0.9, 0.5)
    assert opt.gef is not None and opt.lookahead is not None and not opt.external_read
    _, staged = fresh("adamw", param_stage_p=3)
    cfg = _cfg(tau=2, stage_taus=(2, 1, 0))
    opt = DelayedOptimizer.from_config(staged, cfg)
    assert sorted(set(opt.taus)) == [0, 1, 2]
    with pytest.raises(ValueError, match="param_stage"):
        DelayedOptimizer.from_config(base, cfg)             # groups not split per stage


def test_from_config_on_a_pipeline_stage():
    _, base = fresh("adamw")
    run = RunConfig(steps=5, pipeline="2bw", stages=2, microbatches=2, batch_size=4)
    cfg = TrainConfig(model=MICRO, data=SEQ, optim=ocfg("adamw"), run=run,
                      delay=DelayConfig(tau=1, correction="dcasgd", correction_coef=1.0))
    opt = DelayedOptimizer.from_config(base, cfg, reduce_sq=lambda sq: sq)
    assert opt.tau == 0 and opt.external_read and opt.reduce_sq is not None
    with pytest.raises(ValueError, match="group_taus"):
        DelayedOptimizer.from_config(base, cfg, group_taus=[1] * len(base.param_groups))


def test_config_checks():
    with pytest.raises(ValueError, match="correction_coef"):
        DelayConfig(correction="dcasgd")                       # 0 would be no correction
    with pytest.raises(ValueError, match="correction"):
        DelayConfig(correction_coef=0.5)                       # a coefficient without a rule
    with pytest.raises(ValueError, match="< 1"):
        DelayConfig(correction="nesterov", correction_coef=1.0)
    with pytest.raises(ValueError, match="update-level EF"):
        DelayConfig(correction="nesterov", correction_coef=0.5, ef_lambda=1.0)
    with pytest.raises(ValueError, match="correction"):
        DelayConfig(correction="pipemare", correction_coef=0.5)
    with pytest.raises(ValueError, match="sync_start"):
        DelayConfig(sync_start=-1)
    run = RunConfig(pipeline="2bw", stages=2, microbatches=2, batch_size=4)
    with pytest.raises(ValueError, match="no flush"):
        TrainConfig(model=MICRO, data=SEQ, run=run, delay=DelayConfig(tau=1, sync_cooldown=3))
    for bad in ({"grad_clip": -1.0}, {"wsd_decay_fraction": 0.0}, {"wsd_decay_fraction": 1.5},
                {"schedule": "step"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            OptimConfig(**bad)
    assert TrainConfig.from_dict(_cfg(sync_start=2, correction="dcasgd", correction_coef=0.1)
                                 .to_dict()).delay.correction == "dcasgd"


def test_resume_with_corrections_sync_phases_and_clipping_is_bitwise():
    batches, kw = make_batches(10), dict(tau=1, sync_start=2, sync_cooldown=2, total_steps=10,
                                         correction="nesterov", correction_coef=0.8,
                                         grad_clip=0.5)
    m1, b1 = fresh("adamw")
    run_wrapped(m1, DelayedOptimizer(b1, **kw), batches)
    m2, b2 = fresh("adamw")
    o2 = DelayedOptimizer(b2, **kw)
    run_wrapped(m2, o2, batches[:3])
    buf = io.BytesIO()
    torch.save({"model": m2.state_dict(), "opt": o2.state_dict()}, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=False)
    m3, b3 = fresh("adamw", seed=1)
    o3 = DelayedOptimizer(b3, **kw)
    m3.load_state_dict(state["model"])
    o3.load_state_dict(state["opt"])
    run_wrapped(m3, o3, batches[3:])
    assert params_equal(m1, m3)
    other = DelayedOptimizer(fresh("adamw")[1], tau=1, correction="dcasgd", correction_coef=0.8)
    with pytest.raises(ValueError, match="correction"):
        other.load_state_dict(state["opt"])


# ------------------------------------------------------------- end to end (the run loop)
def _run(out, optim=None, **delay):
    from llm_validation.rundir import RunPaths, latest_checkpoint, load_checkpoint
    from llm_validation.training.loop import train

    cfg = TrainConfig(model=MICRO, data=SEQ, optim=optim or ocfg("adamw"),
                      delay=DelayConfig(**delay),
                      run=RunConfig(steps=4, batch_size=4, eval_interval=0, eval_batches=1,
                                    stats_interval=0, out_dir=str(out)))
    train(cfg, progress=False)
    return load_checkpoint(latest_checkpoint(RunPaths(out)))["model"]


def _same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


def test_the_training_loop_applies_the_knobs(tmp_path):
    sync = _run(tmp_path / "sync", tau=0)
    assert _same(_run(tmp_path / "phase", tau=1, sync_start=4), sync)   # all steps in sync
    delayed = _run(tmp_path / "delayed", tau=1)
    assert not _same(_run(tmp_path / "dc", tau=1, correction="dcasgd", correction_coef=50.0),
                     delayed)
    assert not _same(_run(tmp_path / "clip", optim=ocfg("adamw", grad_clip=1e-4), tau=1),
                     delayed)
