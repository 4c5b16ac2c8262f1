"""Sweep grids: optimizer x mode x lr / tau / momentum / lam / batch size / seed (and the
optimizer and delay knobs) -> run configs.

A :class:`SweepGrid` expands to one :class:`SweepPoint` (a name and a full ``TrainConfig``) per
combination. Modes (the brief's {sync, 2BW, 2BW+EF}):

- ``sync``: tau = 0, no EF (the ``taus``, ``lams``, sync-phase and correction axes do not
  apply: one run per rest);
- ``2bw``: delay tau for every tau in ``taus`` (tau = 1 is PipeDream-2BW), no EF; and for every
  delay correction in ``corrections`` with each of its ``correction_coefs``;
- ``2bw+ef``: tau = 1 with update-level EF for every lam in ``lams``.

``lrs``, ``momenta`` may be given per optimizer (``{"adamw": (1e-3,), "muon": (0.02,)}``) or for
all (a plain tuple); None keeps the base config's value. ``momenta`` sets Muon/NorMuon/SGD
``momentum`` and the Adam family's and Lion's ``beta1`` (docs/theory.md's 1 - alpha). Optimizer
axes for every mode: ``beta2s``, ``weight_decays``, ``warmups``, ``grad_clips``, ``schedules``;
delay axes for the delayed modes: ``sync_starts``, ``sync_cooldowns`` (emulation only).
``pipeline="2bw"`` runs the ``2bw`` points with tau = 1 on the real two-stage pipeline
(``stages``) instead of the emulation.

Each point is named by :func:`llm_validation.records.run_name.point_name` (deterministic, every
swept value in it, e.g. ``muon-2bw+ef-lr0.02-mom0.95-bs16-tau1-lam1-s0``); duplicates collapse
into one point. The base :func:`default_base` is the tiny-model setting the demo uses (see
docs/validation.md for why these hyper-parameters; the lrs of the optimizers added later are
untuned starting points, see :data:`BASE_OPTIM`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from llm_validation.config import (
    CORRECTIONS,
    OPTIMIZERS,
    SCHEDULES,
    DataConfig,
    DelayConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
    field_value,
    preset,
)
from llm_validation.records.run_name import MOMENTUM_FIELD, point_name

__all__ = [
    "MODES",
    "OPTIMIZERS",
    "BASE_OPTIM",
    "OPTIM_AXES",
    "SweepGrid",
    "SweepPoint",
    "default_base",
    "apply_overrides",
    "parse_override",
]

MODES = ("sync", "2bw", "2bw+ef")

#: Per-optimizer settings of the demo's tiny-model runs: AdamW, Muon and SGD at the lr where
#: their synchronous run is near its best at this scale (docs/validation.md: "Why these
#: settings"). The others are untuned starting points: NorMuon Muon's lr (same shape
#: adjustment), Adan and NAdamW AdamW's, Lion AdamW's / 3 (sign updates have a larger RMS than
#: Adam's; the Lion paper advises a 3-10x smaller lr), SOAP the library default 3e-3 (one
#: 80-step tiny run, seed 0: val loss 2.97 at 3e-3 vs 3.81 at 1e-3).
BASE_OPTIM: dict[str, dict[str, Any]] = {
    "adamw": {"lr": 1e-3},
    "muon": {"lr": 1e-2},
    "sgd": {"lr": 0.1},
    "normuon": {"lr": 1e-2},
    "soap": {"lr": 3e-3},
    "lion": {"lr": 3e-4},
    "adan": {"lr": 1e-3},
    "nadamw": {"lr": 1e-3},
}

#: Optimizer axes (SweepGrid field -> OptimConfig field), applied in every mode.
OPTIM_AXES = {"beta2s": "beta2", "weight_decays": "weight_decay", "warmups": "warmup_steps",
              "grad_clips": "grad_clip", "schedules": "schedule"}


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
    """``cfg`` with ``section.field=value`` overrides (for its optimizer or for all), through
    :meth:`~llm_validation.config.TrainConfig.with_fields`."""
    changes = []
    for text in overrides:
        opt, section, name, value = parse_override(text)
        if opt is None or opt == cfg.optim.name:
            changes.append((f"{section}.{name}", value, text))
    d = cfg.to_dict()
    for path, value, text in changes:      # each checked, so a bad one is named with its text
        try:
            field_value(d, path)
        except KeyError as exc:
            raise ValueError(f"override {text!r}: {exc.args[0]}") from None
    return cfg.with_fields([(path, value) for path, value, _ in changes])


def _tuple(value: Any, what: str) -> tuple:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        value = (value,)
    t = tuple(value)
    if not t:
        raise ValueError(f"SweepGrid.{what} must not be empty")
    return t


def _per_key(value: Any, what: str, keys: Sequence[str]) -> dict[str, tuple] | tuple | None:
    """A tuple for every key, or a mapping key -> tuple (keys checked)."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        bad = [k for k in value if k not in keys]
        if bad:
            raise ValueError(f"SweepGrid.{what}: keys {bad} are not in {list(keys)}")
        return {k: _tuple(v, what) for k, v in value.items()}
    return _tuple(value, what)


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep."""

    name: str
    cfg: TrainConfig


@dataclass(frozen=True, kw_only=True)
class SweepGrid:
    """A grid of runs (see the module docstring for the axes)."""

    optimizers: tuple[str, ...] = ("adamw", "muon")
    """Base optimizers (any of ``config.OPTIMIZERS``)."""
    modes: tuple[str, ...] = MODES
    """Subset of ``sync``, ``2bw``, ``2bw+ef``."""
    lrs: Any = None
    """Peak lrs: a tuple for all optimizers or a mapping optimizer -> tuple; None: base."""
    taus: tuple[int, ...] = (1,)
    """Delays of the ``2bw`` mode (sync ignores them; ``2bw+ef`` always uses tau = 1)."""
    momenta: Any = None
    """Momentum (:data:`MOMENTUM_FIELD`; tuple or mapping per optimizer); None: base."""
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
    beta2s: tuple[float, ...] | None = None
    """``OptimConfig.beta2`` values (every mode); None: base."""
    weight_decays: tuple[float, ...] | None = None
    """``OptimConfig.weight_decay`` values (every mode); None: base."""
    warmups: tuple[int, ...] | None = None
    """``OptimConfig.warmup_steps`` values (every mode); None: base."""
    grad_clips: tuple[float, ...] | None = None
    """``OptimConfig.grad_clip`` values (every mode; 0 = off); None: base."""
    schedules: tuple[str, ...] | None = None
    """``OptimConfig.schedule`` values (every mode); None: base."""
    sync_starts: tuple[int, ...] | None = None
    """``DelayConfig.sync_start`` values of the delayed modes (emulation only); None: 0."""
    sync_cooldowns: tuple[int, ...] | None = None
    """``DelayConfig.sync_cooldown`` values of the delayed modes (emulation only); None: 0."""
    corrections: tuple[str, ...] = ("none",)
    """Delay corrections of the ``2bw`` mode (``none``, ``dcasgd``, ``nesterov``)."""
    correction_coefs: Any = None
    """``DelayConfig.correction_coef`` values: a tuple for every correction or a mapping
    correction -> tuple; needed when ``corrections`` has one other than ``none``."""

    def __post_init__(self) -> None:
        set_ = lambda n, v: object.__setattr__(self, n, v)  # noqa: E731
        set_("optimizers", _tuple(self.optimizers, "optimizers"))
        set_("modes", _tuple(self.modes, "modes"))
        set_("taus", _tuple(self.taus, "taus"))
        set_("lams", _tuple(self.lams, "lams"))
        set_("seeds", _tuple(self.seeds, "seeds"))
        set_("overrides", tuple(self.overrides))
        set_("corrections", _tuple(self.corrections, "corrections"))
        for name in ("batch_sizes", *OPTIM_AXES, "sync_starts", "sync_cooldowns"):
            if getattr(self, name) is not None:
                set_(name, _tuple(getattr(self, name), name))
        set_("lrs", _per_key(self.lrs, "lrs", OPTIMIZERS))
        set_("momenta", _per_key(self.momenta, "momenta", OPTIMIZERS))
        set_("correction_coefs", _per_key(self.correction_coefs, "correction_coefs",
                                          CORRECTIONS[1:]))
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
        for s in self.schedules or ():
            if s not in SCHEDULES:
                raise ValueError(f"SweepGrid.schedules: {s!r} is not one of {list(SCHEDULES)}")
        for c in self.corrections:
            if c not in CORRECTIONS:
                raise ValueError(f"SweepGrid.corrections: {c!r} is not one of {list(CORRECTIONS)}")
            if c != "none" and not self._coefs(c):
                raise ValueError(f"SweepGrid.corrections: {c!r} needs correction_coefs")
        for name in ("sync_starts", "sync_cooldowns"):
            for v in getattr(self, name) or ():
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise ValueError(f"SweepGrid.{name}: {v!r} must be an int >= 0")
        if self.pipeline != "none" and any(self.sync_starts or ()) + any(self.sync_cooldowns or ()):
            raise ValueError("SweepGrid: sync_starts/sync_cooldowns need the emulated delay "
                             "(pipeline='none'); the real pipeline has no flush")

    def _axis(self, value: Any, opt: str) -> tuple:
        if value is None:
            return (None,)
        if isinstance(value, dict):
            return value.get(opt, (None,))
        return value

    def _coefs(self, correction: str) -> tuple:
        c = self.correction_coefs
        return (c or {}).get(correction, ()) if isinstance(c, dict) or c is None else c

    def swept(self) -> frozenset[str]:
        """The optimizer axes this grid sweeps (their values go into the point names)."""
        return frozenset(OPTIM_AXES[a] for a in OPTIM_AXES if getattr(self, a) is not None)

    def _delays(self, mode: str) -> list[DelayConfig]:
        if mode == "sync":
            return [DelayConfig()]
        phases = list(itertools.product(self.sync_starts or (0,), self.sync_cooldowns or (0,)))
        if mode == "2bw+ef":
            return [DelayConfig(tau=1, ef_lambda=float(lam), sync_start=s, sync_cooldown=c)
                    for lam, (s, c) in itertools.product(self.lams, phases)]
        corr = [("none", 0.0) if c == "none" else (c, float(k))
                for c in self.corrections for k in ((0.0,) if c == "none" else self._coefs(c))]
        return [DelayConfig(tau=t, correction=c, correction_coef=k, sync_start=s,
                            sync_cooldown=cd)
                for t, (c, k), (s, cd) in itertools.product(self.taus, corr, phases)]

    def expand(self) -> list[SweepPoint]:
        """All points, deduplicated by name, in a fixed order (seed-major last)."""
        points: dict[str, SweepPoint] = {}
        swept = self.swept()
        optim_axes = [(field, getattr(self, axis) or (None,)) for axis, field in OPTIM_AXES.items()]
        for opt in self.optimizers:
            base = apply_overrides(default_base(opt, steps=self.steps, model=self.model),
                                   self.overrides)
            for lr, mom, bs, *knobs, mode in itertools.product(
                    self._axis(self.lrs, opt), self._axis(self.momenta, opt),
                    self.batch_sizes or (None,), *(v for _, v in optim_axes), self.modes):
                changes = {f: v for (f, _), v in zip(optim_axes, knobs) if v is not None}
                if lr is not None:
                    changes["lr"] = float(lr)
                if mom is not None:
                    changes[MOMENTUM_FIELD[opt]] = float(mom)
                optim = dataclasses.replace(base.optim, **changes)
                run = base.run if bs is None else dataclasses.replace(base.run, batch_size=int(bs))
                for delay, seed in itertools.product(self._delays(mode), self.seeds):
                    real = self.pipeline == "2bw" and mode == "2bw" and delay.tau == 1
                    r = dataclasses.replace(run, seed=int(seed),
                                            pipeline="2bw" if real else "none",
                                            stages=self.stages if real else 1)
                    cfg = base.replace(optim=optim, run=r, delay=delay)
                    name = point_name(cfg, swept)
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
