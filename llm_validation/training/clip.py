"""Global-norm gradient clipping, one definition for the emulator and every pipeline stage.

Algorithm (``torch.nn.utils.clip_grad_norm_``'s rule, ``c = OptimConfig.grad_clip``)::

    n_i = ||g_i||_2 in float32 (torch._foreach_norm), sq = sum_i float64(n_i)^2
    g_i <- g_i * min(1, c / (sqrt(sq) + 1e-6))

``sq`` comes from here (one process holding every gradient; ``reduce_sq`` sums it over
stages on the host), or from ``clip_sq`` (a pipeline stage: every stage's norms reduced on the
device, :mod:`llm_validation.pipeline.clipping`); the root, the factor and the product are
:func:`clip_grads_` on the device for both, so equal ``sq`` give equal gradients bitwise.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor

__all__ = ["CLIP_EPS", "clip_scale", "clip_grads_", "global_clip_"]

#: The 1e-6 torch.nn.utils.clip_grad_norm_ adds to the norm before dividing.
CLIP_EPS = 1e-6


def clip_grads_(grads: Sequence[Tensor], sq: Tensor, max_norm: float) -> Tensor:
    """``g <- g * min(1, max_norm / (sqrt(sq) + 1e-6))`` for every tensor of ``grads``, in place,
    on the device (no host read); ``sq``: the squared global norm, a float64 scalar tensor.
    Returns the norm (a float64 scalar tensor).

    The emulator and every pipeline stage call this one function, so equal ``sq`` give equal
    gradients bit for bit: the root is torch's float64 ``sqrt`` (which on this CPU misses
    IEEE's rounding by one ulp for ~0.7% of arguments, so it is used on both sides rather than
    Python's ``math.sqrt``), the division is IEEE float64 (``full_like(c) / x``, not the
    reciprocal ``c / x`` of a tensor would take), and the factor multiplies float32 gradients
    as float32, exactly as a Python float did (a factor of 1 multiplies exactly, so the
    no-clip case is bitwise a no-op)."""
    total = sq.sqrt()
    scale = (torch.full_like(total, max_norm) / (total + CLIP_EPS)).clamp(max=1.0)
    torch._foreach_mul_(list(grads), scale.to(grads[0].device))
    return total


def clip_scale(total_norm: float, max_norm: float) -> float:
    """Factor of global-norm clipping, as ``torch.nn.utils.clip_grad_norm_``:
    ``min(1, max_norm / (total_norm + 1e-6))``."""
    return min(1.0, max_norm / (total_norm + CLIP_EPS))


@torch.no_grad()
def global_clip_(grads: Sequence[Tensor], max_norm: float, *,
                 reduce_sq: Callable[[float], float] | None = None,
                 clip_sq: Callable[[list[Tensor]], Tensor] | None = None) -> Tensor:
    """Clip ``grads`` (not empty) in place by their global norm (module docstring); returns
    the pre-clip norm as a float64 device scalar (no host read unless ``reduce_sq``)."""
    grads = list(grads)
    if clip_sq is not None:
        sq = clip_sq(grads)
    else:
        norms = torch._foreach_norm(grads)                       # float32, as torch's clip
        sq = torch.stack([n.double() for n in norms]).square().sum()
        if reduce_sq is not None:
            sq = torch.tensor(reduce_sq(float(sq)), dtype=torch.float64, device=sq.device)
    return clip_grads_(grads, sq, max_norm)
