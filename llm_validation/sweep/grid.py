"""Sweep grids: optimizer x mode x lr / tau / momentum / lam / batch size / seed -> run configs.

A :class:`SweepGrid` expands to one :class:`SweepPoint` (a name and a full ``TrainConfig``) per
combination. Modes (the brief's {sync, 2BW, 2BW+EF}):

- ``sync``: tau = 0, no EF (the ``taus`` and ``lams`` axes do not apply: one run per rest);
- ``2bw``: delay tau for every tau in ``taus`` (tau = 1 is PipeDream-2BW), no EF;
- ``2bw+ef``: tau = 1 with update-level EF for every lam in ``lams``.

``lrs``, ``momenta`` may be given per optimizer (``{"adamw": (1e-3,), "muon": (0.02,)}``) or for
all (a plain tuple); None keeps the base config's value. ``momenta`` sets Muon/SGD ``momentum``
and AdamW ``beta1`` (both are THEORY.md's 1 - alpha). ``pipeline="2bw"`` runs the ``2bw``
points with tau = 1 on the real two-stage pipeline (``stages``) instead of the emulation.

Names are deterministic and carry every swept value, e.g.
``muon-2bw+ef-lr0.02-mom0.95-bs16-tau1-lam1-s0``; duplicates collapse into one point.
The base :func:`default_base` is the tiny-model setting the demo uses (see docs/validation.md
for why these hyper-parameters).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from llm_validation.config import (
    DataConfig,
    DelayConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
    preset,
)

__all__ = [
    "MODES",
    "OPTIMIZERS",
    "BASE_OPTIM",
    "SweepGrid",
    "SweepPoint",
    "default_base",
    "apply_overrides",
    "parse_override",
    "point_name",
]

MODES = ("sync", "2bw", "2bw+ef")
OPTIMIZERS = ("adamw", "muon", "sgd")

#: Per-optimizer settings of the demo's tiny-model runs: each optimizer at the lr where its
#: synchronous run is near its best at this scale (docs/validation.md: "Why these settings").
BASE_OPTIM: dict[str, dict[str, Any]] = {
    "adamw": {"lr": 1e-3},
    "muon": {"lr": 1e-2},
    "sgd": {"lr": 0.1},
}


def default_base(optimizer: str = "adamw", *, steps: int = 250, model: str = "tiny") -> TrainConfig:
    """The demo's base run (the optimizer's :data:`BASE_OPTIM` on the default corpus, CPU).

    Microbatches M = 2 so that the gradient-noise variance is measured every stats step and the
    real 2-stage pipeline (which needs M >= P) runs the very same computation. Statistics every
    15 steps and the momentum error every 60 steps against a 4x batch keep their cost near 25%
    of the run (each stats step adds a forward/backward and a dry-run optimizer step).
    """
    if optimizer not in BASE_OPTIM:
        raise ValueError(f"optimizer={optimizer!r} is not one of {list(BASE_OPTIM)}")
    return TrainConfig(
        model=preset(model),
        data=DataConfig(seq_len=64),
        optim=OptimConfig(name=optimizer, weight_decay=0.1, schedule="cosine", warmup_steps=0,
                          **BASE_OPTIM[optimizer]),
        delay=DelayConfig(),
        run=RunConfig(steps=steps, batch_size=16, microbatches=2, eval_interval=50,
                      eval_batches=8, stats_interval=15, momentum_error_interval=60,
                      large_batch_factor=4, checkpoint_interval=0, out_dir="runs/sweep"))


def parse_override(text: str) -> tuple[str | None, str, str, Any]:
    """``[optimizer:]section.field=value`` -> (optimizer or None, section, field, value).

    The value is read as JSON when it parses (numbers, true/false, null, lists), else as a str.
    """
    if "=" not in text:
        raise ValueError(f"override {text!r} must look like section.field=value")
    key, raw = text.split("=", 1)
    opt = None
    if ":" in key:
        opt, key = key.split(":", 1)
        if opt not in OPTIMIZERS:
            raise ValueError(f"override {text!r}: optimizer {opt!r} is not one of "
                             f"{list(OPTIMIZERS)}")
    if key.count(".") != 1:
        raise ValueError(f"override {text!r}: key must be section.field (e.g. optim.beta2)")
    section, name = key.split(".")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return opt, section, name, value


def apply_overrides(cfg: TrainConfig, overrides: Sequence[str]) -> TrainConfig:
    """``cfg`` with ``section.field=value`` overrides (for its optimizer or for all)."""
    d = cfg.to_dict()
    for text in overrides:
        opt, section, name, value = parse_override(text)
        if opt is not None and opt != cfg.optim.name:
            continue
        if section not in d:
            raise ValueError(f"override {text!r}: no section {section!r}; have {list(d)}")
        if name not in d[section]:
            raise ValueError(f"override {text!r}: {section} has no field {name!r}")
        d[section][name] = value
    return TrainConfig.from_dict(d)


def _per_opt(value: Any, what: str) -> dict[str, tuple] | tuple | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if k not in OPTIMIZERS:
                raise ValueError(f"SweepGrid.{what}: key {k!r} is not one of {list(OPTIMIZERS)}")
            out[k] = _tuple(v, what)
        return out
    return _tuple(value, what)


def _tuple(value: Any, what: str) -> tuple:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        value = (value,)
    t = tuple(value)
    if not t:
        raise ValueError(f"SweepGrid.{what} must not be empty")
    return t


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep."""

    name: str
    cfg: TrainConfig


@dataclass(frozen=True, kw_only=True)
class SweepGrid:
    """A grid of runs (see the module docstring for the axes)."""

    optimizers: tuple[str, ...] = ("adamw", "muon")
    """Base optimizers."""
    modes: tuple[str, ...] = MODES
    """Subset of ``sync``, ``2bw``, ``2bw+ef``."""
    lrs: Any = None
    """Peak lrs: a tuple for all optimizers or a mapping optimizer -> tuple; None: base."""
    taus: tuple[int, ...] = (1,)
    """Delays of the ``2bw`` mode (sync ignores them; ``2bw+ef`` always uses tau = 1)."""
    momenta: Any = None
    """Muon/SGD momentum or AdamW beta1 (tuple or mapping per optimizer); None: base."""
    lams: tuple[float, ...] = (1.0,)
    """EF coefficients of the ``2bw+ef`` mode."""
    batch_sizes: tuple[int, ...] | None = None
    """Batch sizes (sequences per step); None: base."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Seeds (initialisation and data order); sync and delayed runs pair up by seed."""
    steps: int = 250
    """Optimizer steps of every run."""
    model: str = "tiny"
    """Model preset."""
    overrides: tuple[str, ...] = ()
    """``[optimizer:]section.field=value`` applied to the base config (:func:`apply_overrides`)."""
    pipeline: str = "none"
    """``none`` (emulated delay) or ``2bw`` (tau = 1 ``2bw`` points on the real pipeline)."""
    stages: int = 2
    """Pipeline stages when ``pipeline='2bw'``."""

    def __post_init__(self) -> None:
        set_ = lambda n, v: object.__setattr__(self, n, v)  # noqa: E731
        set_("optimizers", _tuple(self.optimizers, "optimizers"))
        set_("modes", _tuple(self.modes, "modes"))
        set_("taus", _tuple(self.taus, "taus"))
        set_("lams", _tuple(self.lams, "lams"))
        set_("seeds", _tuple(self.seeds, "seeds"))
        set_("overrides", tuple(self.overrides))
        if self.batch_sizes is not None:
            set_("batch_sizes", _tuple(self.batch_sizes, "batch_sizes"))
        set_("lrs", _per_opt(self.lrs, "lrs"))
        set_("momenta", _per_opt(self.momenta, "momenta"))
        for o in self.optimizers:
            if o not in OPTIMIZERS:
                raise ValueError(f"SweepGrid.optimizers: {o!r} is not one of {list(OPTIMIZERS)}")
        for m in self.modes:
            if m not in MODES:
                raise ValueError(f"SweepGrid.modes: {m!r} is not one of {list(MODES)}")
        for t in self.taus:
            if isinstance(t, bool) or not isinstance(t, int) or t < 1:
                raise ValueError(f"SweepGrid.taus: {t!r} must be an int >= 1 (tau = 0 is sync)")
        for lam in self.lams:
            if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not lam > 0:
                raise ValueError(f"SweepGrid.lams: {lam!r} must be > 0 (lam = 0 is 2bw)")
        for s in self.seeds:
            if isinstance(s, bool) or not isinstance(s, int) or s < 0:
                raise ValueError(f"SweepGrid.seeds: {s!r} must be an int >= 0")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"SweepGrid.steps={self.steps!r} must be an int >= 1")
        if self.pipeline not in ("none", "2bw"):
            raise ValueError(f"SweepGrid.pipeline={self.pipeline!r} must be 'none' or '2bw'")
        if isinstance(self.stages, bool) or not isinstance(self.stages, int) or self.stages < 2:
            raise ValueError(f"SweepGrid.stages={self.stages!r} must be an int >= 2")
        for text in self.overrides:
            parse_override(text)

    def _axis(self, value: Any, opt: str) -> tuple:
        if value is None:
            return (None,)
        if isinstance(value, dict):
            return value.get(opt, (None,))
        return value

    def expand(self) -> list[SweepPoint]:
        """All points, deduplicated by name, in a fixed order (seed-major last)."""
        points: dict[str, SweepPoint] = {}
        for opt in self.optimizers:
            base = apply_overrides(default_base(opt, steps=self.steps, model=self.model),
                                   self.overrides)
            for lr, mom, bs, mode in itertools.product(
                    self._axis(self.lrs, opt), self._axis(self.momenta, opt),
                    self.batch_sizes or (None,), self.modes):
                optim = base.optim
                if lr is not None:
                    optim = dataclasses.replace(optim, lr=float(lr))
                if mom is not None:
                    key = "beta1" if opt == "adamw" else "momentum"
                    optim = dataclasses.replace(optim, **{key: float(mom)})
                run = base.run if bs is None else dataclasses.replace(base.run, batch_size=int(bs))
                delays = [(0, 0.0)] if mode == "sync" else \
                    [(t, 0.0) for t in self.taus] if mode == "2bw" else \
                    [(1, float(lam)) for lam in self.lams]
                for (tau, lam), seed in itertools.product(delays, self.seeds):
                    real = self.pipeline == "2bw" and mode == "2bw" and tau == 1
                    r = dataclasses.replace(run, seed=int(seed),
                                            pipeline="2bw" if real else "none",
                                            stages=self.stages if real else 1)
                    cfg = base.replace(optim=optim, run=r,
                                       delay=DelayConfig(tau=tau, ef_lambda=lam))
                    name = point_name(cfg)
                    points.setdefault(name, SweepPoint(name, cfg))
        return list(points.values())

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SweepGrid":
        known = {f.name for f in dataclasses.fields(cls)}
        bad = set(d) - known
        if bad:
            raise ValueError(f"SweepGrid: unknown keys {sorted(bad)}; allowed {sorted(known)}")
        return cls(**dict(d))


def point_name(cfg: TrainConfig) -> str:
    """Deterministic run name carrying every swept value of ``cfg``."""
    o, d, r = cfg.optim, cfg.delay, cfg.run
    mom = o.beta1 if o.name == "adamw" else o.momentum
    if d.tau == 0 and d.ef_lambda == 0:
        mode = "sync"
    elif d.ef_lambda == 0:
        mode = "2bw"
    else:
        mode = "2bw+ef"
    parts = [o.name, mode, f"lr{o.lr:g}", f"mom{mom:g}", f"bs{r.batch_size}"]
    if mode != "sync":
        parts.append(f"tau{d.tau}")
    if mode == "2bw+ef":
        parts.append(f"lam{d.ef_lambda:g}")
    if r.pipeline != "none":
        parts.append(f"pp{r.stages}")
    parts.append(f"s{r.seed}")
    return "-".join(parts)

