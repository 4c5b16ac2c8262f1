"""Every symbol of the theory, defined once (DESIGN.md "One vocabulary").

Scalar symbols carry the sympy assumptions that match their domain's *sign* (``positive``,
``nonnegative``, ``integer``); the finer interval constraints (``alpha <= 1``, ``beta < 1``,
``rho >= 1``) live in :mod:`theory.domain` and are imposed by reparametrisation when sympy
decides a sign (see :func:`theory.decide.domain_substitutions`).

| symbol      | meaning                                                     | torch side              |
|-------------|-------------------------------------------------------------|-------------------------|
| ``K``       | number of optimizer steps (K >= 1)                          | training steps          |
| ``k``       | a step index (k >= 0)                                       |                         |
| ``L``       | smoothness constant in the optimizer's norm (A2)            | estimated from logs     |
| ``eta``     | trust-region radius = length of an LMO step                 | Muon's effective lr     |
| ``gamma``   | step size of (delayed) gradient descent                     | SGD lr                  |
| ``alpha``   | EMA momentum weight, m = (1-alpha) m + alpha g              | 1 - torch momentum      |
| ``beta``    | per-step decoupled weight-decay factor                      | lr * weight_decay       |
| ``sigma``   | Euclidean noise level, E||g - grad f||_2^2 <= sigma^2 (A1)  | gradient noise          |
| ``rho``     | norm equivalence ||g||_* <= rho ||g||_2 (A3)                | Geometry.rho(shape)     |
| ``tau``     | gradient delay in steps (0 sync, 1 PipeDream-2BW)           | DelayConfig.tau         |
| ``r0``      | initial gap f(x_0) - f* (star-convex results)               |                         |
| ``Delta0``  | initial gap f(x_0) - inf f (nonconvex results)              |                         |
| ``lam``     | Error Feedback coefficient (0 off, 1 paper default)         | DelayConfig.ef_lambda   |
| ``omega_bar``| read mismatch sup_k E||p_k - y_k|| / eta                   | measured drift          |
| ``s``       | tracked-point motion per step, in units of eta              |                         |
| ``mu``      | PL constant, 0.5 ||grad f||_*^2 >= mu (f - f*)              |                         |
| ``eps``     | target accuracy of a tuned corollary                        |                         |
| ``D``       | radius eta/beta (A5); a problem constant in tuned results   | 1 / weight_decay        |

``D_OF`` is the derived radius ``eta / beta``. The ``VEC_*`` symbols stand for vectors in the
linear (vector-space) identities of the proofs: they only ever appear to degree one, so an identity
that sympy proves for them as commuting symbols holds in every vector space
(:class:`theory.decide.Obligation` checks the degree).
"""

from __future__ import annotations

import sympy

__all__ = [
    "K", "k", "L", "eta", "gamma", "alpha", "beta", "sigma", "rho", "tau", "r0", "Delta0",
    "lam", "omega_bar", "s", "mu", "eps", "D", "D_OF", "SCALARS", "LATEX_NAMES",
    "VEC_X", "VEC_X_NEXT", "VEC_X_STAR", "VEC_D", "VEC_M", "VEC_G", "VEC_E", "VEC_V",
    "VEC_V_PREV", "VEC_V_PREV2", "VEC_Z", "VEC_XI", "VEC_GP", "VEC_GP_PREV", "VEC_GY",
    "VECTORS",
]

K = sympy.Symbol("K", integer=True, positive=True)
k = sympy.Symbol("k", integer=True, nonnegative=True)
L = sympy.Symbol("L", positive=True)
eta = sympy.Symbol("eta", positive=True)
gamma = sympy.Symbol("gamma", positive=True)
alpha = sympy.Symbol("alpha", positive=True)
beta = sympy.Symbol("beta", positive=True)
sigma = sympy.Symbol("sigma", nonnegative=True)
rho = sympy.Symbol("rho", positive=True)
tau = sympy.Symbol("tau", integer=True, nonnegative=True)
r0 = sympy.Symbol("r0", nonnegative=True)
Delta0 = sympy.Symbol("Delta0", nonnegative=True)
lam = sympy.Symbol("lam", nonnegative=True)
omega_bar = sympy.Symbol("omega_bar", nonnegative=True)
s = sympy.Symbol("s", nonnegative=True)
mu = sympy.Symbol("mu", positive=True)
eps = sympy.Symbol("eps", positive=True)
D = sympy.Symbol("D", positive=True)

#: The derived radius of A5: D = eta / beta.
D_OF = eta / beta

#: Name -> symbol for every scalar symbol (the names theorems, CLI and numerics use).
SCALARS: dict[str, sympy.Symbol] = {
    sym.name: sym
    for sym in (K, k, L, eta, gamma, alpha, beta, sigma, rho, tau, r0, Delta0, lam, omega_bar,
                s, mu, eps, D)
}

#: LaTeX names for symbols whose sympy default would not read well.
LATEX_NAMES: dict[sympy.Symbol, str] = {
    lam: r"\lambda", omega_bar: r"\bar{\omega}", Delta0: r"\Delta_0", r0: r"r_0",
}

# Vector placeholders for linear identities (iterates, directions, gradients, noise).
VEC_X, VEC_X_NEXT, VEC_X_STAR = sympy.symbols("x_k x_k1 x_star")
VEC_D, VEC_M, VEC_G, VEC_E = sympy.symbols("d_k m_k g_k e_k")
VEC_V, VEC_V_PREV, VEC_V_PREV2 = sympy.symbols("v_k v_km1 v_km2")
VEC_Z, VEC_XI = sympy.symbols("z_k xi_k")
VEC_GP, VEC_GP_PREV, VEC_GY = sympy.symbols("gp_k gp_km1 gy_k")

VECTORS: tuple[sympy.Symbol, ...] = (
    VEC_X, VEC_X_NEXT, VEC_X_STAR, VEC_D, VEC_M, VEC_G, VEC_E, VEC_V, VEC_V_PREV, VEC_V_PREV2,
    VEC_Z, VEC_XI, VEC_GP, VEC_GP_PREV, VEC_GY,
)
