"""Norms, dual norms and exact linear minimization oracles (LMOs) for the geometries of THEORY.md.

Definitions (THEORY.md, "Setting"): for a norm ``||.||`` the dual norm is
``||g||_* = sup_{||u|| <= 1} <g, u>`` and the LMO returns ``d(m) in argmin_{||d|| <= 1} <m, d>``,
so ``<m, d(m)> = -||m||_*``.

| geometry   | norm ||x||          | dual ||g||_*          | LMO d(m)             | rho (A3)         |
|------------|---------------------|-----------------------|----------------------|------------------|
| ``l2``     | Euclidean           | Euclidean             | -m / ||m||_2         | 1                |
| ``linf``   | max |x_i|           | sum |g_i|  (l1)       | -sign(m)             | sqrt(d)          |
| ``l1``     | sum |x_i|           | max |g_i|  (l_inf)    | -sign(m_i*) e_i*     | 1                |
| ``spectral``| largest singular v.| nuclear (sum sigma_i) | -U V^T (reduced SVD) | sqrt(min(p, q))  |

All functions take torch tensors and are batched over leading dimensions: vector geometries act on
the last dimension, the spectral geometry on the last two. A zero input has LMO 0 (feasible and
optimal, since then every feasible d attains <m, d> = 0). The spectral LMO handles rank-deficient
inputs by dropping singular directions whose singular value is below a relative cut-off, so the
result is the exact LMO of the matrix (its polar factor on the range).

Newton-Schulz orthogonalisation with ``torch.optim.Muon``'s coefficients approximates the spectral
LMO; :func:`newton_schulz_inexactness` measures how far it is from the exact one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

__all__ = [
    "Geometry",
    "L2",
    "LINF",
    "L1",
    "SPECTRAL",
    "GEOMETRIES",
    "get_geometry",
    "inner",
    "MUON_NS_COEFFICIENTS",
    "MUON_NS_STEPS",
    "newton_schulz",
    "newton_schulz_inexactness",
]

#: Relative singular-value cut-off for the rank of a matrix in the exact spectral LMO: singular
#: values below ``SVD_RANK_RTOL * sigma_max`` are treated as zero (float64 round-off is ~1e-16,
#: so 1e-12 leaves four orders of magnitude of margin).
SVD_RANK_RTOL = 1e-12

#: torch.optim.Muon's quintic Newton-Schulz coefficients (a, b, c) and default step count.
MUON_NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
MUON_NS_STEPS = 5
#: torch.optim.Muon's normalisation epsilon.
MUON_NS_EPS = 1e-7


def inner(a: Tensor, b: Tensor, ndim: int = 1) -> Tensor:
    """Batched Euclidean inner product over the last ``ndim`` dimensions."""
    return (a * b).sum(dim=tuple(range(-ndim, 0)))


def _l2_norm(x: Tensor) -> Tensor:
    return torch.linalg.vector_norm(x, ord=2, dim=-1)


def _l2_lmo(m: Tensor) -> Tensor:
    n = _l2_norm(m).unsqueeze(-1)
    return torch.where(n > 0, -m / torch.where(n > 0, n, torch.ones_like(n)), torch.zeros_like(m))


def _linf_norm(x: Tensor) -> Tensor:
    return x.abs().amax(dim=-1)


def _l1_norm(x: Tensor) -> Tensor:
    return x.abs().sum(dim=-1)


def _linf_lmo(m: Tensor) -> Tensor:
    return -torch.sign(m)


def _l1_lmo(m: Tensor) -> Tensor:
    idx = m.abs().argmax(dim=-1, keepdim=True)
    out = torch.zeros_like(m)
    return out.scatter(-1, idx, -torch.sign(torch.gather(m, -1, idx)))


def _spectral_norm(x: Tensor) -> Tensor:
    return torch.linalg.matrix_norm(x, ord=2)


def _nuclear_norm(x: Tensor) -> Tensor:
    return torch.linalg.matrix_norm(x, ord="nuc")


def _spectral_lmo(m: Tensor) -> Tensor:
    u, s, vh = torch.linalg.svd(m, full_matrices=False)
    keep = s > SVD_RANK_RTOL * s.amax(dim=-1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny)
    u = u * keep.unsqueeze(-2).to(u.dtype)
    return -(u @ vh)


@dataclass(frozen=True)
class Geometry:
    """A normed space with its dual norm and exact LMO (see the module table)."""

    name: str
    """Short name: ``l2``, ``linf``, ``l1`` or ``spectral``."""
    norm: Callable[[Tensor], Tensor]
    """Primal norm ``||x||`` (batched)."""
    dual_norm: Callable[[Tensor], Tensor]
    """Dual norm ``||g||_*`` (batched)."""
    lmo: Callable[[Tensor], Tensor]
    """Exact LMO ``argmin_{||d|| <= 1} <m, d>`` (batched)."""
    event_ndim: int
    """Number of trailing dimensions one point occupies (1 for vectors, 2 for matrices)."""

    def rho(self, shape: tuple[int, ...]) -> float:
        """Norm-equivalence constant of A3, ``||g||_* <= rho ||g||_2``, for points of ``shape``."""
        if self.name in ("l2", "l1"):
            return 1.0
        if self.name == "linf":
            return math.sqrt(shape[-1])
        return math.sqrt(min(shape[-2], shape[-1]))

    def inner(self, a: Tensor, b: Tensor) -> Tensor:
        """Batched Euclidean inner product of two points of this geometry."""
        return inner(a, b, self.event_ndim)

    def l2(self, x: Tensor) -> Tensor:
        """Batched Euclidean (Frobenius) norm of points of this geometry."""
        return torch.sqrt(inner(x, x, self.event_ndim))


L2 = Geometry("l2", _l2_norm, _l2_norm, _l2_lmo, 1)
LINF = Geometry("linf", _linf_norm, _l1_norm, _linf_lmo, 1)
L1 = Geometry("l1", _l1_norm, _linf_norm, _l1_lmo, 1)
SPECTRAL = Geometry("spectral", _spectral_norm, _nuclear_norm, _spectral_lmo, 2)
GEOMETRIES = {g.name: g for g in (L2, LINF, L1, SPECTRAL)}


def get_geometry(name: str) -> Geometry:
    """Look a geometry up by name; raises ``ValueError`` listing the allowed names."""
    if not isinstance(name, str) or name not in GEOMETRIES:
        raise ValueError(f"geometry={name!r} is not one of {sorted(GEOMETRIES)}")
    return GEOMETRIES[name]


def newton_schulz(
    g: Tensor,
    steps: int = MUON_NS_STEPS,
    coefficients: tuple[float, float, float] = MUON_NS_COEFFICIENTS,
    eps: float = MUON_NS_EPS,
) -> Tensor:
    """Quintic Newton-Schulz orthogonalisation, as ``torch.optim.Muon`` does it, in g's dtype.

    Returns an approximation of ``U V^T`` (so ``-newton_schulz(m)`` approximates the spectral LMO).
    Batched over leading dimensions. Muon runs this in bfloat16; pass ``g.bfloat16()`` to match.
    """
    if g.ndim < 2:
        raise ValueError(f"newton_schulz needs a matrix, got shape {tuple(g.shape)}")
    a, b, c = coefficients
    transpose = g.shape[-2] > g.shape[-1]
    x = g.mT if transpose else g
    x = x / torch.linalg.matrix_norm(x, ord="fro").clamp(min=eps)[..., None, None]
    # The same fused ops as torch.optim.Muon (addmm), so bf16 inputs round identically.
    mm = torch.addmm if x.ndim == 2 else torch.baddbmm
    shape = x.shape
    if x.ndim > 3:
        x = x.reshape(-1, *shape[-2:])
    for _ in range(steps):
        gram = x @ x.mT
        gram_update = mm(gram, gram, gram, beta=b, alpha=c)
        x = mm(x, gram_update, x, beta=a)
    x = x.reshape(shape)
    return x.mT if transpose else x


def newton_schulz_inexactness(g: Tensor, **kwargs) -> dict[str, float]:
    """How far Newton-Schulz is from the exact polar factor ``U V^T`` of ``g`` (one matrix).

    Returns the spectral-norm error ``||NS(g) - U V^T||_2``, the range of the singular values of
    ``NS(g)`` (exact: all ones on the range of g) and the LMO suboptimality
    ``(||g||_* - <g, NS(g)>) / ||g||_*`` (0 for the exact LMO).
    """
    g64 = g.to(torch.float64)
    exact = -_spectral_lmo(g64)
    ns = newton_schulz(g, **kwargs).to(torch.float64)
    sv = torch.linalg.svdvals(ns)
    nuc = float(_nuclear_norm(g64))
    return {
        "spectral_error": float(_spectral_norm(ns - exact)),
        "sv_min": float(sv.min()),
        "sv_max": float(sv.max()),
        "lmo_suboptimality": (nuc - float(inner(g64, ns, 2))) / nuc if nuc > 0 else 0.0,
    }
