"""The :class:`Theorem` object: a bound as a sympy expression with validated evaluation.

A theorem has a name, a statement, its assumptions, its parameters (name -> sympy symbol of
:mod:`theory.symbols`) with their :class:`~theory.domain.Domain`, side conditions coupling several
parameters (e.g. ``2 beta lam < 1``), the bound, its encoded :class:`~theory.proof.Proof` and the
paths of its module and markdown proof.

- ``evaluate(**values)`` validates every value (unknown/missing names, non-numbers -> TypeError;
  NaN/inf, out of domain, failed condition -> ValueError naming parameter, value and domain) and
  returns the bound as a float. Parameters with a single-point domain (``tau = 1`` of the EF
  theorems) may be omitted.
- ``latex()`` is the statement's inequality in LaTeX (it renders with matplotlib's mathtext).
- ``trend(symbol)`` is the sign of the partial derivative of the bound, decided by sympy over the
  declared domains: ``+1`` (nondecreasing, not constant), ``-1`` (nonincreasing, not constant),
  ``0`` (the bound does not depend on it); ``ValueError`` when sympy cannot decide (never a guess).
  Integer parameters are treated through their real relaxation.
- ``tuned``/``complexity``: see :mod:`theory.tuning`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping

import sympy

from theory.decide import domain_substitutions, is_nonneg, is_zero
from theory.domain import Domain
from theory.numeric import compile_expr
from theory.proof import Proof
from theory.symbols import LATEX_NAMES
from theory.tuning import Tuning, complexity as _complexity, tuned as _tuned

__all__ = ["Theorem", "Condition"]


@dataclass(frozen=True, kw_only=True)
class Condition:
    """A side condition ``lhs <= rhs`` (or ``<`` when ``strict``) a theorem needs."""

    lhs: sympy.Expr
    """Left-hand side in the theorem's symbols."""
    rhs: sympy.Expr
    """Right-hand side."""
    strict: bool
    """True for ``<``."""
    description: str
    """What the condition is, in words."""
    reparam: tuple[tuple[sympy.Symbol, sympy.Expr], ...] = ()
    """Substitutions parametrising exactly the set where the condition holds (in fresh
    nonnegative symbols); ``trend`` decides signs on that set."""

    def text(self) -> str:
        return f"{sympy.sstr(self.lhs)} {'<' if self.strict else '<='} {sympy.sstr(self.rhs)}"


@dataclass(frozen=True, kw_only=True)
class Theorem:
    """A convergence bound with its assumptions, domains and encoded proof."""

    name: str
    """Registry name (``theory.THEOREMS`` key)."""
    title: str
    """One-line title."""
    statement: str
    """The guarantee in words and formulas (plain text)."""
    assumptions: tuple[str, ...]
    """The assumptions used (A1-A5 of THEORY.md and algorithm conventions)."""
    parameters: Mapping[str, sympy.Symbol]
    """Parameter name -> sympy symbol, in display order."""
    domains: Mapping[str, Domain]
    """Parameter name -> allowed domain."""
    bound: sympy.Expr
    """The right-hand side of the guarantee."""
    lhs_latex: str
    """LaTeX of the guaranteed quantity (left-hand side)."""
    proof: Proof
    """The encoded proof (same step ids as ``proof_md``)."""
    module: str
    """Path of the theory module, e.g. ``theory/star_convex.py``."""
    proof_md: str
    """Path of the markdown proof, e.g. ``proofs_md/star_convex_delayed.md``."""
    conditions: tuple[Condition, ...] = ()
    """Side conditions coupling parameters (checked by ``evaluate``)."""
    extras: Mapping[str, sympy.Expr] = field(default_factory=dict)
    """Named side quantities (radius, gap, ...) in the same parameters."""
    tuning: Tuning | None = None
    """Tuned corollary (None: ``tuned``/``complexity`` raise ValueError)."""
    reference: str = ""
    """Where the statement comes from / what it recovers."""

    def __post_init__(self) -> None:
        if set(self.parameters) != set(self.domains):
            raise ValueError(f"{self.name}: parameters and domains must have the same names")
        free = {s.name for s in self.bound.free_symbols}
        unknown = free - set(self.parameters)
        if unknown:
            raise ValueError(f"{self.name}: bound uses symbols {sorted(unknown)} not in parameters")
        if self.proof.theorem != self.name:
            raise ValueError(f"{self.name}: proof is for {self.proof.theorem!r}")

    # ---------------------------------------------------------------- validation and evaluation
    def validate(self, values: Mapping[str, object]) -> dict[str, float | int]:
        """Validate a full set of parameter values; returns them as floats/ints."""
        unknown = sorted(set(values) - set(self.parameters))
        if unknown:
            raise TypeError(f"{self.name}: unexpected parameter(s) {unknown}; "
                            f"parameters: {list(self.parameters)}")
        missing = [n for n in self.parameters
                   if n not in values and self.domains[n].fixed_value is None]
        if missing:
            raise TypeError(f"{self.name}: missing parameter(s) {missing}; "
                            f"parameters: {list(self.parameters)}")
        clean = {n: self.domains[n].validate(n, values.get(n, self.domains[n].fixed_value))
                 for n in self.parameters}
        failed = self.failed_conditions(clean)
        if failed:
            raise ValueError(f"{self.name}: {failed[0]}")
        return clean

    def failed_conditions(self, clean: Mapping[str, float | int]) -> list[str]:
        """Messages for the side conditions that ``clean`` (validated values) violates."""
        out = []
        for cond in self.conditions:
            lhs = self._numeric(cond.lhs, clean)
            rhs = self._numeric(cond.rhs, clean)
            ok = lhs < rhs if cond.strict else lhs <= rhs
            if not ok:
                out.append(f"condition {cond.text()} ({cond.description}) fails: "
                           f"{lhs!r} {'>=' if cond.strict else '>'} {rhs!r} at "
                           + ", ".join(f"{n}={clean[n]!r}" for n in self.parameters))
        return out

    def evaluate(self, **values: object) -> float:
        """The bound at validated parameter values (see the module docstring)."""
        clean = self.validate(values)
        result = self._numeric(self.bound, clean)
        if not math.isfinite(result):
            raise ValueError(f"{self.name}: bound is not finite ({result}) at {clean}")
        return result

    def evaluate_extra(self, name: str, **values: object) -> float:
        """A named side quantity (``extras``) at validated parameter values."""
        if name not in self.extras:
            raise ValueError(f"{self.name}: no extra {name!r}; extras: {sorted(self.extras)}")
        return self._numeric(self.extras[name], self.validate(values))

    @cached_property
    def _lambdas(self) -> dict:
        return {}

    def _numeric(self, expr: sympy.Expr, clean: Mapping[str, float | int]) -> float:
        key = sympy.srepr(expr)
        fn = self._lambdas.get(key)
        if fn is None:
            fn = compile_expr(list(self.parameters.values()), expr)
            self._lambdas[key] = fn
        try:
            return float(fn(*[clean[n] for n in self.parameters]))
        except (ZeroDivisionError, OverflowError, ValueError) as exc:
            raise ValueError(f"{self.name}: cannot evaluate {sympy.sstr(expr)} at {dict(clean)}: "
                             f"{exc}") from None

    # ---------------------------------------------------------------------------- rendering
    def latex(self) -> str:
        """``lhs \\leq bound`` in LaTeX (renders with matplotlib mathtext)."""
        return f"{self.lhs_latex} \\leq {sympy.latex(self.bound, symbol_names=LATEX_NAMES)}"

    def parameter_table(self) -> list[dict]:
        """Parameters with their domains (for ``show``)."""
        return [{"name": n, "domain": self.domains[n].describe()} for n in self.parameters]

    # ------------------------------------------------------------------------------ corollaries
    def tuned(self, K: object = None, eps: object = None, **problem: object) -> dict:
        """Tuned parameters and the resulting bound (:func:`theory.tuning.tuned`)."""
        return _tuned(self, K=K, eps=eps, **problem)

    def complexity(self, eps: object, **problem: object) -> dict:
        """Iteration count making the tuned bound <= eps (:func:`theory.tuning.complexity`)."""
        return _complexity(self, eps, **problem)

    # ------------------------------------------------------------------------------------ trend
    def trend(self, symbol: str | sympy.Symbol) -> int:
        """Sign of d bound / d symbol over the declared domains (+1, -1 or 0; see module doc)."""
        name = symbol.name if isinstance(symbol, sympy.Symbol) else symbol
        if not isinstance(name, str) or name not in self.parameters:
            raise ValueError(f"{self.name}: trend({symbol!r}): not a parameter; "
                             f"parameters: {list(self.parameters)}")
        if self.domains[name].fixed_value is not None:
            raise ValueError(f"{self.name}: {name} is fixed at {self.domains[name].describe()}; "
                             "the bound has no trend in it")
        sym = self.parameters[name]
        deriv = sympy.diff(self.bound, sym)
        nonzero = self._nonzero_somewhere(deriv)
        if not nonzero and is_zero(deriv):
            return 0
        subs = [pair for cond in self.conditions for pair in cond.reparam]
        subs += domain_substitutions(self.domains, self.parameters)
        reparam = deriv
        for old, new in subs:
            reparam = reparam.subs(old, new)
        if nonzero and is_nonneg(reparam):
            return 1
        if nonzero and is_nonneg(-reparam):
            return -1
        raise ValueError(f"{self.name}: cannot decide the sign of d bound/d {name} = "
                         f"{sympy.sstr(deriv)} over the declared domains")

    def _nonzero_somewhere(self, deriv: sympy.Expr) -> bool:
        rng = random.Random(0)
        for _ in range(20):
            point = {}
            for n, dom in self.domains.items():
                lo = dom.lower if math.isfinite(dom.lower) else 0.0
                hi = dom.upper if math.isfinite(dom.upper) else lo + 10.0
                v = dom.fixed_value if dom.fixed_value is not None else (
                    rng.randint(int(math.ceil(lo)) + 1, int(hi)) if dom.integer
                    else lo + (hi - lo) * rng.uniform(0.05, 0.95))
                point[self.parameters[n]] = sympy.Rational(round(float(v) * 1000), 1000)
            value = deriv.subs(point)
            if value.is_number and value != 0:
                return True
        return False
