"""The A1 noise model: unit Euclidean variance, per-run streams that depend only on the seed."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from numerics.noise import NOISE_BLOCK, NoiseStream, gaussian_noise

#: Z-score for the Monte-Carlo noise-variance check (a 4-sigma two-sided band).
Z = 4.0

seeds = st.integers(min_value=0, max_value=10_000)


@given(st.sampled_from([(5,), (3, 4)]), seeds)
def test_noise_has_unit_euclidean_variance(shape, seed):
    n = 4000
    z = gaussian_noise(torch.Generator().manual_seed(seed), (n, *shape), len(shape))
    sq = (z * z).sum(dim=tuple(range(1, 1 + len(shape))))
    mean, se = float(sq.mean()), float(sq.std()) / math.sqrt(n)
    assert abs(mean - 1.0) <= Z * se


def test_stream_depends_only_on_the_runs_own_seed_and_sigma():
    shape = (3,)
    steps = NOISE_BLOCK + 5  # crosses a block boundary
    batch = NoiseStream([7, 1, 7, 4], [0.5, 0.0, 2.0, 1.0], shape)
    alone = NoiseStream([7], [0.5], shape)
    rows = torch.stack([batch.at(k) for k in range(steps)])  # (K, B, 3)
    single = torch.stack([alone.at(k)[0] for k in range(steps)])
    assert torch.equal(rows[:, 0], single)  # batch independence, bitwise
    assert torch.equal(rows[:, 1], torch.zeros_like(rows[:, 1]))  # sigma = 0: exact zeros
    assert torch.equal(rows[:, 2], 4 * rows[:, 0])  # equal seeds share noise, scaled by sigma
    gen = torch.Generator().manual_seed(4)
    first = gaussian_noise(gen, (NOISE_BLOCK, *shape), 1)
    second = gaussian_noise(gen, (NOISE_BLOCK, *shape), 1)
    assert torch.equal(rows[:NOISE_BLOCK, 3], first)  # the documented block draws
    assert torch.equal(rows[NOISE_BLOCK:, 3], second[:5])


def test_stream_without_noise_draws_nothing():
    assert NoiseStream([0, 1], [0.0, 0.0], (2, 2)).at(0) is None


def test_stream_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="2 seeds for 1 noise levels"):
        NoiseStream([0, 1], [1.0], (2,))
