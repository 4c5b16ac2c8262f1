"""The stochastic oracle of assumption A1: Gaussian gradient noise with a known variance.

Model (THEORY.md, A1): the method sees ``g_k = grad f(y_k) + xi_k`` with ``E[xi_k | past] = 0``
and ``E||xi_k||_2^2 = sigma^2``. Here ``xi_k = sigma z_k`` with ``z_k`` standard Gaussian scaled
to unit Euclidean variance per point (:func:`gaussian_noise`), drawn independently of the past,
so A1 holds with equality.

Reproducibility: each run draws from its own generator (``torch.Generator().manual_seed(seed)``)
in blocks of :data:`NOISE_BLOCK` steps (:class:`NoiseStream`). A trajectory therefore depends
only on its own seed (not on the rest of the batch, nor on the number of steps), and runs with
equal seeds share their noise (common random numbers).
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor

__all__ = ["gaussian_noise", "NoiseStream", "NOISE_BLOCK"]

#: Steps of noise drawn per generator call; fixed, so a seed's stream does not depend on K or B.
NOISE_BLOCK = 256


def gaussian_noise(generator: torch.Generator, shape: tuple[int, ...], event_ndim: int) -> Tensor:
    """Standard Gaussian noise scaled to unit Euclidean variance per point: ``E||z||_2^2 = 1``.

    ``shape`` includes leading (step) dimensions; multiply by sigma for variance sigma^2.
    """
    n = math.prod(shape[len(shape) - event_ndim :])
    return torch.randn(shape, generator=generator, dtype=torch.float64) / math.sqrt(n)


class NoiseStream:
    """Per-run Gaussian noise for a batch of B runs of points of shape ``shape``.

    ``seeds[b]`` and ``sigmas[b]`` are run b's seed and noise level. Noise is drawn NOISE_BLOCK
    steps at a time from each run's own generator and scaled by sigma; runs with sigma = 0 get
    exact zeros and draw nothing. Steps must be requested in order 0, 1, 2, ...
    """

    def __init__(self, seeds: Sequence[int], sigmas: Sequence[float], shape: tuple[int, ...]):
        if len(seeds) != len(sigmas):
            raise ValueError(f"{len(seeds)} seeds for {len(sigmas)} noise levels")
        self.shape = shape
        self.active = [i for i, s in enumerate(sigmas) if s > 0]
        self.gens = {i: torch.Generator().manual_seed(seeds[i]) for i in self.active}
        self.sigma = torch.tensor([sigmas[i] for i in self.active], dtype=torch.float64)
        self.b = len(sigmas)
        self.buf: Tensor | None = None

    def at(self, k: int) -> Tensor | None:
        """Noise of step k, shape (B, *shape), or None when every sigma is 0."""
        if not self.active:
            return None
        j = k % NOISE_BLOCK
        if j == 0 or self.buf is None:
            nd = len(self.shape)
            draws = torch.stack(
                [gaussian_noise(self.gens[i], (NOISE_BLOCK, *self.shape), nd) for i in self.active],
                dim=1,
            )  # (NOISE_BLOCK, B_active, *shape)
            full = torch.zeros(NOISE_BLOCK, self.b, *self.shape, dtype=torch.float64)
            full[:, self.active] = draws * self.sigma.view(1, -1, *([1] * nd))
            self.buf = full
        return self.buf[j]
