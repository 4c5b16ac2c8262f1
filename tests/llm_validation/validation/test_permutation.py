"""The sign-flip test: textbook values, its floor, its validity simulated at 3-5 seeds."""

from __future__ import annotations

import numpy as np
import pytest

from llm_validation.validation.permutation import EXACT_MAX, min_pvalue, sign_flip_pvalue

ALPHA = 0.10
REPS = 4000
#: Three Monte-Carlo standard errors of a rejection rate at ALPHA.
MC_SLACK = 3 * np.sqrt(ALPHA * (1 - ALPHA) / REPS)


def test_all_positive_reaches_the_floor():
    for n in (3, 4, 5):
        x = np.arange(1, n + 1, dtype=float)
        assert sign_flip_pvalue(x) == min_pvalue(n) == 1 / 2 ** n
        assert sign_flip_pvalue(x, alternative="two-sided") == min_pvalue(n, "two-sided")
        assert sign_flip_pvalue(x, alternative="less") == 1.0


def test_hand_case():
    # d = (3, -1, 2): sums of +-3 +-1 +-2 at least 4: (3,-1,2)=4, (3,1,2)=6 -> 2/8
    assert sign_flip_pvalue([3.0, -1.0, 2.0]) == pytest.approx(2 / 8)
    # against a null of 1: d = (2, -2, 1): sums >= 1: 5,1,3(2,2,-1)... enumerate directly
    d = np.array([2.0, -2.0, 1.0])
    signs = np.array([[a, b, c] for a in (1, -1) for b in (1, -1) for c in (1, -1)])
    expected = np.mean(signs @ d >= d.sum() - 1e-12)
    assert sign_flip_pvalue([3.0, -1.0, 2.0], null=1.0) == pytest.approx(expected)


@pytest.mark.parametrize("n", [3, 4, 5])
@pytest.mark.parametrize("dist", ["normal", "t2", "laplace"])
def test_valid_under_symmetric_nulls(n, dist):
    rng = np.random.default_rng(n * 7 + len(dist))
    draw = {"normal": lambda: rng.normal(size=n), "t2": lambda: rng.standard_t(2, size=n),
            "laplace": lambda: rng.laplace(size=n)}[dist]
    rate = np.mean([sign_flip_pvalue(draw()) <= ALPHA for _ in range(REPS)])
    assert rate <= ALPHA + MC_SLACK


def test_detects_a_real_shift():
    rng = np.random.default_rng(3)
    rate = np.mean([sign_flip_pvalue(rng.normal(2.0, 1.0, size=5)) <= 1 / 16
                    for _ in range(500)])
    assert rate > 0.8


def test_monte_carlo_branch_is_valid_and_seeded():
    rng = np.random.default_rng(0)
    x = rng.normal(size=EXACT_MAX + 4)
    a = sign_flip_pvalue(x, draws=2000, seed=5)
    assert a == sign_flip_pvalue(x, draws=2000, seed=5)
    assert 1 / 2001 <= a <= 1.0
    assert sign_flip_pvalue(np.abs(x) + 1, draws=2000, seed=5) == pytest.approx(1 / 2001)


def test_bad_input():
    with pytest.raises(ValueError, match="alternative"):
        sign_flip_pvalue([1.0], alternative="up")
    with pytest.raises(ValueError, match="finite"):
        sign_flip_pvalue([1.0, float("nan")])
