"""Numerically stable float evaluation of the theory's sympy expressions.

The bounds contain ``(1 - beta)**K`` and the iteration counts ``log(1 - beta)``; with the tuned
``beta`` as small as 1e-20 and ``K`` as large as 1e20, evaluating ``1 - beta`` in float64 rounds
to 1 and loses everything. :func:`compile_expr` rewrites, before ``lambdify``:

- ``(1 - x)**n`` (n not a number) -> ``pow1m(x, n)`` = ``exp(n * log1p(-x))``, with the exact
  values at ``x = 1`` (``0**n``: 1 at n = 0, else 0), where ``log1p(-1)`` has no float value;
- ``log(1 - x)`` -> ``log1p(-x)``.

Both are identities; ``log1p`` is evaluated by ``math.log1p`` (exact to a few ulps for small x).
"""

from __future__ import annotations

from typing import Callable, Sequence

import sympy
import math

from sympy.codegen.cfunctions import log1p

__all__ = ["compile_expr", "stable_form"]


class pow1m(sympy.Function):  # noqa: N801 (a sympy function name)
    """``pow1m(x, n) = (1 - x)**n``, evaluated stably by :func:`_pow1m_float`."""

    def _eval_rewrite_as_Pow(self, x, n, **kwargs):  # noqa: N802 (sympy's hook name)
        return (1 - x) ** n


def _pow1m_float(x: float, n: float) -> float:
    if x == 1.0:  # alpha = 1 or beta = 1: (1 - 1)**n
        return 1.0 if n == 0 else 0.0
    return math.exp(n * math.log1p(-x))


def _one_minus(base: sympy.Expr) -> sympy.Expr | None:
    """``x`` if ``base == 1 - x`` (an Add with constant term 1), else None."""
    if isinstance(base, sympy.Add):
        const, rest = base.as_coeff_Add()
        if const == 1 and rest != 0:
            return -rest
    return None


def stable_form(expr: sympy.Expr) -> sympy.Expr:
    """Rewrite ``(1 - x)**n`` and ``log(1 - x)`` with ``log1p`` (see the module docstring)."""

    def is_pow(e) -> bool:
        return (isinstance(e, sympy.Pow) and not e.exp.is_number
                and _one_minus(e.base) is not None)

    def is_log(e) -> bool:
        return isinstance(e, sympy.log) and _one_minus(e.args[0]) is not None

    expr = expr.replace(is_pow, lambda e: pow1m(_one_minus(e.base), e.exp))
    return expr.replace(is_log, lambda e: log1p(-_one_minus(e.args[0])))


def compile_expr(symbols: Sequence[sympy.Symbol], expr: sympy.Expr) -> Callable[..., float]:
    """``lambdify(symbols, stable_form(expr), "math")``."""
    return sympy.lambdify(list(symbols), stable_form(sympy.sympify(expr)),
                          modules=[{"pow1m": _pow1m_float}, "math"])
