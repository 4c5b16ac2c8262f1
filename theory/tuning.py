"""Tuned corollaries: the parameter choice that makes a bound <= eps, and the iteration count.

A :class:`Tuning` holds, for one theorem, sympy expressions for its tuned parameters (``alpha``,
``eta``, ``beta``, ``gamma`` ...) in terms of the problem constants and ``eps``, and the real
threshold ``K_expr`` such that every ``K >= K_expr`` makes the bound <= eps. That "each term is <=
eps/4" (or the analogous split) is a proof step decided by sympy in the theorem's proof; this
module only evaluates the expressions.

``tuned(theorem, K=None, eps=None, **problem)`` returns the parameter choice and the bound:

- with ``eps``: the tuned parameters for ``eps`` and ``K = complexity(eps)`` (or the given K);
- with ``K`` only: the smallest ``eps`` (bisection, geometric) whose complexity is <= K, its
  parameters, and the bound at the given K (the bounds are nonincreasing in K, so bound <= eps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Protocol

import sympy

from theory.domain import POSITIVE, POSITIVE_INTEGER, Domain
from theory.numeric import compile_expr
from theory.symbols import SCALARS, eps as EPS

__all__ = ["Tuning", "TunedTheorem", "tuned", "complexity", "K_SAFETY_RTOL", "BISECTION_STEPS"]

#: The real iteration threshold is rounded up after multiplying by (1 + K_SAFETY_RTOL), so float64
#: round-off in evaluating ``K_expr`` (relative error ~1e-15) can never round K below the exact
#: threshold.
K_SAFETY_RTOL = 1e-12
#: Geometric bisection steps on eps in K-only mode (each halves log(eps_hi/eps_lo)).
BISECTION_STEPS = 200
#: Smallest eps the K-only search tries: eps^2 stays far above float64's underflow (1e-308), and
#: a budget met even there means the bound is (numerically) 0 for that K.
EPS_FLOOR = 1e-100
#: Largest number of one-ulp reductions of the ``nudge`` parameter to satisfy a condition that a
#: tuned choice meets with equality in exact arithmetic (float64 may overshoot by a few ulps).
MAX_NUDGES = 64


class TunedTheorem(Protocol):
    """What ``tuned``/``complexity`` use of a :class:`theory.theorem.Theorem` (which holds a
    :class:`Tuning`, so this module cannot import it without a cycle)."""

    name: str
    parameters: Mapping[str, sympy.Symbol]
    domains: Mapping[str, Domain]
    tuning: "Tuning | None"

    def failed_conditions(self, clean: Mapping[str, float | int]) -> list[str]: ...

    def evaluate(self, **values: object) -> float: ...


@dataclass(frozen=True, kw_only=True)
class Tuning:
    """The tuned corollary of one theorem."""

    problem: Mapping[str, Domain]
    """Problem constants ``tuned``/``complexity`` take, with their domains."""
    choices: Mapping[str, sympy.Expr]
    """Theorem parameter -> its tuned value (sympy, in the problem symbols and ``eps``)."""
    K_expr: sympy.Expr | None
    """Real threshold: every K >= K_expr makes the bound <= eps (None: no iteration count)."""
    description: str
    """One line: what the choice is and the resulting complexity."""
    nudge: str | None = None
    """Parameter shrunk by ulps if float64 makes a boundary condition fail."""

    def __post_init__(self) -> None:
        for name in self.problem:
            if name not in SCALARS:
                raise ValueError(f"Tuning.problem: {name!r} is not a symbol of theory.symbols")

    def symbols(self) -> list[sympy.Symbol]:
        return [SCALARS[n] for n in self.problem] + [EPS]


def _validate_problem(tuning: Tuning, problem: Mapping[str, object]) -> dict[str, float | int]:
    unknown = sorted(set(problem) - set(tuning.problem))
    if unknown:
        raise TypeError(f"unexpected problem constant(s) {unknown}; expected {list(tuning.problem)}")
    missing = [n for n in tuning.problem
               if n not in problem and tuning.problem[n].fixed_value is None]
    if missing:
        raise TypeError(f"missing problem constant(s) {missing}; expected {list(tuning.problem)}")
    return {n: dom.validate(n, problem.get(n, dom.fixed_value)) for n, dom in tuning.problem.items()}


@lru_cache(maxsize=256)
def _compiled(symbols: tuple[sympy.Symbol, ...], expr: sympy.Expr):
    return compile_expr(symbols, expr)


def _eval(tuning: Tuning, expr: sympy.Expr, values: Mapping[str, float], eps: float) -> float:
    fn = _compiled(tuple(tuning.symbols()), expr)
    try:
        return float(fn(*[values[n] for n in tuning.problem], eps))
    except (ZeroDivisionError, OverflowError, ValueError) as exc:
        raise ValueError(f"cannot evaluate the tuned corollary at eps={eps!r}, {dict(values)}: "
                         f"{exc}") from None


def complexity(theorem: TunedTheorem, eps: object, **problem: object) -> dict:
    """The iteration count that makes the tuned bound <= eps.

    Returns ``{"K": int, "K_real": float, "expression": sympy.Expr}`` (``expression`` is the real
    threshold in the problem symbols and ``eps``; ``K = max(1, ceil(K_real))``).
    """
    tuning = _require(theorem)
    if tuning.K_expr is None:
        raise ValueError(f"{theorem.name} is an asymptotic floor: it has no iteration count")
    values = _validate_problem(tuning, problem)
    eps_v = POSITIVE.validate("eps", eps)
    return _complexity(tuning, values, eps_v)


def _complexity(tuning: Tuning, values: Mapping[str, float], eps_v: float) -> dict:
    k_real = _eval(tuning, tuning.K_expr, values, eps_v)
    if not math.isfinite(k_real):
        raise ValueError(f"iteration threshold is not finite at eps={eps_v!r}, {dict(values)}")
    k_int = max(1, math.ceil(k_real * (1 + K_SAFETY_RTOL))) if k_real > 0 else 1
    return {"K": int(k_int), "K_real": k_real, "expression": tuning.K_expr}


def tuned(theorem: TunedTheorem, K: object = None, eps: object = None, **problem: object) -> dict:
    """Tuned parameters and the resulting bound (see the module docstring).

    Returns ``{"eps": float, "K": int | None, "parameters": {name: value}, "bound": float}``.
    """
    tuning = _require(theorem)
    values = _validate_problem(tuning, problem)
    if eps is None and K is None:
        raise ValueError("tuned() needs eps=..., K=..., or both")
    k_given = None if K is None else POSITIVE_INTEGER.validate("K", K)
    if eps is None:
        if tuning.K_expr is None:
            raise ValueError(f"{theorem.name} is an asymptotic floor: tune it with eps=...")
        eps_v = _smallest_eps(tuning, values, k_given)
    else:
        eps_v = POSITIVE.validate("eps", eps)
    params: dict[str, float | int] = {}
    for name in theorem.parameters:
        if name in tuning.choices:
            params[name] = _eval(tuning, tuning.choices[name], values, eps_v)
        elif name in values:
            params[name] = values[name]
        elif name == "K":
            params[name] = k_given if k_given is not None else _complexity(
                tuning, values, eps_v)["K"]
        elif theorem.domains[name].fixed_value is not None:
            params[name] = theorem.domains[name].fixed_value
        else:
            raise ValueError(f"tuning of {theorem.name} does not determine {name}")
    if tuning.nudge is not None:
        for _ in range(MAX_NUDGES):
            if not theorem.failed_conditions(params):
                break
            params[tuning.nudge] = math.nextafter(params[tuning.nudge], 0.0)
    return {"eps": eps_v, "K": params.get("K"), "parameters": params,
            "bound": theorem.evaluate(**params)}


def _smallest_eps(tuning: Tuning, values: Mapping[str, float], k_budget: int) -> float:
    def fits(e: float) -> bool:
        return _complexity(tuning, values, e)["K"] <= k_budget

    hi = 1.0
    while not fits(hi):
        hi *= 2.0
        if hi > 1e300:
            raise ValueError(f"no eps makes the complexity <= K={k_budget}")
    lo = hi
    while fits(lo) and lo > EPS_FLOOR:
        lo *= 0.5
    if fits(lo):
        return lo
    for _ in range(BISECTION_STEPS):
        mid = math.sqrt(lo * hi)
        if mid <= lo or mid >= hi:
            break
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _require(theorem: TunedTheorem) -> Tuning:
    if theorem.tuning is None:
        raise ValueError(f"{theorem.name} has no tuned corollary")
    return theorem.tuning
