"""Update-level Error Feedback (full-update variant) on 1-delayed LMO momentum, via a virtual iterate.

Markdown proofs: ``proofs_md/nonconvex_delayed_ef.md`` and ``proofs_md/star_convex_delayed_ef.md``.

Algorithm (THEORY.md; what the torch wrapper does): ``v_k = -beta x_k + eta d_k`` is the full base
update (weight decay included), ``v_{-1} = 0``, ``x_{k+1} = x_k + v_k + lam (v_k - v_{k-1})``,
read point ``y_k = x_{k-1}`` (``y_0 = x_0``; tau = 1, PipeDream-2BW).

Virtual iterate: ``z_k = x_k - lam v_{k-1}`` obeys ``z_{k+1} = z_k + v_k`` exactly, ``z_0 = x_0``,
and ``z_k - y_k = v_{k-1} - lam v_{k-2}``. The momentum tracks ``z``; the read mismatch is
``omega_bar >= sup_k E||z_k - y_k||/eta`` (worst case ``(1 + lam) s``: EF does not improve the
worst case, it helps when consecutive updates are aligned).

nonconvex_delayed_ef (beta = 0, so ``z_{k+1} = z_k + eta d_k``, s = 1):
    ``(1/K) sum_{k<K} E||grad f(z_k)||_* <= Delta0/(eta K) + 2 rho sigma/(alpha K)
    + 2 sqrt(alpha) rho sigma + L eta/2 + 2 L eta ((1-alpha)/alpha + omega_bar)``.
    Assumptions A1-A3. At lam = 0, omega_bar = 1 it is nonconvex_delayed at tau = 1.

star_convex_delayed_ef (weight decay, ``2 beta lam < 1``):
    ``z_{k+1} = (1-beta) z_k + eta d_k - beta lam v_{k-1}``; invariant ``||z_k|| <= D + lam B``,
    ``||v_k|| <= B``, ``B = 2 eta/(1 - 2 beta lam)``, ``s = 2/(1 - 2 beta lam)``:
    ``E f(z_K) - f* <= (1-beta)^K r0 + 2 eta rho sigma/alpha + 2 rho sigma D sqrt(alpha)
    + 2 L eta D (s (1-alpha)/alpha + omega_bar) + 4 lam L eta D (1 - beta lam)/(1 - 2 beta lam)^2
    + 2 L eta D/(1 - 2 beta lam)^2``. Assumptions A1-A5. At lam = 0, omega_bar = 2 it is
    star_convex_delayed at tau = 1.

Both bounds are statements about the virtual iterate z (z_K = x_K - lam v_{K-1}).
"""

from __future__ import annotations

import sympy

from theory.decide import eq, le
from theory.domain import (AT_LEAST_ONE, NONNEGATIVE, POSITIVE, POSITIVE_INTEGER, UNIT_HALF_OPEN,
                           UNIT_OPEN, fixed)
from theory.lemmas import momentum_error_bound
from theory.nonconvex import nonconvex_bound, nonconvex_tail_steps, nonconvex_tuning
from theory.proof import Proof, Step
from theory.star_convex import (E_NORM, R_K, iteration_count_obligations, star_convex_bound,
                                unrolling_steps)
from theory.symbols import (D, K, L, VEC_D, VEC_V, VEC_V_PREV, VEC_V_PREV2, VEC_X, VEC_X_STAR, VEC_Z, VECTORS, Delta0, alpha, beta, eps, eta, k, lam,
                            omega_bar, r0, rho, sigma, tau)
from theory.lemmas import A_T
from theory.theorem import Condition, Theorem
from theory.tuning import Tuning

__all__ = ["NONCONVEX_DELAYED_EF", "STAR_CONVEX_DELAYED_EF", "ef_star_convex_bound",
           "virtual_iterate_obligations"]

MODULE = "theory/error_feedback.py"
_D = eta / beta
_Q = 1 / (1 - 2 * beta * lam)
_B = 2 * eta * _Q
_S = 2 * _Q
#: lam = l/(2 beta (1 + l)), l >= 0, parametrises exactly the set 0 <= lam < 1/(2 beta).
_LL = sympy.Symbol("l", nonnegative=True)
_ASSUMPTIONS = ("A1 unbiased gradients, E||g - grad f||_2^2 <= sigma^2 (martingale noise)",
                "A2 ||grad f(x) - grad f(y)||_* <= L ||x - y||",
                "A3 ||g||_* <= rho ||g||_2")


def ef_star_convex_bound() -> sympy.Expr:
    """The star-convex EF bound (module docstring)."""
    return ((1 - beta) ** K * r0 + 2 * eta * rho * sigma / alpha
            + 2 * rho * sigma * _D * sympy.sqrt(alpha)
            + 2 * L * eta * _D * (_S * (1 - alpha) / alpha + omega_bar)
            + 4 * lam * L * eta * _D * (1 - beta * lam) * _Q ** 2 + 2 * L * eta * _D * _Q ** 2)


def virtual_iterate_obligations() -> tuple:
    """z_{k+1} = z_k + v_k; z_0 = x_0; z_k - y_k = v_{k-1} - lam v_{k-2} with y_k = x_{k-1}."""
    x_next = VEC_X + VEC_V + lam * (VEC_V - VEC_V_PREV)
    x_k = VEC_X + VEC_V_PREV + lam * (VEC_V_PREV - VEC_V_PREV2)  # VEC_X plays x_{k-1} here
    return (
        eq("z_{k+1} = z_k + v_k", x_next - lam * VEC_V, (VEC_X - lam * VEC_V_PREV) + VEC_V,
           vectors=VECTORS),
        eq("z_0 = x_0 (v_{-1} = 0)", VEC_X - lam * VEC_V_PREV, VEC_X,
           subs=((VEC_V_PREV, 0),), vectors=VECTORS),
        eq("z_k - y_k = v_{k-1} - lam v_{k-2}", (x_k - lam * VEC_V_PREV) - VEC_X,
           VEC_V_PREV - lam * VEC_V_PREV2, vectors=VECTORS),
    )


def _nonconvex_steps() -> tuple[Step, ...]:
    return (
        Step(id="S1", kind="algebra",
             claim="z_k = x_k - lam v_{k-1}: z_{k+1} = z_k + v_k, z_0 = x_0, "
                   "z_k - y_k = v_{k-1} - lam v_{k-2}",
             justification="algebra (linear identities of the EF update)",
             obligations=virtual_iterate_obligations()),
        Step(id="S2", kind="algebra",
             claim="with beta = 0: z_{k+1} = z_k + eta d_k and z_k - y_k = eta (d_{k-1} - lam d_{k-2})",
             justification="algebra (v_k = eta d_k)",
             obligations=(eq("mismatch", VEC_V_PREV - lam * VEC_V_PREV2,
                             eta * (VEC_D - lam * VEC_X_STAR),
                             subs=((VEC_V_PREV, eta * VEC_D), (VEC_V_PREV2, eta * VEC_X_STAR)),
                             vectors=VECTORS),)),
        Step(id="S3", kind="analytic", claim="||d_{k-1} - lam d_{k-2}|| <= 1 + lam",
             justification="triangle inequality, ||d|| <= 1 (worst case of omega_bar)",
             predicate="ef_mismatch_worst_case"),
        Step(id="S4", kind="analytic",
             claim="f(z_{k+1}) <= f(z_k) + eta <grad f(z_k), d_k> + L eta^2/2",
             justification="A2 (smoothness upper bound at z_k), ||d_k|| <= 1",
             predicate="smoothness_upper"),
        Step(id="S5", kind="analytic",
             claim="<grad f(z_k), d_k> <= -||grad f(z_k)||_* + 2 ||m_k - grad f(z_k)||_*",
             justification="LMO optimality, Hoelder, triangle inequality", predicate="lmo_descent"),
        Step(id="S6", kind="analytic",
             claim="f(z_{k+1}) <= f(z_k) - eta ||grad f(z_k)||_* + 2 eta ||e_k||_* + L eta^2/2",
             justification="S4 with S5 (as nonconvex_delayed S3), checked end to end",
             predicate="nonconvex_one_step"),
        Step(id="S7", kind="analytic",
             claim="E||m_k - grad f(z_k)||_* <= (1-alpha)^k rho sigma + sqrt(alpha) rho sigma "
                   "+ L eta ((1-alpha)/alpha + omega_bar)",
             justification="momentum_error lemma, tracked point z (s = 1), measured omega_bar",
             predicate="momentum_error_lemma", options={"ef": True}),
        *nonconvex_tail_steps(8, omega_bar, "omega_bar"),
        Step(id="S12", kind="algebra",
             claim="d bound/d omega_bar = 2 L eta; lam = 0 (z = x, omega_bar = 1) gives "
                   "nonconvex_delayed at tau = 1",
             justification="algebra",
             obligations=(eq("slope", sympy.diff(nonconvex_bound(omega_bar), omega_bar),
                             2 * L * eta),
                          eq("lam = 0", nonconvex_bound(omega_bar).subs(omega_bar, 1),
                             nonconvex_bound(tau).subs(tau, 1)))),
    )


NONCONVEX_DELAYED_EF = Theorem(
    name="nonconvex_delayed_ef",
    title="Nonconvex rate of 1-delayed LMO momentum with update-level Error Feedback",
    statement=("Full-update EF on 1-delayed LMO momentum without weight decay: for the virtual "
               "iterate z_k = x_k - lam eta d_{k-1} and omega_bar >= sup_k E||d_{k-1} - lam "
               "d_{k-2}|| (<= 1 + lam): (1/K) sum_{k<K} E||grad f(z_k)||_* <= Delta0/(eta K) + "
               "2 rho sigma/(alpha K) + 2 sqrt(alpha) rho sigma + L eta/2 + 2 L eta ((1-alpha)/"
               "alpha + omega_bar)."),
    assumptions=_ASSUMPTIONS + ("Delta0 = f(x_0) - inf f",
                                "omega_bar >= sup_k E||z_k - y_k|| / eta"),
    parameters={"K": K, "L": L, "eta": eta, "alpha": alpha, "sigma": sigma, "rho": rho,
                "tau": tau, "Delta0": Delta0, "lam": lam, "omega_bar": omega_bar},
    domains={"K": POSITIVE_INTEGER, "L": POSITIVE, "eta": POSITIVE, "alpha": UNIT_HALF_OPEN,
             "sigma": NONNEGATIVE, "rho": AT_LEAST_ONE, "tau": fixed(1), "Delta0": NONNEGATIVE,
             "lam": NONNEGATIVE, "omega_bar": NONNEGATIVE},
    bound=nonconvex_bound(omega_bar),
    lhs_latex=r"\frac{1}{K}\sum_{k<K}\mathbb{E}\|\nabla f(z_k)\|_*",
    extras={"omega_bar_worst_case": 1 + lam},
    proof=Proof(theorem="nonconvex_delayed_ef", steps=_nonconvex_steps()),
    module=MODULE,
    proof_md="proofs_md/nonconvex_delayed_ef.md",
    tuning=nonconvex_tuning(omega_bar, {"L": POSITIVE, "sigma": NONNEGATIVE, "rho": AT_LEAST_ONE,
                                        "tau": fixed(1), "Delta0": NONNEGATIVE,
                                        "lam": NONNEGATIVE, "omega_bar": NONNEGATIVE}),
    reference="THEORY.md result 5 (nonconvex part)",
)


def _star_tuning_obligations() -> tuple:
    """With beta lam <= 1/4 (so 1/(1-2 beta lam) <= 2) the L-terms are <= 8 L eta D (1/alpha
    + omega_bar/4 + 2 lam); the caps on eta make every term <= eps/4."""
    e_t, u_t, a2 = sympy.symbols("e u a2", nonnegative=True)
    sig = sympy.Symbol("sigma_p", positive=True)
    lam_p = sympy.Symbol("lam_p", positive=True)
    bound = ef_star_convex_bound().subs(beta, eta / D)
    q = 1 / (1 - 2 * (eta / D) * lam)
    t1 = (1 - eta / D) ** K * r0
    t2 = 2 * eta * rho * sigma / alpha
    t3 = 2 * rho * sigma * D * sympy.sqrt(alpha)
    t4 = (2 * L * eta * D * (2 * q * (1 - alpha) / alpha + omega_bar)
          + 4 * lam * L * eta * D * (1 - (eta / D) * lam) * q ** 2 + 2 * L * eta * D * q ** 2)
    mid = 8 * L * eta * D * (1 / alpha + omega_bar / 4 + 2 * lam)
    return (
        eq("the four terms", t1 + t2 + t3 + t4, bound),
        le("2 eta rho sigma/alpha <= eps/4 (eta <= eps alpha/(8 rho sigma))", t2, eps / 4,
           subs=((eta, eps * alpha / (8 * rho * sig * (1 + e_t))), (sigma, sig))),
        le("2 eta rho sigma/alpha <= eps/4 (sigma = 0)", t2, eps / 4, subs=((sigma, 0),)),
        le("2 rho sigma D sqrt(alpha) <= eps/4", t3, eps / 4,
           subs=((alpha, eps ** 2 / (64 * rho ** 2 * sig ** 2 * D ** 2 * (1 + a2) ** 2)),
                 (sigma, sig))),
        le("2 rho sigma D sqrt(alpha) <= eps/4 (sigma = 0)", t3, eps / 4, subs=((sigma, 0),)),
        le("L terms <= 8 L eta D (1/alpha + omega_bar/4 + 2 lam) when beta lam <= 1/4", t4, mid,
           subs=((lam, u_t * D / (4 * eta * (1 + u_t))), (alpha, 1 / (1 + A_T)))),
        le("... <= eps/4 (eta <= eps/(32 L D (1/alpha + omega_bar/4 + 2 lam)))", mid, eps / 4,
           subs=((eta, eps / (32 * L * D * (1 / alpha + omega_bar / 4 + 2 * lam) * (1 + e_t))),)),
        le("beta lam <= 1/4 (eta <= D/(4 lam))", (eta / D) * lam, sympy.Rational(1, 4),
           subs=((eta, D / (4 * lam_p * (1 + e_t))), (lam, lam_p))),
        le("beta <= 1/2 (eta <= D/2)", eta / D, sympy.Rational(1, 2),
           subs=((eta, D / (2 * (1 + e_t))),)),
    )


def _star_tuning() -> Tuning:
    alpha_c = sympy.Piecewise((1, 8 * rho * sigma * D <= eps),
                              ((eps / (8 * rho * sigma * D)) ** 2, True))
    eta_c = sympy.Min(
        eps / (32 * L * D * (1 / alpha_c + omega_bar / 4 + 2 * lam)), D / 2,
        sympy.Piecewise((D / 2, 8 * rho * sigma * D <= 2 * eps * alpha_c),
                        (eps * alpha_c / (8 * rho * sigma), True)),
        sympy.Piecewise((D / 2, 2 * lam <= 1), (D / (4 * lam), True)))
    beta_c = eta_c / D
    k_expr = sympy.Piecewise((0, 4 * r0 <= eps),
                             (sympy.log(4 * r0 / eps) / (-sympy.log(1 - beta_c)), True))
    return Tuning(
        problem={"L": POSITIVE, "sigma": NONNEGATIVE, "rho": AT_LEAST_ONE, "tau": fixed(1),
                 "r0": NONNEGATIVE, "D": POSITIVE, "lam": NONNEGATIVE, "omega_bar": NONNEGATIVE},
        choices={"alpha": alpha_c, "eta": eta_c, "beta": beta_c},
        K_expr=k_expr,
        description=("alpha = min(1, eps^2/(64 rho^2 sigma^2 D^2)), eta = min(eps/(32 L D (1/alpha "
                     "+ omega_bar/4 + 2 lam)), eps alpha/(8 rho sigma), D/2, D/(4 lam)), beta = "
                     "eta/D (so beta lam <= 1/4), K = ceil(log(4 r0/eps)/(-log(1-beta))): K = "
                     "O~(L D^2 (1 + omega_bar + lam)/eps + (L D + rho sigma) rho^2 sigma^2 D^3/eps^3)"))


def _star_steps() -> tuple[Step, ...]:
    cond = ((lam, _LL / (2 * beta * (1 + _LL))),)  # 2 beta lam < 1
    z_next = (1 - beta) * VEC_Z + eta * VEC_D - beta * lam * VEC_V_PREV
    v_k = -beta * (VEC_Z + lam * VEC_V_PREV) + eta * VEC_D
    zh = beta * VEC_X_STAR + (1 - beta) * VEC_Z
    c0 = beta * lam * _B * L * (2 * _D + lam * _B) + L * _B ** 2 / 2
    constant = 2 * eta * (momentum_error_bound(drift=_S) - (1 - alpha) ** k * rho * sigma) + c0
    unroll, final = unrolling_steps(13, constant, ef_star_convex_bound())
    return (
        Step(id="S1", kind="algebra",
             claim="z_{k+1} = z_k + v_k = (1-beta) z_k + eta d_k - beta lam v_{k-1}; z_0 = x_0; "
                   "z_k - y_k = v_{k-1} - lam v_{k-2}",
             justification="algebra (v_k = -beta x_k + eta d_k, x_k = z_k + lam v_{k-1})",
             obligations=virtual_iterate_obligations() + (
                 eq("weight-decay form", VEC_Z + v_k, z_next, vectors=VECTORS),)),
        Step(id="S2", kind="algebra",
             claim="(1-beta)(D + lam B) + beta lam B + eta = D + lam B, beta (D + 2 lam B) + eta = B, "
                   "2 eta <= B",
             justification="algebra (induction step of the invariant; 2 beta lam < 1)",
             obligations=(
                 eq("z radius", (1 - beta) * (_D + lam * _B) + beta * lam * _B + eta, _D + lam * _B),
                 eq("v radius", beta * (_D + 2 * lam * _B) + eta, _B),
                 le("base: ||v_0|| <= 2 eta <= B", 2 * eta, _B, subs=cond))),
        Step(id="S3", kind="analytic", claim="||z_k|| <= D + lam B and ||v_k|| <= B for all k",
             justification="induction with the triangle inequality, ||d|| <= 1, A5, S1, S2",
             predicate="ef_wd_invariant"),
        Step(id="S4", kind="analytic",
             claim="f(z_{k+1}) <= f(z_k) + <grad f(z_k), v_k> + L/2 ||v_k||^2, ||v_k|| <= B",
             justification="A2 (smoothness upper bound at z_k), S3", predicate="smoothness_upper"),
        Step(id="S5", kind="algebra",
             claim="v_k = (zh_k - z_k) + (eta d_k - beta x*) - beta lam v_{k-1}, "
                   "zh_k = beta x* + (1-beta) z_k",
             justification="algebra (linear identity)",
             obligations=(eq("split", z_next - VEC_Z,
                             (zh - VEC_Z) + (eta * VEC_D - beta * VEC_X_STAR)
                             - beta * lam * VEC_V_PREV, vectors=VECTORS),)),
        Step(id="S6", kind="analytic", claim="<grad f(z_k), zh_k - z_k> <= -beta (f(z_k) - f*)",
             justification="A4 (star-convexity) at z_k", predicate="star_convexity"),
        Step(id="S7", kind="analytic", claim="<m_k, eta d_k - beta x*> <= 0",
             justification="LMO optimality and Hoelder with ||beta x*|| <= eta (A5)",
             predicate="lmo_anchor_optimality"),
        Step(id="S8", kind="analytic",
             claim="-<m_k - grad f(z_k), eta d_k - beta x*> <= 2 eta ||m_k - grad f(z_k)||_*",
             justification="Hoelder, ||d_k|| <= 1, ||beta x*|| <= eta", predicate="holder_anchor"),
        Step(id="S9", kind="analytic",
             claim="<grad f(z_k), -beta lam v_{k-1}> <= beta lam B L (||z_k|| + ||x*||) "
                   "<= beta lam B L (2D + lam B)",
             justification="Hoelder, grad f(x*) = 0 and A2, S3, A5", predicate="ef_extra_term"),
        Step(id="S10", kind="algebra",
             claim="r_{k+1} <= (1-beta) r_k + 2 eta ||e_k||_* + beta lam B L (2D + lam B) + L B^2/2",
             justification="algebra (S4-S9 summed; ||z|| + ||x*|| <= 2D + lam B)",
             obligations=(
                 eq("combine", R_K - beta * R_K + 2 * eta * E_NORM + c0,
                    (1 - beta) * R_K + 2 * eta * E_NORM + c0),
                 eq("radii", (_D + lam * _B) + _D, 2 * _D + lam * _B))),
        Step(id="S11", kind="analytic", claim="the one-step inequality S10 on concrete instances",
             justification="end-to-end check of S3-S10", predicate="ef_star_convex_one_step"),
        Step(id="S12", kind="analytic",
             claim="E||m_k - grad f(z_k)||_* <= (1-alpha)^k rho sigma + sqrt(alpha) rho sigma "
                   "+ L eta (s (1-alpha)/alpha + omega_bar), s = 2/(1 - 2 beta lam)",
             justification="momentum_error lemma, tracked point z moving ||v_k|| <= B = s eta",
             predicate="momentum_error_lemma", options={"ef": True, "weight_decay": True}),
        unroll,
        final,
        Step(id="S15", kind="algebra",
             claim="lam = 0 and omega_bar = 2 give star_convex_delayed at tau = 1",
             justification="algebra",
             obligations=(eq("lam = 0", ef_star_convex_bound().subs({lam: 0, omega_bar: 2}),
                             star_convex_bound(tau).subs(tau, 1)),)),
        Step(id="S16", kind="algebra",
             claim="tuned alpha, eta (with beta lam <= 1/4) and beta = eta/D make each of the last "
                   "terms <= eps/4",
             justification="algebra (each choice is below each argument of its min)",
             obligations=_star_tuning_obligations()),
        Step(id="S17", kind="algebra",
             claim="K >= log(4 r0/eps)/(-log(1-beta)) gives (1-beta)^K r0 <= eps/4",
             justification="algebra (as star_convex_delayed S13)",
             obligations=iteration_count_obligations(beta)),
    )


STAR_CONVEX_DELAYED_EF = Theorem(
    name="star_convex_delayed_ef",
    title="Star-convex rate of 1-delayed LMO momentum with weight decay and Error Feedback",
    statement=("Full-update EF (weight decay inside the corrected update) on 1-delayed LMO "
               "momentum, 2 beta lam < 1, D = eta/beta, s = 2/(1 - 2 beta lam), omega_bar >= "
               "sup_k E||v_{k-1} - lam v_{k-2}||/eta: for z_K = x_K - lam v_{K-1}, E f(z_K) - f* "
               "<= (1-beta)^K r0 + 2 eta rho sigma/alpha + 2 rho sigma D sqrt(alpha) + 2 L eta D "
               "(s (1-alpha)/alpha + omega_bar) + 4 lam L eta D (1 - beta lam)/(1 - 2 beta lam)^2 "
               "+ 2 L eta D/(1 - 2 beta lam)^2."),
    assumptions=_ASSUMPTIONS + ("A4 f star-convex about a minimizer x* (grad f(x*) = 0)",
                                "A5 ||x_0||, ||x*|| <= D = eta/beta",
                                "omega_bar >= sup_k E||z_k - y_k|| / eta"),
    parameters={"K": K, "L": L, "eta": eta, "alpha": alpha, "beta": beta, "sigma": sigma,
                "rho": rho, "tau": tau, "r0": r0, "lam": lam, "omega_bar": omega_bar},
    domains={"K": POSITIVE_INTEGER, "L": POSITIVE, "eta": POSITIVE, "alpha": UNIT_HALF_OPEN,
             "beta": UNIT_OPEN, "sigma": NONNEGATIVE, "rho": AT_LEAST_ONE, "tau": fixed(1),
             "r0": NONNEGATIVE, "lam": NONNEGATIVE, "omega_bar": NONNEGATIVE},
    conditions=(Condition(lhs=2 * beta * lam, rhs=sympy.Integer(1), strict=True,
                          description="the EF-corrected iterates stay bounded only if 2 beta lam < 1",
                          reparam=((lam, _LL / (2 * beta * (1 + _LL))),)),),
    bound=ef_star_convex_bound(),
    lhs_latex=r"\mathbb{E}\,[f(z_K) - f^\star]",
    extras={"radius": _D, "update_radius_B": _B, "s": _S, "omega_bar_worst_case": (1 + lam) * _S},
    proof=Proof(theorem="star_convex_delayed_ef", steps=_star_steps()),
    module=MODULE,
    proof_md="proofs_md/star_convex_delayed_ef.md",
    tuning=_star_tuning(),
    reference="THEORY.md result 5 (weight-decay part), derived in the lead's brief",
)
