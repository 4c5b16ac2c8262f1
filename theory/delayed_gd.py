"""Delayed gradient descent (Euclidean, deterministic), with and without Error Feedback.

Markdown proofs: ``proofs_md/nonconvex_delayed_gd.md``, ``proofs_md/nonconvex_delayed_gd_ef.md``.
These are the statements the numerics PEPit cross-check compares with worst cases.

nonconvex_delayed_gd
    Algorithm: ``x_{k+1} = x_k - gamma grad f(x_{max(k-tau,0)})``.
    Assumptions: f L-smooth in the Euclidean norm, ``Delta0 = f(x_0) - inf f``.
    Condition: ``L gamma + L^2 gamma^2 tau^2 <= 1`` (outside it: no guarantee; ``evaluate``
    raises ValueError with the numbers).
    Guarantee: ``(1/K) sum_{k<K} ||grad f(x_k)||^2 <= 2 Delta0/(gamma K)``.
    Tuned: ``gamma = 2/(L (1 + sqrt(1 + 4 tau^2)))`` (the largest step the condition allows),
    ``K >= 2 Delta0/(gamma eps)``: K = O(L Delta0 (1 + tau)/eps).

nonconvex_delayed_gd_ef
    Algorithm: full-update EF on 1-delayed GD: ``v_k = -gamma grad f(x_{k-1})`` (``x_{-1} = x_0``),
    ``v_{-1} = 0``, ``x_{k+1} = x_k + v_k + lam (v_k - v_{k-1})``; virtual iterate
    ``z_k = x_k - lam v_{k-1}`` with ``z_{k+1} = z_k - gamma grad f(x_{k-1})``.
    Condition: ``L gamma + L^2 gamma^2 (1 + lam)^2 <= 1``, lam >= 0.
    Guarantee: ``(1/K) sum_{k<K} ||grad f(z_k)||^2 <= 2 Delta0/(gamma K)``. At lam = 0 this is
    nonconvex_delayed_gd with tau = 1.
"""

from __future__ import annotations

import sympy

from theory.decide import eq, le
from theory.domain import NONNEGATIVE, NONNEGATIVE_INTEGER, POSITIVE, POSITIVE_INTEGER
from theory.error_feedback import virtual_iterate_obligations
from theory.proof import Proof, Step
from theory.symbols import K, L, Delta0, eps, gamma, lam, tau
from theory.theorem import Condition, Theorem
from theory.tuning import Tuning

__all__ = ["NONCONVEX_DELAYED_GD", "NONCONVEX_DELAYED_GD_EF", "largest_step"]

MODULE = "theory/delayed_gd.py"
_L2 = ("l2",)  # Euclidean statements: checked with Euclidean instances
_AA, _BB, _AB = sympy.symbols("aa bb ab", real=True)
_SUM_A, _SUM_B, _MIS, _SLACK = sympy.symbols("A B_sum m_slack a_slack", nonnegative=True)
_G_T = sympy.Symbol("g", nonnegative=True)


def largest_step(growth) -> sympy.Expr:
    """2/(L (1 + sqrt(1 + 4 growth^2))): the largest gamma with L gamma + L^2 gamma^2 growth^2 <= 1."""
    return 2 / (L * (1 + sympy.sqrt(1 + 4 * growth ** 2)))


def _tail_steps(first_id: int, growth, growth_text: str, ef: bool) -> tuple[Step, ...]:
    coef = 1 - L * gamma - L ** 2 * gamma ** 2 * growth ** 2
    inside = ((gamma, largest_step(growth) / (1 + _G_T)),)
    bound = 2 * Delta0 / (gamma * K)
    return (
        Step(id=f"S{first_id}", kind="algebra",
             claim=f"summing: Delta0 >= gamma/2 sum ||a_k||^2 + gamma/2 (1 - L gamma - L^2 gamma^2 "
                   f"{growth_text}) sum ||b_k||^2, and the condition makes the last coefficient >= 0",
             justification="algebra (telescoping, mismatch sum <= L^2 gamma^2 "
                           f"{growth_text} sum ||b||^2, condition)",
             obligations=(
                 le("mismatch sum", gamma / 2 * _SUM_A + gamma / 2 * coef * _SUM_B,
                    gamma / 2 * _SUM_A + gamma / 2 * (1 - L * gamma) * _SUM_B - gamma / 2 * _MIS,
                    subs=((_MIS, L ** 2 * gamma ** 2 * growth ** 2 * _SUM_B - _SLACK),)),
                 le("condition => coefficient >= 0", L * gamma + L ** 2 * gamma ** 2 * growth ** 2,
                    1, subs=inside),
                 le("average", _SUM_A / K, bound, subs=((_SUM_A, 2 * Delta0 / gamma - _SLACK),)))),
        Step(id=f"S{first_id + 1}", kind="analytic",
             claim="(1/K) sum_{k<K} ||grad f(" + ("z" if ef else "x") + "_k)||^2 <= 2 Delta0/(gamma K)"
                   " on simulated runs",
             justification="end-to-end check", predicate="average_squared_gradient",
             instance="delayed_gd", options={"ef": ef}, geometries=_L2),
        Step(id=f"S{first_id + 2}", kind="algebra",
             claim=f"gamma = 2/(L (1 + sqrt(1 + 4 {growth_text}))) meets the condition with "
                   "equality; K >= 2 Delta0/(gamma eps) gives bound <= eps",
             justification="algebra",
             obligations=(
                 eq("largest step", (L * gamma + L ** 2 * gamma ** 2 * growth ** 2).subs(
                     gamma, largest_step(growth)), 1),
                 le("bound <= eps", bound, eps,
                    subs=((K, 2 * Delta0 / (gamma * eps) + sympy.Symbol("kappa", positive=True)),)))),
    )


def _gd_steps() -> tuple[Step, ...]:
    j = sympy.Symbol("j", integer=True)
    xs = sympy.Function("x")
    k_ = sympy.Symbol("k", integer=True)
    return (
        Step(id="S1", kind="analytic",
             claim="f(x_{k+1}) <= f(x_k) - gamma <a_k, b_k> + L gamma^2/2 ||b_k||^2, "
                   "a_k = grad f(x_k), b_k = grad f(y_k)",
             justification="smoothness upper bound (Euclidean)", predicate="smoothness_upper",
             geometries=_L2),
        Step(id="S2", kind="algebra", claim="-<a, b> = (||a - b||^2 - ||a||^2 - ||b||^2)/2",
             justification="algebra (bilinearity: ||a-b||^2 = ||a||^2 - 2<a,b> + ||b||^2)",
             obligations=(eq("polarization", -_AB, ((_AA - 2 * _AB + _BB) - _AA - _BB) / 2),)),
        Step(id="S3", kind="algebra",
             claim="x_k - x_{k-tau} = sum_{j=k-tau}^{k-1} (x_{j+1} - x_j) = -gamma sum_{j in W_k} b_j",
             justification="algebra (telescoping sum)",
             obligations=(eq("telescoping", sympy.Sum(xs(j + 1) - xs(j), (j, k_ - tau, k_ - 1)).doit(),
                             xs(k_) - xs(k_ - tau)),)),
        Step(id="S4", kind="analytic",
             claim="||sum_{j in W} b_j||^2 <= |W| sum_{j in W} ||b_j||^2, |W_k| <= tau",
             justification="Cauchy-Schwarz", predicate="window_cauchy_schwarz"),
        Step(id="S5", kind="analytic",
             claim="||a_k - b_k||^2 <= L^2 gamma^2 tau sum_{j in W_k} ||b_j||^2",
             justification="smoothness (A2), S3, S4", predicate="delayed_gd_mismatch",
             instance="delayed_gd", geometries=_L2),
        Step(id="S6", kind="algebra",
             claim="each b_j lies in at most tau windows: j in W_k iff j+1 <= k <= j+tau",
             justification="algebra (counting)",
             obligations=(eq("window count", (j + tau) - (j + 1) + 1, tau),)),
        *_tail_steps(7, tau, "tau^2", ef=False),
    )


def _gd_ef_steps() -> tuple[Step, ...]:
    u, w = sympy.symbols("u w", real=True)
    return (
        Step(id="S1", kind="algebra",
             claim="z_k = x_k - lam v_{k-1}: z_{k+1} = z_k + v_k = z_k - gamma b_k, z_0 = x_0, "
                   "z_k - x_{k-1} = v_{k-1} - lam v_{k-2} = -gamma (b_{k-1} - lam b_{k-2})",
             justification="algebra (linear identities of the EF update, v_k = -gamma b_k)",
             obligations=virtual_iterate_obligations()),
        Step(id="S2", kind="analytic",
             claim="f(z_{k+1}) <= f(z_k) - gamma <a_k, b_k> + L gamma^2/2 ||b_k||^2, a_k = grad f(z_k)",
             justification="smoothness upper bound (Euclidean)", predicate="smoothness_upper",
             geometries=_L2),
        Step(id="S3", kind="algebra", claim="-<a, b> = (||a - b||^2 - ||a||^2 - ||b||^2)/2",
             justification="algebra (bilinearity)",
             obligations=(eq("polarization", -_AB, ((_AA - 2 * _AB + _BB) - _AA - _BB) / 2),)),
        Step(id="S4", kind="algebra", claim="(u + lam w)^2 <= (1 + lam)(u^2 + lam w^2) for lam >= 0",
             justification="algebra (weighted Cauchy-Schwarz: the difference is lam (u - w)^2)",
             obligations=(le("weighted Cauchy-Schwarz", (u + lam * w) ** 2,
                             (1 + lam) * (u ** 2 + lam * w ** 2)),)),
        Step(id="S5", kind="analytic",
             claim="||grad f(z_k) - b_k|| <= L gamma (||b_{k-1}|| + lam ||b_{k-2}||)",
             justification="smoothness (A2), S1, triangle inequality", predicate="ef_gd_mismatch",
             instance="delayed_gd", options={"ef": True}, geometries=_L2),
        Step(id="S6", kind="algebra",
             claim="sum_k ||a_k - b_k||^2 <= L^2 gamma^2 (1+lam)^2 sum_j ||b_j||^2: b_j gets weight "
                   "(1+lam) from k = j+1 and (1+lam) lam from k = j+2",
             justification="algebra (counting)",
             obligations=(eq("weights", (1 + lam) * 1 + (1 + lam) * lam, (1 + lam) ** 2),)),
        *_tail_steps(7, 1 + lam, "(1+lam)^2", ef=True),
        Step(id="S10", kind="algebra",
             claim="lam = 0 gives nonconvex_delayed_gd at tau = 1 (same condition, same bound)",
             justification="algebra",
             obligations=(eq("condition at lam = 0",
                             (L * gamma + L ** 2 * gamma ** 2 * (1 + lam) ** 2).subs(lam, 0),
                             (L * gamma + L ** 2 * gamma ** 2 * tau ** 2).subs(tau, 1)),)),
    )


def _condition(growth, text: str) -> Condition:
    return Condition(lhs=L * gamma + L ** 2 * gamma ** 2 * growth ** 2, rhs=sympy.Integer(1),
                     strict=False, description=f"step-size condition L gamma + L^2 gamma^2 {text} <= 1",
                     reparam=((gamma, largest_step(growth) / (1 + _G_T)),))


NONCONVEX_DELAYED_GD = Theorem(
    name="nonconvex_delayed_gd",
    title="Nonconvex rate of tau-delayed gradient descent (Euclidean)",
    statement=("x_{k+1} = x_k - gamma grad f(x_{max(k-tau,0)}), f L-smooth: if L gamma + L^2 "
               "gamma^2 tau^2 <= 1 then (1/K) sum_{k<K} ||grad f(x_k)||^2 <= 2 Delta0/(gamma K); "
               "outside that condition there is no guarantee."),
    assumptions=("f L-smooth in the Euclidean norm", "Delta0 = f(x_0) - inf f",
                 "exact gradients"),
    parameters={"K": K, "L": L, "gamma": gamma, "tau": tau, "Delta0": Delta0},
    domains={"K": POSITIVE_INTEGER, "L": POSITIVE, "gamma": POSITIVE, "tau": NONNEGATIVE_INTEGER,
             "Delta0": NONNEGATIVE},
    conditions=(_condition(tau, "tau^2"),),
    bound=2 * Delta0 / (gamma * K),
    lhs_latex=r"\frac{1}{K}\sum_{k<K}\|\nabla f(x_k)\|_2^2",
    extras={"largest_step": largest_step(tau)},
    proof=Proof(theorem="nonconvex_delayed_gd", steps=_gd_steps()),
    module=MODULE,
    proof_md="proofs_md/nonconvex_delayed_gd.md",
    tuning=Tuning(problem={"L": POSITIVE, "tau": NONNEGATIVE_INTEGER, "Delta0": NONNEGATIVE},
                  choices={"gamma": largest_step(tau)},
                  K_expr=2 * Delta0 / (largest_step(tau) * eps), nudge="gamma",
                  description="gamma = 2/(L (1 + sqrt(1 + 4 tau^2))), K = 2 Delta0/(gamma eps) "
                              "= O(L Delta0 (1 + tau)/eps)"),
    reference="lead's addendum item 7 (for the PEPit cross-check)",
)

NONCONVEX_DELAYED_GD_EF = Theorem(
    name="nonconvex_delayed_gd_ef",
    title="Nonconvex rate of 1-delayed gradient descent with update-level Error Feedback",
    statement=("Full-update EF on 1-delayed GD (v_k = -gamma grad f(x_{k-1}), x_{k+1} = x_k + v_k "
               "+ lam (v_k - v_{k-1})): if L gamma + L^2 gamma^2 (1+lam)^2 <= 1 then for the "
               "virtual iterate z_k = x_k - lam v_{k-1}: (1/K) sum_{k<K} ||grad f(z_k)||^2 <= "
               "2 Delta0/(gamma K)."),
    assumptions=("f L-smooth in the Euclidean norm", "Delta0 = f(x_0) - inf f",
                 "exact gradients", "lam >= 0"),
    parameters={"K": K, "L": L, "gamma": gamma, "lam": lam, "Delta0": Delta0},
    domains={"K": POSITIVE_INTEGER, "L": POSITIVE, "gamma": POSITIVE, "lam": NONNEGATIVE,
             "Delta0": NONNEGATIVE},
    conditions=(_condition(1 + lam, "(1+lam)^2"),),
    bound=2 * Delta0 / (gamma * K),
    lhs_latex=r"\frac{1}{K}\sum_{k<K}\|\nabla f(z_k)\|_2^2",
    extras={"largest_step": largest_step(1 + lam)},
    proof=Proof(theorem="nonconvex_delayed_gd_ef", steps=_gd_ef_steps()),
    module=MODULE,
    proof_md="proofs_md/nonconvex_delayed_gd_ef.md",
    tuning=Tuning(problem={"L": POSITIVE, "lam": NONNEGATIVE, "Delta0": NONNEGATIVE},
                  choices={"gamma": largest_step(1 + lam)},
                  K_expr=2 * Delta0 / (largest_step(1 + lam) * eps), nudge="gamma",
                  description="gamma = 2/(L (1 + sqrt(1 + 4 (1+lam)^2))), K = 2 Delta0/(gamma eps)"),
    reference="lead's addendum item 8 (for the PEPit cross-check)",
)
