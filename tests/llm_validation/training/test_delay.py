"""DelayedOptimizer: bitwise against the bare optimizer and against hand-written reference loops
of THEORY.md's rules (delay, update-level EF, gradient-level EF, per-stage delays), for every
base optimizer (``config.OPTIMIZERS``)."""

from __future__ import annotations

import io

import pytest
import torch

from llm_validation.config import OPTIMIZERS, pipedream_taus
from llm_validation.training.delay import (
    DelayedOptimizer,
    GradErrorFeedback,
    UpdateErrorFeedback,
)
from llm_validation.training.model import Transformer
from tests.llm_validation.helpers import MICRO, loss_fn, make_batches, params_equal
from tests.llm_validation.training.reference import fresh as _fresh
from tests.llm_validation.training.reference import reference
from tests.llm_validation.training.reference import run_wrapped as _run_wrapped


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_tau0_lam0_is_the_bare_optimizer_bitwise(name):
    batches = make_batches(10)
    m1, o1 = _fresh(name)
    for b in batches:
        loss_fn(m1, b).backward()
        o1.step()
        o1.zero_grad()
    m2, base = _fresh(name)
    _run_wrapped(m2, DelayedOptimizer(base, tau=0, ef_lambda=0.0), batches)
    assert params_equal(m1, m2)
    assert not params_equal(m2, Transformer(MICRO, seed=0))  # training moved the weights


@pytest.mark.parametrize("name", OPTIMIZERS)
@pytest.mark.parametrize("tau", [1, 2])
def test_delay_matches_reference_loop_bitwise(name, tau):
    batches = make_batches(8)
    m1, o1 = _fresh(name)
    reference(m1, o1, batches, [tau] * len(list(m1.parameters())))
    m2, base = _fresh(name)
    _run_wrapped(m2, DelayedOptimizer(base, tau=tau), batches)
    assert params_equal(m1, m2)
    m3, base3 = _fresh(name)                    # and the delay matters
    _run_wrapped(m3, DelayedOptimizer(base3, tau=0), batches)
    assert not params_equal(m2, m3)


@pytest.mark.parametrize("name", ["adamw", "muon"])
@pytest.mark.parametrize("tau,lam", [(1, 1.0), (2, 0.5), (0, 0.7)])
def test_update_level_ef_matches_its_formula(name, tau, lam):
    batches = make_batches(8)
    m1, o1 = _fresh(name)
    reference(m1, o1, batches, [tau] * len(list(m1.parameters())), lam=lam, level="update")
    m2, base = _fresh(name)
    _run_wrapped(m2, DelayedOptimizer(base, tau=tau, ef_lambda=lam), batches)
    assert params_equal(m1, m2)


@pytest.mark.parametrize("name", ["adamw", "sgd"])
def test_grad_level_ef_matches_its_formula(name):
    batches = make_batches(8)
    m1, o1 = _fresh(name)
    reference(m1, o1, batches, [1] * len(list(m1.parameters())), lam=1.0, level="grad")
    m2, base = _fresh(name)
    _run_wrapped(m2, DelayedOptimizer(base, tau=1, ef_lambda=1.0, ef_level="grad"), batches)
    assert params_equal(m1, m2)


@pytest.mark.parametrize("name", ["adamw", "muon"])
def test_pipedream_per_stage_taus(name):
    """Stage s of P = 3 reads weights P - 1 - s steps old (original PipeDream)."""
    taus = pipedream_taus(3)
    assert taus == (2, 1, 0)
    batches = make_batches(8)
    m1, o1 = _fresh(name, param_stage_p=3)
    per_param = [taus[g["stage"]] for g in o1.param_groups for _ in g["params"]]
    assert sorted(set(per_param)) == [0, 1, 2]
    reference(m1, o1, batches, per_param)
    m2, base = _fresh(name, param_stage_p=3)
    opt = DelayedOptimizer(base, group_taus=[taus[g["stage"]] for g in base.param_groups])
    assert opt.tau == 2
    _run_wrapped(m2, opt, batches)
    assert params_equal(m1, m2)
    m3, b3 = _fresh(name, param_stage_p=3)    # differs from a uniform delay of 2
    _run_wrapped(m3, DelayedOptimizer(b3, tau=2), batches)
    assert not params_equal(m2, m3)


@pytest.mark.parametrize("name", ["muon", "normuon", "soap", "adan"])
def test_state_dict_resume_is_bitwise(name):
    """Muon, and the pytorch_optimizer state layouts (group-level step, SOAP's bases)."""
    batches = make_batches(12)
    m1, b1 = _fresh(name)
    _run_wrapped(m1, DelayedOptimizer(b1, tau=2, ef_lambda=1.0), batches)
    m2, b2 = _fresh(name)
    o2 = DelayedOptimizer(b2, tau=2, ef_lambda=1.0)
    _run_wrapped(m2, o2, batches[:5])
    buf = io.BytesIO()
    torch.save({"model": m2.state_dict(), "opt": o2.state_dict()}, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=False)
    m3, b3 = _fresh(name, seed=1)              # different init: everything must come from state
    o3 = DelayedOptimizer(b3, tau=2, ef_lambda=1.0)
    m3.load_state_dict(state["model"])
    o3.load_state_dict(state["opt"])
    _run_wrapped(m3, o3, batches[5:])
    assert params_equal(m1, m3)


@pytest.mark.parametrize("tau", [0, 1, 2, 3])
@pytest.mark.parametrize("lam,level,corr,extra", [
    (0.0, "update", "none", 0), (1.0, "update", "none", 1), (1.0, "grad", "none", 1),
    (0.0, "update", "dcasgd", 0), (0.0, "update", "nesterov", 1), (1.0, "grad", "nesterov", 2)])
def test_memory_is_exactly_tau_copies_plus_ef_and_correction(tau, lam, level, corr, extra):
    model, base = _fresh("adamw")
    opt = DelayedOptimizer(base, tau=tau, ef_lambda=lam, ef_level=level, correction=corr,
                           correction_coef=0.0 if corr == "none" else 0.5)
    assert opt.extra_bytes() == (tau + extra) * opt.param_bytes()


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_dry_run_base_update_leaves_the_trajectory_bitwise_unchanged(name):
    """The statistics' dry-run step restores weights, gradients and optimizer state exactly."""
    batches = make_batches(6)
    m1, b1 = _fresh(name)
    _run_wrapped(m1, DelayedOptimizer(b1, tau=1), batches)
    m2, b2 = _fresh(name)
    opt = DelayedOptimizer(b2, tau=1)
    moved = []
    for b in batches:
        with opt.delayed_weights():
            loss_fn(m2, b).backward()
        v = opt.dry_run_base_update([p.grad * 0.5 for p in opt.params])
        moved.append(any(bool(x.abs().sum() > 0) for x in v))
        opt.step()
        opt.zero_grad()
    assert params_equal(m1, m2)
    assert any(moved)                           # the dry run did compute an update


def test_recorded_updates_and_read_weights():
    batches = make_batches(4)
    model, base = _fresh("adamw")
    opt = DelayedOptimizer(base, tau=1, ef_lambda=1.0)
    w = [[p.detach().clone() for p in opt.params]]
    for b in batches:
        read = [r.clone() for r in opt.read_weights()]
        assert all(torch.equal(r, x) for r, x in zip(read, w[max(opt.t - 1, 0)]))
        with opt.delayed_weights():
            assert all(torch.equal(p, r) for p, r in zip(opt.params, read))
            loss_fn(model, b).backward()
        opt.step(record=True)
        opt.zero_grad()
        w.append([p.detach().clone() for p in opt.params])
        assert all(torch.equal(d, a - c) for d, a, c in zip(opt.last_update, w[-1], w[-2]))
        assert all(torch.equal(v, vp) for v, vp in zip(opt.last_base_update, opt.ef.v_prev))


def test_per_stage_ef_objects_reproduce_the_wrapper():
    """What a pipeline stage does: base step on its params, then UpdateErrorFeedback.apply."""
    batches = make_batches(6)
    m1, b1 = _fresh("adamw")
    _run_wrapped(m1, DelayedOptimizer(b1, tau=0, ef_lambda=0.8), batches)
    m2, b2 = _fresh("adamw")
    stages = m2.split(3)
    efs = [UpdateErrorFeedback(list(st.parameters()), 0.8) for st in stages]
    for b in batches:
        loss_fn(m2, b).backward()
        before = [[p.detach().clone() for p in st.parameters()] for st in stages]
        b2.step()
        b2.zero_grad()
        for ef, bef in zip(efs, before):
            ef.apply(bef)
    assert params_equal(m1, m2)


def test_grad_ef_object_mixes_gradients():
    p = torch.nn.Parameter(torch.zeros(3))
    gef = GradErrorFeedback([p], 0.5)
    p.grad = torch.tensor([1.0, 2.0, 3.0])
    gef.mix()
    assert torch.equal(p.grad, torch.tensor([1.0, 2.0, 3.0]))          # g_{-1} = g_0
    p.grad = torch.tensor([3.0, 2.0, 1.0])
    gef.mix()
    assert torch.equal(p.grad, torch.tensor([4.0, 2.0, 0.0]))          # 1.5 g_1 - 0.5 g_0


def test_bad_input_and_misuse():
    model, base = _fresh("adamw")
    for kwargs in ({"tau": -1}, {"tau": 1.5}, {"ef_lambda": float("nan")},
                   {"ef_lambda": -0.1}, {"ef_level": "weights"}, {"group_taus": [1]},
                   {"group_taus": [1, -1]}):
        with pytest.raises(ValueError):
            DelayedOptimizer(base, **kwargs)
    opt = DelayedOptimizer(base, tau=1)
    loss_fn(model, make_batches(1)[0]).backward()
    with pytest.raises(RuntimeError, match="delayed_weights"):
        opt.step()                                  # gradients not taken at the read point
    with opt.delayed_weights():
        with pytest.raises(RuntimeError):
            with opt.delayed_weights():
                pass
        with pytest.raises(RuntimeError):
            opt.step()
    other = DelayedOptimizer(_fresh("adamw")[1], tau=2)
    with pytest.raises(ValueError, match="delays"):
        other.load_state_dict(opt.state_dict())


def test_chunked_ef_loops_equal_whole_tensor_formulas_bitwise():
    """Tensors larger than EF_CHUNK are processed in slices: still exactly the formulas."""
    from llm_validation.training.delay import EF_CHUNK
    from theory.update_rules import ef_correct, grad_ef_mix

    gen = torch.Generator().manual_seed(0)
    n = 3 * EF_CHUNK + 123
    p = torch.nn.Parameter(torch.randn(n, generator=gen))
    before = p.detach() - 0.01 * torch.randn(n, generator=gen)
    ef = UpdateErrorFeedback([p], 0.7)
    ef.v_prev[0].copy_(torch.randn(n, generator=gen))
    v = p.detach() - before
    expected = ef_correct(p.detach(), v, ef.v_prev[0].clone(), 0.7)
    ef.apply([before])
    assert torch.equal(p.detach(), expected) and torch.equal(ef.v_prev[0], v)
    gef = GradErrorFeedback([p], 0.4)
    g0, g1 = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    p.grad = g0.clone()
    gef.mix()
    p.grad = g1.clone()
    gef.mix()
    assert torch.equal(p.grad, grad_ef_mix(g1, g0, 0.4)) and torch.equal(gef.g_prev[0], g1)
