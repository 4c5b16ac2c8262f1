"""Optimizer builders (Muon/AdamW split, stage subsets, per-stage groups), the lr schedule's
closed forms, and the normalized momentum."""

from __future__ import annotations

import math

import pytest
import torch

from llm_validation.config import OPTIMIZERS, OptimConfig
from llm_validation.training.model import Transformer, param_kind
from llm_validation.training.optim import (
    ADAN_BETA_DIFF,
    ChainedOptimizer,
    build_optimizer,
    group_geometry,
    lr_factor,
    normalized_momentum,
    set_lr,
)
from tests.llm_validation.helpers import MICRO, loss_fn, make_batches, params_equal
from theory.geometry import L2, LINF, SPECTRAL

#: float64-vs-float32 agreement for the normalized momentum of a constant gradient (the EMA
#: weights sum to 1 up to float32 rounding of the buffers).
MOMENTUM_RTOL = 1e-5
#: ... and an absolute floor for entries near zero (float32 EMA of a constant, O(1) values).
MOMENTUM_ATOL = 1e-6


def lr_at(step: int, cfg: OptimConfig, total_steps: int | None = None) -> float:
    """The main groups' learning rate at ``step`` (the training loop's ``lr * lr_factor``)."""
    return cfg.lr * lr_factor(step, cfg, total_steps)


def test_muon_takes_hidden_matrices_and_adamw_the_rest():
    model = Transformer(MICRO)
    opt = build_optimizer(model, OptimConfig(name="muon", lr=0.02, aux_lr=3e-3))
    assert isinstance(opt, ChainedOptimizer)
    muon, adamw = opt.optimizers
    assert isinstance(muon, torch.optim.Muon) and isinstance(adamw, torch.optim.AdamW)
    names = {id(p): n for n, p in model.named_parameters()}
    in_muon = {names[id(p)] for g in muon.param_groups for p in g["params"]}
    in_adam = {names[id(p)] for g in adamw.param_groups for p in g["params"]}
    assert in_muon == {n for n, p in model.named_parameters() if param_kind(n, p) == "matrix"}
    assert in_adam == set(names.values()) - in_muon
    assert "embed.weight" in in_adam and "head.weight" in in_adam
    for g in adamw.param_groups:
        assert g["lr"] == 3e-3
        assert (g["weight_decay"] == 0.0) == all(p.ndim == 1 for p in g["params"])
    assert {group_geometry(g) for g in muon.param_groups} == {SPECTRAL}
    assert {group_geometry(g) for g in adamw.param_groups} == {LINF}


def test_sgd_and_adamw_groups():
    model = Transformer(MICRO)
    sgd = build_optimizer(model, OptimConfig(name="sgd", lr=0.1, momentum=0.9))
    assert isinstance(sgd, torch.optim.SGD) and {group_geometry(g) for g in sgd.param_groups} \
        == {L2}
    adamw = build_optimizer(model, OptimConfig(name="adamw", weight_decay=0.1))
    decay = {g["weight_decay"] for g in adamw.param_groups}
    assert decay == {0.0, 0.1}


def test_builds_on_a_stage_and_with_per_stage_groups():
    model = Transformer(MICRO)
    stages = model.split(3)
    opt = build_optimizer(stages[1], OptimConfig(name="muon"))
    owned = {id(p) for g in opt.param_groups for p in g["params"]}
    assert owned == {id(p) for p in stages[1].parameters()}
    pairs = build_optimizer(list(stages[2].named_parameters()), OptimConfig(name="adamw"))
    assert sum(len(g["params"]) for g in pairs.param_groups) == len(list(stages[2].parameters()))
    param_stage = {id(p): s for s, st in enumerate(stages) for p in st.parameters()}
    full = build_optimizer(model, OptimConfig(name="muon"), param_stage=param_stage)
    for g in full.param_groups:
        assert {param_stage[id(p)] for p in g["params"]} == {g["stage"]}
    with pytest.raises(ValueError, match="no stage"):
        build_optimizer(model, OptimConfig(), param_stage={})
    with pytest.raises(TypeError):
        build_optimizer([1, 2], OptimConfig())


def test_chained_state_dict_round_trip_is_bitwise():
    batches = make_batches(8)

    def run(model, opt, bs):
        for b in bs:
            loss_fn(model, b).backward()
            opt.step()
            opt.zero_grad()

    cfg = OptimConfig(name="muon", lr=0.02)
    m1 = Transformer(MICRO)
    run(m1, build_optimizer(m1, cfg), batches)
    m2 = Transformer(MICRO)
    o2 = build_optimizer(m2, cfg)
    run(m2, o2, batches[:4])
    m3 = Transformer(MICRO, seed=9)
    o3 = build_optimizer(m3, cfg)
    m3.load_state_dict(m2.state_dict())
    o3.load_state_dict(o2.state_dict())
    run(m3, o3, batches[4:])
    assert params_equal(m1, m3)


def test_schedule_closed_forms():
    cos = OptimConfig(lr=1.0, schedule="cosine", warmup_steps=10, min_lr_ratio=0.1)
    assert lr_factor(0, cos, 110) == pytest.approx(0.1)
    assert lr_factor(9, cos, 110) == pytest.approx(1.0)
    assert lr_factor(10, cos, 110) == pytest.approx(1.0)
    assert lr_factor(60, cos, 110) == pytest.approx(0.1 + 0.9 * 0.5)          # half way
    assert lr_factor(35, cos, 110) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert lr_factor(110, cos, 110) == pytest.approx(0.1)
    assert lr_factor(500, cos, 110) == pytest.approx(0.1)                     # flat after the end
    lin = OptimConfig(lr=2.0, schedule="linear", min_lr_ratio=0.0, decay_steps=100)
    assert lr_at(25, lin) == pytest.approx(1.5)
    const = OptimConfig(lr=3.0, schedule="constant", warmup_steps=4)
    assert [lr_at(s, const) for s in (0, 1, 3, 99)] == pytest.approx([0.75, 1.5, 3.0, 3.0])
    with pytest.raises(ValueError, match="total_steps"):
        lr_factor(5, OptimConfig(schedule="cosine"))
    with pytest.raises(ValueError):
        lr_factor(-1, const)


def test_set_lr_scales_each_groups_base_lr():
    opt = build_optimizer(Transformer(MICRO), OptimConfig(name="muon", lr=0.02, aux_lr=1e-3))
    set_lr(opt, 0.5)
    assert {g["lr"] for g in opt.param_groups} == {0.01, 5e-4}


@pytest.mark.parametrize("name", ["adamw", "muon", "sgd"])
def test_normalized_momentum_of_a_constant_gradient_is_that_gradient(name):
    """The momentum is a weighted average of past gradients with weights summing to one."""
    w = torch.nn.Parameter(torch.zeros(4, 3))
    g = torch.arange(12, dtype=torch.float32).reshape(4, 3) - 5.0
    if name == "muon":
        opt = torch.optim.Muon([{"params": [w], "kind": "muon"}], lr=1e-3, momentum=0.9)
    elif name == "sgd":
        opt = torch.optim.SGD([w], lr=1e-3, momentum=0.9)
    else:
        opt = torch.optim.AdamW([w], lr=1e-3, betas=(0.9, 0.99))
    for n in range(1, 6):
        w.grad = g.clone()
        opt.step()
        m = normalized_momentum(opt, n)[id(w)]
        assert torch.allclose(m, g, rtol=MOMENTUM_RTOL), (name, n)


def test_the_papers_optimizers_come_from_their_libraries_with_the_documented_mapping():
    from pytorch_optimizer import SOAP, Adan, Lion, NorMuon

    model = Transformer(MICRO)
    names = {id(p): n for n, p in model.named_parameters()}
    matrices = {n for n, p in model.named_parameters() if param_kind(n, p) == "matrix"}
    cfg = dict(lr=0.01, beta1=0.8, beta2=0.97, weight_decay=0.1)

    nor = build_optimizer(model, OptimConfig(name="normuon", momentum=0.9, **cfg))
    core, adam = nor.optimizers                      # the same split as Muon
    assert isinstance(core, NorMuon) and isinstance(adam, torch.optim.AdamW)
    assert {names[id(p)] for g in core.param_groups for p in g["params"]} == matrices
    assert {(g["beta2"], g["momentum"], g["use_adjusted_lr"], g["use_muon"])
            for g in core.param_groups} == {(0.97, 0.9, True, True)}
    assert {group_geometry(g) for g in core.param_groups} == {SPECTRAL}
    assert {group_geometry(g) for g in adam.param_groups} == {LINF}

    soap = build_optimizer(model, OptimConfig(name="soap", **cfg))
    assert isinstance(soap, SOAP) and {g["betas"] for g in soap.param_groups} == {(0.8, 0.97)}
    for g in soap.param_groups:                     # preconditioned matrices: spectral
        assert (group_geometry(g) == SPECTRAL) == all(p.ndim == 2 for p in g["params"])
        assert (g["weight_decay"] == 0.0) == all(p.ndim == 1 for p in g["params"])

    lion = build_optimizer(model, OptimConfig(name="lion", **cfg))
    assert isinstance(lion, Lion) and {g["betas"] for g in lion.param_groups} == {(0.8, 0.97)}
    adan = build_optimizer(model, OptimConfig(name="adan", **cfg))
    assert isinstance(adan, Adan)
    assert {(g["betas"], g["weight_decouple"]) for g in adan.param_groups} == \
        {((0.8, ADAN_BETA_DIFF, 0.97), True)}
    nadamw = build_optimizer(model, OptimConfig(name="nadamw", **cfg))
    assert isinstance(nadamw, torch.optim.NAdam)
    assert {(g["betas"], g["decoupled_weight_decay"]) for g in nadamw.param_groups} == \
        {((0.8, 0.97), True)}
    for opt in (lion, adan, nadamw):
        assert {group_geometry(g) for g in opt.param_groups} == {LINF}
        assert {g["weight_decay"] for g in opt.param_groups} == {0.0, 0.1}


def test_soap_keeps_an_oversized_dimension_unpreconditioned_and_l_inf():
    from llm_validation.training.optim import SOAP_MAX_PRECONDITION_DIM

    big = torch.nn.Parameter(torch.zeros(SOAP_MAX_PRECONDITION_DIM + 1, 2))
    small = torch.nn.Parameter(torch.zeros(3, 2))
    opt = build_optimizer([("embed.weight", big), ("blocks.0.attn.q.weight", small)],
                          OptimConfig(name="soap"))
    geo = {g["labels"][0]: group_geometry(g) for g in opt.param_groups}
    assert geo == {"embed.weight": LINF, "blocks.0.attn.q.weight": SPECTRAL}


def test_wsd_schedule_textbook_values():
    """Warmup 10, stable at the peak, linear decay over the last 20% of the 110-step run
    (steps 88..110) to min_lr_ratio; a decay longer than the post-warmup part starts when the
    warmup ends."""
    wsd = OptimConfig(lr=1.0, schedule="wsd", warmup_steps=10, min_lr_ratio=0.1,
                      wsd_decay_fraction=0.2)
    assert lr_factor(0, wsd, 110) == pytest.approx(0.1)
    assert lr_factor(9, wsd, 110) == pytest.approx(1.0)
    assert [lr_factor(s, wsd, 110) for s in (10, 50, 87, 88)] == pytest.approx([1.0] * 4)
    assert lr_factor(93, wsd, 110) == pytest.approx(1.0 - 0.9 * 5 / 22)
    assert lr_factor(99, wsd, 110) == pytest.approx(0.55)                     # half way down
    assert lr_factor(110, wsd, 110) == pytest.approx(0.1)
    assert lr_factor(500, wsd, 110) == pytest.approx(0.1)
    whole = OptimConfig(lr=2.0, schedule="wsd", min_lr_ratio=0.0, wsd_decay_fraction=1.0,
                        decay_steps=100)                  # fraction 1: the linear schedule
    lin = OptimConfig(lr=2.0, schedule="linear", min_lr_ratio=0.0, decay_steps=100)
    assert [lr_at(s, whole) for s in range(0, 120, 7)] == \
        pytest.approx([lr_at(s, lin) for s in range(0, 120, 7)])
    late = OptimConfig(lr=1.0, schedule="wsd", warmup_steps=60, min_lr_ratio=0.0,
                       wsd_decay_fraction=0.5)                # 50% of 100 steps > 40 left
    assert [lr_factor(s, late, 100) for s in (59, 60, 80, 100)] == \
        pytest.approx([1.0, 1.0, 0.5, 0.0])
    with pytest.raises(ValueError, match="total_steps"):
        lr_factor(5, OptimConfig(schedule="wsd"))


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_normalized_momentum_of_every_built_optimizer_is_the_constant_gradient(name):
    """build_optimizer's optimizers, a constant gradient per parameter: the normalized
    momentum is that gradient (weights sum to one), whatever the library's bookkeeping."""
    model = Transformer(MICRO)
    opt = build_optimizer(model, OptimConfig(name=name, lr=1e-4, weight_decay=0.0))
    gen = torch.Generator().manual_seed(0)
    const = {id(p): torch.randn(p.shape, generator=gen) for p in model.parameters()}
    for n in range(1, 5):
        for p in model.parameters():
            p.grad = const[id(p)].clone()          # some optimizers modify p.grad in place
        opt.step()
        mom = normalized_momentum(opt, n)
        if name == "soap" and n == 1:
            assert mom == {}                       # SOAP's first step only sets up its bases
            continue
        assert len(mom) == len(const), (name, n)
        for pid, m in mom.items():
            assert torch.allclose(m, const[pid], rtol=MOMENTUM_RTOL, atol=MOMENTUM_ATOL), (name, n)
