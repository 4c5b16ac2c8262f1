"""Nominal p-values of leaf checks: the closed forms equal the definition (bisection with
checks.at_level) on random checks of every kind, and decide exactly below a level."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from llm_validation.claims.decide.checks import aggregate, at_level, make, not_measured
from llm_validation.claims.decide.familywise import LOOKS
from llm_validation.claims.decide.pvalues import FAMILY_KINDS, nominal_pvalue, routes, status_at
from llm_validation.claims.decide.sequential import DEFAULT_POLICY
from tests.llm_validation.claims.oracles import A_MIN, pvalue_by_bisection

#: Closed form vs bisection: below A_MIN the bisection reports 0 (a level 1 - a keeps too few
#: digits of a); above it the bisection resolves a to 1e-13 and the t tail (scipy) and
#: ``student.t_quantile`` invert each other to ~1e-14, so 1e-9 relative leaves a wide margin
#: and still catches any formula error (a wrong tail or factor 2 is off by 10% or more).
PVALUE_ATOL = A_MIN
PVALUE_RTOL = 1e-9
#: Examples per kind (the closed-form test draws the kind too: this many times the kinds):
#: the bisection costs 48 at_level calls (~20 ms); a third of the profile's count, at least
#: 15 (keeps the file at a few seconds under the dev and ci profiles).
EXAMPLES = max(15, settings.default.max_examples // 3)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= PVALUE_ATOL + PVALUE_RTOL * max(abs(a), abs(b))


@st.composite
def _values(draw, n_min: int = 2) -> dict[int, float]:
    """Per-seed values: 2-9 seeds around a centre, some rounded to create ties and zero
    spreads (the closed forms' edge cases)."""
    n = draw(st.integers(n_min, 9))
    centre = draw(st.floats(-2.0, 2.0, allow_subnormal=False))
    scale = draw(st.sampled_from([1e-3, 0.05, 0.3, 1.0, 3.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    x = centre + scale * rng.standard_normal(n)
    digits = draw(st.sampled_from([None, None, None, 1, 0]))
    if digits is not None:
        x = np.round(x, digits)
    return dict(enumerate(x.tolist()))


@st.composite
def random_check(draw, kind: str):
    """A check of ``kind`` built by checks.make, as the ledger builds them."""
    if kind in ("same_sign", "no_consistent_effect"):
        names = ["A", "B", "C"][:draw(st.integers(2, 3))]
        groups = {k: draw(_values()) for k in names}
        if draw(st.integers(0, 9)) == 0:
            groups[names[-1]] = {}                            # a group not measured
        widths = {k: draw(st.floats(0.01, 3.0)) for k in names}
        return make("random", kind, groups, widths=widths)
    params = ({"boundary": draw(st.floats(-2.0, 2.0)),
               "predicted": draw(st.sampled_from(["above", "below"]))} if kind == "side"
              else {"width": draw(st.floats(0.01, 3.0))})
    return make("random", kind, {"x": draw(_values())}, {"x": 1.0}, **params)


#: Checks a hypothesis search found (same_sign): a group of 5 or 7 seeds whose rounded values
#: have a mean of ~1e-17 (t ~ 1e-16: p_nom is 1 to double precision). ``stats.t.ppf``'s t
#: quantile is 0 below level ~1e-8 at dof 4 and 6; from it, at_level sees a zero-width
#: interval beside 0 there and decides, and the bisection gives 0.99999999 against the closed
#: form's 1.0. ``student.t_quantile`` is exact there.
FOUND_DOF_4 = make("found", "same_sign", {
    "A": {0: -1.4, 1: 0.7, 2: -0.2, 3: 0.7, 4: 0.2},
    "B": {0: 1.6217525151399943, 1: -0.16690391683516925, 2: -1.047946853305053,
          3: 1.3998628173117689, 4: -0.4911779031417327, 5: 0.09651809749506943,
          6: 1.1324985991440075, 7: -0.44147941366170884},
    "C": {0: -0.6598048116619255, 1: 0.17938921800878888, 2: 1.2201733169359885}},
    widths={"A": 0.825443360141515, "B": 2.5776153468364016, "C": 0.015019117677279231})
FOUND_DOF_6 = make("found", "same_sign", {
    "A": {0: -0.07083270809788388, 1: -0.034489594906141216, 2: 0.06061108854028329,
          3: 0.02874987244282374, 4: 0.05688295780534856, 5: -0.013293160229804524},
    "B": {0: -0.07083270809788388, 1: -0.034489594906141216, 2: 0.06061108854028329,
          3: 0.02874987244282374, 4: 0.05688295780534856, 5: -0.013293160229804524},
    "C": {0: -0.3, 1: 0.3, 2: 0.4, 3: -0.3, 4: -0.1, 5: 0.0, 6: 0.0}},
    widths={"A": 2.155585284719777, "B": 0.09872146582930699, "C": 0.60592870351948})


@settings(max_examples=EXAMPLES * len(FAMILY_KINDS))
@given(c=st.sampled_from(FAMILY_KINDS).flatmap(random_check))
@example(c=FOUND_DOF_4)
@example(c=FOUND_DOF_6)
def test_closed_form_equals_bisection(c):
    closed, reference = nominal_pvalue(c), pvalue_by_bisection(c)
    assert 0.0 <= closed <= 1.0
    assert _close(closed, reference), (c.kind, c.samples or c.inputs, c.params, closed,
                                       reference)


@pytest.mark.parametrize("kind", FAMILY_KINDS)
@given(data=st.data(), level=st.floats(0.5, 0.99999))
def test_decides_exactly_below_one_minus_level(kind, data, level):
    c = data.draw(random_check(kind))
    p = nominal_pvalue(c)
    assume(not _close(p, 1.0 - level))                        # a tie within rounding
    decided = at_level(c, level)
    assert (p < 1.0 - level) == (decided.status != "inconclusive")
    # the status at 1 - a is the first route below a: the routes mirror the checks' order
    assert status_at(routes(c), 1.0 - level)[()] == decided.status
    # p_raw = LOOKS p_nom <= alpha exactly when the seeds policy's level decides it
    assume(not _close(LOOKS * p, DEFAULT_POLICY.alpha))
    policy = at_level(c, DEFAULT_POLICY.level1).status != "inconclusive"
    assert (min(1.0, LOOKS * p) <= DEFAULT_POLICY.alpha) == policy


def test_textbook_side_pvalue_and_edges():
    # x = 1..5 against 0: t = 3 / sqrt(2.5 / 5) = 4.2426, two-sided p (4 df) = 0.013236
    c = make("x > 0", "side", {"x": {i: float(i + 1) for i in range(5)}}, {"x": 1.0},
             boundary=0.0, predicted="above")
    assert nominal_pvalue(c) == pytest.approx(0.0132356, rel=1e-4)
    flat = make("flat", "side", {"x": {0: 0.25, 1: 0.25, 2: 0.25}}, {"x": 1.0}, boundary=0.0,
                predicted="below")
    assert nominal_pvalue(flat) == 0.0 == pvalue_by_bisection(flat)  # zero spread: decided
    assert flat.status == "fail"
    on = make("on", "side", {"x": {0: 0.0, 1: 0.0, 2: 0.0}}, {"x": 1.0}, boundary=0.0,
              predicted="below")
    assert nominal_pvalue(on) == 1.0 == pvalue_by_bisection(on)     # on its boundary: never
    two = make("two", "differs", {"x": {0: 1.0, 1: 1.1}}, {"x": 1.0}, width=0.5)
    assert nominal_pvalue(two) == 1.0 == pvalue_by_bisection(two)   # < MIN_SEEDS
    assert nominal_pvalue(not_measured("nm", "no runs")) == 1.0


def test_equivalence_is_tost_with_each_side_at_half_the_error():
    # mean 0.1, sd 0.1, n = 4 (se 0.05), width 0.3: T = 8 and 4 against -w and +w (3 df)
    x = {0: 0.0, 1: 0.1, 2: 0.2, 3: 0.1}
    x = {k: 0.1 + (v - 0.1) * 0.1 / np.std(list(x.values()), ddof=1) for k, v in x.items()}
    c = make("eq", "equivalence", {"x": x}, {"x": 1.0}, width=0.3)
    from scipy import stats
    assert nominal_pvalue(c) == pytest.approx(2 * max(stats.t.sf(8, 3), stats.t.sf(4, 3)))


def test_divergence_has_no_pvalue_and_aggregates_refuse():
    g = {"gradient-level": {0: 1.0, 1: 1.0, 2: 1.0}, "update-level": {0: 0.0, 1: 0.0, 2: 0.0}}
    div = make("div", "divergence", g)
    assert nominal_pvalue(div) is None and pvalue_by_bisection(div) is None
    side = make("s", "side", {"x": {0: 1.0, 1: 1.2, 2: 0.9}}, {"x": 1.0}, boundary=0.0,
                predicted="above")
    with pytest.raises(ValueError, match="aggregate"):
        nominal_pvalue(aggregate("all", "all", [side, side]))
    assert math.isfinite(nominal_pvalue(side))
