"""Sound, incomplete sign and zero decisions for sympy expressions (used by :mod:`theory.decide`
and :meth:`theory.theorem.Theorem.trend`).

``is_nonneg(e)`` / ``is_pos(e)`` return True only when ``e >= 0`` / ``e > 0`` is *proved* for every
value the symbols' assumptions allow; False means "not proved" (possibly true). Rules, all sound:

- sympy's own assumption system (``e.is_nonnegative``);
- a sum of nonnegative terms is nonnegative; a product's sign is the product of its factors'
  signs; a power of a nonnegative base, ``exp``, ``Abs`` and even powers are nonnegative;
- ``log(u)`` with ``u > 0`` has the sign of ``u - 1``;
- ``P - N`` with positive single terms P, N: compare ``log P`` with ``log N`` (log is increasing);
- the same rules on the ``factor``, ``cancel(together(.))`` (numerator over denominator) and
  ``expand`` forms, within a depth, size and rewrite budget (running out = not proved).

``is_zero(e)`` is True when ``expand``/``cancel``/power-base renaming/``simplify`` reach exactly 0;
sums over equal limits are merged first. Answers never depend on earlier calls (caches and budget
are reset per top-level question).
"""

from __future__ import annotations

from functools import lru_cache

import sympy

__all__ = ["is_nonneg", "is_pos", "is_zero", "MAX_DEPTH", "REWRITE_DEPTH", "REWRITE_BUDGET",
           "MAX_REWRITE_OPS"]

#: Recursion depth of the sign analysis.
MAX_DEPTH = 5
#: Depth up to which the (costly) factor/cancel/expand rewrites are tried; deeper levels use the
#: structural rules only, which bounds the work on large expressions (undecided, never wrong).
REWRITE_DEPTH = 2
#: Most factor/cancel/expand rewrites one top-level sign question may try before giving up
#: (bounds the running time; running out means undecided, never proved).
REWRITE_BUDGET = 60
#: Expressions with more operations than this are not rewritten (cancel/factor on them can take
#: minutes); they are decided by the structural rules or left undecided.
MAX_REWRITE_OPS = 250
_budget = [REWRITE_BUDGET]


def is_zero(expr: sympy.Expr) -> bool:
    """True when sympy reduces ``expr`` to exactly 0 (sums with equal limits are merged first)."""
    expr = sympy.sympify(expr)
    if expr == 0:
        return True
    if expr.has(sympy.Sum):
        return _sums_cancel(expr)
    for transform in (sympy.expand, lambda e: sympy.cancel(sympy.together(e)),
                      _rename_power_bases, sympy.simplify):
        try:
            if transform(expr) == 0:
                return True
        except Exception:  # noqa: BLE001 - a failing transform just does not help
            continue
    return False


def _rename_power_bases(expr: sympy.Expr) -> sympy.Expr:
    """Substitute ``x = solve(B = q, x)`` for a power base ``B`` that is linear in its single
    symbol ``x`` (e.g. ``1 - alpha = q``), so that ``B * B**n`` and ``B**(n+1)`` merge; expand."""
    bases = {p.base for p in expr.atoms(sympy.Pow)
             if isinstance(p.base, sympy.Add) and len(p.base.free_symbols) == 1}
    for base in sorted(bases, key=sympy.default_sort_key):
        (x,) = base.free_symbols
        q = sympy.Dummy("q", positive=True)  # q = 0 follows by continuity (polynomial in q)
        sol = sympy.solve(sympy.Eq(base, q), x)
        if len(sol) == 1:
            expr = sympy.expand(expr.subs(x, sol[0]))
    return sympy.expand(expr)


def _sums_cancel(expr: sympy.Expr) -> bool:
    """``sum_i c_i Sum(f_i, lim) + rest == 0`` if ``sum_i c_i f_i == 0`` and ``rest == 0`` (all
    sums over the same limits; the c_i do not depend on the summation index)."""
    summands: dict[tuple, sympy.Expr] = {}
    rest = sympy.Integer(0)
    for term in sympy.Add.make_args(sympy.expand(expr)):
        sums = [f for f in sympy.Mul.make_args(term) if isinstance(f, sympy.Sum)]
        if not sums:
            rest += term
            continue
        if len(sums) != 1 or len(sums[0].limits) != 1:
            return False
        s = sums[0]
        coeff = term / s
        if s.limits[0][0] in coeff.free_symbols:
            return False
        summands[s.limits[0]] = summands.get(s.limits[0], 0) + coeff * s.function
    if len(summands) != 1:
        return False
    (summand,) = summands.values()
    return is_zero(summand) and is_zero(rest)


def is_nonneg(expr) -> bool:
    """True only if ``expr >= 0`` is proved for all values allowed by the symbols' assumptions."""
    _reset()
    return _nonneg(sympy.sympify(expr), 0)


def is_pos(expr) -> bool:
    """True only if ``expr > 0`` is proved for all values allowed by the symbols' assumptions."""
    _reset()
    return _pos(sympy.sympify(expr), 0)


def _reset() -> None:
    """Fresh budget and caches per top-level question, so answers never depend on call order."""
    _budget[0] = REWRITE_BUDGET
    _nonneg.cache_clear()
    _pos.cache_clear()


@lru_cache(maxsize=20000)
def _nonneg(e: sympy.Expr, depth: int) -> bool:
    if e.is_nonnegative:
        return True
    if e.is_number:
        return False
    if depth > MAX_DEPTH or e.is_nonnegative is False:
        return False
    if _structural(e, depth, strict=False):
        return True
    return _rewrites(e, depth, strict=False)


@lru_cache(maxsize=20000)
def _pos(e: sympy.Expr, depth: int) -> bool:
    if e.is_positive:
        return True
    if e.is_number:
        return False
    if depth > MAX_DEPTH or e.is_nonnegative is False:
        return False
    if _structural(e, depth, strict=True):
        return True
    return _rewrites(e, depth, strict=True)


def _structural(e: sympy.Expr, depth: int, strict: bool) -> bool:
    d = depth + 1
    check = _pos if strict else _nonneg
    if isinstance(e, sympy.Add):
        terms = e.args
        if strict:
            if all(_nonneg(t, d) for t in terms) and any(_pos(t, d) for t in terms):
                return True
        elif all(_nonneg(t, d) for t in terms):
            return True
        return _log_compare(terms, d, strict)
    if isinstance(e, sympy.Mul):
        negatives = 0
        for f in e.args:
            sign = _factor_sign(f, d, strict)
            if sign is None:
                return False
            negatives += sign < 0
        return negatives % 2 == 0
    if isinstance(e, sympy.Pow):
        base, exponent = e.as_base_exp()
        if check(base, d) and exponent.is_real:
            return True
        if not strict and exponent.is_integer and exponent.is_even:
            return True
        return False
    if isinstance(e, sympy.exp):
        return bool(e.args[0].is_real)
    if isinstance(e, sympy.log):
        return _factor_sign(e, d, strict) == 1
    if isinstance(e, sympy.Abs):
        return not strict
    if isinstance(e, sympy.Min):
        return all(check(a, d) for a in e.args)
    if isinstance(e, sympy.Max):
        return any(check(a, d) for a in e.args)
    return False


def _factor_sign(f: sympy.Expr, depth: int, strict: bool) -> int | None:
    """+1 / -1 when ``f`` is proved (strictly, if ``strict``) positive / negative, else None.
    ``log(u)`` with ``u > 0`` has the sign of ``u - 1``."""
    check = _pos if strict else _nonneg
    if isinstance(f, sympy.log) and _pos(f.args[0], depth):
        u = f.args[0]
        if check(u - 1, depth):
            return 1
        if check(1 - u, depth):
            return -1
        return None
    if check(f, depth):
        return 1
    if check(-f, depth):
        return -1
    return None


def _log_of(x: sympy.Expr) -> sympy.Expr:
    """log(x) for x > 0 with powers and products of positive factors split out (sound: every
    factor is positive), but each remaining base kept whole: log(u**k) -> k log(u)."""
    if isinstance(x, sympy.Pow) and x.base.is_positive and x.exp.is_real:
        return x.exp * sympy.log(x.base)
    if isinstance(x, sympy.Mul) and all(f.is_positive for f in x.args):
        return sympy.Add(*[_log_of(f) for f in x.args])
    if isinstance(x, sympy.exp):
        return x.args[0]
    return sympy.log(x)


def _log_compare(terms, depth: int, strict: bool) -> bool:
    """``P - N`` with single positive terms P, N: decide via ``log P - log N`` or ``log(P/N)``."""
    if len(terms) != 2:
        return False
    a, b = terms
    for p, n in ((a, -b), (b, -a)):
        if _pos(p, depth) and _pos(n, depth):
            ratio = sympy.powsimp(sympy.cancel(p / n), force=True)
            for gap in (_log_of(p) - _log_of(n), _log_of(ratio)):
                if (_pos if strict else _nonneg)(gap, depth):
                    return True
    return False


def _rewrites(e: sympy.Expr, depth: int, strict: bool) -> bool:
    if depth > REWRITE_DEPTH or _budget[0] <= 0 or sympy.count_ops(e) > MAX_REWRITE_OPS:
        return False
    _budget[0] -= 1
    d = depth + 1
    check = _pos if strict else _nonneg
    num, den = sympy.fraction(sympy.cancel(sympy.together(e)))
    if den != 1:
        if (check(num, d) and _pos(den, d)) or (check(-num, d) and _pos(-den, d)):
            return True
    for form in (sympy.factor, sympy.expand):
        try:
            new = form(e)
        except Exception:  # noqa: BLE001
            continue
        if new != e and check(new, d):
            return True
    return False
