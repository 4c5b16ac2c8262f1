"""Error Feedback and the delay corrections (DC-ASGD, a Nesterov look-ahead), one interface.

Each acts inside :class:`llm_validation.training.delay.DelayedOptimizer` and on its own on any
list of parameters (a pipeline stage): a stateful wrapper with ``apply``/``mix`` around a pure
formula written once. EF (``DelayConfig.ef_lambda``, ``ef_level``; docs/theory.md result 5):
:class:`UpdateErrorFeedback` ``W(t+1) = W_base + lam (v_t - v_{t-1})`` and
:class:`GradErrorFeedback` ``(1 + lam) g_t - lam g_{t-1}``, formulas in
``theory.update_rules``. On a pipeline stage's own parameters::

    ef = UpdateErrorFeedback(stage_params, lam)      # holds v_{t-1}, starts at 0
    before = [p.detach().clone() for p in stage_params]   # W(t) of this stage
    base_optimizer.step()                            # p = W_base
    ef.apply(before)                                 # p = W_base + lam (v_t - v_{t-1})

    gef = GradErrorFeedback(stage_params, lam)
    gef.mix()                                        # p.grad = (1 + lam) g_t - lam g_{t-1}
    base_optimizer.step()

Corrections (``DelayConfig.correction``, coefficient ``c = DelayConfig.correction_coef``),
formulas here:

``dcasgd`` -- Delay-Compensated ASGD (Zheng et al., "Asynchronous Stochastic Gradient Descent
with Delay Compensation", ICML 2017, arXiv:1609.08326). Algorithm: the gradient taken at the
read point ``y_t = W(t - tau)`` is moved to the current weights by a first-order Taylor step
whose Hessian is replaced by the diagonal of the gradient's outer product::

    g_comp = g(y_t) + c * g(y_t) * g(y_t) * (W(t) - y_t)          (elementwise; c = lambda)

and the base optimizer is fed ``g_comp``. Assumptions: the outer product ``g g^T`` approximates
the Hessian (for a log-likelihood loss it is an unbiased estimate of the Fisher information) and
only its diagonal is kept. Guarantee (paper): under its smoothness and bounded-delay assumptions
DC-ASGD converges at a rate comparable to sequential SGD, with a smaller delay-dependent term
than plain ASGD for a suitable lambda. No claim of the paper is re-checked here. With
``tau = 0`` (or a sync phase) ``W(t) - y_t = 0`` and the correction vanishes.

``nesterov`` -- a Nesterov look-ahead on the base update, for the method of Ajanthan et al.,
"Nesterov Method for Asynchronous Pipeline Parallel Optimization" (ICML 2025,
arXiv:2505.01099). Algorithm, with ``v_t = W_base - W(t)`` the base optimizer's update computed
from the delayed gradient and ``gamma = c`` in (0, 1)::

    d_t     = gamma d_{t-1} + (1 - gamma) v_t,        d_{-1} = 0
    W(t+1)  = W(t) + gamma d_t + (1 - gamma) v_t      (= W_base + gamma (d_t - v_t))

i.e. the NAG look-ahead ``gamma d_t`` along the running direction plus a ``(1 - gamma)``-discounted
fresh step. With plain SGD as the base (``v_t = -eta g_t``) this is Nesterov momentum in EMA form,
``W(t+1) = W(t) - eta ((1 - gamma) g_t + gamma m_t)`` with ``m_t`` the EMA of the gradients --
the momentum of ``torch.optim.Muon(nesterov=True)`` and, up to its momentum schedule and bias
corrections, the numerator of ``torch.optim.NAdam``.
Caveat (stated in docs/llm_validation.md): the paper's own equations could not be retrieved
here; its official code (PluralisResearch/AsyncPP, ``run.bash``) trains with delayed
``torch.optim.NAdam(decoupled_weight_decay=True)`` and ``beta1 = 0.99`` under weight stashing,
which is this project's ``OptimConfig(name="nadamw", beta1=0.99)`` with a delay -- that is the
faithful baseline of the paper. This correction is the optimizer-agnostic rendering of the same
look-ahead, not a verified transcription of the paper's update.
"""

from __future__ import annotations

import math
from typing import Any, Iterator, Mapping, Sequence

import torch
from torch import Tensor

from theory.update_rules import ef_correct, grad_ef_mix

__all__ = [
    "EF_LEVELS",
    "EF_CHUNK",
    "UpdateErrorFeedback",
    "GradErrorFeedback",
    "dcasgd_compensate",
    "lookahead_direction",
    "lookahead_correct",
    "DCASGD",
    "NesterovLookahead",
]

#: The two Error Feedback variants (``DelayConfig.ef_level``).
EF_LEVELS = ("update", "grad")
#: Elements per slice of the EF loops on CPU: temporaries of 64Ki floats (256 KiB) stay in
#: cache and are recycled by the allocator; whole-tensor temporaries made update-level EF about
#: 3x slower on the ``small`` preset (page faults of fresh large allocations). Elementwise, so
#: the result is bitwise the same. CUDA tensors are processed whole.
EF_CHUNK = 1 << 16


def _check_lam(lam: Any, what: str = "ef_lambda") -> float:
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) \
            or lam < 0:
        raise ValueError(f"{what}={lam!r} must be a finite real >= 0")
    return float(lam)


def _slices(*tensors: Tensor) -> Iterator[tuple[Tensor, ...]]:
    """Aligned flat slices of same-shape tensors (whole tensors on CUDA or if not contiguous)."""
    if tensors[0].is_cuda or not all(t.is_contiguous() for t in tensors):
        yield tensors
        return
    flat = [t.view(-1) for t in tensors]
    for i in range(0, flat[0].numel(), EF_CHUNK):
        yield tuple(f[i:i + EF_CHUNK] for f in flat)


def _copy_into(dst: list[Tensor], src: Sequence[Tensor], what: str) -> None:
    if len(src) != len(dst):
        raise ValueError(f"{what}: expected {len(dst)} tensors, got {len(src)}")
    for d, s in zip(dst, src):
        if d.shape != s.shape:
            raise ValueError(f"{what}: shape {tuple(s.shape)} does not match {tuple(d.shape)}")
        d.copy_(s)


class UpdateErrorFeedback:
    """Update-level EF on a list of parameters: ``p <- ef_correct(p, v, v_prev, lam)`` with
    ``v = p - before`` the base update just applied; keeps ``v_prev`` (``v_{-1} = 0``)."""

    def __init__(self, params: Sequence[Tensor], lam: float) -> None:
        self.params = list(params)
        self.lam = _check_lam(lam)
        self.v_prev = [torch.zeros_like(p, memory_format=torch.preserve_format)
                       for p in self.params]  # v_{t-1}, one buffer per parameter

    @torch.no_grad()
    def apply(self, before: Sequence[Tensor]) -> None:
        """``before[i]`` = the parameter before the base step; afterwards ``v_prev`` = v_t."""
        if len(before) != len(self.params):
            raise ValueError(f"apply: expected {len(self.params)} tensors, got {len(before)}")
        for whole in zip(self.params, before, self.v_prev):
            for p, b, vp in _slices(*whole):
                v = p - b                                  # v_t = W_base - W(t)
                p.copy_(ef_correct(p, v, vp, self.lam))    # W_base + lam (v_t - v_{t-1})
                vp.copy_(v)

    def buffers(self) -> list[Tensor]:
        return list(self.v_prev)

    def state_dict(self) -> dict[str, Any]:
        return {"lam": self.lam, "v_prev": [v.clone() for v in self.v_prev]}

    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        if float(sd["lam"]) != self.lam:
            raise ValueError(f"UpdateErrorFeedback: checkpoint lam={sd['lam']} != {self.lam}")
        _copy_into(self.v_prev, sd["v_prev"], "UpdateErrorFeedback.v_prev")


class GradErrorFeedback:
    """Gradient-level EF on a list of parameters: ``p.grad <- (1 + lam) g_t - lam g_{t-1}``."""

    def __init__(self, params: Sequence[Tensor], lam: float) -> None:
        self.params = list(params)
        self.lam = _check_lam(lam)
        self.g_prev = [torch.zeros_like(p, memory_format=torch.preserve_format)
                       for p in self.params]  # g_{t-1}, one buffer per parameter
        self.started = False                  # False: g_{-1} = g_0 (plain gradient at t = 0)

    @torch.no_grad()
    def mix(self) -> None:
        """Replace each ``p.grad`` by the EF mix and remember the raw gradient."""
        for p, gp in zip(self.params, self.g_prev):
            if p.grad is None:
                raise ValueError("GradErrorFeedback.mix: a parameter has no gradient")
            for g, gpc in _slices(p.grad, gp):
                mixed = grad_ef_mix(g, gpc if self.started else None, self.lam)
                gpc.copy_(g)
                g.copy_(mixed)
        self.started = True

    def buffers(self) -> list[Tensor]:
        return list(self.g_prev)

    def state_dict(self) -> dict[str, Any]:
        return {"lam": self.lam, "started": self.started,
                "g_prev": [g.clone() for g in self.g_prev]}

    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        if float(sd["lam"]) != self.lam:
            raise ValueError(f"GradErrorFeedback: checkpoint lam={sd['lam']} != {self.lam}")
        _copy_into(self.g_prev, sd["g_prev"], "GradErrorFeedback.g_prev")
        self.started = bool(sd["started"])


def _check_coef(coef: Any, what: str, below_one: bool = False) -> float:
    if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not math.isfinite(coef) \
            or coef <= 0 or (below_one and coef >= 1):
        rng = "(0, 1)" if below_one else "(0, inf)"
        raise ValueError(f"{what} coefficient={coef!r} must be a finite real in {rng}")
    return float(coef)


def dcasgd_compensate(g: Tensor, w_now: Tensor, w_read: Tensor, coef: float | Tensor) -> Tensor:
    """DC-ASGD: ``g + coef * g * g * (w_now - w_read)`` (elementwise; Zheng et al. 2017)."""
    return g + coef * g * g * (w_now - w_read)


def lookahead_direction(d_prev: Tensor, v: Tensor, gamma: float | Tensor) -> Tensor:
    """Running direction of the look-ahead: ``d_t = gamma d_{t-1} + (1 - gamma) v_t``."""
    return gamma * d_prev + (1 - gamma) * v


def lookahead_correct(x_base_next: Tensor, v: Tensor, d: Tensor, gamma: float | Tensor) -> Tensor:
    """From the base step's result ``W_base = W(t) + v_t`` return
    ``W(t+1) = W(t) + gamma d_t + (1 - gamma) v_t = W_base + gamma (d_t - v_t)``."""
    return x_base_next + gamma * (d - v)


class DCASGD:
    """DC-ASGD on a list of parameters: ``p.grad <- dcasgd_compensate(p.grad, p, read, coef)``,
    with ``p`` holding W(t) and ``read`` the weights the gradient was taken at. Stateless."""

    def __init__(self, params: Sequence[Tensor], coef: float) -> None:
        self.params = list(params)
        self.coef = _check_coef(coef, "DC-ASGD")

    @torch.no_grad()
    def apply(self, read_point: Sequence[Tensor | None]) -> None:
        """``read_point[i]``: the read weights of parameter i, None when they are W(t) (no
        delay at this step: the correction is zero and the gradient is left untouched)."""
        if len(read_point) != len(self.params):
            raise ValueError(f"DCASGD.apply: expected {len(self.params)} tensors, "
                             f"got {len(read_point)}")
        for p, r in zip(self.params, read_point):
            if r is None:
                continue
            if p.grad is None:
                raise ValueError("DCASGD.apply: a parameter has no gradient")
            p.grad.copy_(dcasgd_compensate(p.grad, p.detach(), r, self.coef))


class NesterovLookahead:
    """The look-ahead on a list of parameters: after the base step, ``p <- lookahead_correct(p,
    v, d, gamma)`` with ``v = p - before`` and ``d`` the running direction (``d_{-1} = 0``)."""

    def __init__(self, params: Sequence[Tensor], gamma: float) -> None:
        self.params = list(params)
        self.gamma = _check_coef(gamma, "Nesterov look-ahead", below_one=True)
        self.d = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]

    @torch.no_grad()
    def apply(self, before: Sequence[Tensor]) -> None:
        """``before[i]`` = the parameter before the base step (W(t)); afterwards ``d`` = d_t."""
        if len(before) != len(self.params):
            raise ValueError(f"NesterovLookahead.apply: expected {len(self.params)} tensors, "
                             f"got {len(before)}")
        for p, b, d in zip(self.params, before, self.d):
            v = p - b                                               # v_t = W_base - W(t)
            d.copy_(lookahead_direction(d, v, self.gamma))          # d_t
            p.copy_(lookahead_correct(p, v, d, self.gamma))         # W(t+1)

    def buffers(self) -> list[Tensor]:
        return list(self.d)

    def state_dict(self) -> dict[str, Any]:
        return {"gamma": self.gamma, "d": [d.clone() for d in self.d]}

    @torch.no_grad()
    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        if float(sd["gamma"]) != self.gamma:
            raise ValueError(f"NesterovLookahead: checkpoint gamma={sd['gamma']} != {self.gamma}")
        if len(sd["d"]) != len(self.d):
            raise ValueError(f"NesterovLookahead.d: expected {len(self.d)} tensors, "
                             f"got {len(sd['d'])}")
        for d, s in zip(self.d, sd["d"]):
            if d.shape != s.shape:
                raise ValueError(f"NesterovLookahead.d: shape {tuple(s.shape)} does not match "
                                 f"{tuple(d.shape)}")
            d.copy_(s)
