"""PL sharpening: the deterministic loss floor of delayed LMO momentum and the delay gap.

Markdown proof: ``proofs_md/pl_delay_gap.md``.

Algorithm: deterministic (sigma = 0) tau-delayed LMO momentum without weight decay (beta = 0):
``m_0 = grad f(y_0)``, ``m_k = (1-alpha) m_{k-1} + alpha grad f(y_k)``, ``x_{k+1} = x_k + eta d_k``,
``y_k = x_{max(k-tau,0)}``.

Assumptions: A2 (L-smooth in the norm) and PL in the dual norm, ``0.5 ||grad f||_*^2 >= mu (f - f*)``.

Guarantee: with ``E = L eta ((1-alpha)/alpha + tau)`` (the momentum error at sigma = 0, valid for
every k since e_0 = 0), ``c = 2 eta E + L eta^2/2`` and ``t = (2E + L eta/2)^2/(2 mu)``:
``r_{k+1} <= r_k - eta sqrt(2 mu r_k) + c``, hence ``r_k <= max(r0, t + c)`` for every k and
``limsup_k r_k <= t + c = (2E + L eta/2)^2/(2 mu) + 2 eta E + L eta^2/2`` (the encoded bound).

Delay gap: ``floor(tau) - floor(0) = 2 L^2 eta^2 tau (tau + 2(1-alpha)/alpha + 1/2)/mu
+ 2 L eta^2 tau`` exactly (extra ``gap``); its leading term ``2 L^2 eta^2 tau (tau +
2(1-alpha)/alpha + 1/2)/mu`` (extra ``gap_leading``) is THEORY.md's gap law: quadratic in eta,
linear in tau for tau << 1/alpha, quadratic beyond. Both are differences of upper bounds, not a
bound on the gap between two runs.

Tuned: for a target floor eps, ``eta = sqrt(eps/(2 C))`` with ``floor = eta^2 C`` gives floor = eps/2.
There is no iteration count (the bound is a limsup).
"""

from __future__ import annotations

import sympy

from theory.decide import eq, le, lt
from theory.domain import NONNEGATIVE_INTEGER, POSITIVE, UNIT_HALF_OPEN
from theory.proof import Proof, Step
from theory.symbols import L, alpha, eps, eta, mu, tau
from theory.theorem import Theorem
from theory.tuning import Tuning

__all__ = ["PL_DELAY_GAP", "pl_floor", "momentum_error_deterministic"]

MODULE = "theory/pl_gap.py"


def momentum_error_deterministic(delay=tau) -> sympy.Expr:
    """E = L eta ((1-alpha)/alpha + delay)."""
    return L * eta * ((1 - alpha) / alpha + delay)


def pl_floor(delay=tau) -> sympy.Expr:
    """(2E + L eta/2)^2/(2 mu) + 2 eta E + L eta^2/2."""
    e = momentum_error_deterministic(delay)
    return (2 * e + L * eta / 2) ** 2 / (2 * mu) + 2 * eta * e + L * eta ** 2 / 2


_GAP = pl_floor(tau) - pl_floor(0)
_LEADING = 2 * L ** 2 * eta ** 2 * tau * (tau + 2 * (1 - alpha) / alpha + sympy.Rational(1, 2)) / mu
_A_COEF = (1 - alpha) / alpha + tau
_C_COEF = (2 * L * _A_COEF + L / 2) ** 2 / (2 * mu) + 2 * L * _A_COEF + L / 2  # floor = eta^2 C


def _steps() -> tuple[Step, ...]:
    r, g_gap, u = sympy.symbols("r g u", nonnegative=True)
    big_r, big_t = sympy.symbols("R T", nonnegative=True)
    t_pos = sympy.Symbol("T_p", positive=True)
    e = momentum_error_deterministic()
    c = 2 * eta * e + L * eta ** 2 / 2
    t = (2 * e + L * eta / 2) ** 2 / (2 * mu)
    speed = eta * sympy.sqrt(2 * mu)
    return (
        Step(id="S1", kind="analytic",
             claim="f(x_{k+1}) <= f(x_k) - eta ||grad f(x_k)||_* + 2 eta ||e_k||_* + L eta^2/2",
             justification="nonconvex_delayed S1-S3 (A2, LMO optimality, Hoelder)",
             predicate="nonconvex_one_step"),
        Step(id="S2", kind="analytic",
             claim="||e_k||_* <= E = L eta ((1-alpha)/alpha + tau) for every k (sigma = 0, e_0 = 0)",
             justification="momentum_error lemma at sigma = 0 (pathwise), s = 1, omega_bar = tau",
             predicate="momentum_error_lemma", options={"sigma_zero": True, "weight_decay": False}),
        Step(id="S3", kind="analytic", claim="||grad f(x)||_* >= sqrt(2 mu (f(x) - f*))",
             justification="PL assumption in the dual norm", predicate="pl_inequality"),
        Step(id="S4", kind="algebra",
             claim="r_{k+1} <= r_k - eta sqrt(2 mu r_k) + c, c = 2 eta E + L eta^2/2",
             justification="algebra (S1 with S2 and S3)",
             obligations=(le("PL in the descent", r - eta * (sympy.sqrt(2 * mu * r) + g_gap) + c,
                             r - eta * sympy.sqrt(2 * mu * r) + c),)),
        Step(id="S5", kind="algebra",
             claim="t = (2E + L eta/2)^2/(2 mu) solves eta sqrt(2 mu t) = c",
             justification="algebra (2E + L eta/2 > 0)",
             obligations=(eq("fixed point", eta * sympy.sqrt(2 * mu * t), c,
                             subs=((alpha, 1 / (1 + sympy.Symbol("a", nonnegative=True))),)),)),
        Step(id="S6", kind="algebra",
             claim="r_k <= max(r0, t + c) for all k: the map r -> r - eta sqrt(2 mu r) + c sends "
                   "[t, M] into [0, M] and [0, t] into [0, t + c]",
             justification="algebra (r = R^2, t = T^2, c = eta sqrt(2 mu) T; induction on k)",
             obligations=(
                 le("R >= T: no increase", big_r ** 2 - speed * big_r + speed * big_t, big_r ** 2,
                    subs=((big_r, big_t + u),)),
                 le("R <= T: below t + c", big_r ** 2 - speed * big_r + speed * big_t,
                    big_t ** 2 + speed * big_t, subs=((big_t, big_r + u),)))),
        Step(id="S7", kind="algebra",
             claim="above t + c the gap falls by at least eta sqrt(2 mu (t + c)) - c > 0 per step, "
                   "so r_k enters [0, t + c] after finitely many steps and stays (S6)",
             justification="algebra (T > 0 because L eta > 0)",
             obligations=(lt("strict decrease, squared (both sides > 0)", (speed * t_pos) ** 2,
                             eta ** 2 * 2 * mu * (t_pos ** 2 + speed * t_pos)),
                          lt("T > 0", 0, 2 * e + L * eta / 2,
                             subs=((alpha, 1 / (1 + sympy.Symbol("a", nonnegative=True))),)))),
        Step(id="S8", kind="algebra", claim="limsup r_k <= t + c = the stated floor",
             justification="algebra", obligations=(eq("floor", t + c, pl_floor()),)),
        Step(id="S9", kind="algebra",
             claim="floor(tau) - floor(0) = 2 L^2 eta^2 tau (tau + 2(1-alpha)/alpha + 1/2)/mu "
                   "+ 2 L eta^2 tau >= the leading term",
             justification="algebra",
             obligations=(eq("gap", _GAP, _LEADING + 2 * L * eta ** 2 * tau),
                          le("leading <= gap", _LEADING, _GAP))),
        Step(id="S10", kind="analytic",
             claim="r_k <= max(r0, t + c) along deterministic delayed runs on PL quadratics",
             justification="end-to-end check of S1-S6", predicate="pl_invariant"),
        Step(id="S11", kind="algebra",
             claim="floor = eta^2 C, so eta = sqrt(eps/(2 C)) gives floor = eps/2 <= eps",
             justification="algebra",
             obligations=(eq("floor is quadratic in eta", pl_floor(), eta ** 2 * _C_COEF),
                          le("tuned floor", pl_floor().subs(eta, sympy.sqrt(eps / (2 * _C_COEF))),
                             eps))),
    )


PL_DELAY_GAP = Theorem(
    name="pl_delay_gap",
    title="PL floor of deterministic delayed LMO momentum and the delay gap",
    statement=("Deterministic tau-delayed LMO momentum (beta = 0, sigma = 0) on an L-smooth f with "
               "0.5 ||grad f||_*^2 >= mu (f - f*): with E = L eta ((1-alpha)/alpha + tau), "
               "limsup_k f(x_k) - f* <= (2E + L eta/2)^2/(2 mu) + 2 eta E + L eta^2/2, and "
               "f(x_k) - f* <= max(r0, that floor) for every k. The delay gap floor(tau) - "
               "floor(0) = 2 L^2 eta^2 tau (tau + 2(1-alpha)/alpha + 1/2)/mu + 2 L eta^2 tau."),
    assumptions=("A2 ||grad f(x) - grad f(y)||_* <= L ||x - y||",
                 "PL: 0.5 ||grad f(x)||_*^2 >= mu (f(x) - f*)",
                 "exact gradients (sigma = 0), no weight decay (beta = 0)"),
    parameters={"L": L, "eta": eta, "alpha": alpha, "tau": tau, "mu": mu},
    domains={"L": POSITIVE, "eta": POSITIVE, "alpha": UNIT_HALF_OPEN,
             "tau": NONNEGATIVE_INTEGER, "mu": POSITIVE},
    bound=pl_floor(),
    lhs_latex=r"\lim\sup_{k} f(x_k) - f^\star",
    extras={"gap": _GAP, "gap_leading": _LEADING, "floor_sync": pl_floor(0),
            "momentum_error": momentum_error_deterministic()},
    proof=Proof(theorem="pl_delay_gap", steps=_steps()),
    module=MODULE,
    proof_md="proofs_md/pl_delay_gap.md",
    tuning=Tuning(problem={"L": POSITIVE, "alpha": UNIT_HALF_OPEN, "tau": NONNEGATIVE_INTEGER,
                           "mu": POSITIVE},
                  choices={"eta": sympy.sqrt(eps / (2 * _C_COEF))}, K_expr=None,
                  description="eta = sqrt(eps/(2 C)) with floor = eta^2 C: floor = eps/2"),
    reference="THEORY.md result 6",
)
