"""Random instances for the analytic predicates (torch float64, ``theory.geometry`` geometries).

``build_instance(name, geometry, n=..., seed=..., **options)`` returns the keyword arguments of
the predicate ``name`` for ``n`` random instances satisfying that predicate's hypotheses. Only
:meth:`theory.proof.Proof.check` imports this module (lazily), so ``import theory`` stays
torch-free.

Test functions (batched, one per instance, with known constants) live in
:mod:`theory.objectives`.

Trajectories come from :func:`simulate`, which runs the delayed LMO-momentum method (optionally
with full-update Error Feedback) with the update rules of ``theory.update_rules``; its gradient
noise ``xi_k = s_k sigma u_k`` has a unit direction ``u_k`` that depends on the past (adapted)
and a sign ``s_k`` that is +-1 with probability 1/2, so the noise is a martingale difference with
``||xi_k||_2 = sigma``. With ``enumerate_noise=True`` all ``2**steps`` sign patterns are run, so
expectations are exact averages over a genuine probability space.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from theory.geometry import get_geometry
from theory.objectives import DTYPE, Cosine, Ctx, Quadratic, RadialWave, RidgeHuber, mix
from theory.update_rules import ef_correct, ema_momentum, lmo_step, read_index

__all__ = ["build_instance", "BUILDERS", "simulate", "SIM_STEPS", "SIM_INSTANCES"]

#: Steps of enumerated-noise simulations (2**SIM_STEPS equally likely outcomes).
SIM_STEPS = 5
#: Instances per geometry for trajectory-based builders (each runs 2**SIM_STEPS noise outcomes,
#: so fewer instances give the same number of checked inequalities at a fraction of the cost).
SIM_INSTANCES = 16


def simulate(ctx: Ctx, fn, *, x0, eta, alpha, beta, tau, sigma, steps, lam=None,
             enumerate_noise=True) -> dict[str, torch.Tensor]:
    """Run the tau-delayed LMO-momentum method (full-update EF when ``lam`` is given).

    Per-instance parameters are ``(n,)`` tensors (``tau`` integer). Returns tensors of shape
    ``(n, steps, P, *event)``: ``x`` (x_k), ``y`` (read point), ``p`` (tracked point: x_k, or
    z_k = x_k - lam v_{k-1} with EF), ``m``, ``grad_p``, ``d``, ``v`` (full update v_k).
    """
    n, geo, ev = ctx.n, ctx.geo, ctx.event
    outcomes = 2 ** steps if enumerate_noise else 1
    if enumerate_noise:
        signs = torch.tensor([[1.0 - 2.0 * ((p >> j) & 1) for j in range(steps)]
                              for p in range(outcomes)], dtype=DTYPE).unsqueeze(0)  # (1, P, T)
    else:
        signs = (torch.randint(0, 2, (n, 1, steps), generator=ctx.gen) * 2 - 1).to(DTYPE)
    dim = math.prod(ev)
    rot = torch.randn(steps, n, dim, dim, generator=ctx.gen, dtype=DTYPE)
    shift = torch.randn(steps, n, dim, generator=ctx.gen, dtype=DTYPE)
    x = x0.unsqueeze(1).expand(n, outcomes, *ev).clone()
    sc = lambda t: ctx.sc(t, x)  # noqa: E731
    history, v_prev, m = [x], torch.zeros_like(x), None
    rec: dict[str, list] = {key: [] for key in ("x", "y", "p", "m", "grad_p", "d", "v")}
    taus = [int(t) for t in tau.tolist()]
    for k in range(steps):
        y = torch.stack([history[read_index(k, taus[i])][i] for i in range(n)])
        raw = torch.einsum("nij,npj->npi", rot[k], y.reshape(n, outcomes, dim)) + shift[k][:, None]
        unit = (raw / raw.norm(dim=-1, keepdim=True).clamp(min=1e-300)).reshape(n, outcomes, *ev)
        noise = signs[..., k].reshape(-1, outcomes, *([1] * len(ev))) * sc(sigma) * unit
        m = ema_momentum(m, fn.grad(y) + noise, sc(alpha))
        d = geo.lmo(m)
        v = -sc(beta) * x + sc(eta) * d
        base = lmo_step(x, d, sc(eta), sc(beta))
        x_next = base if lam is None else ef_correct(base, v, v_prev, sc(lam))
        p = x if lam is None else x - sc(lam) * v_prev
        for key, val in (("x", x), ("y", y), ("p", p), ("m", m), ("grad_p", fn.grad(p)),
                         ("d", d), ("v", v)):
            rec[key].append(val)
        history.append(x_next)
        v_prev, x = v, x_next
    return {key: torch.stack(vals, dim=1) for key, vals in rec.items()}


# ------------------------------------------------------------------------------- builders
def _wd(ctx: Ctx) -> dict:
    eta, beta = ctx.logu(0.01, 1.0), ctx.u(0.02, 0.9)
    radius = eta / beta
    return {"x": ctx.ball(radius), "x_star": ctx.ball(radius), "d": ctx.directions(),
            "eta": eta, "beta": beta}


def _delay_drift(ctx: Ctx, weight_decay: bool = True) -> dict:
    eta, alpha, tau = ctx.logu(0.01, 0.5), ctx.u(0.05, 1.0), ctx.randint(0, 4)
    beta = ctx.u(0.02, 0.5) if weight_decay else torch.zeros(ctx.n, dtype=DTYPE)
    radius = eta / beta if weight_decay else 3 * torch.ones(ctx.n, dtype=DTYPE)
    quad = Quadratic(ctx, ctx.ball(radius))
    run = simulate(ctx, quad, x0=ctx.ball(radius), eta=eta, alpha=alpha, beta=beta, tau=tau,
                   sigma=ctx.u(0.0, 2.0), steps=10, enumerate_noise=False)
    s = torch.full((ctx.n,), 2.0 if weight_decay else 1.0, dtype=DTYPE)
    return {"path": run["x"][:, :, 0], "tau": tau, "eta": eta, "s": s}


def _martingale(ctx: Ctx, steps: int = SIM_STEPS) -> dict:
    n, ev = ctx.n, ctx.event
    dim, outcomes = math.prod(ev), 2 ** steps
    signs = torch.tensor([[1.0 - 2.0 * ((p >> j) & 1) for j in range(steps)]
                          for p in range(outcomes)], dtype=DTYPE)  # (P, J)
    kicks = torch.randn(n, steps, dim, generator=ctx.gen, dtype=DTYPE)
    rot = torch.randn(steps, n, dim, dim, generator=ctx.gen, dtype=DTYPE)
    shift = torch.randn(steps, n, dim, generator=ctx.gen, dtype=DTYPE)
    sigma, alpha = ctx.u(0.0, 2.0), ctx.u(0.05, 1.0)
    state = torch.zeros(n, outcomes, dim, dtype=DTYPE)
    noise = []
    for j in range(steps):
        raw = torch.einsum("nij,npj->npi", rot[j], state) + shift[j][:, None]
        unit = raw / raw.norm(dim=-1, keepdim=True).clamp(min=1e-300)
        sj = signs[:, j].reshape(1, outcomes, 1)
        noise.append((sj * sigma.reshape(n, 1, 1) * unit).reshape(n, outcomes, *ev))
        state = state + sj * kicks[:, j][:, None]
    k = steps - 1
    a = alpha.reshape(n, 1)
    js = torch.arange(steps, dtype=DTYPE).reshape(1, -1)
    weights = torch.where(js == 0, (1 - a) ** k, a * (1 - a) ** (k - js))
    return {"noise": torch.stack(noise, dim=2), "weights": weights, "sigma": sigma,
            "rho": torch.full((n,), ctx.geo.rho(ev), dtype=DTYPE)}


def _weighted_differences(ctx: Ctx) -> dict:
    quad = Quadratic(ctx, ctx.normal(), indefinite=True)
    a = ctx.normal(5) * ctx.sc(ctx.logu(0.1, 3.0), ctx.normal(5))
    close = (torch.rand(ctx.n, 5, generator=ctx.gen) < 0.5).to(DTYPE)
    b = a + ctx.normal(5) * (0.01 + close.reshape(ctx.n, 5, *([1] * len(ctx.event))))
    c = torch.rand(ctx.n, 5, generator=ctx.gen, dtype=DTYPE)
    return {"grad": quad.grad, "a": a, "b": b, "c": c, "L": quad.L}


def _momentum_lemma(ctx: Ctx, weight_decay: bool = False, ef: bool = False,
                    sigma_zero: bool = False, tau: int | None = None) -> dict:
    n = ctx.n
    eta, alpha = ctx.logu(0.01, 0.5), ctx.u(0.05, 1.0)
    alpha = torch.where(torch.rand(n, generator=ctx.gen) < 0.2, torch.ones_like(alpha), alpha)
    beta = ctx.u(0.02, 0.4) if weight_decay else torch.zeros(n, dtype=DTYPE)
    taus = torch.full((n,), 1 if ef else tau, dtype=torch.long) if (ef or tau is not None) \
        else ctx.randint(0, 3)
    lam = ctx.u(0.0, 1.0) if ef else None
    sigma = torch.zeros(n, dtype=DTYPE) if sigma_zero else ctx.u(0.0, 2.0)
    radius = eta / beta if weight_decay else 3 * torch.ones(n, dtype=DTYPE)
    quad = Quadratic(ctx, ctx.ball(radius))
    run = simulate(ctx, quad, x0=ctx.ball(radius), eta=eta, alpha=alpha, beta=beta, tau=taus,
                   sigma=sigma, steps=SIM_STEPS, lam=lam, enumerate_noise=not sigma_zero)
    if weight_decay and ef:
        s = 2 / (1 - 2 * beta * lam)
    else:
        s = torch.full((n,), 2.0 if weight_decay else 1.0, dtype=DTYPE)
    if ef:  # measured read mismatch sup_k E||p_k - y_k|| / eta
        omega_bar = ctx.geo.norm(run["p"] - run["y"]).mean(dim=2).max(dim=1).values / eta
    else:  # delay: ||x_k - x_{k-tau}|| <= s tau eta
        omega_bar = s * taus.to(DTYPE)
    return {"m": run["m"], "grad_p": run["grad_p"], "k": torch.arange(SIM_STEPS), "L": quad.L,
            "eta": eta, "alpha": alpha, "sigma": sigma,
            "rho": torch.full((n,), ctx.geo.rho(ctx.event), dtype=DTYPE), "s": s,
            "omega_bar": omega_bar}


def _smoothness(ctx: Ctx) -> dict:
    quad = Quadratic(ctx, ctx.normal(), indefinite=True)
    x = ctx.normal() * 2
    y = x + ctx.normal() * ctx.sc(ctx.logu(1e-3, 3.0), x)
    return {"f": quad.f, "grad": quad.grad, "x": x, "y": y, "L": quad.L}


def _star_convexity(ctx: Ctx) -> dict:
    center = ctx.normal()
    f, grad = mix(ctx.randint(0, 2), Quadratic(ctx, center), RadialWave(ctx, center),
                   RidgeHuber(ctx, center))
    x = center + ctx.normal() * ctx.sc(ctx.logu(0.01, 5.0), center)
    return {"f": f, "grad": grad, "x": x, "x_star": center,
            "f_star": torch.zeros(ctx.n, dtype=DTYPE)}


def _anchor(ctx: Ctx) -> dict:
    eta, beta = ctx.logu(0.01, 1.0), ctx.u(0.02, 0.9)
    m = ctx.normal() * ctx.sc(ctx.logu(1e-2, 1e2), ctx.normal())
    return {"m": m, "e": ctx.normal() * ctx.sc(ctx.logu(1e-2, 1e2), m),
            "x_star": ctx.ball(eta / beta), "eta": eta, "beta": beta}


def _noisy_momentum(ctx: Ctx, g: torch.Tensor) -> torch.Tensor:
    scale = ctx.logu(1e-3, 10.0) * (torch.rand(ctx.n, generator=ctx.gen) > 0.1).to(DTYPE)
    return g + ctx.normal() * ctx.sc(scale, g)


def _star_convex_fn(ctx: Ctx, x_star: torch.Tensor):
    """Half quadratics (strongly star-convex: loose), half ridge Hubers (nearly tight)."""
    choice = ctx.randint(0, 1)
    quad = Quadratic(ctx, x_star, scale=ctx.logu(0.1, 10.0))
    ridge = RidgeHuber(ctx, x_star, scale=ctx.logu(0.3, 3.0))
    f, grad = mix(choice, quad, ridge)
    return f, grad, torch.where(choice == 0, quad.L, ridge.L)


def _star_convex_one_step(ctx: Ctx) -> dict:
    eta, beta = ctx.logu(0.01, 0.5), ctx.u(0.02, 0.5)
    radius = eta / beta
    x_star = ctx.ball(radius)
    f, grad, big_l = _star_convex_fn(ctx, x_star)
    x = ctx.ball(radius)
    return {"f": f, "grad": grad, "x": x, "x_star": x_star,
            "f_star": torch.zeros(ctx.n, dtype=DTYPE), "m": _noisy_momentum(ctx, grad(x)),
            "eta": eta, "beta": beta, "L": big_l}


def _lmo_descent(ctx: Ctx) -> dict:
    g = ctx.normal() * ctx.sc(ctx.logu(1e-2, 1e2), ctx.normal())
    return {"g": g, "m": _noisy_momentum(ctx, g)}


def _nonconvex_one_step(ctx: Ctx) -> dict:
    quad = Quadratic(ctx, ctx.normal(), indefinite=True)
    x = ctx.normal() * 2
    return {"f": quad.f, "grad": quad.grad, "x": x, "m": _noisy_momentum(ctx, quad.grad(x)),
            "eta": ctx.logu(1e-3, 1.0), "L": quad.L}


def _ef_mismatch(ctx: Ctx) -> dict:
    d1 = ctx.directions()
    flip = (torch.rand(ctx.n, generator=ctx.gen) < 0.3).reshape(-1, *([1] * len(ctx.event)))
    d2 = torch.where(flip, -d1, ctx.directions())
    return {"d_prev": d1, "d_prev2": d2, "lam": ctx.u(0.0, 2.0)}


def _ef_params(ctx: Ctx):
    eta, beta, lam = ctx.logu(0.01, 0.5), ctx.u(0.02, 0.45), ctx.u(0.0, 1.0)
    return eta, beta, lam, eta / beta, 2 * eta / (1 - 2 * beta * lam)


def _ef_wd_invariant(ctx: Ctx) -> dict:
    eta, beta, lam, radius, _ = _ef_params(ctx)
    quad = Quadratic(ctx, ctx.ball(radius))
    run = simulate(ctx, quad, x0=ctx.ball(radius), eta=eta, alpha=ctx.u(0.05, 1.0), beta=beta,
                   tau=torch.ones(ctx.n, dtype=torch.long), sigma=ctx.u(0.0, 5.0), steps=12,
                   lam=lam, enumerate_noise=False)
    return {"z": run["p"][:, :, 0], "v": run["v"][:, :, 0], "eta": eta, "beta": beta, "lam": lam}


def _ef_extra_term(ctx: Ctx) -> dict:
    eta, beta, lam, radius, big_b = _ef_params(ctx)
    x_star = ctx.ball(radius)
    quad = Quadratic(ctx, x_star)
    return {"grad": quad.grad, "z": ctx.ball(radius + lam * big_b), "v_prev": ctx.ball(big_b),
            "x_star": x_star, "beta": beta, "lam": lam, "L": quad.L}


def _ef_star_convex_one_step(ctx: Ctx) -> dict:
    eta, beta, lam, radius, big_b = _ef_params(ctx)
    x_star = ctx.ball(radius)
    f, grad, big_l = _star_convex_fn(ctx, x_star)
    z = ctx.ball(radius + lam * big_b)
    return {"f": f, "grad": grad, "z": z, "v_prev": ctx.ball(big_b),
            "m": _noisy_momentum(ctx, grad(z)), "x_star": x_star,
            "f_star": torch.zeros(ctx.n, dtype=DTYPE), "eta": eta, "beta": beta, "lam": lam,
            "L": big_l}


def _pl_inequality(ctx: Ctx) -> dict:
    center = ctx.normal()
    quad = Quadratic(ctx, center, pd_shift=0.1)
    x = center + ctx.normal() * ctx.sc(ctx.logu(0.01, 5.0), center)
    return {"f": quad.f, "grad": quad.grad, "x": x, "f_star": torch.zeros(ctx.n, dtype=DTYPE),
            "mu": quad.mu}


def _pl_invariant(ctx: Ctx, steps: int = 120) -> dict:
    quad = Quadratic(ctx, ctx.normal(), pd_shift=0.1)
    eta, alpha, tau = ctx.logu(1e-3, 0.3), ctx.u(0.05, 1.0), ctx.randint(0, 4)
    zeros = torch.zeros(ctx.n, dtype=DTYPE)
    x0 = quad.c + ctx.normal() * 2
    run = simulate(ctx, quad, x0=x0, eta=eta, alpha=alpha, beta=zeros, tau=tau, sigma=zeros,
                   steps=steps, enumerate_noise=False)
    return {"r": quad.f(run["x"][:, :, 0]), "r0": quad.f(x0), "L": quad.L, "eta": eta,
            "alpha": alpha, "tau": tau.to(DTYPE), "mu": quad.mu}


def _window(ctx: Ctx) -> dict:
    return {"b": ctx.normal(6), "mask": (torch.rand(ctx.n, 6, generator=ctx.gen) < 0.6).to(DTYPE)}


def _delayed_gd(ctx: Ctx, ef: bool = False, steps: int = 40) -> dict:
    """Delayed GD (or full-update EF on 1-delayed GD) on Euclidean test functions."""
    n = ctx.n
    mask = torch.rand(n, generator=ctx.gen) < 0.5
    quad, cosine = Quadratic(ctx, ctx.normal()), Cosine(ctx)
    f, grad = mix((~mask).long(), quad, cosine)
    big_l = torch.where(mask, quad.L, cosine.L)
    inf_lower = torch.where(mask, torch.zeros(n, dtype=DTYPE), cosine.inf_lower)
    tau = torch.ones(n, dtype=torch.long) if ef else ctx.randint(0, 4)
    lam = ctx.u(0.0, 1.0) if ef else torch.zeros(n, dtype=DTYPE)
    growth = (1 + lam) if ef else tau.to(DTYPE)
    gamma = ctx.u(0.3, 1.0) * 2 / (big_l * (1 + torch.sqrt(1 + 4 * growth ** 2)))
    x = ctx.normal() * 2
    x0, history, v_prev = x, [x], torch.zeros_like(x)
    sc = lambda t: ctx.sc(t, x)  # noqa: E731
    a_list, b_list = [], []
    for k in range(steps):
        y = torch.stack([history[read_index(k, int(tau[i]))][i] for i in range(n)])
        b = grad(y)
        v = -sc(gamma) * b
        point = x - sc(lam) * v_prev  # z_k (= x_k without EF)
        a_list.append(grad(point))
        b_list.append(b)
        x = ef_correct(x + v, v, v_prev, sc(lam)) if ef else x + v
        history.append(x)
        v_prev = v
    a, b = torch.stack(a_list, dim=1), torch.stack(b_list, dim=1)
    out = {"a": a, "b": b, "gamma": gamma, "L": big_l, "grad_sq": ctx.geo.l2(a) ** 2,
           "Delta0": f(x0) - inf_lower}
    out.update({"lam": lam} if ef else {"tau": tau})
    return out


#: Instance builder per predicate (or per shared instance name used by a Step).
BUILDERS: dict[str, Callable[..., dict]] = {
    "wd_ball_invariant": _wd, "wd_anchor_shift": _wd, "wd_anchor_gap": _wd,
    "wd_step_length": _wd, "wd_anchor_to_next": _wd,
    "delay_drift": _delay_drift,
    "martingale_noise": _martingale,
    "weighted_gradient_differences": _weighted_differences,
    "momentum_error_lemma": _momentum_lemma,
    "smoothness_upper": _smoothness,
    "star_convexity": _star_convexity,
    "lmo_anchor_optimality": _anchor, "holder_anchor": _anchor,
    "star_convex_one_step": _star_convex_one_step,
    "lmo_descent": _lmo_descent,
    "nonconvex_one_step": _nonconvex_one_step,
    "ef_mismatch_worst_case": _ef_mismatch,
    "ef_wd_invariant": _ef_wd_invariant,
    "ef_extra_term": _ef_extra_term,
    "ef_star_convex_one_step": _ef_star_convex_one_step,
    "pl_inequality": _pl_inequality,
    "pl_invariant": _pl_invariant,
    "window_cauchy_schwarz": _window,
    "delayed_gd": _delayed_gd,
}


_SIMULATED = {"delay_drift", "momentum_error_lemma", "ef_wd_invariant", "pl_invariant",
              "delayed_gd", "martingale_noise"}


def build_instance(name: str, geometry: str, *, n: int, seed: int, **options) -> dict:
    """Keyword arguments for predicate/instance ``name``: ``n`` random instances in ``geometry``
    (deterministic in ``seed``), plus ``geometry`` itself."""
    if name not in BUILDERS:
        raise ValueError(f"no instance builder {name!r}; known: {sorted(BUILDERS)}")
    geo = get_geometry(geometry)
    gen = torch.Generator().manual_seed(int(seed))
    if name in _SIMULATED:
        n = min(n, SIM_INSTANCES)
    instance = BUILDERS[name](Ctx(geo, gen, n), **options)
    instance["geometry"] = geo
    return instance
