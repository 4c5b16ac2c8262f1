"""Muon and NorMuon with a chosen Newton-Schulz dtype: bfloat16 is the library's step bitwise,
float32 is the library's step with its iteration in float32, and the two differ by bfloat16's
rounding only."""

from __future__ import annotations

import functools

import pytest
import torch
from pytorch_optimizer import NorMuon as LibNorMuon
from pytorch_optimizer.optimizer.muon import normuon as lib_normuon

from llm_validation.config import OptimConfig
from llm_validation.training import muon as muon_module
from llm_validation.training.muon import (
    BF16_REL_TOL,
    FLOAT32_REL_TOL,
    Muon,
    NorMuon,
    ns_torch_dtype,
)
from llm_validation.training.model import Transformer
from llm_validation.training.optim import ChainedOptimizer, build_optimizer
from tests.llm_validation.helpers import MICRO, loss_fn, make_batches
from theory.geometry import newton_schulz

#: Shapes of the hidden matrices in the checks: wide, tall and square, as in the tiny model.
SHAPES = ((32, 64), (64, 32), (48, 48))
#: Optimizer steps per check (momentum and NorMuon's second moment both enter by step 2).
STEPS = 4


def _params(seed: int = 0) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*s, generator=g) * 0.1) for s in SHAPES]


def _grads(step: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    return [torch.randn(*s, generator=g) for s in SHAPES]


def _run(make, steps: int = STEPS) -> list[torch.Tensor]:
    """Parameters after ``steps`` steps on fixed gradients of an optimizer ``make(params)``."""
    params = _params()
    opt = make(params)
    for k in range(steps):
        for p, g in zip(params, _grads(k)):
            p.grad = g.clone()
        opt.step()
    return [p.detach().clone() for p in params]


def _torch_ns_in(dtype: torch.dtype):
    """torch.optim.Muon's Newton-Schulz call run in ``dtype`` (its own code hard-wires bf16)."""
    def ns(grad, ns_coefficients, ns_steps, eps):
        return newton_schulz(grad.to(dtype), steps=ns_steps, coefficients=ns_coefficients,
                             eps=eps)
    return ns


def _rel(a: list[torch.Tensor], b: list[torch.Tensor], start: list[torch.Tensor]) -> float:
    """Largest relative difference of the total updates ``a - start`` and ``b - start``."""
    return max(float((x - y).norm() / (y - s.detach()).norm()) for x, y, s in zip(a, b, start))


MUON_KW = dict(lr=0.02, weight_decay=0.1, momentum=0.95, nesterov=True,
               adjust_lr_fn="match_rms_adamw")
NORMUON_KW = dict(lr=0.02, momentum=0.95, beta2=0.95, weight_decay=0.1, nesterov=True,
                  use_adjusted_lr=True, foreach=False)


def _normuon_groups(params):
    return [{"params": params, "use_muon": True}]


def test_muon_bfloat16_is_torch_muon_bitwise():
    ours = _run(lambda ps: Muon(ps, ns_dtype=torch.bfloat16, **MUON_KW))
    ref = _run(lambda ps: torch.optim.Muon(ps, **MUON_KW))
    assert all(torch.equal(a, b) for a, b in zip(ours, ref))


def test_muon_float32_is_torch_muon_with_its_iteration_in_float32(monkeypatch):
    ours = _run(lambda ps: Muon(ps, ns_dtype=torch.float32, **MUON_KW))
    monkeypatch.setattr(torch.optim._muon, "_zeropower_via_newtonschulz",
                        _torch_ns_in(torch.float32))
    ref = _run(lambda ps: torch.optim.Muon(ps, **MUON_KW))
    assert all(torch.equal(a, b) for a, b in zip(ours, ref))


def test_muon_float32_differs_from_torch_by_bfloat16_rounding_only():
    start = _params()
    f32 = _run(lambda ps: Muon(ps, ns_dtype=torch.float32, **MUON_KW))
    bf16 = _run(lambda ps: torch.optim.Muon(ps, **MUON_KW))
    rel = _rel(f32, bf16, start)
    assert 0.0 < rel <= BF16_REL_TOL


def test_normuon_bfloat16_is_the_library_bitwise():
    ours = _run(lambda ps: NorMuon(_normuon_groups(ps), ns_dtype=torch.bfloat16, **NORMUON_KW))
    ref = _run(lambda ps: LibNorMuon(_normuon_groups(ps), **NORMUON_KW))
    assert all(torch.equal(a, b) for a, b in zip(ours, ref))


def test_normuon_float32_is_the_library_with_its_iteration_in_float32(monkeypatch):
    start = _params()
    ours = _run(lambda ps: NorMuon(_normuon_groups(ps), ns_dtype=torch.float32, **NORMUON_KW))
    monkeypatch.setattr(lib_normuon, "zero_power_via_newton_schulz_5", functools.partial(
        lib_normuon.zero_power_via_newton_schulz_5, dtype=torch.float32))
    ref = _run(lambda ps: LibNorMuon(_normuon_groups(ps), **NORMUON_KW))
    assert _rel(ours, ref, start) <= FLOAT32_REL_TOL


def test_normuon_float32_differs_from_the_library_by_bfloat16_rounding_only():
    start = _params()
    f32 = _run(lambda ps: NorMuon(_normuon_groups(ps), ns_dtype=torch.float32, **NORMUON_KW))
    bf16 = _run(lambda ps: LibNorMuon(_normuon_groups(ps), **NORMUON_KW))
    assert 0.0 < _rel(f32, bf16, start) <= BF16_REL_TOL


def test_normuon_float32_refuses_groups_it_does_not_rewrite():
    with pytest.raises(ValueError, match="use_muon"):
        NorMuon([{"params": _params(), "use_muon": False}], ns_dtype=torch.float32,
                **NORMUON_KW)


@pytest.mark.parametrize("name", ["muon", "normuon"])
@pytest.mark.parametrize("ns_dtype", ["bfloat16", "float32"])
def test_build_optimizer_passes_the_dtype(name, ns_dtype):
    opt = build_optimizer(Transformer(MICRO), OptimConfig(name=name, ns_dtype=ns_dtype))
    assert isinstance(opt, ChainedOptimizer)
    assert opt.optimizers[0].ns_dtype == ns_torch_dtype(ns_dtype)


def test_build_optimizer_resolves_auto_from_the_cpu(monkeypatch):
    monkeypatch.setattr("llm_validation.training.optim.resolve_ns_dtype",
                        lambda name, device: "float32" if name == "auto" else name)
    opt = build_optimizer(Transformer(MICRO), OptimConfig(name="muon", ns_dtype="auto"))
    assert opt.optimizers[0].ns_dtype == torch.float32


def test_float32_muon_trains_the_model_like_bfloat16():
    """On the real model the two dtypes give the same loss path up to bfloat16's rounding."""
    losses = {}
    for dt in ("bfloat16", "float32"):
        torch.manual_seed(0)
        model = Transformer(MICRO)
        opt = build_optimizer(model, OptimConfig(name="muon", lr=0.02, ns_dtype=dt))
        path = []
        for batch in make_batches(6):
            opt.zero_grad()
            loss = loss_fn(model, batch)
            loss.backward()
            opt.step()
            path.append(float(loss))
        losses[dt] = path
    assert losses["bfloat16"][0] == losses["float32"][0]
    assert losses["bfloat16"] != losses["float32"]
    assert max(abs(a - b) for a, b in zip(losses["bfloat16"], losses["float32"])) \
        <= BF16_REL_TOL * losses["bfloat16"][0]


def test_ns_torch_dtype_needs_a_resolved_name():
    assert ns_torch_dtype("float32") is torch.float32
    with pytest.raises(ValueError, match="resolve"):
        ns_torch_dtype("auto")


def test_module_uses_theory_iteration():
    """The iteration is written once: the module calls theory.geometry.newton_schulz."""
    assert muon_module.newton_schulz is newton_schulz
