"""Base optimizers (the paper's six: AdamW, Muon, NorMuon, SOAP, Lion, Adan; plus SGD and NAdamW)
and the learning-rate schedule.

:func:`build_optimizer` takes a module or an iterable of ``(name, parameter)`` pairs, so a
pipeline stage builds its optimizer over its own stage module. Parameter groups carry extra keys:
``base_lr`` (the peak lr the schedule scales), ``kind`` (which update rule: the optimizer's
name, or ``adamw`` for the AdamW part of Muon/NorMuon), ``geometry`` (``spectral``, ``linf`` or
``l2``: the norm the statistics use, see below), ``stage`` (the stage index when
``param_stage`` is given, else 0) and ``labels`` (parameter names, for reports).

- ``adamw``: ``torch.optim.AdamW``; every group l_inf.
- ``nadamw``: ``torch.optim.NAdam(decoupled_weight_decay=True)``; l_inf.
- ``sgd``: ``torch.optim.SGD`` (momentum, Nesterov); l2.
- ``muon``: ``torch.optim.Muon`` on hidden matrices (spectral) + ``torch.optim.AdamW`` (l_inf).
- ``normuon``: ``pytorch_optimizer.NorMuon`` on hidden matrices (spectral) + ``torch.optim.AdamW``.
  Both with Newton-Schulz in ``cfg.ns_dtype`` (:mod:`llm_validation.training.muon`: bfloat16 is
  the library's own step, float32 the same step with the iteration in float32).
- ``soap``: ``pytorch_optimizer.SOAP``; matrices preconditioned on both sides spectral, vectors
  and matrices with a side over :data:`SOAP_MAX_PRECONDITION_DIM` l_inf.
- ``lion``: ``pytorch_optimizer.Lion``; l_inf.  ``adan``: ``pytorch_optimizer.Adan``; l_inf.

Muon-like optimizers (``muon``, ``normuon``) act on the hidden 2-D matrices of the blocks
(attention q/k/v/o, MLP gate/up/down); ``torch.optim.AdamW`` takes the embedding, the head and
the norm gains (the usual split), so the AdamW part of a Muon and a NorMuon run is the same
rule. The two optimizers are combined in :class:`ChainedOptimizer`, which behaves as a torch
optimizer for everything this project uses (``param_groups``, ``state``, ``step``,
``zero_grad``, ``state_dict``, ``load_state_dict``). NorMuon (Li et al. 2025) is Muon followed
by a row-wise second-moment normalisation (``beta2``) that keeps the update's Frobenius norm
(``update_scale='preserve_norm'``, the official code's choice); its lr uses the same shape
adjustment as Muon (``muon_adjust_lr``).

Hyper-parameter mapping: ``beta1``/``beta2`` are the Adam pair of AdamW, NAdamW and SOAP;
Lion's ``betas = (beta1, beta2)`` (update interpolation, momentum); Adan's ``betas = (beta1,
ADAN_BETA_DIFF, beta2)`` (gradient EMA, gradient-difference EMA, squared EMA); NorMuon's
row-wise second moment uses ``beta2``. ``pytorch_optimizer`` optimizers run their
per-parameter path (``foreach=False``): a parameter's update then does not depend on which
other parameters share its group, so a pipeline stage's optimizer reproduces the whole-model one.

Weight decay: decoupled (every optimizer but SGD) on 2-D weights only; norm gains are never
decayed. For SGD torch's ``weight_decay`` is a coupled L2 penalty.

Geometry of each group (used for dual norms by ``stats``): the norm whose LMO the update is
closest to. Muon and NorMuon matrices -> spectral (dual nuclear; NorMuon rescales the rows of
the orthogonalised momentum, a diagonal preconditioner on the spectral direction); SOAP
matrices preconditioned on both sides -> spectral (with beta's -> 0 Adam in Shampoo's eigenbasis
is U V^T, the spectral LMO); the Adam family, Lion and SOAP's unpreconditioned tensors -> l_inf
(dual l1: Adam without momentum and Lion are sign descent); SGD -> l2.

Schedule (:func:`lr_factor`, pure): linear warmup ``(step + 1) / warmup_steps`` for
``step < warmup_steps``, then ``constant``, ``cosine`` or ``linear`` decay from 1 to
``min_lr_ratio`` at ``decay_steps`` (default: the run's total steps), constant afterwards; or
``wsd`` (warmup-stable-decay, Hu et al. 2024 "MiniCPM"): 1 until the last
``wsd_decay_fraction`` of the run (of ``decay_steps``; never before the warmup ends), then
linear to ``min_lr_ratio`` at the end.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import torch
from torch import Tensor, nn

from llm_validation.config import OptimConfig
from llm_validation.hardware import resolve_ns_dtype
from llm_validation.training.model import param_kind
from llm_validation.training.muon import Muon, NorMuon, ns_torch_dtype
from theory.geometry import L2, LINF, SPECTRAL, Geometry, get_geometry

__all__ = [
    "ChainedOptimizer",
    "build_optimizer",
    "lr_factor",
    "set_lr",
    "group_geometry",
    "optimizer_kind",
    "kind_geometry",
    "normalized_momentum",
    "ADAN_BETA_DIFF",
    "SOAP_MAX_PRECONDITION_DIM",
]

#: Adan's gradient-difference EMA coefficient (the library's and the paper's default 0.92).
ADAN_BETA_DIFF = 0.92
#: SOAP preconditions a tensor dimension only up to this size (the library default); a larger
#: dimension (e.g. a 49152-token vocabulary) keeps the identity basis.
SOAP_MAX_PRECONDITION_DIM = 10000
#: Geometry of hand-built groups that carry a ``kind`` but no ``geometry`` key.
_KIND_GEOMETRY = {"muon": SPECTRAL, "normuon": SPECTRAL, "adamw": LINF, "nadamw": LINF,
                  "lion": LINF, "adan": LINF, "sgd": L2}


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


def _group(stage: int, kind: str, geometry: Geometry, items: list, lr: float,
           wd: float) -> dict[str, Any]:
    return {"params": [p for _, p in items], "lr": lr, "base_lr": lr, "weight_decay": wd,
            "kind": kind, "geometry": geometry.name, "stage": stage,
            "labels": [n for n, _ in items]}


def _soap_spectral(p: Tensor) -> bool:
    """SOAP preconditions both sides of this tensor (a matrix within the size limit)."""
    return p.ndim == 2 and max(p.shape) <= SOAP_MAX_PRECONDITION_DIM


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
    name, betas = cfg.name, (cfg.beta1, cfg.beta2)

    def decays(_name: str, p: Tensor) -> tuple[bool]:
        return (p.ndim >= 2,)

    if name == "soap":
        from pytorch_optimizer import SOAP

        groups = [_group(stage, "soap", SPECTRAL if spectral else LINF, items, cfg.lr,
                         cfg.weight_decay if decay else 0.0)
                  for (stage, decay, spectral), items in _groups(
                      named, param_stage, lambda n, p: (p.ndim >= 2, _soap_spectral(p))).items()]
        return SOAP(groups, lr=cfg.lr, betas=betas, weight_decay=cfg.weight_decay, eps=cfg.eps,
                    max_precondition_dim=SOAP_MAX_PRECONDITION_DIM)

    if name not in ("muon", "normuon"):
        geometry = L2 if name == "sgd" else LINF
        groups = [_group(stage, name, geometry, items, cfg.lr, cfg.weight_decay if decay else 0.0)
                  for (stage, decay), items in _groups(named, param_stage, decays).items()]
        common = dict(lr=cfg.lr, weight_decay=cfg.weight_decay)
        if name == "adamw":
            return torch.optim.AdamW(groups, betas=betas, eps=cfg.eps, **common)
        if name == "nadamw":
            return torch.optim.NAdam(groups, betas=betas, eps=cfg.eps,
                                     decoupled_weight_decay=True, **common)
        if name == "sgd":
            return torch.optim.SGD(groups, momentum=cfg.momentum, nesterov=cfg.nesterov, **common)
        if name == "lion":
            from pytorch_optimizer import Lion

            return Lion(groups, betas=betas, weight_decouple=True, foreach=False, **common)
        from pytorch_optimizer import Adan

        return Adan(groups, betas=(cfg.beta1, ADAN_BETA_DIFF, cfg.beta2), eps=cfg.eps,
                    weight_decouple=True, foreach=False, **common)

    # Muon / NorMuon on hidden matrices, AdamW on embedding / head (decayed) and norms (not).
    def split(pname: str, p: Tensor) -> tuple[str, bool]:
        kind = param_kind(pname, p)
        return (name if kind == "matrix" else "adamw", kind in ("embed", "head"))

    aux_lr = cfg.lr if cfg.aux_lr is None else cfg.aux_lr
    muon_groups, adam_groups = [], []
    for (stage, kind, decay), items in _groups(named, param_stage, split).items():
        if kind == name:
            muon_groups.append(_group(stage, name, SPECTRAL, items, cfg.lr, cfg.weight_decay))
        else:
            adam_groups.append(_group(stage, "adamw", LINF, items, aux_lr,
                                      cfg.weight_decay if decay else 0.0))
    parts: list[torch.optim.Optimizer] = []
    if muon_groups:
        device = str(muon_groups[0]["params"][0].device)
        ns_dtype = ns_torch_dtype(resolve_ns_dtype(cfg.ns_dtype, device))
    if muon_groups and name == "muon":
        parts.append(Muon(muon_groups, lr=cfg.lr, weight_decay=cfg.weight_decay,
                          momentum=cfg.momentum, nesterov=cfg.nesterov,
                          adjust_lr_fn=cfg.muon_adjust_lr, ns_dtype=ns_dtype))
    elif muon_groups:
        for g in muon_groups:
            g["use_muon"] = True
        parts.append(NorMuon(muon_groups, lr=cfg.lr, momentum=cfg.momentum, beta2=cfg.beta2,
                             weight_decay=cfg.weight_decay, nesterov=cfg.nesterov,
                             use_adjusted_lr=cfg.muon_adjust_lr == "match_rms_adamw",
                             foreach=False, ns_dtype=ns_dtype))
    if adam_groups:
        parts.append(torch.optim.AdamW(adam_groups, lr=aux_lr, betas=betas, eps=cfg.eps,
                                       weight_decay=cfg.weight_decay))
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
    r = cfg.min_lr_ratio
    if cfg.schedule == "wsd":
        start = max(warm, end - cfg.wsd_decay_fraction * end)    # the final decay begins
        progress = min(1.0, max(0.0, (step - start) / max(1, end - start)))
        return 1.0 - (1.0 - r) * progress
    progress = min(1.0, (step - warm) / max(1, end - warm))
    if cfg.schedule == "cosine":
        return r + (1.0 - r) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return 1.0 - (1.0 - r) * progress


def set_lr(optimizer: Any, factor: float) -> None:
    """Set every group's lr to ``base_lr * factor``."""
    for g in optimizer.param_groups:
        g["lr"] = g["base_lr"] * factor


def group_geometry(group: Mapping[str, Any]) -> Geometry:
    """Geometry whose dual norm measures the gradients of a group (see module docstring): the
    group's ``geometry`` key, or for hand-built groups the usual one of its ``kind``."""
    if "geometry" in group:
        return get_geometry(group["geometry"])
    kind = group.get("kind")
    if kind in _KIND_GEOMETRY:
        return _KIND_GEOMETRY[kind]
    raise ValueError(f"param group kind={kind!r} is not one of {sorted(_KIND_GEOMETRY)} and the "
                     "group has no 'geometry' key (build the optimizer with build_optimizer)")


#: Optimizer class name -> the update rule (``kind``) of a group that ``build_optimizer`` did
#: not build (a user's own optimizer); Adam counts as the AdamW rule (sign-descent geometry).
_CLASS_KIND = {"AdamW": "adamw", "Adam": "adamw", "NAdam": "nadamw", "SGD": "sgd",
               "Muon": "muon", "NorMuon": "normuon", "SOAP": "soap", "Lion": "lion",
               "Adan": "adan"}


def optimizer_kind(optimizer: Any) -> str | None:
    """The update rule of a torch optimizer from its class (or a base class): one of
    :data:`~llm_validation.config.OPTIMIZERS`, or None for a class this project does not know."""
    for cls in type(optimizer).__mro__:
        if cls.__name__ in _CLASS_KIND:
            return _CLASS_KIND[cls.__name__]
    return None


def kind_geometry(kind: str | None, p: Tensor) -> Geometry | None:
    """The geometry ``build_optimizer`` gives parameter ``p`` under the rule ``kind`` (SOAP:
    spectral for matrices it preconditions on both sides, else l_inf); None for an unknown kind."""
    if kind == "soap":
        return SPECTRAL if _soap_spectral(p) else LINF
    return _KIND_GEOMETRY.get(kind)


def _children(optimizer: Any) -> tuple:
    return optimizer.optimizers if isinstance(optimizer, ChainedOptimizer) else (optimizer,)


def _ema_average(buf: Tensor, beta: float, n: float) -> Tensor | None:
    """An EMA ``buf = beta buf + (1 - beta) g`` started at 0, after n >= 1 updates, divided by
    the sum of its weights ``1 - beta^n``."""
    return buf / (1.0 - beta ** n) if n >= 1 else None


@torch.no_grad()
def normalized_momentum(optimizer: Any, n_steps: int) -> dict[int, Tensor]:
    """Each parameter's momentum as a weighted average of past gradients (weights sum to 1),
    after ``n_steps`` optimizer steps: ``id(p) -> m``.

    AdamW, NAdamW, Adan (``exp_avg``, EMA with beta1 from 0): ``exp_avg / (1 - beta1^step)``;
    Lion (its momentum is the EMA with beta2): ``exp_avg / (1 - beta2^step)``; SOAP (its first
    step only initialises the preconditioner): ``exp_avg / (1 - beta1^(step - 1))``; Muon and
    NorMuon (EMA buffer from 0): ``buf / (1 - mu^n)``; SGD (``buf = mu buf + g``):
    ``buf (1 - mu) / (1 - mu^n)``. Without momentum state (SGD with mu = 0) the parameter is
    omitted.
    """
    out: dict[int, Tensor] = {}
    if n_steps < 1:
        return out
    for opt in _children(optimizer):
        for group in opt.param_groups:
            kind = group.get("kind") or optimizer_kind(opt)
            for p in group["params"]:
                state = opt.state.get(p, {})
                m = None
                if "exp_avg" in state:
                    step = float(state["step"]) if "step" in state else float(group["step"])
                    if kind == "lion":
                        m = _ema_average(state["exp_avg"], group["betas"][1], step)
                    elif kind == "soap":
                        m = _ema_average(state["exp_avg"], group["betas"][0], step - 1)
                    else:
                        m = _ema_average(state["exp_avg"], group["betas"][0], step)
                elif state.get("momentum_buffer") is not None:
                    mu, buf = group["momentum"], state["momentum_buffer"]
                    if isinstance(opt, torch.optim.SGD):
                        m = buf * ((1.0 - mu) / (1.0 - mu ** n_steps))
                    else:
                        m = _ema_average(buf, mu, n_steps)
                if m is not None:
                    out[id(p)] = m
    return out
