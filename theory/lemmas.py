"""The two lemmas every rate uses: weight-decay geometry and the momentum error at a stale read.

Markdown proofs: ``proofs_md/geometry_weight_decay.md`` and ``proofs_md/momentum_error.md``.

geometry_weight_decay (THEORY.md result 1)
    Algorithm: ``x_{k+1} = (1 - beta) x_k + eta d_k`` with ``||d_k|| <= 1`` (any LMO output).
    Assumptions: A5 (``||x_0||, ||x*|| <= D = eta/beta``).
    Guarantee: ``||x_k|| <= D`` for all k; with ``xh_k = beta x* + (1 - beta) x_k``:
    ``||xh_k - (1-beta) x_k|| <= eta`` and ``||xh_k - x_k||, ||x_{k+1} - x_k||,
    ||x_{k+1} - xh_k|| <= 2 eta``; hence ``||x_k - x_{k-tau}|| <= 2 tau eta``.
    Encoded bound: the step length ``2 eta``; extra ``radius = eta/beta``.

momentum_error (THEORY.md result 2)
    Algorithm: EMA momentum ``m_0 = g(y_0)``, ``m_k = (1-alpha) m_{k-1} + alpha g(y_k)`` read at
    ``y_k``, tracked point ``p_k`` with ``y_0 = p_0``, ``||p_k - p_{k-1}|| <= s eta`` and
    ``E||y_j - p_j|| <= omega_bar eta``.
    Assumptions: A1 (martingale-difference noise, ``E||xi||_2^2 <= sigma^2``), A2, A3.
    Guarantee: ``E||m_k - grad f(p_k)||_* <= (1-alpha)^k rho sigma + sqrt(alpha) rho sigma
    + L eta (s (1-alpha)/alpha + omega_bar)``. For a tau-delayed read, ``omega_bar = s tau``.
"""

from __future__ import annotations

import sympy

from theory.decide import eq, le
from theory.domain import (NONNEGATIVE, NONNEGATIVE_INTEGER, POSITIVE, UNIT_HALF_OPEN,
                           UNIT_OPEN, AT_LEAST_ONE)
from theory.proof import Proof, Step
from theory.symbols import (L, VEC_D, VEC_GP, VEC_GP_PREV, VEC_GY, VEC_M, VEC_X,
                            VEC_X_NEXT, VEC_X_STAR, VEC_XI, VECTORS, alpha, beta, eta, k,
                            omega_bar, rho, s, sigma)
from theory.theorem import Theorem

__all__ = ["GEOMETRY_WEIGHT_DECAY", "MOMENTUM_ERROR", "momentum_error_bound", "A_T", "B_T"]

MODULE = "theory/lemmas.py"
#: Fresh positive symbols of the reparametrisations alpha = 1/(1+a), beta = 1/(1+b). a > 0 covers
#: alpha in (0, 1); alpha = 1 follows by continuity (every obligation is continuous in alpha on
#: (0, 1] for fixed integer k >= 0).
A_T = sympy.Symbol("a", positive=True)
B_T = sympy.Symbol("b", positive=True)
_D = eta / beta


def _xh():
    return beta * VEC_X_STAR + (1 - beta) * VEC_X


def _geometry_steps() -> tuple[Step, ...]:
    step = ((VEC_X_NEXT, (1 - beta) * VEC_X + eta * VEC_D),)
    return (
        Step(id="S1", kind="algebra", claim="(1 - beta) D + eta = D for D = eta/beta",
             justification="algebra (the radius is a fixed point of r -> (1-beta) r + eta)",
             obligations=(eq("fixed point", (1 - beta) * _D + eta, _D),)),
        Step(id="S2", kind="analytic",
             claim="||x_k|| <= D and ||d_k|| <= 1 imply ||x_{k+1}|| <= D (induction from A5)",
             justification="triangle inequality, ||d_k|| <= 1 (LMO output), S1",
             predicate="wd_ball_invariant"),
        Step(id="S3", kind="algebra",
             claim="xh-(1-beta)x = beta x*, xh-x = beta(x*-x), x_{k+1}-x = -beta x + eta d, "
                   "x_{k+1}-xh = eta d - beta x*",
             justification="algebra (linear identities in the vectors)",
             obligations=(
                 eq("anchor shift", _xh() - (1 - beta) * VEC_X, beta * VEC_X_STAR, vectors=VECTORS),
                 eq("anchor gap", _xh() - VEC_X, beta * (VEC_X_STAR - VEC_X), vectors=VECTORS),
                 eq("step", VEC_X_NEXT - VEC_X, -beta * VEC_X + eta * VEC_D, subs=step,
                    vectors=VECTORS),
                 eq("anchor to next", VEC_X_NEXT - _xh(), eta * VEC_D - beta * VEC_X_STAR,
                    subs=step, vectors=VECTORS))),
        Step(id="S4", kind="algebra",
             claim="beta D = eta, beta (D + D) = 2 eta, beta D + eta = 2 eta",
             justification="algebra (norm bounds of S3 via the triangle inequality)",
             obligations=(eq("beta D", beta * _D, eta), eq("beta 2D", beta * 2 * _D, 2 * eta),
                          eq("beta D + eta", beta * _D + eta, 2 * eta))),
        Step(id="S5", kind="analytic", claim="||xh_k - (1-beta) x_k|| <= eta",
             justification="S3, ||x*|| <= D (A5), S4", predicate="wd_anchor_shift"),
        Step(id="S6", kind="analytic", claim="||xh_k - x_k|| <= 2 eta",
             justification="S3, triangle inequality, ||x_k||, ||x*|| <= D (S2, A5), S4",
             predicate="wd_anchor_gap"),
        Step(id="S7", kind="analytic", claim="||x_{k+1} - x_k|| <= 2 eta",
             justification="S3, triangle inequality, ||x_k|| <= D (S2), ||d_k|| <= 1, S4",
             predicate="wd_step_length"),
        Step(id="S8", kind="analytic", claim="||x_{k+1} - xh_k|| <= 2 eta",
             justification="S3, triangle inequality, ||x*|| <= D (A5), ||d_k|| <= 1, S4",
             predicate="wd_anchor_to_next"),
        Step(id="S9", kind="analytic",
             claim="||x_k - x_{max(k-tau,0)}|| <= 2 min(k, tau) eta <= 2 tau eta",
             justification="telescoping sum of at most tau steps, triangle inequality, S7",
             predicate="delay_drift", options={"weight_decay": True}),
    )


GEOMETRY_WEIGHT_DECAY = Theorem(
    name="geometry_weight_decay",
    title="Geometry lemma: weight decay keeps LMO iterates in the ball of radius eta/beta",
    statement=("For x_{k+1} = (1-beta) x_k + eta d_k with ||d_k|| <= 1 and ||x_0||, ||x*|| <= "
               "D = eta/beta: ||x_k|| <= D for all k, and with xh_k = beta x* + (1-beta) x_k: "
               "||xh_k - (1-beta) x_k|| <= eta, ||xh_k - x_k|| <= 2 eta, "
               "||x_{k+1} - x_k|| <= 2 eta, ||x_{k+1} - xh_k|| <= 2 eta; hence "
               "||x_k - x_{k-tau}|| <= 2 tau eta."),
    assumptions=("A5: ||x_0|| <= eta/beta and ||x*|| <= eta/beta",
                 "d_k is any point of the unit ball (e.g. an LMO output)"),
    parameters={"eta": eta, "beta": beta},
    domains={"eta": POSITIVE, "beta": UNIT_OPEN},
    bound=2 * eta,
    lhs_latex=r"\|x_{k+1} - x_k\|",
    extras={"radius": _D},
    proof=Proof(theorem="geometry_weight_decay", steps=_geometry_steps()),
    module=MODULE,
    proof_md="proofs_md/geometry_weight_decay.md",
    reference="THEORY.md result 1 (agrees with the four '2 eta' inequalities of the paper's "
              "Appendix C fragments)",
)


def momentum_error_bound(step=k, *, drift=s, mismatch=omega_bar) -> sympy.Expr:
    """(1-alpha)^step rho sigma + sqrt(alpha) rho sigma + L eta (drift (1-alpha)/alpha + mismatch)."""
    return ((1 - alpha) ** step * rho * sigma + sympy.sqrt(alpha) * rho * sigma
            + L * eta * (drift * (1 - alpha) / alpha + mismatch))


def _momentum_steps() -> tuple[Step, ...]:
    j = sympy.Symbol("j", integer=True)
    q, e0 = sympy.Symbol("q", nonnegative=True), sympy.Symbol("e_0")
    u = sympy.Function("u")
    unrolled = lambda n: q ** n * e0 + sympy.Sum(q ** (n - j) * u(j), (j, 1, n))  # noqa: E731
    a_sub = ((alpha, 1 / (1 + A_T)),)
    w = (1 - alpha) ** 2
    geo_sum = lambda n: (1 - w ** n) / (1 - w)  # noqa: E731  sum_{i<n} w^i
    noise_sq = (1 - alpha) ** (2 * k) + alpha ** 2 * geo_sum(k)
    drift_sum = lambda n: (1 - alpha) * (1 - (1 - alpha) ** n) / alpha  # noqa: E731
    mis_sum = lambda n: 1 - (1 - alpha) ** n  # noqa: E731  alpha sum_{i<n} (1-alpha)^i
    m_k = (1 - alpha) * VEC_M + alpha * (VEC_GY + VEC_XI)
    return (
        Step(id="S1", kind="algebra",
             claim="e_k = (1-alpha) e_{k-1} + (1-alpha)(grad f(p_{k-1}) - grad f(p_k)) + alpha xi_k "
                   "+ alpha (grad f(y_k) - grad f(p_k)); e_0 = xi_0",
             justification="algebra (definition of m_k, g(y_k) = grad f(y_k) + xi_k, y_0 = p_0)",
             obligations=(
                 eq("recursion", m_k - VEC_GP,
                    (1 - alpha) * (VEC_M - VEC_GP_PREV) + (1 - alpha) * (VEC_GP_PREV - VEC_GP)
                    + alpha * VEC_XI + alpha * (VEC_GY - VEC_GP), vectors=VECTORS),
                 eq("start", (VEC_GY + VEC_XI) - VEC_GP, VEC_XI, subs=((VEC_GY, VEC_GP),),
                    vectors=VECTORS))),
        Step(id="S2", kind="algebra",
             claim="e_k = q e_{k-1} + u_k implies e_k = q^k e_0 + sum_{j=1}^k q^{k-j} u_j",
             justification="algebra (induction on k; finite-sum peeling)",
             obligations=(eq("base", unrolled(0).doit(), e0),
                          eq("induction step", unrolled(k + 1), q * unrolled(k) + u(k + 1)))),
        Step(id="S3", kind="algebra",
             claim="sum of squared noise weights (1-alpha)^{2k} + alpha^2 sum_{j=1}^k "
                   "(1-alpha)^{2(k-j)} <= ((1-alpha)^k + sqrt(alpha))^2",
             justification="algebra (geometric sum by induction, then sqrt(a+b) <= sqrt a + sqrt b)",
             obligations=(eq("geometric sum, base", geo_sum(0), 0),
                          eq("geometric sum, step", geo_sum(k + 1), w * geo_sum(k) + 1),
                          le("weights", noise_sq, ((1 - alpha) ** k + sympy.sqrt(alpha)) ** 2,
                             subs=a_sub))),
        Step(id="S4", kind="analytic",
             claim="E||sum_j w_j xi_j||_* <= rho sigma sqrt(sum_j w_j^2)",
             justification="A3 (||.||_* <= rho ||.||_2), Jensen, martingale differences are "
                           "orthogonal in L2, A1",
             predicate="martingale_noise"),
        Step(id="S5", kind="analytic",
             claim="||sum_{j=1}^k (1-alpha)^{k-j+1} (grad f(p_{j-1}) - grad f(p_j))||_* "
                   "<= L s eta sum_{i=1}^k (1-alpha)^i",
             justification="triangle inequality, A2, ||p_j - p_{j-1}|| <= s eta",
             predicate="weighted_gradient_differences"),
        Step(id="S6", kind="algebra", claim="sum_{i=1}^k (1-alpha)^i <= (1-alpha)/alpha",
             justification="algebra (closed form by induction, (1-alpha)^k >= 0)",
             obligations=(eq("base", drift_sum(0), 0),
                          eq("step", drift_sum(k + 1), drift_sum(k) + (1 - alpha) ** (k + 1)),
                          le("bound", drift_sum(k), (1 - alpha) / alpha, subs=a_sub))),
        Step(id="S7", kind="analytic",
             claim="||alpha sum_{j=1}^k (1-alpha)^{k-j} (grad f(y_j) - grad f(p_j))||_* "
                   "<= L alpha sum_{j=1}^k (1-alpha)^{k-j} ||y_j - p_j||",
             justification="triangle inequality, A2", predicate="weighted_gradient_differences"),
        Step(id="S8", kind="algebra", claim="alpha sum_{i=0}^{k-1} (1-alpha)^i <= 1",
             justification="algebra (closed form by induction)",
             obligations=(eq("base", mis_sum(0), 0),
                          eq("step", mis_sum(k + 1), mis_sum(k) + alpha * (1 - alpha) ** k),
                          le("bound", mis_sum(k), 1, subs=a_sub))),
        Step(id="S9", kind="algebra",
             claim="rho sigma((1-alpha)^k + sqrt(alpha)) + L s eta (1-alpha)/alpha + L eta omega_bar "
                   "is the stated bound",
             justification="algebra (S1-S8 combined by the triangle inequality)",
             obligations=(eq("sum of the three parts",
                             rho * sigma * ((1 - alpha) ** k + sympy.sqrt(alpha))
                             + L * s * eta * (1 - alpha) / alpha + L * eta * omega_bar,
                             momentum_error_bound()),)),
        Step(id="S10", kind="analytic",
             claim="the lemma on tau-delayed runs without weight decay (s = 1, omega_bar = tau)",
             justification="end-to-end check of S1-S9 (all noise outcomes enumerated)",
             predicate="momentum_error_lemma", options={"weight_decay": False}),
        Step(id="S11", kind="analytic",
             claim="the lemma on tau-delayed runs with weight decay (s = 2, omega_bar = 2 tau)",
             justification="end-to-end check of S1-S9 with geometry lemma S7, S9",
             predicate="momentum_error_lemma", options={"weight_decay": True}),
    )


MOMENTUM_ERROR = Theorem(
    name="momentum_error",
    title="Momentum-error lemma at a stale read point",
    statement=("With m_0 = g(y_0), m_k = (1-alpha) m_{k-1} + alpha g(y_k), y_0 = p_0, a tracked "
               "point moving ||p_k - p_{k-1}|| <= s eta and read mismatch E||y_j - p_j|| <= "
               "omega_bar eta: E||m_k - grad f(p_k)||_* <= (1-alpha)^k rho sigma + sqrt(alpha) "
               "rho sigma + L eta (s (1-alpha)/alpha + omega_bar). A tau-delayed read has "
               "omega_bar = s tau (s = 1 without, 2 with weight decay)."),
    assumptions=("A1: g = grad f + xi, xi martingale differences with E||xi||_2^2 <= sigma^2",
                 "A2: ||grad f(x) - grad f(y)||_* <= L ||x - y||",
                 "A3: ||g||_* <= rho ||g||_2"),
    parameters={"k": k, "L": L, "eta": eta, "alpha": alpha, "sigma": sigma, "rho": rho,
                "s": s, "omega_bar": omega_bar},
    domains={"k": NONNEGATIVE_INTEGER, "L": POSITIVE, "eta": POSITIVE, "alpha": UNIT_HALF_OPEN,
             "sigma": NONNEGATIVE, "rho": AT_LEAST_ONE, "s": NONNEGATIVE,
             "omega_bar": NONNEGATIVE},
    bound=momentum_error_bound(),
    lhs_latex=r"\mathbb{E}\|m_k - \nabla f(p_k)\|_*",
    proof=Proof(theorem="momentum_error", steps=_momentum_steps()),
    module=MODULE,
    proof_md="proofs_md/momentum_error.md",
    reference="THEORY.md result 2",
)
