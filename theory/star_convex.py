"""Star-convex rates with decoupled weight decay: synchronous and tau-delayed LMO momentum.

Markdown proofs: ``proofs_md/star_convex_sync.md`` and ``proofs_md/star_convex_delayed.md``.

Algorithm (THEORY.md "Algorithms"): ``m_0 = g(y_0)``, ``m_k = (1-alpha) m_{k-1} + alpha g(y_k)``,
``d_k = LMO(m_k)``, ``x_{k+1} = (1-beta) x_k + eta d_k``, read point ``y_k = x_{max(k-tau,0)}``
(``tau = 0``: synchronous, ``y_k = x_k``).

Assumptions: A1 (unbiased, E||g - grad f||_2^2 <= sigma^2), A2 (L-smooth in the norm), A3
(``||.||_* <= rho ||.||_2``), A4 (star-convex about a minimizer x*), A5 (``||x_0||, ||x*|| <= D =
eta/beta``).

Guarantee (anytime, every K >= 1, the domain of K), with r_k = f(x_k) - f*:
``E r_K <= (1-beta)^K r0 + 2 eta rho sigma/alpha + 2 rho sigma D sqrt(alpha)
+ 4 L eta D ((1-alpha)/alpha + tau) + 2 L eta D``.
The one-step recursion ``r_{k+1} <= (1-beta) r_k + 2 eta ||m_k - grad f(x_k)||_* + 2 L eta^2`` holds
pathwise (THEORY.md states 4 L eta^2; the proof gives (L/2)(2 eta)^2 = 2 L eta^2, and that sharper
constant is what is encoded; THEORY.md's ``4 L eta D (1/alpha + tau)`` is an upper bound of our
last two terms). Delay adds ``4 L eta D tau`` to the floor and leaves the contraction alone.

Tuned corollary (D the problem radius, eps > 0): ``alpha = min(1, eps^2/(64 rho^2 sigma^2 D^2))``,
``eta = min(eps/(16 L D (1/alpha + tau)), eps alpha/(8 rho sigma), D/2)``, ``beta = eta/D``,
``K >= log(4 r0/eps)/(-log(1-beta))``: every term is <= eps/4. The cap ``eps alpha/(8 rho sigma)``
is missing from THEORY.md; without it the term ``2 eta rho sigma/alpha`` equals
``eps rho sigma/(8 L D (1 + alpha tau))``, which exceeds eps/4 when rho sigma > 2 L D (1 + alpha tau).
Complexity: ``K = O~(L D^2 (1+tau)/eps + (L D + rho sigma) rho^2 sigma^2 D^3/eps^3)``; tau
multiplies only the deterministic term.
"""

from __future__ import annotations

import sympy

from theory.decide import eq, increasing, le
from theory.domain import (AT_LEAST_ONE, NONNEGATIVE, NONNEGATIVE_INTEGER, POSITIVE,
                           POSITIVE_INTEGER, UNIT_HALF_OPEN, UNIT_OPEN, Domain, fixed)
from theory.lemmas import A_T, B_T, momentum_error_bound
from theory.proof import Proof, Step
from theory.symbols import (D, K, L, VEC_D, VEC_X, VEC_X_NEXT, VEC_X_STAR, VECTORS, alpha, beta,
                            eps, eta, k, r0, rho, sigma, tau)
from theory.theorem import Theorem
from theory.tuning import Tuning

__all__ = ["STAR_CONVEX_SYNC", "STAR_CONVEX_DELAYED", "star_convex_bound", "unrolling_steps",
           "iteration_count_obligations"]

MODULE = "theory/star_convex.py"
_D = eta / beta
#: Fresh symbols of the proofs: r_k, ||e_k||_*, the unrolled weight sum H, constants A, C.
R_K, E_NORM = sympy.symbols("r_k e_norm", nonnegative=True)
H_SUM, A_C, C_C, H_GAP = sympy.symbols("H A C h", nonnegative=True)
E_T, KAPPA = sympy.symbols("e kappa", nonnegative=True)
C_POS = sympy.Symbol("c", positive=True)


def star_convex_bound(delay=tau) -> sympy.Expr:
    """(1-beta)^K r0 + 2 eta rho sigma/alpha + 2 rho sigma D sqrt(alpha)
    + 4 L eta D ((1-alpha)/alpha + delay) + 2 L eta D, with D = eta/beta."""
    return ((1 - beta) ** K * r0 + 2 * eta * rho * sigma / alpha
            + 2 * rho * sigma * _D * sympy.sqrt(alpha)
            + 4 * L * eta * _D * ((1 - alpha) / alpha + delay) + 2 * L * eta * _D)


def unrolling_steps(first_id: int, constant: sympy.Expr, bound: sympy.Expr) -> tuple[Step, Step]:
    """Two algebra steps: unroll ``R_{k+1} <= (1-beta) R_k + A (1-alpha)^k + C`` (induction), then
    identify ``(1-beta)^K r0 + A/alpha + C/beta`` with ``bound`` for A = 2 eta rho sigma and
    ``C = constant``."""
    w = 1 - beta
    p = lambda n, h: w ** n * r0 + A_C * h + C_C * (1 - w ** n) / beta  # noqa: E731
    j = lambda n: (1 - (1 - alpha) ** n) / alpha  # noqa: E731
    ab = ((alpha, 1 / (1 + A_T)), (beta, 1 / (1 + B_T)))
    unroll = Step(
        id=f"S{first_id}", kind="algebra",
        claim="R_{k+1} <= (1-beta) R_k + A (1-alpha)^k + C for all k implies R_K <= (1-beta)^K r0 "
              "+ A H_K + C (1-(1-beta)^K)/beta with H_K <= 1/alpha",
        justification="algebra (induction on k; the map R -> (1-beta) R + c is nondecreasing)",
        obligations=(
            eq("base", p(0, 0), r0),
            eq("induction step", w * p(k, H_SUM) + A_C * (1 - alpha) ** k + C_C,
               p(k + 1, w * H_SUM + (1 - alpha) ** k)),
            le("monotone map", 0, w, subs=ab),
            eq("H_0 <= J_0", j(0), 0),
            le("H_{k+1} <= J_{k+1}", w * j(k) + (1 - alpha) ** k, j(k + 1), subs=ab),
            le("J_k <= 1/alpha", j(k), 1 / alpha, subs=ab),
            le("geometric weight sum", (1 - w ** k) / beta, 1 / beta, subs=ab)))
    final = Step(
        id=f"S{first_id + 1}", kind="algebra",
        claim="E r_K <= (1-beta)^K r0 + 2 eta rho sigma/alpha + C/beta = the stated bound",
        justification="algebra (H_K <= 1/alpha, 1-(1-beta)^K <= 1, D = eta/beta)",
        obligations=(
            le("drop H and the geometric factor", p(K, H_SUM),
               w ** K * r0 + A_C / alpha + C_C / beta,
               subs=((H_SUM, 1 / alpha - H_GAP),) + ab),
            eq("constants", w ** K * r0 + 2 * eta * rho * sigma / alpha + constant / beta,
               bound)))
    return unroll, final


def iteration_count_obligations(contraction: sympy.Expr) -> tuple:
    """``K >= log(4 r0/eps)/(-log(1-c))`` implies ``(1-c)^K r0 <= eps/4`` (both cases of
    4 r0 vs eps), and ``-log(1-c) >= c`` (so K <= log(4 r0/eps)/c + 1: the O~ form)."""
    b = sympy.Symbol("b_c", positive=True)
    x, t = sympy.Symbol("x", nonnegative=True), sympy.Symbol("t", nonnegative=True)
    cs = ((contraction, 1 / (1 + b)),)
    return (
        le("(1-c)^K r0 <= eps/4 when 4 r0 > eps", r0 * sympy.exp(K * sympy.log(1 - contraction)),
           eps / 4, subs=((K, sympy.log(4 * r0 / eps) / (-sympy.log(1 - contraction)) + KAPPA),
                          (eps, 4 * r0 / (1 + C_POS))) + cs),
        le("(1-c)^K r0 <= r0", r0 * (1 - contraction) ** K, r0, subs=cs),
        le("r0 <= eps/4 when 4 r0 <= eps", r0, eps / 4, subs=((eps, 4 * r0 + 4 * E_T),)),
        increasing("-log(1-x) >= x on [0, 1)", -sympy.log(1 - x) - x, x, 0, t / (1 + t)),
    )


def _tuning_obligations(delay) -> tuple:
    bound = star_convex_bound(delay).subs(beta, eta / D)
    t1 = (1 - eta / D) ** K * r0
    t2 = 2 * eta * rho * sigma / alpha
    t3 = 2 * rho * sigma * D * sympy.sqrt(alpha)
    t4 = 4 * L * eta * D * ((1 - alpha) / alpha + delay) + 2 * L * eta * D
    sig = sympy.Symbol("sigma_p", positive=True)
    a2 = sympy.Symbol("a2", nonnegative=True)
    a_sub = ((alpha, 1 / (1 + A_T)),)
    return (
        eq("the four terms", t1 + t2 + t3 + t4, bound),
        le("2 eta rho sigma/alpha <= eps/4 (eta <= eps alpha/(8 rho sigma))", t2, eps / 4,
           subs=((eta, eps * alpha / (8 * rho * sigma * (1 + E_T))), (sigma, sig))),
        le("2 eta rho sigma/alpha <= eps/4 (sigma = 0)", t2, eps / 4, subs=((sigma, 0),)),
        le("2 rho sigma D sqrt(alpha) <= eps/4", t3, eps / 4,
           subs=((alpha, eps ** 2 / (64 * rho ** 2 * sig ** 2 * D ** 2 * (1 + a2) ** 2)),
                 (sigma, sig))),
        le("2 rho sigma D sqrt(alpha) <= eps/4 (sigma = 0)", t3, eps / 4, subs=((sigma, 0),)),
        le("L terms <= eps/4 (eta <= eps/(16 L D (1/alpha + tau)))", t4, eps / 4,
           subs=((eta, eps / (16 * L * D * (1 / alpha + delay) * (1 + E_T))),) + a_sub),
        le("beta = eta/D <= 1/2 (eta <= D/2)", eta / D, sympy.Rational(1, 2),
           subs=((eta, D / (2 * (1 + E_T))),)),
    )


def _tuning(delay, tau_domain: Domain) -> Tuning:
    # min(1, eps^2/(64 rho^2 sigma^2 D^2)) and the cap eps alpha/(8 rho sigma), written with the
    # branch conditions multiplied out so that no float division by an underflowed 0 can occur.
    alpha_c = sympy.Piecewise((1, 8 * rho * sigma * D <= eps),
                              ((eps / (8 * rho * sigma * D)) ** 2, True))
    eta_c = sympy.Min(eps / (16 * L * D * (1 / alpha_c + delay)), D / 2,
                      sympy.Piecewise((D / 2, 8 * rho * sigma * D <= 2 * eps * alpha_c),
                                      (eps * alpha_c / (8 * rho * sigma), True)))
    beta_c = eta_c / D
    k_expr = sympy.Piecewise((0, 4 * r0 <= eps),
                             (sympy.log(4 * r0 / eps) / (-sympy.log(1 - beta_c)), True))
    return Tuning(
        problem={"L": POSITIVE, "sigma": NONNEGATIVE, "rho": AT_LEAST_ONE, "tau": tau_domain,
                 "r0": NONNEGATIVE, "D": POSITIVE},
        choices={"alpha": alpha_c, "eta": eta_c, "beta": beta_c},
        K_expr=k_expr,
        description=("alpha = min(1, eps^2/(64 rho^2 sigma^2 D^2)), eta = min(eps/(16 L D "
                     "(1/alpha + tau)), eps alpha/(8 rho sigma), D/2), beta = eta/D, K = "
                     "ceil(log(4 r0/eps)/(-log(1-beta))): K = O~(L D^2 (1+tau)/eps + "
                     "(L D + rho sigma) rho^2 sigma^2 D^3/eps^3)"))


def _steps(delay, sync: bool) -> tuple[Step, ...]:
    step = ((VEC_X_NEXT, (1 - beta) * VEC_X + eta * VEC_D),)
    xh = beta * VEC_X_STAR + (1 - beta) * VEC_X
    mom = momentum_error_bound(drift=2, mismatch=2 * delay)
    constant = 2 * eta * (mom - (1 - alpha) ** k * rho * sigma) + 2 * L * eta ** 2
    unroll, final = unrolling_steps(10, constant, star_convex_bound(delay))
    if sync:
        last = Step(id="S14", kind="algebra",
                    claim="the bound is star_convex_delayed's at tau = 0",
                    justification="algebra (tau = 0 in the delayed bound)",
                    obligations=(eq("tau = 0", star_convex_bound(0),
                                    star_convex_bound(tau).subs(tau, 0)),))
    else:
        last = Step(id="S14", kind="algebra",
                    claim="d bound / d tau = 4 L eta D and the contraction (1-beta)^K is free of tau",
                    justification="algebra (delay raises the floor linearly, not the rate)",
                    obligations=(eq("slope in tau", sympy.diff(star_convex_bound(tau), tau),
                                    4 * L * eta * _D),
                                 eq("contraction", sympy.diff((1 - beta) ** K * r0, tau), 0)))
    return (
        Step(id="S1", kind="analytic",
             claim="||x_k|| <= D for all k and ||x_{k+1} - x_k|| <= 2 eta",
             justification="geometry lemma (geometry_weight_decay S2, S7)",
             predicate="wd_step_length"),
        Step(id="S2", kind="analytic",
             claim="f(x_{k+1}) <= f(x_k) + <grad f(x_k), x_{k+1} - x_k> + L/2 ||x_{k+1} - x_k||^2",
             justification="A2 (smoothness upper bound in the norm)", predicate="smoothness_upper"),
        Step(id="S3", kind="algebra",
             claim="x_{k+1} - x_k = (xh_k - x_k) + (eta d_k - beta x*), xh_k = beta x* + (1-beta) x_k",
             justification="algebra (linear identity)",
             obligations=(eq("split", VEC_X_NEXT - VEC_X,
                             (xh - VEC_X) + (eta * VEC_D - beta * VEC_X_STAR), subs=step,
                             vectors=VECTORS),)),
        Step(id="S4", kind="analytic",
             claim="<grad f(x_k), xh_k - x_k> = beta <grad f(x_k), x* - x_k> <= -beta r_k",
             justification="A4 (star-convexity, differentiated at b = 0), beta >= 0",
             predicate="star_convexity"),
        Step(id="S5", kind="analytic", claim="<m_k, eta d_k - beta x*> <= 0",
             justification="LMO optimality <m, d> = -||m||_* and Hoelder with ||beta x*|| <= eta (A5)",
             predicate="lmo_anchor_optimality"),
        Step(id="S6", kind="analytic", claim="-<e_k, eta d_k - beta x*> <= 2 eta ||e_k||_*",
             justification="Hoelder, ||d_k|| <= 1, ||beta x*|| <= eta (A5)",
             predicate="holder_anchor"),
        Step(id="S7", kind="algebra",
             claim="r_{k+1} <= r_k - beta r_k + 2 eta ||e_k||_* + L/2 (2 eta)^2 "
                   "= (1-beta) r_k + 2 eta ||e_k||_* + 2 L eta^2",
             justification="algebra (S2-S6 with grad f = m_k - e_k; sharper than THEORY.md's 4 L eta^2)",
             obligations=(eq("combine", R_K - beta * R_K + 2 * eta * E_NORM
                             + L / 2 * (2 * eta) ** 2,
                             (1 - beta) * R_K + 2 * eta * E_NORM + 2 * L * eta ** 2),)),
        Step(id="S8", kind="analytic",
             claim="r_{k+1} <= (1-beta) r_k + 2 eta ||m_k - grad f(x_k)||_* + 2 L eta^2 (pathwise)",
             justification="end-to-end check of S1-S7", predicate="star_convex_one_step"),
        Step(id="S9", kind="analytic",
             claim="E||m_k - grad f(x_k)||_* <= (1-alpha)^k rho sigma + sqrt(alpha) rho sigma "
                   "+ L eta (2 (1-alpha)/alpha + 2 tau)",
             justification="momentum_error lemma with s = 2, omega_bar = 2 tau (geometry lemma S9)",
             predicate="momentum_error_lemma",
             options={"weight_decay": True, **({"tau": 0} if sync else {})}),
        unroll,
        final,
        Step(id="S12", kind="algebra",
             claim="tuned alpha, eta, beta = eta/D make each of the last three terms <= eps/4",
             justification="algebra (each choice is a min, so it is below each argument)",
             obligations=_tuning_obligations(delay)),
        Step(id="S13", kind="algebra",
             claim="K >= log(4 r0/eps)/(-log(1-beta)) gives (1-beta)^K r0 <= eps/4, and "
                   "-log(1-beta) >= beta",
             justification="algebra (exp/log monotonicity; derivative sign)",
             obligations=iteration_count_obligations(beta)),
        last,
    )


def _theorem(name: str, sync: bool) -> Theorem:
    delay = sympy.Integer(0) if sync else tau
    tau_domain = fixed(0) if sync else NONNEGATIVE_INTEGER
    what = "synchronous (tau = 0)" if sync else "tau-delayed (y_k = x_{max(k-tau,0)})"
    return Theorem(
        name=name,
        title=f"Star-convex rate of {what} LMO momentum with weight decay",
        statement=(f"For {what} LMO momentum with weight decay, D = eta/beta, r_k = f(x_k) - f*, "
                   "every K >= 1: E r_K <= (1-beta)^K r0 + 2 eta rho sigma/alpha + 2 rho sigma D "
                   f"sqrt(alpha) + 4 L eta D ((1-alpha)/alpha{' + tau' if not sync else ''}) "
                   "+ 2 L eta D."),
        assumptions=("A1 unbiased gradients, E||g - grad f||_2^2 <= sigma^2 (martingale noise)",
                     "A2 ||grad f(x) - grad f(y)||_* <= L ||x - y||",
                     "A3 ||g||_* <= rho ||g||_2",
                     "A4 f star-convex about a minimizer x*",
                     "A5 ||x_0||, ||x*|| <= D = eta/beta"),
        parameters={"K": K, "L": L, "eta": eta, "alpha": alpha, "beta": beta, "sigma": sigma,
                    "rho": rho, "tau": tau, "r0": r0},
        domains={"K": POSITIVE_INTEGER, "L": POSITIVE, "eta": POSITIVE, "alpha": UNIT_HALF_OPEN,
                 "beta": UNIT_OPEN, "sigma": NONNEGATIVE, "rho": AT_LEAST_ONE, "tau": tau_domain,
                 "r0": NONNEGATIVE},
        bound=star_convex_bound(delay),
        lhs_latex=r"\mathbb{E}\,[f(x_K) - f^\star]",
        extras={"radius": _D},
        proof=Proof(theorem=name, steps=_steps(delay, sync)),
        module=MODULE,
        proof_md=f"proofs_md/{name}.md",
        tuning=_tuning(delay, tau_domain),
        reference="THEORY.md result 3; Kovalev (2025) star-convex weight-decay rate at tau = 0",
    )


STAR_CONVEX_SYNC = _theorem("star_convex_sync", sync=True)
STAR_CONVEX_DELAYED = _theorem("star_convex_delayed", sync=False)
