"""Base optimizers (AdamW, Muon + AdamW, SGD with momentum) and the learning-rate schedule.

:func:`build_optimizer` takes a module or an iterable of ``(name, parameter)`` pairs, so a
pipeline stage builds its optimizer over its own stage module. Parameter groups carry extra keys:
``base_lr`` (the peak lr the schedule scales), ``kind`` (``adamw``, ``muon`` or ``sgd``: which
update rule, hence which geometry the statistics use), ``stage`` (the stage index when
``param_stage`` is given, else 0) and ``labels`` (parameter names, for reports).

Muon: ``torch.optim.Muon`` on the hidden 2-D matrices of the blocks (attention q/k/v/o, MLP
gate/up/down), ``torch.optim.AdamW`` on the embedding, the head and the norm gains (the usual
split). The two are combined in :class:`ChainedOptimizer`, which behaves as a torch optimizer for
everything this project uses (``param_groups``, ``state``, ``step``, ``zero_grad``,
``state_dict``, ``load_state_dict``).

Weight decay: decoupled (AdamW, Muon) on 2-D weights only; norm gains are never decayed. For SGD
torch's ``weight_decay`` is a coupled L2 penalty.

Geometry of each group (used for dual norms by ``stats``): Muon matrices -> spectral (dual
nuclear); AdamW -> l_inf (dual l1: Adam without momentum is sign descent); SGD -> l2.

Schedule (:func:`lr_factor`, pure): linear warmup ``(step + 1) / warmup_steps`` for
``step < warmup_steps``, then ``constant``, ``cosine`` or ``linear`` decay from 1 to
``min_lr_ratio`` at ``decay_steps`` (default: the run's total steps), constant afterwards.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import torch
from torch import Tensor, nn

from llm_validation.config import OptimConfig
from llm_validation.training.model import param_kind
from theory.geometry import L2, LINF, SPECTRAL, Geometry

__all__ = [
    "ChainedOptimizer",
    "build_optimizer",
    "lr_factor",
    "lr_at",
    "set_lr",
    "group_geometry",
    "normalized_momentum",
]


class ChainedOptimizer:
    """Several torch optimizers over disjoint parameters acting as one (Muon + AdamW)."""

    def __init__(self, *optimizers: torch.optim.Optimizer) -> None:
        if not optimizers:
            raise ValueError("ChainedOptimizer needs at least one optimizer")
        self.optimizers = tuple(optimizers)
        self.defaults: dict[str, Any] = {}

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The children's group dicts (mutating a group, e.g. its lr, reaches the child)."""
        return [g for o in self.optimizers for g in o.param_groups]

    @property
    def state(self) -> dict[Tensor, dict[str, Any]]:
        """Merged per-parameter state (a new dict; the values are the children's)."""
        return {p: s for o in self.optimizers for p, s in o.state.items()}

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:
        if closure is not None:
            raise ValueError("ChainedOptimizer.step does not take a closure")
        for o in self.optimizers:
            o.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.optimizers:
            o.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizers": [o.state_dict() for o in self.optimizers]}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        parts = state_dict.get("optimizers")
        if not isinstance(parts, list) or len(parts) != len(self.optimizers):
            raise ValueError("ChainedOptimizer.load_state_dict: expected "
                             f"{len(self.optimizers)} optimizer states")
        for o, sd in zip(self.optimizers, parts):
            o.load_state_dict(sd)

    def __repr__(self) -> str:
        return "ChainedOptimizer(" + ", ".join(type(o).__name__ for o in self.optimizers) + ")"


def _named(source: nn.Module | Iterable[tuple[str, Tensor]]) -> list[tuple[str, Tensor]]:
    items = list(source.named_parameters() if isinstance(source, nn.Module) else source)
    out, seen = [], set()
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Tensor)):
            raise TypeError("build_optimizer needs a module or (name, parameter) pairs")
        name, p = item
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            out.append((name, p))
    if not out:
        raise ValueError("build_optimizer: no trainable parameters")
    return out


def _groups(named: list[tuple[str, Tensor]], param_stage: Mapping[int, int] | None,
            key) -> dict[tuple, list[tuple[str, Tensor]]]:
    """Partition (name, p) by (stage, key(name, p)), preserving first-seen order."""
    out: dict[tuple, list[tuple[str, Tensor]]] = {}
    for name, p in named:
        stage = 0 if param_stage is None else param_stage.get(id(p))
        if stage is None:
            raise ValueError(f"param_stage has no stage for parameter {name!r}")
        out.setdefault((stage, *key(name, p)), []).append((name, p))
    return out


def build_optimizer(source: nn.Module | Iterable[tuple[str, Tensor]], cfg: OptimConfig, *,
                    param_stage: Mapping[int, int] | None = None
                    ) -> torch.optim.Optimizer | ChainedOptimizer:
    """The base optimizer of ``cfg`` over ``source``'s trainable parameters.

    ``param_stage`` maps ``id(parameter) -> stage``; groups are then split per stage (each group
    has a ``stage`` key), which is how per-stage delays find their parameters.
    """
    if not isinstance(cfg, OptimConfig):
        raise TypeError(f"build_optimizer needs an OptimConfig, got {type(cfg).__name__}")
    named = _named(source)

    def group(stage: int, kind: str, items: list, lr: float, wd: float) -> dict[str, Any]:
        return {"params": [p for _, p in items], "lr": lr, "base_lr": lr, "weight_decay": wd,
                "kind": kind, "stage": stage, "labels": [n for n, _ in items]}

    def decays(_name: str, p: Tensor) -> tuple[bool]:
        return (p.ndim >= 2,)

    if cfg.name in ("adamw", "sgd"):
        groups = [group(stage, cfg.name, items, cfg.lr, cfg.weight_decay if decay else 0.0)
                  for (stage, decay), items in _groups(named, param_stage, decays).items()]
        if cfg.name == "adamw":
            return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                                     eps=cfg.eps, weight_decay=cfg.weight_decay)
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov,
                               weight_decay=cfg.weight_decay)

    # Muon on hidden matrices, AdamW on embedding / head (decayed) and norms (not decayed).
    def split(name: str, p: Tensor) -> tuple[str, bool]:
        kind = param_kind(name, p)
        return ("muon" if kind == "matrix" else "adamw", kind in ("embed", "head"))

    aux_lr = cfg.lr if cfg.aux_lr is None else cfg.aux_lr
    muon_groups, adam_groups = [], []
    for (stage, kind, decay), items in _groups(named, param_stage, split).items():
        if kind == "muon":
            muon_groups.append(group(stage, "muon", items, cfg.lr, cfg.weight_decay))
        else:
            adam_groups.append(group(stage, "adamw", items, aux_lr,
                                     cfg.weight_decay if decay else 0.0))
    parts: list[torch.optim.Optimizer] = []
    if muon_groups:
        parts.append(torch.optim.Muon(muon_groups, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                      momentum=cfg.momentum, nesterov=cfg.nesterov,
                                      adjust_lr_fn=cfg.muon_adjust_lr))
    if adam_groups:
        parts.append(torch.optim.AdamW(adam_groups, lr=aux_lr, betas=(cfg.beta1, cfg.beta2),
                                       eps=cfg.eps, weight_decay=cfg.weight_decay))
    return ChainedOptimizer(*parts)


def lr_factor(step: int, cfg: OptimConfig, total_steps: int | None = None) -> float:
    """Multiplier of the peak lr at 0-based ``step`` (pure; see the module docstring)."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step={step!r} must be an int >= 0")
    warm = cfg.warmup_steps
    if step < warm:
        return (step + 1) / warm
    if cfg.schedule == "constant":
        return 1.0
    end = cfg.decay_steps if cfg.decay_steps is not None else total_steps
    if end is None:
        raise ValueError(f"schedule={cfg.schedule!r} needs decay_steps or total_steps")
    progress = min(1.0, (step - warm) / max(1, end - warm))
    r = cfg.min_lr_ratio
    if cfg.schedule == "cosine":
        return r + (1.0 - r) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return 1.0 - (1.0 - r) * progress


def lr_at(step: int, cfg: OptimConfig, total_steps: int | None = None) -> float:
    """Learning rate (of the main groups) at ``step``: ``cfg.lr * lr_factor(...)``."""
    return cfg.lr * lr_factor(step, cfg, total_steps)


def set_lr(optimizer: Any, factor: float) -> None:
    """Set every group's lr to ``base_lr * factor``."""
    for g in optimizer.param_groups:
        g["lr"] = g["base_lr"] * factor


def group_geometry(group: Mapping[str, Any]) -> Geometry:
    """Geometry whose dual norm measures the gradients of a group (see module docstring)."""
    kind = group.get("kind")
    if kind == "muon":
        return SPECTRAL
    if kind == "adamw":
        return LINF
    if kind == "sgd":
        return L2
    raise ValueError(f"param group kind={kind!r} is not one of ['muon', 'adamw', 'sgd'] "
                     "(build the optimizer with build_optimizer)")


def _children(optimizer: Any) -> tuple:
    return optimizer.optimizers if isinstance(optimizer, ChainedOptimizer) else (optimizer,)


@torch.no_grad()
def normalized_momentum(optimizer: Any, n_steps: int) -> dict[int, Tensor]:
    """Each parameter's momentum as a weighted average of past gradients (weights sum to 1),
    after ``n_steps`` optimizer steps: ``id(p) -> m``.

    AdamW: ``exp_avg / (1 - beta1^step)``; Muon (EMA buffer from 0): ``buf / (1 - mu^n)``;
    SGD (``buf = mu buf + g``): ``buf (1 - mu) / (1 - mu^n)``. Without momentum state (SGD with
    mu = 0) the parameter is omitted.
    """
    out: dict[int, Tensor] = {}
    if n_steps < 1:
        return out
    for opt in _children(optimizer):
        for group in opt.param_groups:
            for p in group["params"]:
                state = opt.state.get(p, {})
                if "exp_avg" in state:
                    b1 = group["betas"][0]
                    step = float(state["step"])
                    out[id(p)] = state["exp_avg"] / (1.0 - b1 ** step)
                elif "momentum_buffer" in state and state["momentum_buffer"] is not None:
                    mu = group["momentum"]
                    buf = state["momentum_buffer"]
                    if isinstance(opt, torch.optim.SGD):
                        out[id(p)] = buf * ((1.0 - mu) / (1.0 - mu ** n_steps))
                    else:
                        out[id(p)] = buf / (1.0 - mu ** n_steps)
    return out
