"""Sound (and deliberately incomplete) decision procedures for the algebraic proof steps.

An algebraic step of a proof is a list of :class:`Obligation` objects; each one is an identity
``lhs == rhs``, an inequality ``lhs <= rhs`` / ``lhs < rhs``, or a monotonicity argument. sympy
must *decide* each one; anything it cannot decide is reported as not proved, never as proved.

How an inequality ``rhs - lhs >= 0`` is decided (:func:`is_nonneg`):

1. Interval constraints become sign constraints by reparametrisation (``subs``), e.g.
   ``alpha in (0, 1]`` becomes ``alpha = 1/(1+a)`` with ``a >= 0`` (:func:`domain_substitutions`).
2. A recursive sign analysis (:mod:`theory.signs`) that only uses sound rules: sympy's own
   assumption system; a sum of nonnegative terms is nonnegative; a product's sign is the product of its factors' signs; a
   power of a nonnegative base, ``exp``, ``Abs`` and even powers are nonnegative;
   ``log(u) >= 0`` iff ``u >= 1``; ``P - N >= 0`` for positive single terms ``P``, ``N`` iff
   ``log P - log N >= 0`` (log is increasing).
3. The same analysis applied to ``factor``, ``cancel(together(.))`` (numerator over denominator)
   and ``expand`` forms of the expression.

Identities are decided by ``expand``/``cancel``/``simplify`` reaching exactly 0. Finite sums
``Sum(f, (j, lo, n + 1))`` are first peeled into ``Sum(f, (j, lo, n)) + f(n + 1)`` (the
definition of a finite sum, valid in sympy's Karr convention for every integer ``n``), which lets
sympy verify induction steps of unrolled recursions.

Vector identities use the commuting placeholders of :mod:`theory.symbols`; an obligation that
lists ``vectors`` is accepted only if every term is of degree <= 1 in them (a linear identity),
which makes the commutative check valid in any vector space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import sympy

from theory.domain import Domain
from theory.signs import is_nonneg, is_pos, is_zero

__all__ = [
    "Obligation",
    "Decision",
    "eq",
    "le",
    "lt",
    "increasing",
    "is_nonneg",
    "is_pos",
    "is_zero",
    "peel_sums",
    "domain_substitutions",
]


@dataclass(frozen=True)
class Decision:
    """Outcome of deciding one obligation."""

    proved: bool
    """True only when sympy decided the claim."""
    detail: str
    """How it was decided, or why not."""


@dataclass(frozen=True, kw_only=True)
class Obligation:
    """One claim sympy must decide: ``eq``/``le``/``lt`` relation or a monotonicity argument."""

    label: str
    """Short description of the claim (shown in reports)."""
    relation: str
    """``"eq"`` (lhs == rhs), ``"le"`` (lhs <= rhs), ``"lt"`` (lhs < rhs) or ``"increasing"``."""
    lhs: sympy.Expr
    """Left-hand side (for ``increasing``: the expression shown to be >= 0)."""
    rhs: sympy.Expr = sympy.Integer(0)
    """Right-hand side."""
    subs: tuple[tuple[sympy.Expr, sympy.Expr], ...] = ()
    """Substitutions applied in order before deciding (reparametrisations of the domain)."""
    vectors: tuple[sympy.Symbol, ...] = ()
    """Vector placeholders: the identity must be linear in them."""
    var: sympy.Symbol | None = None
    """``increasing`` only: the variable the argument runs over."""
    start: sympy.Expr | None = None
    """``increasing`` only: left end of the interval, where ``lhs >= 0`` is checked."""
    param: sympy.Expr | None = None
    """``increasing`` only: ``var`` as a function of a fresh nonnegative symbol covering the
    interval ``[start, end)``; the derivative's sign is decided there."""

    def __post_init__(self) -> None:
        if self.relation not in ("eq", "le", "lt", "increasing"):
            raise ValueError(f"Obligation.relation={self.relation!r} is not eq/le/lt/increasing")
        if self.relation == "increasing" and (
            self.var is None or self.start is None or self.param is None
        ):
            raise ValueError("an 'increasing' obligation needs var, start and param")

    def statement(self) -> str:
        """The claim as text."""
        if self.relation == "increasing":
            return (f"{sympy.sstr(self.lhs)} >= 0 for {self.var} >= {self.start} "
                    f"(value at start >= 0, derivative >= 0)")
        op = {"eq": "==", "le": "<=", "lt": "<"}[self.relation]
        return f"{sympy.sstr(self.lhs)} {op} {sympy.sstr(self.rhs)}"

    def _apply(self, expr: sympy.Expr) -> sympy.Expr:
        expr = peel_sums(sympy.sympify(expr))
        for old, new in self.subs:
            expr = expr.subs(old, new)
        return together_power_bases(expr)

    def decide(self) -> Decision:
        """Decide the claim (sound: ``proved`` is True only if the claim holds)."""
        try:
            return self._decide()
        except Exception as exc:  # a sympy failure is an undecided claim, never a proof
            return Decision(False, f"undecided: sympy raised {type(exc).__name__}: {exc}")

    def _decide(self) -> Decision:
        if self.relation == "increasing":
            expr = self._apply(self.lhs)
            at_start = expr.subs(self.var, self.start)
            if not (is_zero(at_start) or is_nonneg(at_start)):
                return Decision(False, f"undecided: value at start {sympy.sstr(at_start)} >= 0")
            deriv = sympy.diff(expr, self.var).subs(self.var, self.param)
            if not is_nonneg(deriv):
                return Decision(False, f"undecided: derivative {sympy.sstr(deriv)} >= 0")
            return Decision(True, "value at start >= 0 and derivative >= 0 on the interval")
        lhs, rhs = self._apply(self.lhs), self._apply(self.rhs)
        if self.vectors:
            for side in (lhs, rhs):
                if not _is_linear_in(side, self.vectors):
                    return Decision(False, "not linear in the vector placeholders")
        diff = rhs - lhs
        if self.relation == "eq":
            return Decision(True, "identity") if is_zero(diff) else Decision(
                False, f"undecided: {sympy.sstr(sympy.simplify(diff))} == 0")
        decided = is_pos(diff) if self.relation == "lt" else is_nonneg(diff)
        if decided:
            return Decision(True, "sign decided")
        return Decision(False, f"undecided: {sympy.sstr(diff)} {'>' if self.relation == 'lt' else '>='} 0")


def eq(label: str, lhs, rhs, *, subs=(), vectors=()) -> Obligation:
    """Obligation ``lhs == rhs``."""
    return Obligation(label=label, relation="eq", lhs=sympy.sympify(lhs), rhs=sympy.sympify(rhs),
                      subs=tuple(subs), vectors=tuple(vectors))


def le(label: str, lhs, rhs, *, subs=()) -> Obligation:
    """Obligation ``lhs <= rhs``."""
    return Obligation(label=label, relation="le", lhs=sympy.sympify(lhs), rhs=sympy.sympify(rhs),
                      subs=tuple(subs))


def lt(label: str, lhs, rhs, *, subs=()) -> Obligation:
    """Obligation ``lhs < rhs``."""
    return Obligation(label=label, relation="lt", lhs=sympy.sympify(lhs), rhs=sympy.sympify(rhs),
                      subs=tuple(subs))


def increasing(label: str, expr, var, start, param, *, subs=()) -> Obligation:
    """Obligation ``expr >= 0`` on ``[start, end)`` via ``expr(start) >= 0`` and ``expr' >= 0``
    (``param``: ``var`` as a function of a fresh nonnegative symbol covering the interval).
    ``expr`` must be differentiable on the interval (fundamental theorem of calculus)."""
    return Obligation(label=label, relation="increasing", lhs=sympy.sympify(expr), var=var,
                      start=sympy.sympify(start), param=sympy.sympify(param), subs=tuple(subs))


def _is_linear_in(expr: sympy.Expr, vectors: tuple[sympy.Symbol, ...]) -> bool:
    for term in sympy.Add.make_args(sympy.expand(expr)):
        free = term.free_symbols & set(vectors)
        if not free:
            continue
        try:
            if sympy.Poly(term, *vectors).total_degree() > 1:
                return False
        except sympy.PolynomialError:
            return False
    return True


def together_power_bases(expr: sympy.Expr) -> sympy.Expr:
    """Write sums that are bases of powers over a common denominator, e.g.
    ``(1 - 1/(a+1))**k -> (a/(a+1))**k`` (an identity), so sympy can merge and split powers."""
    return expr.replace(
        lambda e: isinstance(e, sympy.Pow) and isinstance(e.base, sympy.Add),
        lambda e: sympy.Pow(sympy.together(e.base), e.exp))


def peel_sums(expr: sympy.Expr) -> sympy.Expr:
    """Rewrite ``Sum(f, (j, lo, n + c))`` (integer ``c >= 1``) as ``Sum(f, (j, lo, n)) + f(n+1) +
    ... + f(n+c)`` (the definition of a finite sum)."""

    def peel(s: sympy.Sum) -> sympy.Expr:
        if len(s.limits) != 1:
            return s
        j, lo, hi = s.limits[0]
        const, rest = sympy.sympify(hi).as_coeff_Add()
        if not (const.is_Integer and const > 0) or rest == 0:
            return s
        out = sympy.Sum(s.function, (j, lo, rest))
        for i in range(1, int(const) + 1):
            out = out + s.function.subs(j, rest + i)
        return out

    return expr.replace(lambda e: isinstance(e, sympy.Sum), peel)


def domain_substitutions(
    domains: Mapping[str, Domain], symbols: Mapping[str, sympy.Symbol]
) -> list[tuple[sympy.Symbol, sympy.Expr]]:
    """Reparametrise bounded domains by fresh sign-constrained symbols.

    ``(0, 1]`` -> ``1/(1+t)``, ``t >= 0``; ``(0, 1)`` -> ``1/(1+t)``, ``t > 0``;
    ``[a, inf)`` with ``a > 0`` -> ``a + t``, ``t >= 0``; a single point -> its value. Domains whose
    sign is already carried by the symbol's assumptions (``(0, inf)``, ``[0, inf)``, integers
    ``>= 0`` or ``>= 1``) need nothing. Other shapes are left alone, which can only make sympy
    decide less, never wrongly.
    """
    out = []
    for name, dom in domains.items():
        sym = symbols[name]
        if dom.fixed_value is not None:
            out.append((sym, sympy.nsimplify(dom.fixed_value)))
        elif dom.lower == 0 and dom.lower_open and dom.upper == 1 and not dom.integer:
            t = (sympy.Symbol(f"{name}_t", positive=True) if dom.upper_open
                 else sympy.Symbol(f"{name}_t", nonnegative=True))
            out.append((sym, 1 / (1 + t)))
        elif dom.lower > 0 and dom.upper == math.inf and not dom.integer and not dom.lower_open:
            t = sympy.Symbol(f"{name}_t", nonnegative=True)
            out.append((sym, sympy.nsimplify(dom.lower) + t))
    return out
