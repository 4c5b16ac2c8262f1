"""Muon and NorMuon with the Newton-Schulz dtype as a choice (``OptimConfig.ns_dtype``).

Algorithm (Muon, ``torch.optim.Muon``; per hidden matrix W with gradient G):

    B <- mu B + (1 - mu) G                         (EMA momentum, ``lerp``)
    M <- (1 - mu) G + mu B  if nesterov else B
    O <- NS_5(M)                                   (quintic Newton-Schulz, ~ U V^T of M)
    W <- (1 - lr wd) W - adjust(lr, shape) O

NorMuon (``pytorch_optimizer.NorMuon``, Li et al. 2025) follows ``O`` with a row-wise second
moment ``v <- beta2 v + (1 - beta2) mean_row(O^2)``, ``O <- O / (sqrt(v) + eps)`` rescaled to
the Frobenius norm it had (``update_scale='preserve_norm'``).

Both libraries run NS_5 in bfloat16. On a CPU without native bfloat16 products that is the
whole cost of the step (docs/performance.md: a tiny Muon step 3.5x-6x an AdamW step), so
:class:`Muon` and :class:`NorMuon` take ``ns_dtype``:

- ``torch.bfloat16``: the library's own ``step`` runs, unchanged (bitwise the library);
- any other dtype: the same update with NS_5 written once, in
  :func:`theory.geometry.newton_schulz`, run in that dtype (the other lines above are the
  library's, in the parameter's dtype).

Assumptions: the Muon groups hold 2-D parameters only (the libraries' own check); NorMuon's
groups are all ``use_muon`` groups run per parameter (``foreach=False``), as
:func:`llm_validation.training.optim.build_optimizer` builds them (its AdamW part is a separate
``torch.optim.AdamW``).

Guarantee (tests/llm_validation/training/test_muon.py): in float32 the step equals the
library's step with its Newton-Schulz call run in float32 (Muon bitwise, NorMuon within
:data:`FLOAT32_REL_TOL`), and it differs from the bfloat16 library step by the rounding of
bfloat16 alone (within :data:`BF16_REL_TOL` of the update's norm).

Reference: K. Jordan et al., "Muon: an optimizer for hidden layers" (2024); torch 2.13
``torch/optim/_muon.py``; Z. Li et al., "NorMuon" (2025), pytorch_optimizer 4.1.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from pytorch_optimizer import NorMuon as _LibNorMuon
from torch.optim._muon import _adjust_lr

from theory.geometry import MUON_NS_EPS, newton_schulz

__all__ = ["Muon", "NorMuon", "ns_torch_dtype", "BF16_REL_TOL", "FLOAT32_REL_TOL"]

#: Largest relative difference ||step_f32 - step_bf16|| / ||step_bf16|| between a float32 and a
#: bfloat16 Newton-Schulz step: bfloat16 keeps 8 significant bits (unit roundoff 2^-9 ~ 0.002)
#: and five quintic iterations of three products each compound it; measured 1.1-1.3% on
#: Gaussian 128x512, 512x128 and 128x128 matrices, so 3% leaves room without hiding a bug
#: (a wrong coefficient or a missing step moves the result by tens of percent).
BF16_REL_TOL = 0.03
#: Largest relative difference between two float32 implementations of the same iteration that
#: differ only in operation order (theory's ``newton_schulz`` vs pytorch_optimizer's
#: ``zero_power_via_newton_schulz_5`` in float32): a few float32 ulps (2^-24) amplified by
#: the iteration's slope at small singular values (~3.4 per step, 5 steps).
FLOAT32_REL_TOL = 1e-4

_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def ns_torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a resolved ``OptimConfig.ns_dtype`` (``bfloat16`` or ``float32``)."""
    if name not in _DTYPES:
        raise ValueError(f"ns_dtype={name!r} must be resolved to one of {list(_DTYPES)} "
                         "(llm_validation.hardware.resolve_ns_dtype)")
    return _DTYPES[name]


def _orthogonalize(update: torch.Tensor, dtype: torch.dtype, steps: int,
                   coefficients: tuple[float, float, float], eps: float) -> torch.Tensor:
    """NS_5 of ``update`` run in ``dtype``, returned in ``dtype``."""
    return newton_schulz(update.to(dtype), steps=steps, coefficients=tuple(coefficients),
                         eps=eps)


def _closure_loss(closure: Any) -> Any:
    """The loss of an optimizer step's closure (re-evaluated with gradients on), or None."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


class Muon(torch.optim.Muon):
    """``torch.optim.Muon`` whose Newton-Schulz runs in ``ns_dtype`` (module docstring)."""

    def __init__(self, params: Any, *, ns_dtype: torch.dtype = torch.bfloat16,
                 **kwargs: Any) -> None:
        super().__init__(params, **kwargs)
        self.ns_dtype = ns_dtype

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        if self.ns_dtype == torch.bfloat16:
            return super().step(closure)
        loss = _closure_loss(closure)
        for group in self.param_groups:
            params: list[torch.Tensor] = []
            grads: list[torch.Tensor] = []
            bufs: list[torch.Tensor] = []
            self._init_group(group, params, grads, bufs)
            lr, mu = float(group["lr"]), group["momentum"]
            for param, grad, buf in zip(params, grads, bufs):
                buf.lerp_(grad, 1 - mu)
                update = grad.lerp(buf, mu) if group["nesterov"] else buf
                ortho = _orthogonalize(update, self.ns_dtype, group["ns_steps"],
                                       group["ns_coefficients"], group["eps"])
                param.mul_(1 - lr * group["weight_decay"])
                param.add_(ortho.to(param.dtype),
                           alpha=-_adjust_lr(lr, group["adjust_lr_fn"], param.shape))
        return loss


class NorMuon(_LibNorMuon):
    """``pytorch_optimizer.NorMuon`` whose Newton-Schulz runs in ``ns_dtype`` (module
    docstring); in a dtype other than bfloat16 every group must be a per-parameter
    ``use_muon`` group."""

    def __init__(self, params: Any, *, ns_dtype: torch.dtype = torch.bfloat16,
                 **kwargs: Any) -> None:
        super().__init__(params, **kwargs)
        self.ns_dtype = ns_dtype
        if ns_dtype != torch.bfloat16:
            for group in self.param_groups:
                if not group.get("use_muon") or group.get("foreach", self.foreach):
                    raise ValueError("NorMuon(ns_dtype != bfloat16) needs use_muon groups with "
                                     "foreach=False (the AdamW part is a separate optimizer)")

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        if self.ns_dtype == torch.bfloat16:
            return super().step(closure)
        loss = _closure_loss(closure)
        for group in self.param_groups:
            self.init_group(group)
            group["step"] += 1
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad, state = p.grad, self.state[p]
                self.maximize_gradient(grad, maximize=self.maximize)
                self.apply_weight_decay(p, grad=grad, lr=group["lr"],
                                        weight_decay=group["weight_decay"],
                                        weight_decouple=group["weight_decouple"],
                                        fixed_decay=False)
                buf = state["momentum_buffer"]
                buf.lerp_(grad, weight=1.0 - group["momentum"])
                update = grad.lerp_(buf, weight=group["momentum"]) if group["nesterov"] else buf
                update = update.reshape(len(update), -1)
                (coefficients,) = group["ns_coeffs"]
                update = _orthogonalize(update, self.ns_dtype, group["ns_steps"], coefficients,
                                        MUON_NS_EPS).to(grad.dtype)
                self._normalize_rows(update, state, group)
                lr = self._lr(group, p)
                p.add_(update.reshape(p.shape), alpha=-lr)
        return loss

    @staticmethod
    def _normalize_rows(update: torch.Tensor, state: dict, group: dict) -> None:
        """NorMuon's row-wise second-moment normalisation of ``update``, in place."""
        eps = group["eps"]
        original_norm = update.norm()
        v_mean = update.square().mean(dim=-1, keepdim=True)
        second = state["second_momentum_buffer"]
        second.lerp_(v_mean, weight=1.0 - group["beta2"])
        update.div_(second.sqrt().add_(eps))
        if group["update_scale"] == "preserve_norm":
            update.mul_(original_norm / update.norm().add_(eps))
        else:
            update.mul_(0.2 * math.sqrt(update.numel()) / update.norm().add_(eps))

    @staticmethod
    def _lr(group: dict, p: torch.Tensor) -> float:
        """The step size NorMuon applies to ``p``."""
        from pytorch_optimizer.optimizer.muon.base import get_adjusted_lr

        if group["update_scale"] == "preserve_norm":
            return get_adjusted_lr(group["lr"], p.size(),
                                   use_adjusted_lr=group["use_adjusted_lr"])
        return group["lr"]
