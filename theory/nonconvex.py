"""Nonconvex rate of tau-delayed LMO momentum (no weight decay).

Markdown proof: ``proofs_md/nonconvex_delayed.md``.

Algorithm: ``m_0 = g(y_0)``, ``m_k = (1-alpha) m_{k-1} + alpha g(y_k)``, ``d_k = LMO(m_k)``,
``x_{k+1} = x_k + eta d_k`` (beta = 0), ``y_k = x_{max(k-tau,0)}``.

Assumptions: A1, A2, A3; ``Delta0 = f(x_0) - inf f``.

Guarantee: ``(1/K) sum_{k<K} E||grad f(x_k)||_* <= Delta0/(eta K) + 2 rho sigma/(alpha K)
+ 2 sqrt(alpha) rho sigma + L eta/2 + 2 L eta ((1-alpha)/alpha + tau)``.

Tuned: ``alpha = min(1, eps^2/(64 rho^2 sigma^2))``, ``eta = eps/(8 L (1/alpha + tau))``,
``K >= max(4 Delta0/(eta eps), 8 rho sigma/(alpha eps))``: each of the four groups of terms is
<= eps/4. Complexity ``K = O(L Delta0 (1+tau)/eps^2 + L Delta0 rho^2 sigma^2/eps^4
+ rho^3 sigma^3/eps^3)`` (the last term, from the initial momentum error 2 rho sigma/(alpha K),
is missing from THEORY.md's O-statement).

Kovalev (2025, "Understanding Gradient Orthogonalization for Deep Learning via Non-Euclidean
Trust-Region Optimization", Theorem 2) bounds the same quantity for tau = 0 by a sum of the four
terms ``Delta0/(eta K)``, ``rho sigma/(alpha K)``, ``sqrt(alpha) rho sigma`` and ``L eta/alpha``
with numerical constants, with the parameter choice ``alpha = O(min(1, eps^2/(rho^2 sigma^2)))``
(his eq. 17). At tau = 0 our bound is exactly ``Delta0/(eta K) + 2 rho sigma/(alpha K)
+ 2 sqrt(alpha) rho sigma + 2 L eta/alpha - 3 L eta/2`` (:data:`KOVALEV_CONSTANTS`: constants 1,
2, 2, 2 on the four terms, and a negative remainder), i.e. the same form up to the documented
constants. Kovalev's exact constants could not be retrieved offline; the test compares forms.
"""

from __future__ import annotations

import sympy

from theory.decide import eq, le
from theory.domain import (AT_LEAST_ONE, NONNEGATIVE, NONNEGATIVE_INTEGER, POSITIVE,
                           POSITIVE_INTEGER, UNIT_HALF_OPEN, Domain)
from theory.lemmas import A_T
from theory.proof import Proof, Step
from theory.symbols import K, L, Delta0, alpha, eps, eta, k, rho, sigma, tau
from theory.theorem import Theorem
from theory.tuning import Tuning

__all__ = ["NONCONVEX_DELAYED", "nonconvex_bound", "nonconvex_tail_steps", "nonconvex_tuning",
           "KOVALEV_TERMS", "KOVALEV_CONSTANTS", "KOVALEV_REMAINDER"]

MODULE = "theory/nonconvex.py"

#: The four terms of Kovalev (2025) Theorem 2's form (tau = 0), and our constants on them.
KOVALEV_TERMS = (Delta0 / (eta * K), rho * sigma / (alpha * K), sympy.sqrt(alpha) * rho * sigma,
                 L * eta / alpha)
KOVALEV_CONSTANTS = (1, 2, 2, 2)
#: Our tau = 0 bound minus sum(constant * term): a negative multiple of L eta.
KOVALEV_REMAINDER = -sympy.Rational(3, 2) * L * eta

_G, _E, _F = sympy.symbols("G E_norm f_k", nonnegative=True)
_J, _H, _E_T, _A2 = sympy.symbols("J h e a2", nonnegative=True)
_KAPPA = sympy.Symbol("kappa", positive=True)
_FINF, _GAP = sympy.Symbol("f_inf"), sympy.Symbol("g", nonnegative=True)


def nonconvex_bound(delay=tau) -> sympy.Expr:
    """Delta0/(eta K) + 2 rho sigma/(alpha K) + 2 sqrt(alpha) rho sigma + L eta/2
    + 2 L eta ((1-alpha)/alpha + delay)."""
    return (Delta0 / (eta * K) + 2 * rho * sigma / (alpha * K)
            + 2 * sympy.sqrt(alpha) * rho * sigma + L * eta / 2
            + 2 * L * eta * ((1 - alpha) / alpha + delay))


def nonconvex_tail_steps(first_id: int, delay, delay_name: str) -> tuple[Step, ...]:
    """Algebra steps shared with the EF theorem: telescoping, the momentum-weight sum, the
    average, and the tuned corollary (``delay`` is tau or omega_bar)."""
    fseq = sympy.Function("f")
    j = sympy.Symbol("j", integer=True)
    a_sub = ((alpha, 1 / (1 + A_T)),)
    geo = lambda n: (1 - (1 - alpha) ** n) / alpha  # noqa: E731  sum_{i<n} (1-alpha)^i
    b_const = sympy.sqrt(alpha) * rho * sigma + L * eta * ((1 - alpha) / alpha + delay)
    average = (Delta0 + 2 * eta * (rho * sigma * _J + K * b_const) + K * L * eta ** 2 / 2) / (
        eta * K)
    bound = nonconvex_bound(delay)
    t1, t2 = Delta0 / (eta * K), 2 * rho * sigma / (alpha * K)
    t3 = 2 * sympy.sqrt(alpha) * rho * sigma
    t4 = L * eta / 2 + 2 * L * eta * ((1 - alpha) / alpha + delay)
    sig = sympy.Symbol("sigma_p", positive=True)
    return (
        Step(id=f"S{first_id}", kind="algebra",
             claim="sum_{k<K} (f(x_k) - f(x_{k+1})) = f(x_0) - f(x_K) <= Delta0",
             justification="algebra (telescoping by induction; f(x_K) >= inf f)",
             obligations=(
                 eq("telescoping step",
                    sympy.Sum(fseq(j) - fseq(j + 1), (j, 0, k + 1)),
                    sympy.Sum(fseq(j) - fseq(j + 1), (j, 0, k)) + fseq(k + 1) - fseq(k + 2)),
                 eq("telescoping closed form",
                    sympy.Sum(fseq(j) - fseq(j + 1), (j, 0, k - 1)).doit(), fseq(0) - fseq(k)),
                 le("f(x_0) - f(x_K) <= Delta0", fseq(0) - fseq(K), Delta0,
                    subs=((fseq(0), _FINF + Delta0), (fseq(K), _FINF + _GAP))))),
        Step(id=f"S{first_id + 1}", kind="algebra",
             claim="sum_{k<K} (1-alpha)^k = (1-(1-alpha)^K)/alpha <= 1/alpha",
             justification="algebra (geometric sum by induction)",
             obligations=(eq("base", geo(0), 0),
                          eq("step", geo(k + 1), geo(k) + (1 - alpha) ** k),
                          le("bound", geo(k), 1 / alpha, subs=a_sub))),
        Step(id=f"S{first_id + 2}", kind="algebra",
             claim=f"(Delta0 + 2 eta sum_k E||e_k||_* + K L eta^2/2)/(eta K) <= the bound "
                   f"(E||e_k||_* <= (1-alpha)^k rho sigma + sqrt(alpha) rho sigma "
                   f"+ L eta ((1-alpha)/alpha + {delay_name}))",
             justification="algebra (sum of the one-step inequalities divided by eta K)",
             obligations=(
                 eq("average with J = 1/alpha - h", average,
                    bound - 2 * rho * sigma * _H / K, subs=((_J, 1 / alpha - _H),)),
                 le("drop h >= 0", bound - 2 * rho * sigma * _H / K, bound))),
        Step(id=f"S{first_id + 3}", kind="algebra",
             claim="tuned alpha, eta and K make each group of terms <= eps/4",
             justification="algebra (each choice is below each argument of its min/max)",
             obligations=(
                 eq("the four groups", t1 + t2 + t3 + t4, bound),
                 le("Delta0/(eta K) <= eps/4", t1, eps / 4,
                    subs=((K, 4 * Delta0 / (eta * eps) + _KAPPA),)),
                 le("2 rho sigma/(alpha K) <= eps/4", t2, eps / 4,
                    subs=((K, 8 * rho * sigma / (alpha * eps) + _KAPPA),)),
                 le("2 sqrt(alpha) rho sigma <= eps/4", t3, eps / 4,
                    subs=((alpha, eps ** 2 / (64 * rho ** 2 * sig ** 2 * (1 + _A2) ** 2)),
                          (sigma, sig))),
                 le("2 sqrt(alpha) rho sigma <= eps/4 (sigma = 0)", t3, eps / 4,
                    subs=((sigma, 0),)),
                 le(f"L eta terms <= eps/4 (eta <= eps/(8 L (1/alpha + {delay_name})))", t4,
                    eps / 4, subs=((eta, eps / (8 * L * (1 / alpha + delay) * (1 + _E_T))),)
                    + a_sub))),
    )


def nonconvex_tuning(delay, problem: dict[str, Domain]) -> Tuning:
    """alpha = min(1, eps^2/(64 rho^2 sigma^2)), eta = eps/(8 L (1/alpha + delay)),
    K = max(4 Delta0/(eta eps), 8 rho sigma/(alpha eps))."""
    # min(1, eps^2/(64 rho^2 sigma^2)) with the branch condition multiplied out (no division by
    # an underflowed 0)
    alpha_c = sympy.Piecewise((1, 8 * rho * sigma <= eps), ((eps / (8 * rho * sigma)) ** 2, True))
    eta_c = eps / (8 * L * (1 / alpha_c + delay))
    k_expr = sympy.Max(4 * Delta0 / (eta_c * eps), 8 * rho * sigma / (alpha_c * eps))
    name = sympy.sstr(delay)
    return Tuning(
        problem=problem, choices={"alpha": alpha_c, "eta": eta_c}, K_expr=k_expr,
        description=(f"alpha = min(1, eps^2/(64 rho^2 sigma^2)), eta = eps/(8 L (1/alpha + {name})),"
                     f" K = max(4 Delta0/(eta eps), 8 rho sigma/(alpha eps)) = O(L Delta0 "
                     f"(1+{name})/eps^2 + L Delta0 rho^2 sigma^2/eps^4 + rho^3 sigma^3/eps^3)"))


def _steps() -> tuple[Step, ...]:
    return (
        Step(id="S1", kind="analytic",
             claim="f(x_{k+1}) <= f(x_k) + eta <grad f(x_k), d_k> + L eta^2/2",
             justification="A2 (smoothness upper bound), ||d_k|| <= 1", predicate="smoothness_upper"),
        Step(id="S2", kind="analytic",
             claim="<grad f(x_k), d_k> <= -||grad f(x_k)||_* + 2 ||e_k||_*, e_k = m_k - grad f(x_k)",
             justification="LMO optimality <m_k, d_k> = -||m_k||_*, Hoelder, triangle inequality",
             predicate="lmo_descent"),
        Step(id="S3", kind="algebra",
             claim="f(x_{k+1}) <= f(x_k) - eta ||grad f(x_k)||_* + 2 eta ||e_k||_* + L eta^2/2",
             justification="algebra (S1 with S2)",
             obligations=(eq("combine", _F + eta * (-_G + 2 * _E) + L * eta ** 2 / 2,
                             _F - eta * _G + 2 * eta * _E + L * eta ** 2 / 2),)),
        Step(id="S4", kind="analytic", claim="the one-step inequality S3 on concrete instances",
             justification="end-to-end check of S1-S3", predicate="nonconvex_one_step"),
        Step(id="S5", kind="analytic",
             claim="E||e_k||_* <= (1-alpha)^k rho sigma + sqrt(alpha) rho sigma "
                   "+ L eta ((1-alpha)/alpha + tau)",
             justification="momentum_error lemma with s = 1, omega_bar = tau",
             predicate="momentum_error_lemma", options={"weight_decay": False}),
        *nonconvex_tail_steps(6, tau, "tau"),
        Step(id="S10", kind="algebra",
             claim="d bound/d tau = 2 L eta; at tau = 0 the bound is Delta0/(eta K) + 2 rho sigma/"
                   "(alpha K) + 2 sqrt(alpha) rho sigma + 2 L eta/alpha - 3 L eta/2 (Kovalev's form)",
             justification="algebra",
             obligations=(eq("slope in tau", sympy.diff(nonconvex_bound(tau), tau), 2 * L * eta),
                          eq("tau = 0 form", nonconvex_bound(0),
                             sum(c * t for c, t in zip(KOVALEV_CONSTANTS, KOVALEV_TERMS))
                             + KOVALEV_REMAINDER))),
    )


NONCONVEX_DELAYED = Theorem(
    name="nonconvex_delayed",
    title="Nonconvex rate of tau-delayed LMO momentum (no weight decay)",
    statement=("For tau-delayed LMO momentum without weight decay (x_{k+1} = x_k + eta d_k, "
               "y_k = x_{max(k-tau,0)}): (1/K) sum_{k<K} E||grad f(x_k)||_* <= Delta0/(eta K) + "
               "2 rho sigma/(alpha K) + 2 sqrt(alpha) rho sigma + L eta/2 + "
               "2 L eta ((1-alpha)/alpha + tau)."),
    assumptions=("A1 unbiased gradients, E||g - grad f||_2^2 <= sigma^2 (martingale noise)",
                 "A2 ||grad f(x) - grad f(y)||_* <= L ||x - y||",
                 "A3 ||g||_* <= rho ||g||_2",
                 "Delta0 = f(x_0) - inf f"),
    parameters={"K": K, "L": L, "eta": eta, "alpha": alpha, "sigma": sigma, "rho": rho,
                "tau": tau, "Delta0": Delta0},
    domains={"K": POSITIVE_INTEGER, "L": POSITIVE, "eta": POSITIVE, "alpha": UNIT_HALF_OPEN,
             "sigma": NONNEGATIVE, "rho": AT_LEAST_ONE, "tau": NONNEGATIVE_INTEGER,
             "Delta0": NONNEGATIVE},
    bound=nonconvex_bound(tau),
    lhs_latex=r"\frac{1}{K}\sum_{k<K}\mathbb{E}\|\nabla f(x_k)\|_*",
    proof=Proof(theorem="nonconvex_delayed", steps=_steps()),
    module=MODULE,
    proof_md="proofs_md/nonconvex_delayed.md",
    tuning=nonconvex_tuning(tau, {"L": POSITIVE, "sigma": NONNEGATIVE, "rho": AT_LEAST_ONE,
                                  "tau": NONNEGATIVE_INTEGER, "Delta0": NONNEGATIVE}),
    reference="THEORY.md result 4; at tau = 0 the form of Kovalev (2025) Theorem 2",
)
