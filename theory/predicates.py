"""Numeric predicates for the analytic proof steps: ``predicate(**instance) -> slack``.

Each predicate evaluates one inequality of a proof on concrete data and returns its *slack*
(right-hand side minus left-hand side): slack >= 0 means the inequality holds on that instance.
They are generic over the geometry: ``geometry`` is any object with ``norm``, ``dual_norm``,
``lmo``, ``inner``, ``l2`` and ``event_ndim`` (``theory.geometry.Geometry``), and functions are
passed as batched callables ``f(x) -> value``, ``grad(x) -> gradient``. Nothing here imports
torch: the predicates only use tensor methods, so ``numerics`` can run them at scale on its own
problems and trajectories.

Shapes: points are ``(N, ..., *event)`` with ``N`` independent instances leading; per-instance
scalars (``eta``, ``beta``, ``L``, ...) are floats or tensors of shape ``(N,)``; the returned
slack has the batch shape of the inequality (``(N,)``, ``(N, T)``, ...). Extra keyword
arguments are ignored so one instance dictionary can feed several predicates.

The hypotheses of each inequality (||x|| <= eta/beta, ||d|| <= 1, grad f(x*) = 0, the momentum
noise being a martingale difference with E||xi||_2^2 <= sigma^2, ...) are the caller's
responsibility; they are stated in each docstring and the instance builders of
:mod:`theory.instances` satisfy them.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["PREDICATES"] + [
    "wd_ball_invariant", "wd_anchor_shift", "wd_anchor_gap", "wd_step_length",
    "wd_anchor_to_next", "delay_drift", "martingale_noise", "weighted_gradient_differences",
    "momentum_error_lemma", "smoothness_upper", "star_convexity", "lmo_anchor_optimality",
    "holder_anchor", "star_convex_one_step", "lmo_descent", "nonconvex_one_step",
    "ef_mismatch_worst_case", "ef_wd_invariant", "ef_extra_term", "ef_star_convex_one_step",
    "pl_inequality", "pl_invariant", "window_cauchy_schwarz", "delayed_gd_mismatch",
    "ef_gd_mismatch", "average_squared_gradient",
]


def _bx(value, ref):
    """Append singleton dims to a per-instance scalar tensor so it broadcasts against ``ref``."""
    if hasattr(value, "ndim") and hasattr(ref, "ndim") and value.ndim < ref.ndim:
        return value.reshape(tuple(value.shape) + (1,) * (ref.ndim - value.ndim))
    return value


def _anchor(x, x_star, beta):
    """``xh = beta x* + (1 - beta) x`` (the weight-decay anchor of the geometry lemma)."""
    return _bx(beta, x) * x_star + (1 - _bx(beta, x)) * x


def _wd_step(x, d, eta, beta):
    """``x_{k+1} = (1 - beta) x_k + eta d_k`` (THEORY.md; same formula as theory.update_rules)."""
    return (1 - _bx(beta, x)) * x + _bx(eta, x) * d


# ------------------------------------------------------------------------- geometry lemma
def wd_ball_invariant(*, x, d, eta, beta, geometry, **_):
    """||x|| <= D and ||d|| <= 1  =>  ||(1-beta) x + eta d|| <= D, with D = eta/beta."""
    n = geometry.norm(_wd_step(x, d, eta, beta))
    return _bx(eta, n) / _bx(beta, n) - n


def wd_anchor_shift(*, x, x_star, eta, beta, geometry, **_):
    """||x*|| <= eta/beta  =>  ||xh - (1-beta) x|| <= eta."""
    n = geometry.norm(_anchor(x, x_star, beta) - (1 - _bx(beta, x)) * x)
    return _bx(eta, n) - n


def wd_anchor_gap(*, x, x_star, eta, beta, geometry, **_):
    """||x||, ||x*|| <= eta/beta  =>  ||xh - x|| <= 2 eta."""
    n = geometry.norm(_anchor(x, x_star, beta) - x)
    return 2 * _bx(eta, n) - n


def wd_step_length(*, x, d, eta, beta, geometry, **_):
    """||x|| <= eta/beta, ||d|| <= 1  =>  ||x_{k+1} - x_k|| <= 2 eta."""
    n = geometry.norm(_wd_step(x, d, eta, beta) - x)
    return 2 * _bx(eta, n) - n


def wd_anchor_to_next(*, x, x_star, d, eta, beta, geometry, **_):
    """||x*|| <= eta/beta, ||d|| <= 1  =>  ||x_{k+1} - xh|| <= 2 eta."""
    n = geometry.norm(_wd_step(x, d, eta, beta) - _anchor(x, x_star, beta))
    return 2 * _bx(eta, n) - n


def delay_drift(*, path, tau, eta, s, geometry, **_):
    """Steps of length <= s*eta  =>  ||x_k - x_{max(k-tau,0)}|| <= s * min(k, tau) * eta.

    ``path``: iterates ``(N, T, *event)``; ``tau``: ``(N,)`` integer tensor. Slack ``(N, T)``.
    """
    n_inst, steps = path.shape[0], path.shape[1]
    idx = path.new_tensor(list(range(steps)))  # (T,)
    lag = idx.reshape(1, -1).minimum(_bx(tau.to(path.dtype), idx.reshape(1, -1)))  # (N, T)
    src = (idx.reshape(1, -1) - lag).long()  # (N, T)
    gather = src.reshape(n_inst, steps, *([1] * (path.ndim - 2))).expand_as(path)
    n = geometry.norm(path - path.gather(1, gather))
    return _bx(s, n) * lag * _bx(eta, n) - n


# ----------------------------------------------------------------------- momentum-error lemma
def martingale_noise(*, noise, weights, sigma, rho, geometry, **_):
    """E||sum_j w_j xi_j||_* <= rho sigma sqrt(sum_j w_j^2) for martingale differences xi_j with
    E||xi_j||_2^2 <= sigma^2 (A1, A3, Jensen).

    ``noise``: ``(N, P, J, *event)`` over P equally likely outcomes; ``weights``: ``(N, J)``.
    """
    w = weights.reshape(weights.shape[0], 1, weights.shape[1], *([1] * geometry.event_ndim))
    total = (w * noise).sum(dim=2)  # (N, P, *event)
    lhs = geometry.dual_norm(total).mean(dim=1)  # (N,)
    rhs = _bx(rho, lhs) * _bx(sigma, lhs) * (weights ** 2).sum(dim=1) ** 0.5
    return rhs - lhs


def weighted_gradient_differences(*, grad, a, b, c, L, geometry, **_):
    """||sum_j c_j (grad f(a_j) - grad f(b_j))||_* <= L sum_j c_j ||a_j - b_j|| for c_j >= 0
    (triangle inequality and A2). ``a``, ``b``: ``(N, J, *event)``; ``c``: ``(N, J)``."""
    cw = c.reshape(*c.shape, *([1] * geometry.event_ndim))
    lhs = geometry.dual_norm((cw * (grad(a) - grad(b))).sum(dim=1))
    rhs = _bx(L, lhs) * (c * geometry.norm(a - b)).sum(dim=1)
    return rhs - lhs


def momentum_error_lemma(*, m, grad_p, k, L, eta, alpha, sigma, rho, s, omega_bar, geometry,
                         **_):
    """E||m_k - grad f(p_k)||_* <= (1-alpha)^k rho sigma + sqrt(alpha) rho sigma
    + L eta (s (1-alpha)/alpha + omega_bar)  (the momentum-error lemma).

    ``m``, ``grad_p``: ``(N, T, P, *event)`` (step k = 0..T-1, P equally likely noise outcomes);
    ``k``: ``(T,)``. Slack ``(N, T)``.
    """
    err = geometry.dual_norm(m - grad_p).mean(dim=2)  # (N, T)
    a = _bx(alpha, err)
    kk = k.reshape(1, -1).to(err.dtype)
    bound = ((1 - a) ** kk + a ** 0.5) * _bx(rho, err) * _bx(sigma, err) + _bx(L, err) * _bx(
        eta, err) * (_bx(s, err) * (1 - a) / a + _bx(omega_bar, err))
    return bound - err


# ------------------------------------------------------------------ one-step inequalities
def smoothness_upper(*, f, grad, x, y, L, geometry, **_):
    """f(y) <= f(x) + <grad f(x), y - x> + L/2 ||y - x||^2 (A2)."""
    fx = f(x)
    return fx + geometry.inner(grad(x), y - x) + _bx(L, fx) / 2 * geometry.norm(y - x) ** 2 - f(y)


def star_convexity(*, f, grad, x, x_star, f_star, geometry, **_):
    """<grad f(x), x* - x> <= f* - f(x) (A4, differentiated at b = 0)."""
    fx = f(x)
    return (_bx(f_star, fx) - fx) - geometry.inner(grad(x), x_star - x)


def lmo_anchor_optimality(*, m, x_star, eta, beta, geometry, **_):
    """||x*|| <= eta/beta  =>  <m, eta d(m) - beta x*> <= 0 (LMO optimality + Hoelder)."""
    d = geometry.lmo(m)
    return -geometry.inner(m, _bx(eta, m) * d - _bx(beta, m) * x_star)


def holder_anchor(*, e, m, x_star, eta, beta, geometry, **_):
    """||x*|| <= eta/beta  =>  -<e, eta d(m) - beta x*> <= 2 eta ||e||_* (Hoelder)."""
    d = geometry.lmo(m)
    lhs = -geometry.inner(e, _bx(eta, m) * d - _bx(beta, m) * x_star)
    return 2 * _bx(eta, lhs) * geometry.dual_norm(e) - lhs


def star_convex_one_step(*, f, grad, x, x_star, f_star, m, eta, beta, L, geometry, **_):
    """||x||, ||x*|| <= eta/beta  =>  r_{k+1} <= (1-beta) r_k + 2 eta ||m - grad f(x)||_* + 2 L eta^2."""
    x_next = _wd_step(x, geometry.lmo(m), eta, beta)
    fx = f(x)
    fs, et, be = _bx(f_star, fx), _bx(eta, fx), _bx(beta, fx)
    rhs = (1 - be) * (fx - fs) + 2 * et * geometry.dual_norm(m - grad(x)) + 2 * _bx(L, fx) * et ** 2
    return rhs - (f(x_next) - fs)


def lmo_descent(*, g, m, geometry, **_):
    """<g, d(m)> <= -||g||_* + 2 ||m - g||_* (LMO optimality, Hoelder, triangle inequality)."""
    return -geometry.dual_norm(g) + 2 * geometry.dual_norm(m - g) - geometry.inner(g, geometry.lmo(m))


def nonconvex_one_step(*, f, grad, x, m, eta, L, geometry, **_):
    """f(x + eta d(m)) <= f(x) - eta ||grad f(x)||_* + 2 eta ||m - grad f(x)||_* + L eta^2 / 2."""
    g = grad(x)
    fx = f(x)
    et = _bx(eta, fx)
    x_next = x + _bx(eta, x) * geometry.lmo(m)
    rhs = fx - et * geometry.dual_norm(g) + 2 * et * geometry.dual_norm(m - g) + _bx(
        L, fx) * et ** 2 / 2
    return rhs - f(x_next)


# ---------------------------------------------------------------------------- Error Feedback
def ef_mismatch_worst_case(*, d_prev, d_prev2, lam, geometry, **_):
    """||d_{k-1} - lam d_{k-2}|| <= 1 + lam for ||d|| <= 1, lam >= 0 (triangle inequality)."""
    n = geometry.norm(d_prev - _bx(lam, d_prev) * d_prev2)
    return 1 + _bx(lam, n) - n


def _ef_radii(eta, beta, lam):
    big_b = 2 * eta / (1 - 2 * beta * lam)
    return eta / beta, big_b


def ef_wd_invariant(*, z, v, eta, beta, lam, geometry, **_):
    """Full-update EF with weight decay, 2 beta lam < 1: ||z_k|| <= D + lam B and ||v_k|| <= B
    with D = eta/beta, B = 2 eta/(1 - 2 beta lam). ``z``, ``v``: ``(N, T, *event)``."""
    nz, nv = geometry.norm(z), geometry.norm(v)
    radius, big_b = _ef_radii(_bx(eta, nz), _bx(beta, nz), _bx(lam, nz))
    return (radius + _bx(lam, nz) * big_b - nz).minimum(big_b - nv)


def ef_extra_term(*, grad, z, v_prev, x_star, beta, lam, L, geometry, **_):
    """grad f(x*) = 0  =>  <grad f(z), -beta lam v> <= beta lam ||v|| L (||z|| + ||x*||)."""
    lhs = geometry.inner(grad(z), -_bx(beta, z) * _bx(lam, z) * v_prev)
    rhs = (_bx(beta, lhs) * _bx(lam, lhs) * geometry.norm(v_prev) * _bx(L, lhs)
           * (geometry.norm(z) + geometry.norm(x_star)))
    return rhs - lhs


def ef_star_convex_one_step(*, f, grad, z, v_prev, m, x_star, f_star, eta, beta, lam, L,
                            geometry, **_):
    """||z|| <= D + lam B, ||v_prev|| <= B, ||x*|| <= D, 2 beta lam < 1  =>
    r(z_{k+1}) <= (1-beta) r(z_k) + 2 eta ||m - grad f(z)||_* + beta lam B L (2D + lam B) + L B^2/2."""
    x = z + _bx(lam, z) * v_prev
    v = -_bx(beta, z) * x + _bx(eta, z) * geometry.lmo(m)
    fz = f(z)
    fs, et, be, la, ll = (_bx(t, fz) for t in (f_star, eta, beta, lam, L))
    radius, big_b = _ef_radii(et, be, la)
    rhs = ((1 - be) * (fz - fs) + 2 * et * geometry.dual_norm(m - grad(z))
           + be * la * big_b * ll * (2 * radius + la * big_b) + ll * big_b ** 2 / 2)
    return rhs - (f(z + v) - fs)


# ---------------------------------------------------------------------------------------- PL
def pl_inequality(*, f, grad, x, f_star, mu, geometry, **_):
    """||grad f(x)||_* >= sqrt(2 mu (f(x) - f*)) (the PL assumption in the dual norm)."""
    gap = (f(x) - _bx(f_star, f(x))).clamp(min=0)
    return geometry.dual_norm(grad(x)) - (2 * _bx(mu, gap) * gap) ** 0.5


def pl_invariant(*, r, r0, L, eta, alpha, tau, mu, **_):
    """Deterministic delayed LMO-momentum under PL: r_k <= max(r0, t + c) for all k, with
    E = L eta ((1-alpha)/alpha + tau), c = 2 eta E + L eta^2/2, t = (2E + L eta/2)^2/(2 mu).
    ``r``: ``(N, T)`` gaps f(x_k) - f*."""
    L, eta, alpha, tau, mu, r0 = (_bx(t, r) for t in (L, eta, alpha, tau, mu, r0))
    big_e = L * eta * ((1 - alpha) / alpha + tau)
    c = 2 * eta * big_e + L * eta ** 2 / 2
    t = (2 * big_e + L * eta / 2) ** 2 / (2 * mu)
    return (t + c).maximum(r0) - r


# ------------------------------------------------------------------ delayed gradient descent
def window_cauchy_schwarz(*, b, mask, geometry, **_):
    """||sum_{j in W} b_j||_2^2 <= |W| sum_{j in W} ||b_j||_2^2 (Cauchy-Schwarz).
    ``b``: ``(N, J, *event)``; ``mask``: ``(N, J)`` 0/1 membership of W."""
    mw = mask.reshape(*mask.shape, *([1] * geometry.event_ndim))
    lhs = geometry.l2((mw * b).sum(dim=1)) ** 2
    return mask.sum(dim=1) * (mask * geometry.l2(b) ** 2).sum(dim=1) - lhs


def delayed_gd_mismatch(*, a, b, gamma, L, tau, geometry, **_):
    """Delayed GD x_{k+1} = x_k - gamma b_k, b_k = grad f(x_{max(k-tau,0)}), a_k = grad f(x_k):
    ||a_k - b_k||^2 <= L^2 gamma^2 tau sum_{j=max(k-tau,0)}^{k-1} ||b_j||^2 (A2 + Cauchy-Schwarz).
    ``a``, ``b``: ``(N, T, *event)``; ``tau``: ``(N,)``. Slack ``(N, T)``."""
    n_inst, steps = b.shape[0], b.shape[1]
    idx = b.new_tensor(list(range(steps)))
    kk, jj = idx.reshape(1, steps, 1), idx.reshape(1, 1, steps)
    tt = tau.to(b.dtype).reshape(n_inst, 1, 1)
    window = ((jj <= kk - 1) & (jj >= kk - tt)).to(b.dtype)  # (N, T, T)
    bsq = geometry.l2(b) ** 2  # (N, T)
    wsum = (window * bsq.reshape(n_inst, 1, steps)).sum(dim=2)
    lhs = geometry.l2(a - b) ** 2
    return _bx(L, lhs) ** 2 * _bx(gamma, lhs) ** 2 * _bx(tau.to(b.dtype), lhs) * wsum - lhs


def ef_gd_mismatch(*, a, b, gamma, L, lam, geometry, **_):
    """EF on 1-delayed GD: ||grad f(z_k) - b_k|| <= L gamma (||b_{k-1}|| + lam ||b_{k-2}||) with
    b_k = grad f(x_{k-1}), b_{-1} = b_{-2} = 0 (virtual iterate + A2). Slack ``(N, T)``."""
    nb = geometry.l2(b)
    prev1, prev2 = nb.new_zeros(nb.shape), nb.new_zeros(nb.shape)
    prev1[:, 1:] = nb[:, :-1]
    prev2[:, 2:] = nb[:, :-2]
    lhs = geometry.l2(a - b)
    return _bx(L, lhs) * _bx(gamma, lhs) * (prev1 + _bx(lam, lhs) * prev2) - lhs


def average_squared_gradient(*, grad_sq, Delta0, gamma, **_):
    """(1/K) sum_{k<K} ||grad f(.)||^2 <= 2 Delta0 / (gamma K). ``grad_sq``: ``(N, K)``."""
    steps = grad_sq.shape[1]
    return 2 * Delta0 / (gamma * steps) - grad_sq.mean(dim=1)


#: Name -> predicate, for :class:`theory.proof.Step` and for ``numerics`` at scale.
PREDICATES: dict[str, Callable] = {
    fn.__name__: fn
    for fn in (
        wd_ball_invariant, wd_anchor_shift, wd_anchor_gap, wd_step_length, wd_anchor_to_next,
        delay_drift, martingale_noise, weighted_gradient_differences, momentum_error_lemma,
        smoothness_upper, star_convexity, lmo_anchor_optimality, holder_anchor,
        star_convex_one_step, lmo_descent, nonconvex_one_step, ef_mismatch_worst_case,
        ef_wd_invariant, ef_extra_term, ef_star_convex_one_step, pl_inequality, pl_invariant,
        window_cauchy_schwarz, delayed_gd_mismatch, ef_gd_mismatch, average_squared_gradient,
    )
}
