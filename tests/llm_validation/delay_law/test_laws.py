"""Candidate delay laws: exact recovery, interval coverage at 4 seeds (beside a cluster
bootstrap that under-covers), held-out scoring and the choice rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llm_validation.delay_law.laws import (HIT_FACTOR, Observed, Law, candidate_laws, choose,
                                           fit_law, held_out_scores)

SIZES = (46_296, 113_000, 266_816, 485_144)
STEPS = (579, 904, 3616)
#: Coverage simulation: replicates (Monte-Carlo sd of a 95% rate ~0.007 at 1000).
REPS = 1000
#: Allowed shortfall of a 95% interval's simulated coverage: 3 Monte-Carlo sds.
COVER_SLACK = 3 * math.sqrt(0.95 * 0.05 / REPS)


def _cells(gen, seeds=(0, 1, 2, 3), lr=None):
    return [Observed(name=f"{n}/{s}", n_params=n, steps=s, lr_rel=1.0 if lr is None else lr,
                 values={k: gen(n, s, k) for k in seeds}) for n in SIZES for s in STEPS]


def test_exact_power_law_is_recovered():
    cells = _cells(lambda n, s, k: 3.0 * s ** -0.5 * n ** 0.1)
    fit = fit_law(Law(features=("log_n", "log_steps")), cells)
    assert fit.coefficient("log_steps").estimate == pytest.approx(-0.5)
    assert fit.coefficient("log_n").estimate == pytest.approx(0.1)
    assert fit.coefficient("const").estimate == pytest.approx(math.log(3.0))
    pred = fit.predict(Observed(name="x", n_params=10 ** 6, steps=10_000, values={}))
    assert pred.estimate == pytest.approx(3.0 * 10_000 ** -0.5 * 10 ** 0.6)


def test_saturating_law_stays_below_one_and_drops_what_it_cannot_read():
    z = lambda n, s, k: 1 / (1 + math.exp(-(4.0 - 0.6 * math.log(s))))
    cells = _cells(z) + [Observed(name="bad", n_params=1000, steps=100, values={0: 1.2, 1: -0.1})]
    fit = fit_law(Law(features=("log_steps",), link="logit"), cells)
    assert fit.dropped == 2
    assert fit.coefficient("log_steps").estimate == pytest.approx(-0.6)
    assert fit.predict(Observed(name="short", n_params=1000, steps=2, values={})).estimate < 1


def _simulate_seed_effects(rng, n_seeds=4):
    """Per-seed random intercept and slope around the truth, plus cell noise."""
    a = rng.normal(0.0, 0.3, n_seeds)
    b = -0.5 + rng.normal(0.0, 0.1, n_seeds)
    return lambda n, s, k: math.exp(a[k] + b[k] * math.log(s) + rng.normal(0, 0.05))


def test_t_interval_covers_at_four_seeds_and_the_cluster_bootstrap_does_not():
    rng = np.random.default_rng(7)
    law = Law(features=("log_steps",))
    t_cover = boot_cover = 0
    for _ in range(REPS):
        fit = fit_law(law, _cells(_simulate_seed_effects(rng)))
        iv = fit.coefficient("log_steps")
        t_cover += iv.lo <= -0.5 <= iv.hi
        slopes = np.array([c[1] for c in fit.coefs.values()])
        boot = [rng.choice(slopes, size=slopes.size).mean() for _ in range(200)]
        lo, hi = np.percentile(boot, [2.5, 97.5])
        boot_cover += lo <= -0.5 <= hi
    assert t_cover / REPS >= 0.95 - COVER_SLACK
    assert boot_cover / REPS < 0.95 - COVER_SLACK      # why the laws use the t interval


def test_held_out_choice_finds_the_generating_law():
    rng = np.random.default_rng(1)
    gen = lambda n, s, k: 5.0 * s ** -0.45 * math.exp(rng.normal(0, 0.03))
    cells = _cells(gen)
    held = [c for c in cells if c.n_params == SIZES[-1]]
    train = [c for c in cells if c.n_params != SIZES[-1]]
    scores = held_out_scores(candidate_laws(), train, held)
    best = choose(scores)
    assert best.law == "steps"           # n's coefficient is noise: the tie goes to fewer
    assert best.hits == len(held)
    by = {s.law: s for s in scores}
    assert by["const"].mean_log_error > by["steps"].mean_log_error
    assert all(e <= math.log(HIT_FACTOR) for e in best.errors.values())


def test_a_law_that_cannot_be_identified_scores_inf():
    cells = _cells(lambda n, s, k: 0.3 * s ** -0.2)          # lr never moves
    scores = held_out_scores([Law(features=("log_n", "log_steps", "log_lr"))], cells[:-3],
                             cells[-3:])
    assert scores[0].mean_log_error == math.inf
    with pytest.raises(ValueError, match="no law predicts"):
        choose(scores)


def test_unknown_link_or_feature_is_refused():
    with pytest.raises(ValueError):
        Law(features=("log_batch",))
    with pytest.raises(ValueError):
        Law(features=(), link="probit")
