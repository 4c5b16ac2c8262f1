"""Random-draw context and batched objective functions with known constants, for the instances
of :mod:`theory.instances` (torch float64; imported only by ``Proof.check``).

- :class:`Ctx`: per-geometry random draws for ``n`` instances (uniform, log-uniform, points in a
  ball with a fraction exactly on the sphere, LMO directions).
- :class:`Quadratic` ``f(x) = 0.5 <x - c, H (x - c)>`` (``H`` acts on the rows of matrices), with
  its exact smoothness constant in the geometry: l2 ``max |eig H|``; l_inf (dual l1)
  ``max_{s in {-1,1}^d} ||H s||_1`` (a convex function of u is maximised over the cube at a
  vertex); spectral (dual nuclear) ``||H||_nuc`` (exact since the matrices are p x q, p <= q).
  With ``H`` positive definite it is PL in the dual norm with ``mu = lambda_min(H)`` (the dual
  norms l1 and nuclear dominate l2 and Frobenius).
- :class:`RadialWave` ``||x - c||_2^2 (1 + a sin^2(w <u, x - c>/||x - c||_2))``: homogeneous of
  degree 2 about c, hence star-convex about its minimizer c, and nonconvex.
- :class:`RidgeHuber` ``huber(<a, x - c>)``: convex, L = ||a||_*^2/delta in every norm, nearly
  linear away from c, where star-convexity is almost tight.
- :class:`Cosine` ``0.5 ||x||^2 + a sum_i cos(w x_i)`` (Euclidean, nonconvex): L = 1 + a w^2,
  ``inf f >= -a d``.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from theory.geometry import Geometry

__all__ = ["Ctx", "Quadratic", "RadialWave", "RidgeHuber", "Cosine", "mix", "EVENT_SHAPES",
           "BOUNDARY_FRACTION", "DTYPE"]

#: Point shapes per geometry (p <= q for spectral, see Quadratic).
EVENT_SHAPES = {"l2": (6,), "linf": (6,), "l1": (6,), "spectral": (3, 4)}
#: Fraction of random points put exactly on the boundary of their ball (worst cases).
BOUNDARY_FRACTION = 0.3
DTYPE = torch.float64


class Ctx:
    """Random-draw helpers for ``n`` instances in one geometry."""

    def __init__(self, geo: Geometry, gen: torch.Generator, n: int):
        self.geo, self.gen, self.n = geo, gen, n
        self.event = EVENT_SHAPES[geo.name]

    def u(self, lo: float, hi: float) -> torch.Tensor:  # (n,)
        return lo + (hi - lo) * torch.rand(self.n, generator=self.gen, dtype=DTYPE)

    def logu(self, lo: float, hi: float) -> torch.Tensor:  # (n,)
        return torch.exp(self.u(math.log(lo), math.log(hi)))

    def randint(self, lo: int, hi: int) -> torch.Tensor:  # (n,) in [lo, hi]
        return torch.randint(lo, hi + 1, (self.n,), generator=self.gen)

    def normal(self, *mid: int) -> torch.Tensor:  # (n, *mid, *event)
        return torch.randn(self.n, *mid, *self.event, generator=self.gen, dtype=DTYPE)

    def sc(self, t, ref: torch.Tensor) -> torch.Tensor:
        """Per-instance scalar (n,) reshaped to broadcast against ``ref`` (n, ...)."""
        return t.reshape(self.n, *([1] * (ref.ndim - 1)))

    def ball(self, radius: torch.Tensor, *mid: int) -> torch.Tensor:
        """Points with ``||x|| <= radius`` (a BOUNDARY_FRACTION of them on the sphere)."""
        x = self.normal(*mid)  # (n, *mid, *event)
        scale = torch.rand(x.shape[: x.ndim - len(self.event)], generator=self.gen, dtype=DTYPE)
        on_edge = torch.rand(scale.shape, generator=self.gen, dtype=DTYPE) < BOUNDARY_FRACTION
        scale = torch.where(on_edge, torch.ones_like(scale), scale)
        r = radius.reshape(self.n, *([1] * len(mid))) * scale  # (n, *mid)
        factor = r / self.geo.norm(x).clamp(min=1e-300)
        return x * factor.reshape(*factor.shape, *([1] * len(self.event)))

    def directions(self, *mid: int) -> torch.Tensor:
        """LMO outputs of random vectors: ||d|| <= 1."""
        return self.geo.lmo(self.normal(*mid))


class Quadratic:
    """``f(x) = 0.5 <x - c, H (x - c)>`` per instance, with its exact L in the geometry."""

    def __init__(self, ctx: Ctx, center: torch.Tensor, *, indefinite: bool = False,
                 pd_shift: float = 0.0, scale: torch.Tensor | None = None):
        a = ctx.event[0]
        mat = torch.randn(ctx.n, a, a, generator=ctx.gen, dtype=DTYPE)
        h = (mat + mat.mT) / 2 if indefinite else mat @ mat.mT / a
        h = h + pd_shift * torch.eye(a, dtype=DTYPE)
        if scale is not None:
            h = h * scale.reshape(-1, 1, 1)
        self.ctx, self.h, self.c = ctx, h, center
        eig = torch.linalg.eigvalsh(h)
        self.mu = eig.min(dim=-1).values
        name = ctx.geo.name
        if name == "l2":
            self.L = eig.abs().max(dim=-1).values
        elif name == "linf":
            signs = torch.tensor([[1.0 - 2.0 * ((i >> j) & 1) for j in range(a)]
                                  for i in range(2 ** a)], dtype=DTYPE)  # (2^a, a)
            self.L = (h @ signs.T).abs().sum(dim=-2).max(dim=-1).values
        elif name == "spectral":
            self.L = eig.abs().sum(dim=-1)
        else:
            raise ValueError(f"Quadratic: no exact L for geometry {name!r}")

    def _b(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        extra = x.ndim - 1 - len(self.ctx.event)
        return t.reshape(t.shape[0], *([1] * extra), *t.shape[1:])

    def grad(self, x: torch.Tensor) -> torch.Tensor:
        diff = x - self._b(self.c, x)
        hb = self._b(self.h, x)
        if len(self.ctx.event) == 1:
            return (hb @ diff.unsqueeze(-1)).squeeze(-1)
        return hb @ diff

    def f(self, x: torch.Tensor) -> torch.Tensor:
        diff = x - self._b(self.c, x)
        return 0.5 * self.ctx.geo.inner(diff, self.grad(x))


class RadialWave:
    """Star-convex, nonconvex: ``||x - c||_2^2 (1 + a sin^2(w <u, x - c> / ||x - c||_2))``."""

    def __init__(self, ctx: Ctx, center: torch.Tensor):
        self.ctx, self.c = ctx, center
        u = ctx.normal()
        self.u = u / ctx.geo.l2(u).reshape(ctx.n, *([1] * len(ctx.event)))
        self.a, self.w = ctx.u(0.5, 2.0), ctx.u(2.0, 6.0)

    def f(self, x: torch.Tensor) -> torch.Tensor:
        ctx = self.ctx
        extra = x.ndim - 1 - len(ctx.event)
        c = self.c.reshape(ctx.n, *([1] * extra), *ctx.event)
        u = self.u.reshape(ctx.n, *([1] * extra), *ctx.event)
        diff = x - c
        r = ctx.geo.l2(diff).clamp(min=1e-300)
        ang = ctx.geo.inner(u, diff) / r
        a = self.a.reshape(ctx.n, *([1] * extra))
        w = self.w.reshape(ctx.n, *([1] * extra))
        return r ** 2 * (1 + a * torch.sin(w * ang) ** 2)

    def grad(self, x: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            xx = x.detach().clone().requires_grad_(True)
            (g,) = torch.autograd.grad(self.f(xx).sum(), xx)
        return g


class RidgeHuber:
    """Convex, nearly linear far from its minimizers: ``f(x) = huber_delta(<a, x - c>)`` with
    ``huber_delta(s) = s^2/(2 delta)`` for |s| <= delta, ``|s| - delta/2`` beyond. Its gradient
    ``huber'(s) a`` is Lipschitz with ``L = ||a||_*^2 / delta`` in every norm (|huber''| <= 1/delta
    and |<a, u>| <= ||a||_* ||u||); f* = 0 at c. Star-convexity is nearly tight for |s| >> delta."""

    def __init__(self, ctx: Ctx, center: torch.Tensor, *, scale: torch.Tensor | None = None):
        self.ctx, self.c = ctx, center
        self.a = ctx.normal()
        if scale is not None:
            self.a = self.a * ctx.sc(scale, self.a)
        self.delta = ctx.logu(1e-2, 1.0)
        self.L = ctx.geo.dual_norm(self.a) ** 2 / self.delta

    def _s(self, x):
        extra = x.ndim - 1 - len(self.ctx.event)
        shape = (self.ctx.n, *([1] * extra), *self.ctx.event)
        s = self.ctx.geo.inner(self.a.reshape(shape), x - self.c.reshape(shape))
        return s, self.delta.reshape(self.ctx.n, *([1] * extra)), shape

    def f(self, x):
        s, delta, _ = self._s(x)
        return torch.where(s.abs() <= delta, s ** 2 / (2 * delta), s.abs() - delta / 2)

    def grad(self, x):
        s, delta, shape = self._s(x)
        slope = torch.clamp(s / delta, -1.0, 1.0)
        return slope.reshape(*slope.shape, *([1] * len(self.ctx.event))) * self.a.reshape(shape)


class Cosine:
    """Euclidean nonconvex ``0.5 ||x||^2 + a sum_i cos(w x_i)``; L = 1 + a w^2, inf f >= -a d."""

    def __init__(self, ctx: Ctx):
        self.ctx, self.a, self.w = ctx, ctx.u(0.1, 1.0), ctx.u(0.5, 3.0)
        self.L = 1 + self.a * self.w ** 2
        self.inf_lower = -self.a * math.prod(ctx.event)

    def _ab(self, x):
        extra = x.ndim - 1
        return (self.a.reshape(-1, *([1] * extra)), self.w.reshape(-1, *([1] * extra)))

    def f(self, x):
        a, w = self._ab(x)
        return 0.5 * self.ctx.geo.l2(x) ** 2 + (a * torch.cos(w * x)).sum(dim=-1)

    def grad(self, x):
        a, w = self._ab(x)
        return x - a * w * torch.sin(w * x)


def mix(choice: torch.Tensor, *fns) -> tuple[Callable, Callable]:
    """Per-instance choice among functions: instance i uses ``fns[choice[i]]``."""

    def pick(values):
        out = values[0]
        for idx, val in enumerate(values[1:], start=1):
            m = (choice == idx).reshape(-1, *([1] * (val.ndim - 1)))
            out = torch.where(m, val, out)
        return out

    return (lambda x: pick([fn.f(x) for fn in fns]), lambda x: pick([fn.grad(x) for fn in fns]))
