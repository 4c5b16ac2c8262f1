"""The sympy decision procedures are sound: they prove true claims and never prove false ones."""

from __future__ import annotations

import math
import random

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from theory.decide import (
    Obligation,
    domain_substitutions,
    eq,
    increasing,
    is_nonneg,
    is_pos,
    le,
    lt,
    peel_sums,
)
from theory.domain import AT_LEAST_ONE, UNIT_HALF_OPEN, UNIT_OPEN
from theory.symbols import VEC_D, VEC_X, VECTORS

X, Y = sympy.symbols("x y", positive=True)
Z = sympy.Symbol("z", nonnegative=True)
U = sympy.Symbol("u", real=True)
K_INT = sympy.Symbol("n", integer=True, nonnegative=True)
#: Numeric check of a claimed sign: round-off of float64 evaluation of expressions with entries
#: of size <= 1e6 is far below this relative slack.
REL_TOL = 1e-9


@pytest.mark.parametrize("claim", [
    le("AM-GM", 2 * X * Y, X ** 2 + Y ** 2),
    le("weighted CS", (U + Z * Y) ** 2, (1 + Z) * (U ** 2 + Z * Y ** 2)),
    lt("strict", X, X + Y),
    le("power <= 1", (X / (1 + X)) ** K_INT, 1),
    le("log", sympy.log(X / (1 + X)), 0),
    le("exp vs power", X * sympy.exp(-sympy.log(1 + Y)), X),
    eq("geometric sum step", (1 - X ** (K_INT + 1)) / (1 - X), X * (1 - X ** K_INT) / (1 - X) + 1),
    increasing("-log(1-t) >= t", -sympy.log(1 - U) - U, U, 0, Z / (1 + Z)),
], ids=lambda o: o.label)
def test_true_claims_are_proved(claim):
    decision = claim.decide()
    assert decision.proved, decision.detail


@pytest.mark.parametrize("claim", [
    le("reverse AM-GM", X ** 2 + Y ** 2, 2 * X * Y),
    le("x <= 1", X, 1),
    lt("not strict", X, X),
    eq("wrong identity", (X + 1) ** 2, X ** 2 + 1),
    le("log sign", 0, sympy.log(X)),
    increasing("decreasing", -U, U, 0, Z),
    eq("nonlinear vector identity", VEC_X * VEC_D, VEC_D * VEC_X, vectors=VECTORS),
], ids=lambda o: o.label)
def test_false_or_unjustified_claims_are_not_proved(claim):
    assert not claim.decide().proved


def test_obligation_validation():
    with pytest.raises(ValueError):
        Obligation(label="x", relation="ge", lhs=X)
    with pytest.raises(ValueError):
        Obligation(label="x", relation="increasing", lhs=X)


def test_peel_sums_is_the_definition():
    j = sympy.Symbol("j", integer=True)
    f = sympy.Function("f")
    peeled = peel_sums(sympy.Sum(f(j), (j, 1, K_INT + 2)))
    assert peeled == sympy.Sum(f(j), (j, 1, K_INT)) + f(K_INT + 1) + f(K_INT + 2)


def test_domain_substitutions_cover_the_intervals():
    a, b, r = sympy.symbols("alpha beta rho", positive=True)
    subs = dict(domain_substitutions({"alpha": UNIT_HALF_OPEN, "beta": UNIT_OPEN,
                                      "rho": AT_LEAST_ONE}, {"alpha": a, "beta": b, "rho": r}))
    t_a = next(iter(subs[a].free_symbols))
    t_b = next(iter(subs[b].free_symbols))
    assert t_a.is_nonnegative and not t_a.is_positive  # alpha = 1 reachable (t = 0)
    assert t_b.is_positive  # beta < 1
    assert subs[a].subs(t_a, 0) == 1 and subs[r].subs(next(iter(subs[r].free_symbols)), 0) == 1


# ----------------------------------------------------------------- soundness fuzzing
LEAVES = st.sampled_from([X, Y, Z, sympy.Integer(1), sympy.Integer(2), sympy.Rational(1, 2)])


def _combine(children):
    return st.one_of(
        st.tuples(children, children).map(lambda p: p[0] + p[1]),
        st.tuples(children, children).map(lambda p: p[0] - p[1]),
        st.tuples(children, children).map(lambda p: p[0] * p[1]),
        st.tuples(children, st.integers(1, 3)).map(lambda p: p[0] ** p[1]),
        children.map(lambda c: sympy.sqrt(c * c + 1)),
        children.map(lambda c: sympy.exp(c)),
        children.map(lambda c: sympy.log(1 + c * c)),
        st.tuples(children, children).map(lambda p: p[0] / (1 + p[1] ** 2)),
    )


EXPRS = st.recursive(LEAVES, _combine, max_leaves=6)



@given(EXPRS, st.integers(0, 2 ** 31 - 1))
def test_sign_decisions_are_sound(expr, seed):
    """Whenever sympy claims expr >= 0 (or > 0), it holds at random points of the domain."""
    claims = [(is_nonneg(expr), False), (is_pos(expr), True)]
    if not any(c for c, _ in claims):
        return
    fn = sympy.lambdify((X, Y, Z), expr, modules="math")
    rng = random.Random(seed)
    for _ in range(30):
        point = (rng.uniform(1e-3, 5), rng.uniform(1e-3, 5), rng.choice([0.0, rng.uniform(0, 5)]))
        try:
            value = float(fn(*point))
        except (OverflowError, ZeroDivisionError, ValueError):
            continue
        if not math.isfinite(value):
            continue
        for claimed, strict in claims:
            if claimed:
                assert value >= -REL_TOL * (1 + abs(value)), (expr, point, value, strict)
