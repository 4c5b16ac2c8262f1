"""Statistics against closed forms on quadratic models, and the stage-reduction property."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from llm_validation.training import stats
from theory.geometry import L2, LINF, SPECTRAL

#: The statistics sum in float64 from float64 inputs here; closed forms agree to round-off.
RTOL = 1e-10


def _t(*values):
    return torch.tensor(values, dtype=torch.float64)


def test_dual_norms_of_each_geometry_and_their_product():
    gen = torch.Generator().manual_seed(0)
    mat = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    vec = torch.randn(7, generator=gen, dtype=torch.float64)
    sgd = [torch.randn(4, generator=gen, dtype=torch.float64) for _ in range(2)]
    tensors, geoms = [mat, vec, *sgd], [SPECTRAL, LINF, L2, L2]
    row = stats.finalize(stats.grad_partials(tensors, geoms), step=0)
    nuclear = np.linalg.svd(mat.numpy(), compute_uv=False).sum()
    l1 = np.abs(vec.numpy()).sum()
    l2 = math.sqrt(sum(float((s * s).sum()) for s in sgd))
    assert row["grad_dual_norm"] == pytest.approx(nuclear + l1 + l2, rel=RTOL)
    assert row["grad_norm"] == pytest.approx(
        math.sqrt(sum(float((t * t).sum()) for t in tensors)), rel=RTOL)


def test_smoothness_of_a_quadratic_along_an_eigenvector_is_its_eigenvalue():
    """f(x) = x^T A x / 2 with A = diag(1, 4, 9): grad difference A d; for d = e_3 the l2
    ratio is exactly 9."""
    a = _t(1.0, 4.0, 9.0)
    x, y = _t(0.3, -1.0, 2.0), _t(0.3, -1.0, 1.5)          # x - y = 0.5 e_3
    part = stats.pair_partials([x], [y], [a * x], [a * y], [L2])
    row = stats.finalize(part, step=0, f_x=float((a * x * x).sum() / 2),
                         f_y=float((a * y * y).sum() / 2))
    assert row["smoothness_est"] == pytest.approx(9.0, rel=RTOL)
    assert row["smoothness_est_l2"] == pytest.approx(9.0, rel=RTOL)


def test_smoothness_in_the_spectral_geometry():
    """f(X) = ||X M||_F^2 / 2, grad X M M^T. For D = u v^T: ||D M M^T||_nuc / ||D||_op =
    ||M M^T v|| / ||v||."""
    gen = torch.Generator().manual_seed(1)
    m = torch.randn(3, 3, generator=gen, dtype=torch.float64)
    u, v = _t(1.0, 2.0, -1.0, 0.5), _t(0.2, -0.7, 1.1)
    x = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    y = x - torch.outer(u, v)
    grad = lambda z: z @ m @ m.T                                  # noqa: E731
    row = stats.finalize(stats.pair_partials([x], [y], [grad(x)], [grad(y)], [SPECTRAL]),
                         step=0)
    assert row["smoothness_est"] == pytest.approx(
        float(torch.linalg.vector_norm(m @ m.T @ v) / torch.linalg.vector_norm(v)), rel=1e-9)


def test_star_convex_slack_closed_forms():
    """Convex quadratic: slack = (x - y)^T A (x - y) / 2 >= 0; concave: -||x - y||^2 / 2 < 0."""
    a = _t(2.0, 0.5)
    x, y = _t(1.0, -2.0), _t(-0.5, 3.0)
    f = lambda z: float((a * z * z).sum() / 2)                   # noqa: E731
    row = stats.finalize(stats.pair_partials([x], [y], [a * x], [a * y], [L2]), step=0,
                         f_x=f(x), f_y=f(y))
    d = x - y
    assert row["star_convex_slack"] == pytest.approx(float((a * d * d).sum() / 2), rel=RTOL)
    g = lambda z: float(-(z * z).sum() / 2)                      # noqa: E731
    row = stats.finalize(stats.pair_partials([x], [y], [-x], [-y], [L2]), step=0,
                         f_x=g(x), f_y=g(y))
    assert row["star_convex_slack"] == pytest.approx(-float((d * d).sum() / 2), rel=RTOL)
    assert row["star_convex_slack"] < 0


def test_update_cosine_and_ef_drift():
    v, v_prev = _t(1.0, 0.0), _t(1.0, 1.0)
    row = stats.finalize(stats.update_partials([v], [L2], [v], [v_prev]), step=0)
    assert row["cos_consecutive_update"] == pytest.approx(1 / math.sqrt(2), rel=RTOL)
    assert row["update_norm"] == pytest.approx(1.0)
    x = _t(3.0, 4.0)
    y = x - v_prev                                   # tau = 1 without EF: read point W(t-1)
    assert stats.finalize(stats.drift_partials([x], [y], [v_prev], 0.0), step=0)["ef_drift"] \
        == pytest.approx(1.0, rel=RTOL)
    # with lam = 1 the virtual iterate z = x - v_prev is exactly the read point: no drift
    assert stats.finalize(stats.drift_partials([x], [y], [v_prev], 1.0), step=0)["ef_drift"] \
        == 0.0
    y2 = x - v_prev - _t(1.0, 0.0)                   # tau = 2, lam = 0: ||v_1 + v_2|| / ||v_1||
    assert stats.finalize(stats.drift_partials([x], [y2], [v_prev], 0.0), step=0)["ef_drift"] \
        == pytest.approx(math.sqrt(5) / math.sqrt(2), rel=RTOL)


def test_delayed_vs_fresh():
    fresh = _t(1.0, 2.0, 2.0)
    row = stats.finalize(stats.fresh_partials([2 * fresh], [fresh], [fresh]), step=0)
    assert row["cos_delayed_fresh"] == pytest.approx(1.0, rel=RTOL)
    assert row["rel_err_delayed_fresh"] == pytest.approx(1.0, rel=RTOL)
    ortho = _t(2.0, -1.0, 0.0)
    row = stats.finalize(stats.fresh_partials([ortho], [ortho], [fresh]), step=0)
    assert row["cos_delayed_fresh"] == pytest.approx(0.0, abs=RTOL)
    assert row["rel_err_delayed_fresh"] == pytest.approx(math.sqrt(5 + 9) / 3, rel=RTOL)


def test_noise_variance_from_microbatches_matches_the_sample_variance():
    gen = torch.Generator().manual_seed(2)
    m = 4
    g = [torch.randn(3, 2, generator=gen, dtype=torch.float64) for _ in range(m)]
    p = torch.nn.Parameter(torch.zeros(3, 2, dtype=torch.float64))
    acc = stats.MicrobatchGradVariance([p], m)
    for gi in g:                                       # what (loss_i / M).backward() does
        p.grad = gi / m if p.grad is None else p.grad + gi / m
        acc.observe()
    mean = sum(g) / m
    ss = sum(float(((gi - mean) ** 2).sum()) for gi in g)
    row = stats.finalize(acc.partials(), step=0, microbatches=m)
    assert row["grad_noise_var_micro"] == pytest.approx(ss / (m - 1), rel=1e-9)
    assert row["grad_noise_var"] == pytest.approx(ss / (m * (m - 1)), rel=1e-9)
    assert stats.finalize(acc.partials(), step=0, microbatches=1)["grad_noise_var"] is None


def test_momentum_error_dual_norm():
    m, big = [_t(1.0, -1.0, 2.0)], [_t(0.0, 1.0, 2.0)]
    row = stats.finalize(stats.momentum_partials(m, big, [LINF]), step=0)
    assert row["momentum_error"] == pytest.approx(3.0, rel=RTOL)          # l1 of (1, -2, 0)
    assert row["momentum_error_rel"] == pytest.approx(1.0, rel=RTOL)      # / l1 of G = 3
    assert row["momentum_error_l2"] == pytest.approx(math.sqrt(5), rel=RTOL)


def test_partials_reduce_across_stages_like_the_whole_model():
    """A pipeline reduces per-stage partials (sum, max for max_*); the result equals the
    partials of the whole parameter list."""
    gen = torch.Generator().manual_seed(3)
    shapes = [(4, 3), (6,), (3, 5), (2,)]
    geoms = [SPECTRAL, LINF, SPECTRAL, L2]

    def rnd():
        return [torch.randn(s, generator=gen, dtype=torch.float64) for s in shapes]

    x, y, gx, gy, dx, v, vp, fr = (rnd() for _ in range(8))

    def everything(sl):
        part = {}
        part.update(stats.grad_partials(gx[sl], geoms[sl]))
        part.update(stats.pair_partials(x[sl], y[sl], gx[sl], gy[sl], geoms[sl]))
        part.update(stats.drift_partials(x[sl], y[sl], vp[sl], 0.5))
        part.update(stats.update_partials(dx[sl], geoms[sl], v[sl], vp[sl]))
        part.update(stats.fresh_partials(dx[sl], v[sl], fr[sl]))
        part.update(stats.momentum_partials(v[sl], fr[sl], geoms[sl]))
        return stats.to_host(part)          # partials stay on the device until one host read

    whole = stats.finalize(everything(slice(0, 4)), step=1, f_x=1.0, f_y=2.0)
    staged = stats.finalize(stats.reduce_partials([everything(slice(0, 2)),
                                                   everything(slice(2, 4))]),
                            step=1, f_x=1.0, f_y=2.0)
    assert set(whole) == set(staged)
    not_given = {"loss", "val_loss", "lr", "grad_noise_var"}    # scalars / microbatch input
    assert whole.pop("kind") == staged.pop("kind") == "train"   # the row's shape, not a statistic
    for k, a in whole.items():
        if k in not_given:
            assert a is None and staged[k] is None, k
            continue
        assert a is not None, k
        assert staged[k] == pytest.approx(a, rel=1e-12), k


def test_every_core_key_is_present_and_unmeasured_ones_are_none():
    row = stats.finalize({}, step=3, loss=1.5)
    assert set(stats.KEYS) <= set(row)
    assert row["step"] == 3 and row["loss"] == 1.5 and row["grad_norm"] is None
