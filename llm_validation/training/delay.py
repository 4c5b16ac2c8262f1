"""Exact emulation of a tau-step gradient delay, with Error Feedback, around any torch optimizer.

Algorithm (THEORY.md, "Algorithms"; step t = 0, 1, ...)::

    g_t     = grad f(W(max(t - tau, 0)); batch t)          # read point, W(-k) = W(0)
    W_base  = base_step(W(t), g_t)                         # optimizer state, weight decay on W(t)
    v_t     = W_base - W(t)                                # full base update (U_t = -v_t)
    W(t+1)  = W_base + lam (v_t - v_{t-1}),  v_{-1} = 0    # update-level EF (lam = 0: off)

Gradient-level EF instead feeds the base optimizer ``(1 + lam) g_t - lam g_{t-1}``
(``g_{-1} = g_0``). The formulas are ``theory.update_rules.read_index`` / ``ef_correct`` /
``grad_ef_mix``, written once there. The paper's ``x_{t+1} = x_t - u_{t-1} - lam (u_{t-1} -
u_{t-2})`` is the same rule with ``u = -v`` and its t shifted by one.

Usage protocol (the pipeline and the tests rely on it)::

    opt = DelayedOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3), tau=1, ef_lambda=1.0)
    for batch in batches:                  # batch t
        with opt.delayed_weights():        # parameters hold W(max(t - tau, 0)) inside the block
            loss_fn(model, batch).backward()   # backward INSIDE the block (autograd reads p)
        opt.step()                         # base step on W(t), then the EF correction
        opt.zero_grad()

Memory: parameter ``p`` with delay ``tau_p`` keeps exactly ``tau_p`` extra copies (a ring:
slot ``j mod tau_p`` holds ``W(j)``); update-level EF keeps one more buffer (``v_{t-1}``),
gradient-level EF one more (``g_{t-1}``). ``delayed_weights`` swaps tensors (no copy); ``step``
copies ``W(t)`` into the ring slot that ``W(t - tau)`` has just vacated (one copy per step).

Per-group delays (original PipeDream, stage s of P reads weights P - 1 - s steps old):
``group_taus`` gives one tau per ``optimizer.param_groups`` entry.

Per-stage reuse (the pipeline runtime): :class:`UpdateErrorFeedback` and
:class:`GradErrorFeedback` act on any list of parameters on their own::

    ef = UpdateErrorFeedback(stage_params, lam)      # holds v_{t-1}, starts at 0
    before = [p.detach().clone() for p in stage_params]   # W(t) of this stage
    base_optimizer.step()                            # p = W_base
    ef.apply(before)                                 # p = W_base + lam (v_t - v_{t-1})

    gef = GradErrorFeedback(stage_params, lam)
    gef.mix()                                        # p.grad = (1 + lam) g_t - lam g_{t-1}
    base_optimizer.step()

Reference: PipeDream-2BW (Narayanan et al., 2021) weight stashing with one version; the EF rule
and its virtual iterate ``z_t = x_t - lam v_{t-1}`` are THEORY.md result 5.
"""

from __future__ import annotations

import copy
import math
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

import torch
from torch import Tensor

from theory.update_rules import ef_correct, grad_ef_mix, read_index

__all__ = ["DelayedOptimizer", "UpdateErrorFeedback", "GradErrorFeedback", "EF_LEVELS"]

EF_LEVELS = ("update", "grad")
#: Elements per slice of the EF loops on CPU: temporaries of 64Ki floats (256 KiB) stay in
#: cache and are recycled by the allocator; whole-tensor temporaries made update-level EF about
#: 3x slower on the ``small`` preset (page faults of fresh large allocations). Elementwise, so
#: the result is bitwise the same. CUDA tensors are processed whole.
EF_CHUNK = 1 << 16


def _check_lam(lam: Any) -> float:
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) \
            or lam < 0:
        raise ValueError(f"ef_lambda={lam!r} must be a finite real >= 0")
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


class DelayedOptimizer:
    """``DelayedOptimizer(optimizer, tau=1, ef_lambda=0.0, ef_level="update", group_taus=None)``.

    Wraps ``optimizer`` (anything with ``param_groups``, ``step``, ``zero_grad``, ``state_dict``,
    ``load_state_dict``) so that the gradient of step t is taken at ``W(t - tau)``; see the
    module docstring. ``tau = 0, ef_lambda = 0`` is the bare optimizer, bitwise.

    For the statistics: :meth:`read_weights` (the delayed read point of step t), ``ef.v_prev``
    (the previous base update, with update-level EF), and after ``step(record=True)``:
    ``last_base_update`` (v_t) and ``last_update`` (the applied displacement W(t+1) - W(t)).
    """

    def __init__(self, optimizer: Any, tau: int = 1, ef_lambda: float = 0.0,
                 ef_level: str = "update", group_taus: Sequence[int] | None = None) -> None:
        if isinstance(tau, bool) or not isinstance(tau, int) or tau < 0:
            raise ValueError(f"tau={tau!r} must be an int >= 0")
        lam = _check_lam(ef_lambda)
        if ef_level not in EF_LEVELS:
            raise ValueError(f"ef_level={ef_level!r} is not one of {list(EF_LEVELS)}")
        groups = optimizer.param_groups
        if group_taus is not None:
            group_taus = list(group_taus)
            if len(group_taus) != len(groups) or any(
                    isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in group_taus):
                raise ValueError(f"group_taus={group_taus!r} must be {len(groups)} ints >= 0 "
                                 "(one per optimizer param group)")
        self.optimizer = optimizer
        self.ef_lambda, self.ef_level = lam, ef_level
        self.params: list[Tensor] = []
        self.taus: list[int] = []
        seen: set[int] = set()
        for gi, group in enumerate(groups):
            for p in group["params"]:
                if id(p) in seen:
                    raise ValueError("DelayedOptimizer: a parameter appears in two groups")
                seen.add(id(p))
                self.params.append(p)
                self.taus.append(tau if group_taus is None else group_taus[gi])
        self.tau = max(self.taus, default=0)
        with torch.no_grad():  # ring of tau_p versions, all W(0) (W(-k) = W(0))
            self.history = [[p.detach().clone() for _ in range(tp)]
                            for p, tp in zip(self.params, self.taus)]
        on = lam > 0.0
        self.ef = UpdateErrorFeedback(self.params, lam) if on and ef_level == "update" else None
        self.gef = GradErrorFeedback(self.params, lam) if on and ef_level == "grad" else None
        self.t = 0                 # number of steps taken
        self._inside = False
        self._read_done = False
        self.last_base_update: list[Tensor] | None = None
        self.last_update: list[Tensor] | None = None

    # ---------------------------------------------------------------- torch-optimizer surface
    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    @property
    def state(self) -> Any:
        return self.optimizer.state

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    # ------------------------------------------------------------------------------- delay
    def read_index(self, i: int) -> int:
        """Index of the weights parameter i is read at in step t: ``max(t - tau_i, 0)``."""
        return read_index(self.t, self.taus[i])

    def read_weights(self) -> list[Tensor]:
        """The delayed read point W(t - tau_p) of every parameter (outside the block, before
        ``step``). Views of internal buffers: do not modify."""
        if self._inside:
            return [p.detach() for p in self.params]
        return [h[self.t % tp] if tp else p.detach()
                for p, h, tp in zip(self.params, self.history, self.taus)]

    def _swap(self) -> None:
        for p, h, tp in zip(self.params, self.history, self.taus):
            if tp:
                slot = self.t % tp
                p.data, h[slot] = h[slot], p.data

    @contextmanager
    def delayed_weights(self) -> Iterator[None]:
        """Inside the block every parameter holds its read point ``W(max(t - tau_p, 0))``."""
        if self._inside:
            raise RuntimeError("delayed_weights() is not re-entrant")
        with torch.no_grad():
            self._swap()
        self._inside = True
        try:
            yield
        finally:
            with torch.no_grad():
                self._swap()
            self._inside = False
            self._read_done = True

    @torch.no_grad()
    def step(self, record: bool = False) -> None:
        """Base step on W(t) with the delayed gradients, then EF; ``record=True`` keeps
        ``last_base_update`` and ``last_update`` (costs two parameter-sized temporaries)."""
        if self._inside:
            raise RuntimeError("step() called inside delayed_weights()")
        if self.tau > 0 and not self._read_done:
            raise RuntimeError("DelayedOptimizer.step(): compute the gradients inside "
                               "`with opt.delayed_weights():` first")
        need_before = self.ef is not None or record
        before: list[Tensor] = []
        for p, h, tp in zip(self.params, self.history, self.taus):
            if tp:  # W(t - tau) is no longer needed: its slot now keeps W(t)
                slot = h[self.t % tp]
                slot.copy_(p)
                before.append(slot)
            elif need_before:
                before.append(p.detach().clone())
        if self.gef is not None:
            self.gef.mix()
        self.optimizer.step()
        base = [p - b for p, b in zip(self.params, before)] if record else None
        if self.ef is not None:
            self.ef.apply(before)
        if record:
            self.last_base_update = base
            self.last_update = [p - b for p, b in zip(self.params, before)]
        self.t += 1
        self._read_done = False

    @torch.no_grad()
    def dry_run_base_update(self, grads: Sequence[Tensor]) -> list[Tensor]:
        """The base update the wrapped optimizer would apply from the current weights with
        ``grads`` (the statistics' "fresh update"); weights, gradients and optimizer state are
        restored exactly afterwards."""
        base, params = self.optimizer, self.params
        snap = [p.detach().clone() for p in params]
        state = copy.deepcopy(base.state_dict())
        saved = [p.grad for p in params]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        base.step()
        v = [p - s for p, s in zip(params, snap)]
        for p, s, g in zip(params, snap, saved):
            p.copy_(s)
            p.grad = g
        base.load_state_dict(state)
        return v

    # ---------------------------------------------------------------------------- memory
    def extra_buffers(self) -> list[Tensor]:
        """Every persistent tensor the wrapper adds: tau_p ring slots per parameter + EF."""
        bufs = [t for h in self.history for t in h]
        for ef in (self.ef, self.gef):
            if ef is not None:
                bufs.extend(ef.buffers())
        return bufs

    def extra_bytes(self) -> int:
        """Bytes held by :meth:`extra_buffers`."""
        return sum(t.numel() * t.element_size() for t in self.extra_buffers())

    def param_bytes(self) -> int:
        """Bytes of one copy of the wrapped parameters."""
        return sum(p.numel() * p.element_size() for p in self.params)

    # ---------------------------------------------------------------------------- checkpoint
    def state_dict(self) -> dict[str, Any]:
        """Base optimizer state, step count, every stashed weight version and EF buffer."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "t": self.t,
            "taus": list(self.taus),
            "ef_lambda": self.ef_lambda,
            "ef_level": self.ef_level,
            "history": [[t.clone() for t in h] for h in self.history],
            "ef": None if self.ef is None else self.ef.state_dict(),
            "gef": None if self.gef is None else self.gef.state_dict(),
        }

    @torch.no_grad()
    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        if list(sd["taus"]) != self.taus:
            raise ValueError("DelayedOptimizer.load_state_dict: checkpoint delays differ")
        if float(sd["ef_lambda"]) != self.ef_lambda or sd["ef_level"] != self.ef_level:
            raise ValueError("DelayedOptimizer.load_state_dict: checkpoint EF settings differ "
                             f"(lam={sd['ef_lambda']}, level={sd['ef_level']})")
        self.optimizer.load_state_dict(sd["optimizer"])
        for h, src in zip(self.history, sd["history"]):
            _copy_into(h, src, "DelayedOptimizer.history")
        if self.ef is not None:
            self.ef.load_state_dict(sd["ef"])
        if self.gef is not None:
            self.gef.load_state_dict(sd["gef"])
        self.t = int(sd["t"])
        self._read_done = False
