"""Synthetic test problems with exact constants: f, grad, x*, f*, L in the problem's own norm.

Every :class:`Problem` is a fixed instance (its matrices are drawn once from a seed) whose
``f``/``grad`` are batched over leading dimensions in torch float64: a point is a tensor of shape
``(..., *shape)``. The smoothness constant ``L`` is *exact* for the problem's norm (A2 of
THEORY.md: ``||grad f(x) - grad f(y)||_* <= L ||x - y||``, attained), derived per family:

| family             | geometry | f(x), e = x - x*                       | exact L                                  |
|--------------------|----------|----------------------------------------|------------------------------------------|
| ``quadratic_l2``   | l2       | 0.5 e^T A e, A PSD                     | lambda_max(A)                            |
| ``quadratic_linf`` | linf     | 0.5 e^T A e, A PSD                     | max_{s in {+-1}^d} s^T A s (enumerated)  |
| ``matrix_ls``      | spectral | 0.5 tr(E^T M E), M PSD (p x p), E p x q| sum of the top min(p, q) eigenvalues of M|
| ``angular``        | l2       | 0.5 r^2 (1 + a cos 3 theta) + 0.5 sum c_i e_i^2 | max(1 + 3.5 a, max c_i)         |
| ``pl_sine``        | l2       | sum_i e_i^2 + 3 sin^2 e_i              | 8                                        |

Derivations (also in docs/numerics.md):
- l_inf -> l1 constant of a PSD A: ``sup_{||u||_inf, ||w||_inf <= 1} w^T A u`` is at most
  ``sqrt(w^T A w) sqrt(u^T A u)`` (Cauchy-Schwarz in the A-semi-inner product), and the convex
  function ``u -> u^T A u`` is maximised over the cube at a vertex; ``u = w = s*`` attains it.
- spectral -> nuclear constant of ``Delta -> M Delta``: the same Cauchy-Schwarz argument gives
  ``sup_{||Delta||_2 <= 1} tr(Delta^T M Delta) = sup tr(M Delta Delta^T)``; ``Delta Delta^T`` has
  eigenvalues in [0, 1] and rank <= min(p, q), so Ky Fan gives the sum of the top min(p, q)
  eigenvalues, attained at ``Delta = U_k V^T``.
- ``angular`` (nonconvex, star-convex about x*): on the plane of the first two coordinates,
  ``f = r^2 g(theta)`` with ``g = (1 + a cos 3 theta)/2`` has the Hessian ``[[2g, g'], [g', 2g + g'']]``
  in the polar frame, with eigenvalues ``1 - 5/4 a c +- 3/4 a sqrt(4 + 5 c^2)``, ``c = cos 3 theta``:
  the larger is convex in c, the smaller concave, so the extremes sit at ``c = -1`` and ``c = 1``:
  ``lambda_max = 1 + 3.5 a``, ``lambda_min = 1 - 3.5 a`` (nonconvex for a > 2/7; star-convex for
  a < 1 since f is degree-2 homogeneous about x* and f >= f* = 0). The gradient is continuous at
  x* and C^1 elsewhere, so L = sup ||Hessian||_2.
- PL constants in the dual norm (``0.5 ||grad f||_*^2 >= mu (f - f*)``): l2 quadratic
  ``lambda_min(A)``; l_inf quadratic ``1 / max_i (A^{-1})_ii`` (``inf_g ||g||_1^2 / g^T A^{-1} g``,
  a convex maximisation over the l1 ball, attained at a vertex); matrix LS ``lambda_min(M)``;
  ``pl_sine`` ``min_u 0.5 f'(u)^2 / f(u)`` of the 1-D factor (:data:`PL_SINE_MU`); ``angular``
  the valid (not tight) ``min(1 - a, min c_i)`` from Euler's identity ``<grad f, e> = 2 f``.

Stochastic oracle (A1): ``g = grad f(y) + xi`` with Gaussian ``xi`` of Euclidean variance
``E||xi||_2^2 = sigma^2`` (see :func:`numerics.noise.gaussian_noise`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor

from theory.geometry import L2, LINF, SPECTRAL, Geometry

__all__ = [
    "Problem",
    "quadratic",
    "matrix_least_squares",
    "angular",
    "pl_sine",
    "FAMILIES",
    "make_problem",
    "linf_quadratic_constant",
    "spectral_quadratic_constant",
    "PL_SINE_MU",
    "PL_SINE_L",
    "MAX_LINF_DIM",
]

#: Largest dimension for which the l_inf -> l1 constant is enumerated over {+-1}^d (2^(d-1) sign
#: vectors; beyond this the enumeration is too slow to build an instance in a test).
MAX_LINF_DIM = 16

#: Exact l2 smoothness of ``u^2 + 3 sin^2 u``: ``sup |2 + 6 cos 2u| = 8``.
PL_SINE_L = 8.0
#: ``min_u 0.5 (2u + 3 sin 2u)^2 / (u^2 + 3 sin^2 u)`` (attained at u ~ 2.20171); computed by a
#: 1e-5 grid on (0, 50] plus Brent refinement (tests/numerics/test_problems.py recomputes it).
#: Karimi, Nutini & Schmidt (2016) quote the valid but smaller 1/32.
PL_SINE_MU = 0.1755309858797317


def _sym_matvec(a: Tensor, dim: int) -> Callable[[Tensor], Tensor]:
    """``e -> A e`` along dimension ``dim`` of ``e`` (A symmetric) as a fixed-order sum of columns.

    Pure elementwise ops, so every row's result is bitwise independent of the batch size
    (a BLAS matmul picks different kernels for different batch sizes) and faster than a
    broadcast-then-reduce for the small sizes used here. The columns are shaped once.
    """
    n = a.shape[0]

    def cols(ndim: int) -> list[Tensor]:
        shape = [1] * ndim
        shape[dim] = n
        return [a[:, j].reshape(shape).clone() for j in range(n)]

    cache: dict[int, list[Tensor]] = {}

    def matvec(e: Tensor) -> Tensor:
        c = cache.get(e.ndim)
        if c is None:
            c = cache[e.ndim] = cols(e.ndim)
        parts = e.split(1, dim=dim)
        out = parts[0] * c[0]
        for j in range(1, n):
            out = out + parts[j] * c[j]
        return out

    return matvec


@dataclass(frozen=True, eq=False)
class Problem:
    """One fixed instance of a test function with its exact constants.

    Calls are batched: ``f(x)`` maps ``(..., *shape) -> (...)`` and ``grad(x)`` keeps the shape.
    Per-row results do not depend on the other rows (no BLAS calls whose blocking depends on the
    batch size), so a configuration's trajectory is the same in any batch.
    """

    name: str
    """Family name plus its size, e.g. ``quadratic_linf(d=8)``."""
    family: str
    """Key in :data:`FAMILIES`."""
    geometry: Geometry
    """The norm in which L, D and R are measured and whose LMO the methods use."""
    shape: tuple[int, ...]
    """Shape of one point."""
    value_and_grad: Callable[[Tensor], tuple[Tensor, Tensor]]
    """Batched ``x -> (f(x), grad f(x))``."""
    x_star: Tensor
    """A minimiser (for ``angular`` the centre of star-convexity)."""
    f_star: float
    """``f(x*) = inf f``."""
    L: float
    """Exact smoothness constant in the geometry's norm (A2)."""
    x0: Tensor
    """Default starting point."""
    star_convex: bool
    """True when A4 (star-convexity about x*) is proven for the family."""
    mu: float | None = None
    """A valid PL constant in the dual norm (exact where the docs say so), or None."""
    hessian_min: float | None = None
    """Minimum eigenvalue of the Euclidean Hessian (negative: nonconvex)."""
    info: dict = field(default_factory=dict)
    """Family-specific data (eigenvalues, the attaining direction of L, ...)."""

    def f(self, x: Tensor) -> Tensor:
        """Batched objective value."""
        return self.value_and_grad(x)[0]

    def grad(self, x: Tensor) -> Tensor:
        """Batched exact gradient."""
        return self.value_and_grad(x)[1]

    @property
    def event_ndim(self) -> int:
        """Number of trailing dimensions of one point."""
        return len(self.shape)

    @property
    def rho(self) -> float:
        """Norm-equivalence constant of A3 for this shape."""
        return self.geometry.rho(self.shape)

    @property
    def x_star_norm(self) -> float:
        """``||x*||`` in the problem's norm (A5 needs it <= D)."""
        return float(self.geometry.norm(self.x_star))

    @property
    def x0_norm(self) -> float:
        """``||x_0||`` in the problem's norm."""
        return float(self.geometry.norm(self.x0))

    @property
    def R(self) -> float:
        """``||x_0 - x*||`` in the problem's norm."""
        return float(self.geometry.norm(self.x0 - self.x_star))

    def delta0(self, x0: Tensor | None = None) -> float:
        """``Delta0 = f(x_0) - inf f``."""
        x = self.x0 if x0 is None else x0
        return float(self.f(x)) - self.f_star


def _random_psd(d: int, gen: torch.Generator, lam_min: float, lam_max: float) -> tuple[Tensor, Tensor]:
    """``Q diag(lam) Q^T`` with log-uniform eigenvalues in [lam_min, lam_max] (both attained)."""
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    if d == 1:
        lam = torch.tensor([lam_max], dtype=torch.float64)
    else:
        u = torch.rand(d, generator=gen, dtype=torch.float64)
        u[0], u[1] = 0.0, 1.0
        lam = torch.exp(math.log(lam_min) + u * (math.log(lam_max) - math.log(lam_min)))
    a = (q * lam) @ q.T
    return 0.5 * (a + a.T), lam


def linf_quadratic_constant(a: Tensor) -> tuple[float, Tensor]:
    """Exact ``||A||_{inf -> 1} = max_{s in {+-1}^d} s^T A s`` for PSD A, and an attaining s."""
    d = a.shape[0]
    if d > MAX_LINF_DIM:
        raise ValueError(f"dim={d} is too large to enumerate sign vectors (allowed 1..{MAX_LINF_DIM})")
    if d == 1:
        return float(a[0, 0]), torch.ones(1, dtype=a.dtype)
    # s_0 = +1 without loss of generality (s and -s give the same value).
    rest = torch.tensor(list(itertools.product((1.0, -1.0), repeat=d - 1)), dtype=a.dtype)
    s = torch.cat([torch.ones(rest.shape[0], 1, dtype=a.dtype), rest], dim=1)  # (2^(d-1), d)
    vals = ((s @ a) * s).sum(dim=1)
    i = int(vals.argmax())
    return float(vals[i]), s[i].clone()


def spectral_quadratic_constant(m: Tensor, q: int) -> tuple[float, Tensor]:
    """Exact ``sup_{||Delta||_2 <= 1} ||M Delta||_nuc`` for PSD ``M`` (p x p) and p x q Delta:
    the sum of the top ``min(p, q)`` eigenvalues of M; returns it and an attaining Delta."""
    p = m.shape[0]
    k = min(p, q)
    lam, u = torch.linalg.eigh(m)  # ascending
    delta = u[:, p - k :] @ torch.eye(q, dtype=m.dtype)[:k]  # U_k V^T with V = first k basis vectors
    return float(lam[p - k :].sum()), delta


def quadratic(dim: int, *, geometry: str = "l2", seed: int = 0, cond: float = 10.0) -> Problem:
    """Convex quadratic ``0.5 (x - x*)^T A (x - x*)`` with A PD of condition number ``cond``.

    ``||x*|| = 1`` and ``x_0 = -x*`` in the chosen norm (l2 or linf), so R = 2.
    """
    if not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim={dim!r} must be an int >= 1")
    if geometry not in ("l2", "linf"):
        raise ValueError(f"geometry={geometry!r} must be 'l2' or 'linf' for quadratic")
    if not (1.0 <= cond <= 1e6):
        raise ValueError(f"cond={cond!r} must be in [1, 1e6]")
    gen = torch.Generator().manual_seed(seed)
    a, lam = _random_psd(dim, gen, 1.0 / cond, 1.0)
    geom = L2 if geometry == "l2" else LINF
    xs = torch.randn(dim, generator=gen, dtype=torch.float64)
    xs = xs / geom.norm(xs)
    a_matvec = _sym_matvec(a, -1)
    if geometry == "l2":
        big_l, attain = float(lam.max()), None
        mu = float(lam.min())
    else:
        big_l, attain = linf_quadratic_constant(a)
        mu = 1.0 / float(torch.linalg.inv(a).diagonal().max())

    def value_and_grad(x: Tensor) -> tuple[Tensor, Tensor]:
        e = x - xs
        g = a_matvec(e)  # (..., d)
        return 0.5 * (e * g).sum(-1), g

    return Problem(
        name=f"quadratic_{geometry}(d={dim})", family=f"quadratic_{geometry}", geometry=geom,
        shape=(dim,), value_and_grad=value_and_grad, x_star=xs, f_star=0.0, L=big_l, x0=-xs,
        star_convex=True, mu=mu, hessian_min=float(lam.min()),
        info={"A": a, "eigenvalues": lam, "attaining_sign": attain, "seed": seed},
    )


def matrix_least_squares(p: int, q: int, *, seed: int = 0, cond: float = 10.0) -> Problem:
    """``0.5 ||A (X - X*)||_F^2 = 0.5 tr(E^T M E)``, ``M = A^T A`` (p x p), in spectral geometry
    (Muon's LMO). ``||X*||_2 = 1`` and ``X_0 = -X*``."""
    for nm, v in (("p", p), ("q", q)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{nm}={v!r} must be an int >= 1")
    if not (1.0 <= cond <= 1e6):
        raise ValueError(f"cond={cond!r} must be in [1, 1e6]")
    gen = torch.Generator().manual_seed(seed)
    m, lam = _random_psd(p, gen, 1.0 / cond, 1.0)
    xs = torch.randn(p, q, generator=gen, dtype=torch.float64)
    xs = xs / SPECTRAL.norm(xs)
    big_l, attain = spectral_quadratic_constant(m, q)
    m_matvec = _sym_matvec(m, -2)

    def value_and_grad(x: Tensor) -> tuple[Tensor, Tensor]:
        e = x - xs
        g = m_matvec(e)  # (..., p, q): M E
        return 0.5 * (e * g).sum((-2, -1)), g

    return Problem(
        name=f"matrix_ls(p={p},q={q})", family="matrix_ls", geometry=SPECTRAL, shape=(p, q),
        value_and_grad=value_and_grad, x_star=xs, f_star=0.0, L=big_l, x0=-xs, star_convex=True,
        mu=float(lam.min()), hessian_min=float(lam.min()),
        info={"M": m, "eigenvalues": lam, "attaining_delta": attain, "seed": seed},
    )


def angular(dim: int, *, a: float = 0.5, seed: int = 0) -> Problem:
    """Nonconvex star-convex ``f = 0.5 r^2 (1 + a cos 3 theta) + 0.5 sum_{i>=2} c_i e_i^2`` with
    ``(r, theta)`` the polar coordinates of ``(e_0, e_1)``, ``e = x - x*``, ``c_i`` in [0.5, 1].

    Exact L = max(1 + 3.5 a, max c_i) = 1 + 3.5 a, Hessian minimum 1 - 3.5 a (< 0 for a > 2/7).
    ``||x*||_2 = 1``, ``x_0 = -x*``.
    """
    if not isinstance(dim, int) or dim < 2:
        raise ValueError(f"dim={dim!r} must be an int >= 2 for angular")
    if not (0.0 <= a < 1.0):
        raise ValueError(f"a={a!r} must be in [0, 1) (f >= f* needs 1 - a > 0)")
    gen = torch.Generator().manual_seed(seed)
    c = 0.5 + 0.5 * torch.rand(dim - 2, generator=gen, dtype=torch.float64)
    xs = torch.randn(dim, generator=gen, dtype=torch.float64)
    xs = xs / L2.norm(xs)

    def value_and_grad(x: Tensor) -> tuple[Tensor, Tensor]:
        e = x - xs
        u, w = e[..., 0], e[..., 1]
        r2 = u * u + w * w
        r = torch.sqrt(r2)
        safe = torch.where(r > 0, r, torch.ones_like(r))
        cubic = u * u * u - 3.0 * u * w * w  # r^3 cos 3 theta
        val = 0.5 * r2 + 0.5 * a * cubic / safe
        gu = u + 0.5 * a * ((3.0 * u * u - 3.0 * w * w) / safe - cubic * u / safe**3)
        gw = w + 0.5 * a * ((-6.0 * u * w) / safe - cubic * w / safe**3)
        zero = r == 0
        gu = torch.where(zero, torch.zeros_like(gu), gu)
        gw = torch.where(zero, torch.zeros_like(gw), gw)
        val = torch.where(zero, torch.zeros_like(val), val)
        rest = e[..., 2:]
        val = val + 0.5 * (c * rest * rest).sum(-1)
        g = torch.cat([gu.unsqueeze(-1), gw.unsqueeze(-1), c * rest], dim=-1)
        return val, g

    c_max = float(c.max()) if dim > 2 else 0.0
    c_min = float(c.min()) if dim > 2 else math.inf
    return Problem(
        name=f"angular(d={dim},a={a:g})", family="angular", geometry=L2, shape=(dim,),
        value_and_grad=value_and_grad, x_star=xs, f_star=0.0, L=max(1.0 + 3.5 * a, c_max), x0=-xs,
        star_convex=True, mu=min(1.0 - a, c_min), hessian_min=min(1.0 - 3.5 * a, c_min),
        info={"a": a, "c": c, "seed": seed},
    )


def pl_sine(dim: int, *, seed: int = 0, scale: float = 3.0) -> Problem:
    """Nonconvex PL function ``sum_i e_i^2 + 3 sin^2 e_i`` (Karimi et al. 2016), ``e = x - x*``.

    L = 8, mu = :data:`PL_SINE_MU` (both exact, l2), Hessian minimum -4. ``||x*||_2 = 1`` and
    ``x_0 = x* + scale * u`` with a random unit u (``scale`` > 2.2 starts beyond the flat region).
    """
    if not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim={dim!r} must be an int >= 1")
    if not (0.0 < scale <= 100.0):
        raise ValueError(f"scale={scale!r} must be in (0, 100]")
    gen = torch.Generator().manual_seed(seed)
    xs = torch.randn(dim, generator=gen, dtype=torch.float64)
    xs = xs / L2.norm(xs)
    u = torch.randn(dim, generator=gen, dtype=torch.float64)
    x0 = xs + scale * u / L2.norm(u)

    def value_and_grad(x: Tensor) -> tuple[Tensor, Tensor]:
        e = x - xs
        s = torch.sin(e)
        return (e * e + 3.0 * s * s).sum(-1), 2.0 * e + 3.0 * torch.sin(2.0 * e)

    return Problem(
        name=f"pl_sine(d={dim})", family="pl_sine", geometry=L2, shape=(dim,),
        value_and_grad=value_and_grad, x_star=xs, f_star=0.0, L=PL_SINE_L, x0=x0,
        star_convex=False, mu=PL_SINE_MU, hessian_min=-4.0, info={"seed": seed, "scale": scale},
    )


#: family -> constructor ``(size, seed) -> Problem`` used by the sweeps (size = dimension; for
#: ``matrix_ls`` a (size + 2) x size matrix, so L sums the top ``size`` of ``size + 2`` eigenvalues).
FAMILIES: dict[str, Callable[[int, int], Problem]] = {
    "quadratic_l2": lambda n, seed: quadratic(n, geometry="l2", seed=seed),
    "quadratic_linf": lambda n, seed: quadratic(n, geometry="linf", seed=seed),
    "matrix_ls": lambda n, seed: matrix_least_squares(n + 2, n, seed=seed),
    "angular": lambda n, seed: angular(max(n, 2), seed=seed),
    "pl_sine": lambda n, seed: pl_sine(n, seed=seed),
}


def make_problem(family: str, size: int, seed: int = 0) -> Problem:
    """Build a member of ``family`` (a key of :data:`FAMILIES`)."""
    if family not in FAMILIES:
        raise ValueError(f"family={family!r} is not one of {sorted(FAMILIES)}")
    return FAMILIES[family](size, seed)
