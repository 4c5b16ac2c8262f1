"""Exact emulation of a tau-step gradient delay, with Error Feedback, around any torch optimizer.

Algorithm (docs/theory.md, "Algorithms"; step t = 0, 1, ...)::

    g_t     = grad f(W(max(t - tau, 0)); batch t)          # read point, W(-k) = W(0)
    W_base  = base_step(W(t), g_t)                         # optimizer state, weight decay on W(t)
    v_t     = W_base - W(t)                                # full base update (U_t = -v_t)
    W(t+1)  = W_base + lam (v_t - v_{t-1}),  v_{-1} = 0    # update-level EF (lam = 0: off)

Gradient-level EF instead feeds the base optimizer ``(1 + lam) g_t - lam g_{t-1}``
(``g_{-1} = g_0``). The formulas are ``theory.update_rules.read_index`` / ``ef_correct`` /
``grad_ef_mix``, written once there. The paper's ``x_{t+1} = x_t - u_{t-1} - lam (u_{t-1} -
u_{t-2})`` is the same rule with ``u = -v`` and its t shifted by one.

Knobs (``DelayConfig`` / ``OptimConfig``), in the order one step applies them:

- sync phases: step t runs with ``tau_t = effective_tau(t, tau, sync_start, sync_cooldown,
  total_steps)`` (0 for the first ``sync_start`` and the last ``sync_cooldown`` steps); the
  ring keeps every version meanwhile, so the step where the delay switches on reads
  ``W(t - tau)`` and a cooldown step reads ``W(t)``; EF is unchanged by the phases;
- DC-ASGD (``correction='dcasgd'``) compensates ``g_t`` towards W(t) before anything else;
- gradient-level EF mixes the (compensated) gradients;
- ``grad_clip``: global L2 clipping of the gradient the base step uses, ``g <- g min(1, c /
  (||g|| + 1e-6))`` (torch.nn.utils.clip_grad_norm_'s rule; per-tensor norms in float32 as
  torch, their squares summed in float64 and passed through ``reduce_sq``, the pipeline's sum
  over stages, before the square root; or ``clip_sq(grads)``, the squared norm as a device
  scalar computed elsewhere: a pipeline stage's over every stage,
  :mod:`llm_validation.pipeline.clipping`, with no host read); the root, the factor and the
  product on the device, one function for both (:func:`clip_grads_`);
- base step; then update-level EF or the Nesterov look-ahead (``correction='nesterov'``) on
  the base update. The correction formulas: :mod:`llm_validation.training.corrections`.

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

Per-stage reuse (the pipeline runtime): :meth:`DelayedOptimizer.from_config` with the stage's
optimizer (tau = 0 there: the schedule makes the delay); :class:`UpdateErrorFeedback` and
:class:`GradErrorFeedback` (``corrections``, re-exported here) act on any parameter list.

Reference: PipeDream-2BW (Narayanan et al., 2021) weight stashing with one version; the EF rule
and its virtual iterate ``z_t = x_t - lam v_{t-1}`` are docs/theory.md result 5.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
from torch import Tensor

from llm_validation.config import CORRECTIONS, TrainConfig
from llm_validation.training.clip import CLIP_EPS, clip_grads_, clip_scale, global_clip_  # noqa: F401
from llm_validation.training.corrections import (DCASGD, EF_CHUNK, EF_LEVELS,  # noqa: F401
                                                  GradErrorFeedback, NesterovLookahead,
                                                  UpdateErrorFeedback, _check_lam, _copy_into)
from theory.update_rules import read_index

__all__ = ["DelayedOptimizer", "UpdateErrorFeedback", "GradErrorFeedback", "EF_LEVELS",
           "effective_tau", "clip_scale", "clip_grads_", "CLIP_EPS"]

def effective_tau(step: int, tau: int, sync_start: int = 0, sync_cooldown: int = 0,
                  total_steps: int | None = None) -> int:
    """The delay of step ``step`` (pure): 0 for the first ``sync_start`` steps and the last
    ``sync_cooldown`` of ``total_steps``, else ``tau``. The read point is ``W(max(step -
    effective_tau, 0))``: W(step - tau) where the delay switches on, W(step) in a cooldown."""
    for name, value in (("step", step), ("tau", tau), ("sync_start", sync_start),
                        ("sync_cooldown", sync_cooldown)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"effective_tau: {name}={value!r} must be an int >= 0")
    if step < sync_start:
        return 0
    if sync_cooldown:
        if total_steps is None:
            raise ValueError("effective_tau: sync_cooldown > 0 needs total_steps")
        if step >= total_steps - sync_cooldown:
            return 0
    return tau


class DelayedOptimizer:
    """``DelayedOptimizer(optimizer, tau=1, ef_lambda=0.0, ef_level="update", group_taus=None,
    *, sync_start=0, sync_cooldown=0, total_steps=None, correction="none", correction_coef=0.0,
    grad_clip=0.0, reduce_sq=None, external_read=False, clip_sq=None)``; :meth:`from_config` builds it from a
    ``TrainConfig`` (the one factory of the training loop and of every pipeline stage).

    Wraps ``optimizer`` (anything with ``param_groups``, ``step``, ``zero_grad``, ``state_dict``,
    ``load_state_dict``) so that the gradient of step t is taken at ``W(t - tau_t)``; one step
    applies the knobs in the module docstring's order. ``tau = 0, ef_lambda = 0`` (no
    correction, no clipping) is the bare optimizer, bitwise. ``external_read``: the delay comes
    from outside (a pipeline stage, tau = 0 here) and DC-ASGD needs ``step(read_point=...)``.

    For the statistics: :meth:`read_weights` (the delayed read point of step t),
    :attr:`current_tau`, ``ef.v_prev`` (the previous base update, with update-level EF),
    ``last_grad_norm`` (pre-clip global norm, when clipping), and after ``step(record=True)``:
    ``last_base_update`` (v_t) and ``last_update`` (the applied displacement W(t+1) - W(t)).
    """

    def __init__(self, optimizer: Any, tau: int = 1, ef_lambda: float = 0.0,
                 ef_level: str = "update", group_taus: Sequence[int] | None = None, *,
                 sync_start: int = 0, sync_cooldown: int = 0, total_steps: int | None = None,
                 correction: str = "none", correction_coef: float = 0.0, grad_clip: float = 0.0,
                 reduce_sq: Callable[[float], float] | None = None,
                 external_read: bool = False,
                 clip_sq: Callable[[list[Tensor]], Tensor] | None = None) -> None:
        if isinstance(tau, bool) or not isinstance(tau, int) or tau < 0:
            raise ValueError(f"tau={tau!r} must be an int >= 0")
        lam = _check_lam(ef_lambda)
        if ef_level not in EF_LEVELS:
            raise ValueError(f"ef_level={ef_level!r} is not one of {list(EF_LEVELS)}")
        if correction not in CORRECTIONS:
            raise ValueError(f"correction={correction!r} is not one of {list(CORRECTIONS)}")
        if correction == "nesterov" and lam > 0 and ef_level == "update":
            raise ValueError("correction='nesterov' and update-level EF both rewrite the "
                             "applied update; use one of them")
        grad_clip = _check_lam(grad_clip, "grad_clip")
        effective_tau(0, 0, 0, sync_cooldown, total_steps)               # validates the knobs
        effective_tau(0, 0, sync_start)
        groups = optimizer.param_groups
        if group_taus is not None:
            group_taus = list(group_taus)
            if len(group_taus) != len(groups) or any(
                    isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in group_taus):
                raise ValueError(f"group_taus={group_taus!r} must be {len(groups)} ints >= 0 "
                                 "(one per optimizer param group)")
        self.optimizer = optimizer
        self.ef_lambda, self.ef_level = lam, ef_level
        self.sync_start, self.sync_cooldown = sync_start, sync_cooldown
        self.total_steps = total_steps
        self.grad_clip, self.reduce_sq, self.clip_sq = grad_clip, reduce_sq, clip_sq
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
        self.correction = correction
        self.correction_coef = 0.0 if correction == "none" else float(correction_coef)
        self.dc = DCASGD(self.params, correction_coef) if correction == "dcasgd" else None
        self.lookahead = NesterovLookahead(self.params, correction_coef) \
            if correction == "nesterov" else None
        self.external_read = bool(external_read)
        self.t = 0                 # number of steps taken
        self._inside = self._read_done = False
        self.last_base_update: list[Tensor] | None = None
        self.last_update: list[Tensor] | None = None
        self._grad_norm: Tensor | None = None

    @classmethod
    def from_config(cls, base: Any, cfg: TrainConfig, *, group_taus: Sequence[int] | None = None,
                    reduce_sq: Callable[[float], float] | None = None) -> "DelayedOptimizer":
        """The wrapper ``cfg`` describes around ``base``. Emulated runs: ``cfg.delay.tau`` or
        ``group_taus`` (default ``stage_taus[group['stage']]``, from ``build_optimizer(...,
        param_stage=...)``) and the sync phases. A pipeline stage: tau = 0 (the schedule makes
        the delay; DC-ASGD on 2BW then needs ``step(read_point=...)``). Both: EF, correction,
        clipping (``reduce_sq`` sums the stages' squared norms)."""
        if not isinstance(cfg, TrainConfig):
            raise TypeError(f"from_config needs a TrainConfig, got {type(cfg).__name__}")
        d, emulated = cfg.delay, cfg.run.pipeline == "none"
        if not emulated and group_taus is not None:
            raise ValueError("from_config: group_taus is for emulated runs; a pipeline stage "
                             "gets its delay from the schedule")
        if emulated and group_taus is None and d.stage_taus is not None:
            stages = [g.get("stage", 0) for g in base.param_groups]
            if sorted(set(stages)) != list(range(len(d.stage_taus))):
                raise ValueError(f"from_config: stage_taus has {len(d.stage_taus)} stages but the "
                                 f"optimizer groups cover stages {sorted(set(stages))}; build it "
                                 "with build_optimizer(..., param_stage=...)")
            group_taus = [d.stage_taus[s] for s in stages]
        return cls(base, tau=d.tau if emulated else 0, ef_lambda=d.ef_lambda,
                   ef_level=d.ef_level, group_taus=group_taus, sync_start=d.sync_start,
                   sync_cooldown=d.sync_cooldown, total_steps=cfg.run.steps,
                   correction=d.correction, correction_coef=d.correction_coef,
                   grad_clip=cfg.optim.grad_clip, reduce_sq=reduce_sq,
                   external_read=cfg.run.pipeline == "2bw" and d.correction == "dcasgd")

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
    def _tau_now(self, i: int) -> int:
        return effective_tau(self.t, self.taus[i], self.sync_start, self.sync_cooldown,
                             self.total_steps)

    @property
    def current_tau(self) -> int:
        """The largest delay of step t (0 in a sync phase)."""
        return max((self._tau_now(i) for i in range(len(self.params))), default=0)

    def read_index(self, i: int) -> int:
        """Index of the weights parameter i is read at in step t: ``max(t - tau_i(t), 0)``."""
        return read_index(self.t, self._tau_now(i))

    def _read_slots(self) -> list[Tensor | None]:
        """Ring slot holding each parameter's read point at step t (None: W(t) itself). Slot
        ``j mod tau_p`` holds W(j) for the last tau_p steps, and W(0) where not yet written."""
        return [h[(self.t - e) % tp] if (e := self._tau_now(i)) else None
                for i, (h, tp) in enumerate(zip(self.history, self.taus))]

    def read_weights(self) -> list[Tensor]:
        """The delayed read point W(t - tau_p(t)) of every parameter (outside the block, before
        ``step``). Views of internal buffers: do not modify."""
        if self._inside:
            return [p.detach() for p in self.params]
        return [p.detach() if s is None else s for p, s in zip(self.params, self._read_slots())]

    def _swap(self, slots: list[Tensor | None]) -> None:
        for p, s in zip(self.params, slots):
            if s is not None:
                p.data, s.data = s.data, p.data

    @contextmanager
    def delayed_weights(self) -> Iterator[None]:
        """Inside the block every parameter holds its read point ``W(max(t - tau_p(t), 0))``."""
        if self._inside:
            raise RuntimeError("delayed_weights() is not re-entrant")
        slots = self._read_slots()
        with torch.no_grad():
            self._swap(slots)
        self._inside = True
        try:
            yield
        finally:
            with torch.no_grad():
                self._swap(slots)
            self._inside = False
            self._read_done = True

    @torch.no_grad()
    def _clip(self) -> None:
        """Global L2 clipping of the gradients the base step will use (``grad_clip``;
        :func:`llm_validation.training.clip.global_clip_`)."""
        grads = [p.grad for p in self.params if p.grad is not None]
        if grads:
            self._grad_norm = global_clip_(grads, self.grad_clip, reduce_sq=self.reduce_sq,
                                           clip_sq=self.clip_sq)

    @property
    def last_grad_norm(self) -> float | None:
        """The pre-clip global norm of the last clipped step (read on the host when asked)."""
        return None if self._grad_norm is None else float(self._grad_norm)

    @torch.no_grad()
    def step(self, record: bool = False, read_point: Sequence[Tensor] | None = None) -> None:
        """Base step on W(t) with the delayed gradients, then EF / the look-ahead;
        ``record=True`` keeps ``last_base_update`` and ``last_update`` (two parameter-sized
        temporaries). ``read_point``: the weights the gradients were taken at, for DC-ASGD
        when the delay comes from outside (``external_read``)."""
        if self._inside:
            raise RuntimeError("step() called inside delayed_weights()")
        if self.tau > 0 and not self._read_done:
            raise RuntimeError("DelayedOptimizer.step(): compute the gradients inside "
                               "`with opt.delayed_weights():` first")
        if self.dc is not None:              # before the ring slot of W(t - tau) is reused
            if read_point is None and self.external_read:
                raise RuntimeError("DelayedOptimizer.step(): DC-ASGD on a pipeline stage needs "
                                   "read_point= (the stashed weights of this step's gradients)")
            self.dc.apply(self._read_slots() if read_point is None else list(read_point))
        need_before = self.ef is not None or self.lookahead is not None or record
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
        if self.grad_clip > 0:
            self._clip()
        self.optimizer.step()
        base = [p - b for p, b in zip(self.params, before)] if record else None
        if self.ef is not None:
            self.ef.apply(before)
        if self.lookahead is not None:
            self.lookahead.apply(before)
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
        """Every persistent tensor the wrapper adds: tau_p ring slots per parameter, EF and
        the look-ahead direction (one parameter copy each)."""
        bufs = [t for h in self.history for t in h]
        for ef in (self.ef, self.gef, self.lookahead):
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
        """Base optimizer state, step count, every stashed weight version, EF and
        correction buffers."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "t": self.t,
            "taus": list(self.taus),
            "ef_lambda": self.ef_lambda,
            "ef_level": self.ef_level,
            "history": [[t.clone() for t in h] for h in self.history],
            "ef": None if self.ef is None else self.ef.state_dict(),
            "gef": None if self.gef is None else self.gef.state_dict(),
            "correction": self.correction,
            "correction_coef": self.correction_coef,
            "lookahead": None if self.lookahead is None else self.lookahead.state_dict(),
        }

    @torch.no_grad()
    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        if list(sd["taus"]) != self.taus:
            raise ValueError("DelayedOptimizer.load_state_dict: checkpoint delays differ")
        if float(sd["ef_lambda"]) != self.ef_lambda or sd["ef_level"] != self.ef_level:
            raise ValueError("DelayedOptimizer.load_state_dict: checkpoint EF settings differ "
                             f"(lam={sd['ef_lambda']}, level={sd['ef_level']})")
        saved = (sd.get("correction", "none"), float(sd.get("correction_coef", 0.0)))
        if saved != (self.correction, self.correction_coef):
            raise ValueError("DelayedOptimizer.load_state_dict: checkpoint correction differs "
                             f"({saved[0]}, coef={saved[1]})")
        self.optimizer.load_state_dict(sd["optimizer"])
        for h, src in zip(self.history, sd["history"]):
            _copy_into(h, src, "DelayedOptimizer.history")
        if self.ef is not None:
            self.ef.load_state_dict(sd["ef"])
        if self.gef is not None:
            self.gef.load_state_dict(sd["gef"])
        if self.lookahead is not None:
            self.lookahead.load_state_dict(sd["lookahead"])
        self.t = int(sd["t"])
        self._read_done = False
