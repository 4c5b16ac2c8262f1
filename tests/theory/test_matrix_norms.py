"""Batched spectral and nuclear norms (theory.matrix_norms) against one SVD per matrix, on random,
trained, ill-conditioned and rank-deficient matrices, within the module's named tolerances."""

from __future__ import annotations

import math

import pytest
import torch

from theory import matrix_norms as mn
from theory.geometry import newton_schulz
from theory.matrix_norms import (
    GRAM_NOISE_FACTOR,
    NUCLEAR_RTOL,
    SPECTRAL_RTOL,
    gram_eigenvalues,
    matrix_norms,
    spectral_nuclear,
    svd_matrix_norms,
)

#: Spectral norms of float64 inputs are computed in float64: round-off of the largest
#: eigenvalue, ~max(p, q) * eps64 ~ 1e-13 relative at these sizes.
SPECTRAL_RTOL_F64 = 1e-12

SHAPES = [(1, 7), (7, 1), (5, 3), (3, 5), (32, 32), (48, 96), (96, 48), (192, 576)]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _with_singular_values(p: int, q: int, sv: torch.Tensor, seed: int) -> torch.Tensor:
    """U diag(sv) V^T with Haar-random orthonormal U (p x r), V (q x r), float64."""
    g = _gen(seed)
    r = len(sv)
    u, _ = torch.linalg.qr(torch.randn(p, r, generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(q, r, generator=g, dtype=torch.float64))
    return (u * sv.double()) @ v.T


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return float(((got - want).abs() / want.abs().clamp_min(1e-300)).max())


def _check(mats: list[torch.Tensor]) -> tuple[float, float]:
    """Max relative errors (nuclear, spectral) of matrix_norms against the SVD reference."""
    nuc = _rel_err(matrix_norms(mats, "nuclear"), svd_matrix_norms(mats, "nuclear"))
    spec = _rel_err(matrix_norms(mats, "spectral"), svd_matrix_norms(mats, "spectral"))
    return nuc, spec


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_random_matrices_of_every_shape(dtype):
    g = _gen(0)
    mats = [torch.randn(*s, generator=g, dtype=dtype) * 10.0 ** k for k, s in enumerate(SHAPES)]
    nuc, spec = _check(mats)
    assert nuc <= NUCLEAR_RTOL
    assert spec <= (SPECTRAL_RTOL if dtype == torch.float32 else SPECTRAL_RTOL_F64)


def _trained_matrices() -> list[torch.Tensor]:
    """The weight gradients of the tiny language model after a few AdamW steps on the default
    corpus (low effective rank, a heavy-tailed spectrum), their Newton-Schulz orthogonalisation
    (Muon's update: every singular value near one) and the trained weights."""
    from llm_validation.config import DataConfig, PRESETS
    from llm_validation.training.data import WindowSampler, load_corpus
    from llm_validation.training.model import Transformer, lm_loss

    torch.manual_seed(0)
    model = Transformer(PRESETS["tiny"], seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sampler = WindowSampler(load_corpus(DataConfig(seq_len=32)).train, 8, 32, seed=0)
    for _ in range(4):
        x, y = sampler.next()
        opt.zero_grad()
        lm_loss(model(x), y).backward()
        opt.step()
    mats = [p for p in model.parameters() if p.ndim == 2 and min(p.shape) > 1]
    grads = [p.grad.detach().clone() for p in mats]
    return grads + [newton_schulz(g) for g in grads[:6]] + [p.detach().clone() for p in mats]


def test_trained_matrices():
    nuc, spec = _check(_trained_matrices())
    assert nuc <= NUCLEAR_RTOL
    assert spec <= SPECTRAL_RTOL


@pytest.mark.parametrize("shape", [(96, 48), (48, 96), (64, 64)])
def test_ill_conditioned_matrices(shape):
    """Singular values spread evenly over 12 decades (condition number 1e12), and a cluster of
    tiny ones under a few large ones."""
    r = min(shape)
    spread = torch.logspace(0, -12, r, dtype=torch.float64)
    cluster = torch.cat([torch.tensor([5.0, 2.0, 1.0], dtype=torch.float64),
                         torch.full((r - 3,), 1e-9, dtype=torch.float64)])
    mats = [_with_singular_values(*shape, sv, seed=i) for i, sv in enumerate((spread, cluster))]
    nuc, spec = _check(mats)
    assert nuc <= NUCLEAR_RTOL
    assert spec <= SPECTRAL_RTOL_F64


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("rank", [1, 3])
def test_rank_deficient_matrices(rank, dtype):
    g = _gen(rank)
    mats = [(torch.randn(p, rank, generator=g, dtype=torch.float64)
             @ torch.randn(rank, q, generator=g, dtype=torch.float64)).to(dtype)
            for p, q in ((40, 24), (24, 40), (64, 64))]
    nuc, spec = _check(mats)
    assert nuc <= NUCLEAR_RTOL
    assert spec <= (SPECTRAL_RTOL if dtype == torch.float32 else SPECTRAL_RTOL_F64)


def test_zero_matrix_has_zero_norms():
    z = torch.zeros(6, 4)
    assert matrix_norms([z], "nuclear").tolist() == [0.0]
    assert matrix_norms([z], "spectral").tolist() == [0.0]


def test_cutoff_lies_above_the_rounding_noise_of_zero_singular_values():
    """GRAM_NOISE_FACTOR's premise: the eigenvalues a rank-deficient float64 matrix's Gram
    shows for its zero singular values stay below the cut-off (raw eigvalsh, no cut)."""
    g = _gen(7)
    worst = 0.0
    for p, q, k in ((4, 3, 1), (3, 4, 1), (2, 2, 1), (64, 32, 3), (32, 64, 1), (200, 120, 10)):
        for _ in range(10):
            a = (torch.randn(p, k, generator=g, dtype=torch.float64)
                 @ torch.randn(k, q, generator=g, dtype=torch.float64))
            lam = torch.linalg.eigvalsh(mn._gram(a, torch.float64))
            unit = torch.finfo(torch.float64).eps * math.sqrt(max(p, q)) * float(lam[-1])
            worst = max(worst, float(lam[:-k].abs().max()) / unit)
    assert worst < GRAM_NOISE_FACTOR / 4, f"noise reached {worst:.3g} units"


def test_one_eigenproblem_gives_both_norms_and_batching_changes_no_bit(monkeypatch):
    g = _gen(3)
    mats = [torch.randn(*s, generator=g) for s in ((48, 96), (96, 48), (48, 96), (5, 3))]
    spec, nuc = spectral_nuclear(mats)
    assert torch.equal(torch.stack(nuc), matrix_norms(mats, "nuclear"))
    # the spectral norm of the float64 eigenproblem is the float64 SVD's
    assert _rel_err(torch.stack(spec), svd_matrix_norms(mats, "spectral")) <= SPECTRAL_RTOL_F64
    # one matrix per eigvalsh call (chunks of 1) gives the same bits as the whole group
    whole = gram_eigenvalues(mats)
    monkeypatch.setattr(mn, "MAX_CHUNK_ELEMENTS", 1)
    one_by_one = gram_eigenvalues(mats)
    assert all(torch.equal(a, b) for a, b in zip(whole, one_by_one))
    # and the order of the input is kept across groups
    assert [len(x) for x in whole] == [48, 48, 48, 3]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="kind"):
        matrix_norms([torch.ones(2, 2)], "frobenius")
    with pytest.raises(ValueError, match="matrices"):
        matrix_norms([torch.ones(2, 2, 2)], "nuclear")
    assert matrix_norms([], "nuclear").numel() == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the batched "
                    "eigensolver on the GPU); the CPU path is tested above")
def test_on_cuda_as_on_cpu():
    g = _gen(5)
    mats = [torch.randn(*s, generator=g) for s in SHAPES]
    for kind, tol in (("nuclear", NUCLEAR_RTOL), ("spectral", SPECTRAL_RTOL)):
        got = matrix_norms([m.cuda() for m in mats], kind)
        assert got.device.type == "cuda"
        assert _rel_err(got.cpu(), svd_matrix_norms(mats, kind)) <= tol
