"""Batched methods against an independent, hand-written single-run loop of THEORY.md's algorithms;
bitwise batch-independence and determinism; delay semantics."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from numerics.methods import EF_MODES, MethodConfig, run, run_naive
from numerics.noise import NOISE_BLOCK, gaussian_noise
from numerics.problems import FAMILIES, make_problem

#: The reference loop re-associates a few sums (e.g. (1-beta)x + eta d vs x + v): float64 round-off
#: over <= 40 steps of O(1) quantities stays far below this.
REF_TOL = 1e-11
#: REF_TOL assumes round-off is not amplified. Gradient steps (sgd, heavy_ball) on the nonconvex
#: pl_sine (L = 8) with eta L (1 + lam) near 2 are chaotic: 1e-16 differences grew to 2e-10 in 25
#: steps (heavy_ball, EF lam = 1, eta L = 2). The comparison caps eta L (1 + lam) at this value,
#: where 1500 random cases stayed below 3e-15 (LMO steps are bounded by eta: no cap needed).
STABLE_ETA_L = 1.0


def reference(problem, cfg, steps, method, ef, noise):
    """THEORY.md written out literally for one configuration; ``noise[k]`` is xi_k."""
    geom = problem.geometry
    xs = [problem.x0.clone()]
    m = v2 = None
    g_hist, u_hist = [], []
    out = []
    for k in range(steps):
        x = xs[k]
        y = xs[max(k - cfg.tau, 0)]
        g = problem.grad(y) + noise[k]
        g_hist.append(g)
        if ef == "grad":
            gin = g if k == 0 else (1 + cfg.lam) * g - cfg.lam * g_hist[k - 1]
        else:
            gin = g
        a = cfg.alpha
        if method == "lmo":
            m = gin.clone() if m is None else (1 - a) * m + a * gin
            u = cfg.eta * geom.lmo(m)
        elif method == "heavy_ball":
            m = gin.clone() if m is None else (1 - a) * m + a * gin
            u = -cfg.eta * m
        elif method == "sgd":
            u = -cfg.eta * gin
        else:  # AdamW, torch's formulas
            m = a * gin if m is None else (1 - a) * m + a * gin
            v2 = 0.001 * gin**2 if v2 is None else 0.999 * v2 + 0.001 * gin**2
            mh, vh = m / (1 - (1 - a) ** (k + 1)), v2 / (1 - 0.999 ** (k + 1))
            u = -cfg.eta * mh / (vh.sqrt() + 1e-8)
        v = -cfg.beta * x + u  # full update
        if ef == "update":
            vp = u_hist[-1] if u_hist else torch.zeros_like(x)
            x_next = x + v + cfg.lam * (v - vp)
            u_hist.append(v)
            z = x - cfg.lam * vp
        elif ef == "update_nowd":
            up = u_hist[-1] if u_hist else torch.zeros_like(x)
            x_next = (1 - cfg.beta) * x + u + cfg.lam * (u - up)
            u_hist.append(u)
            z = x - cfg.lam * up / (1 - cfg.beta)
        else:
            x_next = x + v
            z = x
        out.append((float(problem.f(x)), float(problem.f(z)), float(geom.norm(y - z) / cfg.eta)))
        xs.append(x_next)
    return xs, out


configs = st.builds(
    MethodConfig,
    tau=st.integers(0, 3),
    eta=st.floats(min_value=1e-3, max_value=0.3, allow_nan=False),
    alpha=st.floats(min_value=0.05, max_value=1.0, allow_nan=False),
    beta=st.floats(min_value=0.0, max_value=0.2, allow_nan=False),
    lam=st.floats(min_value=0.0, max_value=1.5, allow_nan=False),
    sigma=st.sampled_from([0.0, 0.3]),
    seed=st.integers(0, 2**31),
)


@given(
    st.sampled_from(sorted(FAMILIES)),
    configs,
    st.sampled_from(["lmo", "heavy_ball", "sgd", "adam"]),
    st.sampled_from(EF_MODES),
)
@example("quadratic_linf", MethodConfig(tau=2, eta=0.1, alpha=0.3, beta=0.05, lam=1.0, sigma=0.3, seed=3), "lmo", "update")
def test_batched_run_matches_reference_loop(family, cfg, method, ef):
    if method == "sgd":
        cfg = MethodConfig(**{**cfg.__dict__, "alpha": 1.0})
    p = make_problem(family, 3, 7)
    if method in ("sgd", "heavy_ball"):
        cfg = MethodConfig(**{**cfg.__dict__, "eta": min(cfg.eta, STABLE_ETA_L / (p.L * (1 + cfg.lam)))})
    steps = 25
    traj = run(p, [cfg], steps, method=method, ef=ef)
    # The documented noise stream: the run's own generator, NOISE_BLOCK steps per draw.
    gen = torch.Generator().manual_seed(cfg.seed)
    noise = cfg.sigma * gaussian_noise(gen, (NOISE_BLOCK, *p.shape), p.event_ndim)[:steps]
    xs, out = reference(p, cfg, steps, method, ef, noise)
    ref_x = xs[-1]
    assert torch.allclose(traj.x_final[0], ref_x, rtol=REF_TOL, atol=REF_TOL)
    for k in (0, 1, steps // 2, steps - 1):
        fx, fz, om = out[k]
        assert math.isclose(float(traj["gap"][k, 0]), fx - p.f_star, rel_tol=1e-9, abs_tol=REF_TOL)
        if ef in ("update", "update_nowd"):
            assert math.isclose(float(traj["gap_z"][k, 0]), fz - p.f_star, rel_tol=1e-9, abs_tol=REF_TOL)
        assert math.isclose(float(traj["omega"][k, 0]), om, rel_tol=1e-9, abs_tol=1e-9)


@given(st.lists(configs, min_size=2, max_size=6), st.sampled_from(sorted(FAMILIES)), st.sampled_from(EF_MODES))
def test_batch_independence_is_bitwise(cfgs, family, ef):
    """A configuration's trajectory does not depend on the rest of the batch (noise streams are
    per seed; every op is row-wise)."""
    p = make_problem(family, 3, 1)
    batched = run(p, cfgs, 30, ef=ef)
    singles = run_naive(p, cfgs, 30, ef=ef)
    for b, single in enumerate(singles):
        for name, series in single.series.items():
            assert torch.equal(series[:, 0], batched[name][:, b]), (name, b)
        assert torch.equal(single.x_final[0], batched.x_final[b])


def test_same_seed_same_trajectory_and_different_seed_differs():
    p = make_problem("quadratic_l2", 4, 0)
    c = MethodConfig(tau=1, eta=0.05, alpha=0.2, sigma=0.5, seed=11)
    a, b = run(p, [c], 300), run(p, [c], 300)
    assert all(torch.equal(a[n], b[n]) for n in a.series)
    d = run(p, [MethodConfig(tau=1, eta=0.05, alpha=0.2, sigma=0.5, seed=12)], 300)
    assert not torch.equal(a["gap"], d["gap"])
    # A longer run starts with the same trajectory (the noise stream does not depend on K).
    e = run(p, [c], 700)
    assert torch.equal(e["gap"][:301], a["gap"])


def test_delay_reads_the_start_point_first():
    """tau = 2: steps 0, 1, 2 all use grad f(x_0); with alpha = 1, sgd and no noise the first three
    updates are identical."""
    p = make_problem("quadratic_l2", 3, 0)
    t = run(p, [MethodConfig(tau=2, eta=0.1)], 4, method="sgd", record=("omega", "step"))
    g0 = p.grad(p.x0)
    assert torch.allclose(t["step"][:3, 0], torch.full((3,), 0.1 * float(g0.norm()), dtype=torch.float64))
    assert float(t["omega"][0, 0]) == 0.0 and float(t["omega"][1, 0]) > 0.0


def test_noise_error_is_zero_without_noise_and_momentum_error_splits():
    p = make_problem("quadratic_l2", 3, 0)
    t = run(p, [MethodConfig(eta=0.05, alpha=0.3), MethodConfig(eta=0.05, alpha=0.3, sigma=1.0, seed=2)], 50)
    assert float(t["noise_err"][:, 0].abs().max()) == 0.0
    assert float(t["noise_err"][:, 1].min()) > 0.0
    assert float(t["mom_err"][0, 0]) == 0.0  # m_0 = grad f(x_0) exactly when sigma = 0, tau = 0


def test_run_validates_arguments():
    p = make_problem("quadratic_l2", 3, 0)
    c = MethodConfig(eta=0.1)
    with pytest.raises(ValueError, match="method='newton'"):
        run(p, [c], 5, method="newton")
    with pytest.raises(ValueError, match="ef='both'"):
        run(p, [c], 5, ef="both")
    with pytest.raises(ValueError, match="steps=0"):
        run(p, [c], 0)
    with pytest.raises(ValueError, match="alpha must be 1"):
        run(p, [MethodConfig(eta=0.1, alpha=0.5)], 5, method="sgd")
    with pytest.raises(ValueError, match="record"):
        run(p, [c], 5, record=("loss",))
    with pytest.raises(ValueError, match="tau=-1"):
        MethodConfig(eta=0.1, tau=-1)
    with pytest.raises(ValueError, match="alpha=0"):
        MethodConfig(eta=0.1, alpha=0.0)
    with pytest.raises(TypeError, match="eta=nan"):
        MethodConfig(eta=float("nan"))
    with pytest.raises(TypeError, match="tau=1.5"):
        MethodConfig(eta=0.1, tau=1.5)
