"""Spectral and nuclear norms of many matrices at once, from one eigenproblem per matrix.

The spectral geometry's primal norm is the largest singular value and its dual norm the sum of
the singular values (:mod:`theory.geometry`, which computes them by an SVD, one call per
norm). Statistics of a training run need these norms for every weight matrix of a model at
once (210 matrices at the smollm-135m shape); this module computes them in batches, from the
symmetric eigenproblem of the smaller Gram matrix of each matrix, and returns both norms of a
matrix from that one factorisation.

Algorithm (:func:`spectral_nuclear`), for a matrix ``A`` of shape (p, q), r = min(p, q)::

    G = A A^T  if p <= q  else  A^T A          # r x r, symmetric PSD, in `dtype`
    lam = eigvalsh(G)                          # batched over matrices with the same r
    lam[lam < CUTOFF(p, q, dtype) * max(lam)] = 0   # below the rounding floor of G: noise
    ||A||_2 = sqrt(max(lam)),   ||A||_* = sum(sqrt(lam))

Assumptions: finite real entries. The matrices are grouped by (r, max(p, q)) (a 1536x576
and a 576x1536 matrix share one batched eigenproblem of 576x576 Grams), each group is one
``eigvalsh`` call on the matrices' device (CPU or CUDA), in chunks
of at most :data:`MAX_CHUNK_ELEMENTS` Gram entries. Nothing is read to the host.

Guarantee (exactness within a named tolerance, tested against the SVD in
``tests/theory/test_matrix_norms.py`` on random, trained, ill-conditioned and rank-deficient
matrices): the Gram matrix squares the singular values, so an eigenvalue is known to about
``eps * max(p, q) * lam_max`` (the rounding of the Gram product and of the symmetric
eigensolver, both backward stable), i.e. a singular value to ``sqrt(eps * max(p, q)) *
sigma_max`` in absolute terms. The spectral norm is therefore accurate to ~``eps * max(p, q)``
relative (the largest eigenvalue of a perturbed symmetric matrix moves by at most the
perturbation's norm), in float32 as well; the nuclear norm adds r such absolute errors, so it
is computed in float64 (:data:`NUCLEAR_DTYPE`). Eigenvalues below the cut-off
(:func:`gram_cutoff`, a few ``eps * sqrt(max(p, q))`` of ``lam_max``, the size rounding noise
has in practice) are noise of the Gram product: setting them to zero makes rank-deficient
matrices exact (their zero singular values would otherwise each add ~``sqrt(noise)``) and drops
true singular values below ``sqrt(cutoff) * sigma_max`` (2.6e-7 of it at 1536 columns), at
most r of them: a worst case of 1.5e-4 sigma_max at 576 x 1536, in practice (few singular
values sit that low) far less: :data:`NUCLEAR_RTOL`.

:func:`svd_matrix_norms` is the one-SVD-per-matrix reference (the tests' ground truth).

Why this and not the alternatives (measured at the smollm-135m shape on the project's CPU,
docs/performance.md): the SVD is 1.5-3x slower than Gram + ``eigvalsh``; power iteration
for the spectral norm has no tight stopping rule on matrices with a flat top spectrum (Muon's
updates: singular values all near one, where the Rayleigh quotient's error decays like 1/k),
and an iterative polar factor needs many matrix products per matrix where the Gram needs one.

Reference: Higham, *Accuracy and Stability of Numerical Algorithms* (2002), section 3.5 (the
inner-product error bound behind the Gram product's rounding) and Weyl's inequality for the
eigenvalues of a perturbed symmetric matrix.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor

__all__ = [
    "NUCLEAR_DTYPE",
    "SPECTRAL_DTYPE",
    "NUCLEAR_RTOL",
    "SPECTRAL_RTOL",
    "MAX_CHUNK_ELEMENTS",
    "GRAM_NOISE_FACTOR",
    "gram_cutoff",
    "gram_eigenvalues",
    "spectral_nuclear",
    "matrix_norms",
    "svd_matrix_norms",
]

#: Dtype of the Gram product and eigensolver when nuclear norms are needed (float32 would leave
#: ~r * sqrt(6e-8 * max(p, q)) ~ 5% of sigma_max of rounding noise in a rank-deficient matrix).
NUCLEAR_DTYPE = torch.float64
#: Least dtype when only spectral norms are needed (float64 inputs stay float64): the largest
#: eigenvalue of the Gram is accurate to ~eps * max(p, q) relative, so float32 suffices and its
#: Gram product is several times cheaper than float64's on a CPU.
SPECTRAL_DTYPE = torch.float32
#: Relative tolerance of the nuclear norm against the float64 SVD. Random and rank-deficient
#: matrices agree to ~1e-13; what the cut-off (GRAM_NOISE_FACTOR) drops is the rest: the
#: singular values below ~1e-7 sigma_max, e.g. the float32 rounding floor that a float32
#: gradient carries (1.8e-6 of the norm on the tiny model's trained gradients, the worst tested
#: family; 1.3e-7 for singular values spread over 12 decades). 2e-5 leaves a 10x margin and
#: still fails on a float32 Gram (the slip it guards against: 0.04 on the same gradients).
NUCLEAR_RTOL = 2e-5
#: Relative tolerance of the spectral norm in float32 against the float64 SVD (eps32 * max(p, q)
#: is 9e-5 at 1536 columns as a worst case; random rounding gives ~sqrt(q) * eps32 ~ 2e-6).
SPECTRAL_RTOL = 1e-4
#: The eigenvalue floor in units of ``eps * sqrt(max(p, q)) * lam_max`` (the rounding of an
#: inner product of length max(p, q) with independent roundings): the zero eigenvalues of
#: rank-deficient float64 matrices come out at most 0.6 of that unit (measured from 2x2 to
#: 1536x576; tests/theory/test_matrix_norms.py checks 2 as the limit), so 8 leaves a margin of
#: 13x; a true singular value below sqrt(8 eps sqrt(max(p, q))) sigma_max (2.6e-7 of it at
#: 1536 columns) is dropped, which the nuclear tolerance covers.
GRAM_NOISE_FACTOR = 8.0
#: Gram entries per batched eigenproblem call (64M: 512 MB in float64), so one call's memory
#: stays bounded whatever the model.
MAX_CHUNK_ELEMENTS = 1 << 26


def gram_cutoff(p: int, q: int, dtype: torch.dtype) -> float:
    """Relative eigenvalue floor of the Gram of a (p, q) matrix in ``dtype``:
    ``GRAM_NOISE_FACTOR * eps * sqrt(max(p, q))`` (module docstring)."""
    return GRAM_NOISE_FACTOR * torch.finfo(dtype).eps * math.sqrt(max(p, q))


def _gram(a: Tensor, dtype: torch.dtype) -> Tensor:
    """The smaller Gram matrix of ``a`` (r x r) in ``dtype``."""
    a = a.detach().to(dtype)
    return a @ a.mT if a.shape[-2] <= a.shape[-1] else a.mT @ a


def gram_eigenvalues(mats: Sequence[Tensor], dtype: torch.dtype = NUCLEAR_DTYPE
                     ) -> list[Tensor]:
    """Squared singular values of each matrix (ascending, length r, in ``dtype``, on its
    device), from batched ``eigvalsh`` of the smaller Gram matrices grouped by (r, max(p, q))
    (the cut-off is one scalar per group: no host-to-device copy); entries below
    :func:`gram_cutoff` times the largest are set to zero (module docstring)."""
    out: list[Tensor | None] = [None] * len(mats)
    groups: dict[tuple[int, int, str], list[int]] = {}
    for i, m in enumerate(mats):
        if m.ndim != 2:
            raise ValueError(f"gram_eigenvalues needs matrices, got shape {tuple(m.shape)}")
        groups.setdefault((min(m.shape), max(m.shape), str(m.device)), []).append(i)
    for (r, c, _), idx in groups.items():
        floor = gram_cutoff(r, c, dtype)
        per_chunk = max(1, MAX_CHUNK_ELEMENTS // (r * r))
        for start in range(0, len(idx), per_chunk):
            part = idx[start:start + per_chunk]
            lam = torch.linalg.eigvalsh(torch.stack([_gram(mats[i], dtype) for i in part]))
            lam = torch.where(lam > floor * lam[:, -1:].clamp_min(0.0), lam,
                              torch.zeros_like(lam))
            for j, i in enumerate(part):
                out[i] = lam[j]
    return out  # type: ignore[return-value]


def spectral_nuclear(mats: Sequence[Tensor], *, nuclear: bool = True
                     ) -> tuple[list[Tensor], list[Tensor] | None]:
    """(spectral norms, nuclear norms) of each matrix as 0-d tensors on its device, both from
    one eigenproblem per matrix (float64, :data:`NUCLEAR_DTYPE`); ``nuclear=False``: spectral
    norms only, in :data:`SPECTRAL_DTYPE` or the first matrix's dtype if that is wider (then
    None for the nuclear norms)."""
    if nuclear:
        dtype = NUCLEAR_DTYPE
    else:
        dtype = torch.promote_types(SPECTRAL_DTYPE, mats[0].dtype) if mats else SPECTRAL_DTYPE
    lams = gram_eigenvalues(mats, dtype)
    spec = [lam[-1].sqrt() for lam in lams]
    return spec, ([lam.sqrt().sum() for lam in lams] if nuclear else None)


def matrix_norms(mats: Sequence[Tensor], kind: str) -> Tensor:
    """The ``kind`` (``"spectral"`` or ``"nuclear"``) norm of every matrix, as one float64
    vector on the first matrix's device (empty: a float64 vector of length 0 on the CPU)."""
    if kind not in ("spectral", "nuclear"):
        raise ValueError(f"kind={kind!r} is not 'spectral' or 'nuclear'")
    if not mats:
        return torch.zeros(0, dtype=torch.float64)
    spec, nuc = spectral_nuclear(mats, nuclear=kind == "nuclear")
    vals = nuc if kind == "nuclear" else spec
    return torch.stack([v.to(torch.float64) for v in vals])


def svd_matrix_norms(mats: Sequence[Tensor], kind: str) -> Tensor:
    """The reference for :func:`matrix_norms`: one float64 SVD per matrix
    (``torch.linalg.matrix_norm``, ord 2 or ``"nuc"``), one matrix at a time, which is how the
    statistics computed these norms before this module; the tests' ground truth and the
    benchmark's baseline."""
    if kind not in ("spectral", "nuclear"):
        raise ValueError(f"kind={kind!r} is not 'spectral' or 'nuclear'")
    if not mats:
        return torch.zeros(0, dtype=torch.float64)
    order = 2 if kind == "spectral" else "nuc"
    return torch.stack([torch.linalg.matrix_norm(m.detach().double(), ord=order) for m in mats])
