"""Numeric predicates: non-negative slack on fresh random instances in the l2, l_inf and spectral
geometries, and negative slack as soon as a hypothesis or a constant is broken (they can fail)."""

from __future__ import annotations

import pytest
import torch

from theory.instances import BUILDERS, build_instance
from theory.predicates import PREDICATES
from theory.proof import TOL

GEOMETRIES = ("l2", "linf", "spectral")
#: (predicate, instance builder, builder options, geometries)
CASES = [(p, p, {}, GEOMETRIES) for p in PREDICATES if p in BUILDERS] + [
    ("momentum_error_lemma", "momentum_error_lemma", {"weight_decay": True}, GEOMETRIES),
    ("momentum_error_lemma", "momentum_error_lemma", {"ef": True, "weight_decay": True},
     GEOMETRIES),
    ("momentum_error_lemma", "momentum_error_lemma", {"sigma_zero": True}, GEOMETRIES),
    ("delayed_gd_mismatch", "delayed_gd", {}, ("l2",)),
    ("average_squared_gradient", "delayed_gd", {}, ("l2",)),
    ("ef_gd_mismatch", "delayed_gd", {"ef": True}, ("l2",)),
    ("average_squared_gradient", "delayed_gd", {"ef": True}, ("l2",)),
]
SEED = 12345  # differs from Proof.check()'s seeds: fresh instances
#: A broken hypothesis must produce a violation well beyond round-off (1000 x TOL).
BROKEN = 1000 * TOL


def test_every_predicate_is_covered():
    assert {c[0] for c in CASES} == set(PREDICATES)


@pytest.mark.parametrize("predicate, instance, options, geometries", CASES,
                         ids=[f"{c[0]}-{c[1]}-{'-'.join(c[2])}" for c in CASES])
def test_slack_is_nonnegative(predicate, instance, options, geometries):
    for geometry in geometries:
        inst = build_instance(instance, geometry, n=8, seed=SEED, **options)
        slack = PREDICATES[predicate](**inst)
        assert torch.isfinite(slack).all()
        assert float(slack.min()) >= -TOL, (geometry, float(slack.min()))


def _min_slack(predicate, instance, geometry, edit, **options):
    inst = build_instance(instance, geometry, n=32, seed=SEED, **options)
    edit(inst)
    return float(PREDICATES[predicate](**inst).min())


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_predicates_detect_broken_hypotheses(geometry):
    def outside_ball(inst):
        inst["x"] = inst["x"] * 3

    def star_outside(inst):  # ||x*|| = 2 eta/beta, aligned with the LMO direction
        radius = (inst["eta"] / inst["beta"]).reshape(-1, *([1] * (inst["m"].ndim - 1)))
        inst["x_star"] = 2 * radius * inst["geometry"].lmo(inst["m"])

    def smaller_l(inst):
        inst["L"] = inst["L"] / 4

    def less_noise(inst):
        inst["sigma"] = inst["sigma"] * 0.2

    def larger_mu(inst):
        inst["mu"] = inst["mu"] * 100  # l1 and nuclear dual norms exceed l2 by up to ~d

    assert _min_slack("wd_step_length", "wd_step_length", geometry, outside_ball) < -BROKEN
    assert _min_slack("lmo_anchor_optimality", "lmo_anchor_optimality", geometry,
                      star_outside) < -BROKEN
    assert _min_slack("smoothness_upper", "smoothness_upper", geometry, smaller_l) < -BROKEN
    assert _min_slack("momentum_error_lemma", "momentum_error_lemma", geometry, less_noise) < -BROKEN
    assert _min_slack("pl_inequality", "pl_inequality", geometry, larger_mu) < -BROKEN


def test_star_convexity_fails_for_an_indefinite_quadratic():
    from theory.geometry import L2
    from theory.objectives import Ctx, Quadratic

    ctx = Ctx(L2, torch.Generator().manual_seed(0), 32)
    center = ctx.normal()
    quad = Quadratic(ctx, center, indefinite=True)
    slack = PREDICATES["star_convexity"](f=quad.f, grad=quad.grad, x=center + ctx.normal(),
                                         x_star=center, f_star=torch.zeros(32, dtype=torch.float64),
                                         geometry=L2)
    assert float(slack.min()) < -BROKEN


def test_instances_are_deterministic():
    a = build_instance("momentum_error_lemma", "spectral", n=4, seed=7, ef=True)
    b = build_instance("momentum_error_lemma", "spectral", n=4, seed=7, ef=True)
    assert torch.equal(a["m"], b["m"]) and torch.equal(a["omega_bar"], b["omega_bar"])
    with pytest.raises(ValueError, match="no instance builder"):
        build_instance("nope", "l2", n=1, seed=0)
