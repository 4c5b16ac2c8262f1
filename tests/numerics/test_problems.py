"""Problems: gradients, exact smoothness constants (upper bound AND attained), PL constants,
star-convexity and the noise oracle's variance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from numerics.problems import (
    FAMILIES,
    PL_SINE_MU,
    angular,
    linf_quadratic_constant,
    make_problem,
    matrix_least_squares,
    pl_sine,
    quadratic,
)
from theory.geometry import L2, LINF, SPECTRAL

#: float64 round-off on O(1) quantities built from O(10) operations.
REL_TOL = 1e-10

families = st.sampled_from(sorted(FAMILIES))
sizes = st.integers(min_value=2, max_value=6)
seeds = st.integers(min_value=0, max_value=10_000)


def _points(p, n, gen, scale=2.0):
    return scale * torch.randn(n, *p.shape, generator=gen, dtype=torch.float64)


@given(families, sizes, seeds)
def test_gradient_matches_autograd(family, size, seed):
    p = make_problem(family, size, seed)
    x = _points(p, 16, torch.Generator().manual_seed(seed)).requires_grad_(True)
    val, g = p.value_and_grad(x)
    (ga,) = torch.autograd.grad(val.sum(), x)
    assert torch.allclose(g, ga, rtol=REL_TOL, atol=REL_TOL)
    assert abs(float(p.f(p.x_star)) - p.f_star) < REL_TOL
    assert float(p.geometry.dual_norm(p.grad(p.x_star))) < REL_TOL


@given(families, sizes, seeds)
def test_L_is_an_upper_bound_on_random_pairs(family, size, seed):
    p = make_problem(family, size, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    x, y = _points(p, 256, gen), _points(p, 256, gen)
    y[:64] = x[:64] + 1e-3 * torch.randn(64, *p.shape, generator=gen, dtype=torch.float64)
    ratio = p.geometry.dual_norm(p.grad(x) - p.grad(y)) / p.geometry.norm(x - y)
    assert float(ratio.max()) <= p.L * (1 + REL_TOL)


@given(st.integers(min_value=1, max_value=10), seeds)
def test_linf_constant_equals_independent_vertex_enumeration(dim, seed):
    """||A||_{inf->1} = max over cube vertices of the convex ||A u||_1, enumerated separately."""
    p = quadratic(dim, geometry="linf", seed=seed)
    a = p.info["A"]
    signs = torch.tensor(
        [[1.0 if (i >> j) & 1 else -1.0 for j in range(dim)] for i in range(2**dim)], dtype=torch.float64
    )
    brute = float((signs @ a).abs().sum(1).max())
    assert math.isclose(p.L, brute, rel_tol=REL_TOL)
    s = p.info["attaining_sign"]  # attained: ||A s||_1 / ||s||_inf = L
    assert math.isclose(float(LINF.dual_norm(a @ s)), p.L, rel_tol=REL_TOL)


def test_linf_constant_rejects_large_dim():
    with pytest.raises(ValueError, match="dim=17"):
        linf_quadratic_constant(torch.eye(17, dtype=torch.float64))


@given(st.integers(min_value=1, max_value=5), st.integers(min_value=1, max_value=5), seeds)
def test_spectral_constant_attained_and_not_beaten(p_, q_, seed):
    """L = sum of the top min(p, q) eigenvalues of M; Delta* attains it, random partial
    isometries (the extreme points of the spectral ball) never beat it."""
    p = matrix_least_squares(p_, q_, seed=seed)
    m, lam = p.info["M"], p.info["eigenvalues"]
    k = min(p_, q_)
    assert math.isclose(p.L, float(lam.sort().values[-k:].sum()), rel_tol=REL_TOL)
    delta = p.info["attaining_delta"]
    assert math.isclose(float(SPECTRAL.norm(delta)), 1.0, rel_tol=REL_TOL)
    assert math.isclose(float(SPECTRAL.dual_norm(m @ delta)), p.L, rel_tol=REL_TOL)
    gen = torch.Generator().manual_seed(seed)
    u, _, vh = torch.linalg.svd(torch.randn(512, p_, q_, generator=gen, dtype=torch.float64), full_matrices=False)
    iso = u @ vh
    assert float(SPECTRAL.dual_norm(m @ iso).max()) <= p.L * (1 + REL_TOL)


@given(st.floats(min_value=0.0, max_value=0.95, allow_nan=False), st.integers(2, 5), seeds)
def test_angular_hessian_extremes(a, dim, seed):
    """Hessian eigenvalues lie in [1 - 3.5a, 1 + 3.5a] (on the angular plane) and both ends are
    attained at cos(3 theta) = -1 and +1."""
    p = angular(dim, a=a, seed=seed)
    xs = p.x_star

    def hess_eigs(theta, r=0.7):
        e = torch.zeros(dim, dtype=torch.float64)
        e[0], e[1] = r * math.cos(theta), r * math.sin(theta)
        h = torch.autograd.functional.hessian(lambda z: p.f(z), xs + e)
        return torch.linalg.eigvalsh(h)

    thetas = torch.linspace(0, 2 * math.pi, 25, dtype=torch.float64)[:-1]
    all_eigs = torch.stack([hess_eigs(float(t)) for t in thetas])
    assert float(all_eigs.max()) <= p.L * (1 + REL_TOL)
    assert float(all_eigs.min()) >= p.hessian_min - REL_TOL * p.L
    # cos 3t = -1 at t = pi/3 (lambda_max), cos 3t = 1 at t = 0 (lambda_min); other coordinates
    # contribute their own c_i, so look for the value among the eigenvalues.
    assert float((hess_eigs(math.pi / 3) - (1 + 3.5 * a)).abs().min()) <= 1e-9
    assert float((hess_eigs(0.0) - (1 - 3.5 * a)).abs().min()) <= 1e-9


def test_angular_is_nonconvex_for_a_above_2_7():
    assert angular(3, a=0.5).hessian_min < 0 < angular(3, a=0.25).hessian_min


@given(st.sampled_from(["quadratic_l2", "quadratic_linf", "matrix_ls", "angular"]), sizes, seeds,
       st.floats(min_value=0.0, max_value=1.0, allow_nan=False))
def test_star_convexity(family, size, seed, b):
    p = make_problem(family, size, seed)
    x = _points(p, 128, torch.Generator().manual_seed(seed))
    lhs = p.f(b * p.x_star + (1 - b) * x)
    rhs = b * p.f_star + (1 - b) * p.f(x)
    assert bool((lhs <= rhs + REL_TOL * (1 + rhs.abs())).all())


@given(families, sizes, seeds)
def test_pl_inequality_on_random_points(family, size, seed):
    p = make_problem(family, size, seed)
    x = _points(p, 256, torch.Generator().manual_seed(seed), scale=3.0)
    val, g = p.value_and_grad(x)
    lhs = 0.5 * p.geometry.dual_norm(g) ** 2
    assert bool((lhs >= p.mu * (val - p.f_star) * (1 - REL_TOL)).all())


@given(st.integers(1, 8), seeds)
def test_quadratic_pl_constants_are_attained(dim, seed):
    """l2: e = eigenvector of lambda_min; linf: e = A^{-1} e_i* with i* = argmax (A^{-1})_ii."""
    for geom in ("l2", "linf"):
        p = quadratic(dim, geometry=geom, seed=seed)
        a = p.info["A"]
        if geom == "l2":
            e = torch.linalg.eigh(a).eigenvectors[:, 0]
        else:
            inv = torch.linalg.inv(a)
            e = inv[:, int(inv.diagonal().argmax())]
        val, g = p.value_and_grad(p.x_star + e)
        assert math.isclose(float(0.5 * p.geometry.dual_norm(g) ** 2 / val), p.mu, rel_tol=1e-9)


def test_pl_sine_constant_recomputed():
    u = np.linspace(1e-3, 50.0, 2_000_001)
    ratio = lambda t: 0.5 * (2 * t + 3 * np.sin(2 * t)) ** 2 / (t**2 + 3 * np.sin(t) ** 2)  # noqa: E731
    i = int(ratio(u).argmin())
    res = minimize_scalar(ratio, bracket=(u[i - 5], u[i], u[i + 5]), tol=1e-14)
    assert math.isclose(res.fun, PL_SINE_MU, rel_tol=1e-9)
    assert PL_SINE_MU > 1 / 32  # Karimi et al.'s constant is valid but smaller
    p = pl_sine(3)
    assert p.star_convex is False and p.hessian_min == -4.0


def test_constructors_validate_arguments():
    with pytest.raises(ValueError, match="geometry='l1'"):
        quadratic(3, geometry="l1")
    with pytest.raises(ValueError, match="a=1.0"):
        angular(3, a=1.0)
    with pytest.raises(ValueError, match="family='nope'"):
        make_problem("nope", 3)
    with pytest.raises(ValueError, match="dim=0"):
        pl_sine(0)


def test_radius_and_start_point():
    for family in FAMILIES:
        p = make_problem(family, 4, 0)
        assert math.isclose(p.x_star_norm, 1.0, rel_tol=1e-12)
        assert p.delta0() > 0 and p.R > 0
        assert p.geometry in (L2, LINF, SPECTRAL)
