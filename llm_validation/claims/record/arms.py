"""Arms: one training setting of a claim (an optimizer plus config changes), run over seeds.

An :class:`Arm` is a change of a scale's base run (:func:`llm_validation.claims.plan.scales.base_config`):
``cond`` changes everything but the delay (``optim.lr``, ``run.steps``...), ``delay`` changes
the ``DelayConfig`` (``tau``, ``ef_lambda``, ``sync_start``...). Values are plain JSON values,
:class:`Times` (a multiple of the base value: ``Times(0.5)`` on ``optim.lr`` is half the tuned
lr) or :class:`OfSteps` (a fraction of the run's steps, after ``run.steps`` is resolved).

Every delayed arm has a synchronous *partner*: the same optimizer and ``cond`` with no delay
changes (:meth:`Arm.partner`). Its gap, seed by seed, is the delayed arm's final validation loss
minus its partner's (:mod:`llm_validation.claims.decide.data`). The plan adds partners by itself, so a
claim lists only the arms it compares.

Arms are keyed ``optimizer/mode[/tag]`` (``muon/2bw/lr=0.5x``); the key is unique within a claim
and is how analyses and figures refer to an arm.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from llm_validation.config import TrainConfig, field_value, optimizer_label, set_field

__all__ = ["Times", "OfSteps", "Arm", "sync", "delayed", "resolve", "describe_value",
           "Unavailable"]


class Unavailable(ValueError):
    """An arm that cannot be configured (a config field or value this checkout lacks)."""


@dataclass(frozen=True)
class Times:
    """``factor`` times the base run's value of the field."""

    factor: float


@dataclass(frozen=True)
class OfSteps:
    """``round(fraction * steps)`` of the arm's own run length."""

    fraction: float


def describe_value(value: Any) -> str:
    """``0.5 x base``, ``20% of the steps`` or the plain value."""
    if isinstance(value, Times):
        return f"{value.factor:g} x base"
    if isinstance(value, OfSteps):
        return f"{value.fraction:.0%} of the steps"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass(frozen=True, kw_only=True)
class Arm:
    """One setting of a claim."""

    optimizer: str
    """``OptimConfig.name``."""
    mode: str = "sync"
    """Delay label: ``sync``, ``2bw``, ``2bw+ef``, ``2bw+sync-start``, ``pipedream P=3``..."""
    tag: str = ""
    """Label of the ``cond`` changes (``lr=0.5x``); empty at the base condition."""
    cond: tuple[tuple[str, Any], ...] = ()
    """Changes outside ``delay`` as (``section.field``, value)."""
    delay: tuple[tuple[str, Any], ...] = ()
    """Changes of ``DelayConfig`` as (``field``, value); empty for a synchronous arm."""
    series: str | None = None
    """Line label in a figure (default: optimizer and mode)."""
    long: bool = False
    """A long-horizon arm (the ladder's upper rungs, the claims run at its long horizon):
    left out of ``--quick`` plans, whose budget it would exceed (its claim then says so)."""

    def __post_init__(self) -> None:
        for key, _ in self.cond:
            if key.count(".") != 1 or key.startswith("delay."):
                raise ValueError(f"Arm.cond key {key!r} must be section.field outside delay")
        for key, _ in self.delay:
            if "." in key:
                raise ValueError(f"Arm.delay key {key!r} must be a DelayConfig field name")
        if (self.mode == "sync") != (not self.delay):
            raise ValueError(f"Arm {self.key}: mode 'sync' exactly when there are no delay "
                             "changes")

    @property
    def key(self) -> str:
        return "/".join(p for p in (self.optimizer, self.mode, self.tag) if p)

    @property
    def is_sync(self) -> bool:
        return not self.delay

    @property
    def label(self) -> str:
        """``Muon 2bw lr=0.5x``."""
        return " ".join(p for p in (optimizer_label(self.optimizer), self.mode, self.tag) if p)

    @property
    def line(self) -> str:
        """The figure series this arm belongs to."""
        return self.series or f"{optimizer_label(self.optimizer)} {self.mode}"

    def partner(self) -> "Arm":
        """The synchronous arm of the same condition (itself when synchronous)."""
        return self if self.is_sync else Arm(optimizer=self.optimizer, tag=self.tag,
                                              cond=self.cond, long=self.long)

    def value(self, key: str) -> Any:
        """The change of ``section.field`` (``delay.x`` reads ``delay``), or None."""
        items = self.delay if key.startswith("delay.") else self.cond
        name = key.split(".", 1)[1] if key.startswith("delay.") else key
        return dict(items).get(name)

    def describe(self) -> str:
        """``optim.lr = 0.5 x base; delay.tau = 1`` (empty: the base run)."""
        parts = [f"{k} = {describe_value(v)}" for k, v in self.cond]
        parts += [f"delay.{k} = {describe_value(v)}" for k, v in self.delay]
        return "; ".join(parts)


def sync(optimizer: str, cond: Mapping[str, Any] | None = None, tag: str = "",
         long: bool = False) -> Arm:
    """The synchronous arm of ``optimizer`` at a condition."""
    return Arm(optimizer=optimizer, tag=tag, cond=tuple((cond or {}).items()), long=long)


def delayed(optimizer: str, mode: str = "2bw", cond: Mapping[str, Any] | None = None,
            tag: str = "", series: str | None = None, long: bool = False, **delay: Any) -> Arm:
    """A delayed arm (tau = 1 unless ``tau`` is given), e.g. ``delayed("muon", "2bw+ef",
    ef_lambda=1.0)``."""
    delay = {"tau": 1, **delay}
    return Arm(optimizer=optimizer, mode=mode, tag=tag, cond=tuple((cond or {}).items()),
               delay=tuple(delay.items()), series=series, long=long)


def _set(d: dict[str, Any], section: str, name: str, value: Any, arm: Arm) -> None:
    path = f"{section}.{name}"
    try:
        base = field_value(d, path)
    except KeyError as exc:
        raise Unavailable(f"arm {arm.key}: {exc.args[0]}") from None
    if isinstance(value, Times):
        if isinstance(base, bool) or not isinstance(base, (int, float)):
            raise ValueError(f"arm {arm.key}: {path}={base!r} cannot be scaled")
        value = type(base)(round(base * value.factor)) if isinstance(base, int) \
            else float(base * value.factor)
    set_field(d, path, value)


def resolve(arm: Arm, base: TrainConfig) -> TrainConfig:
    """The arm's config: ``base`` (the optimizer's base run) with the arm's changes.
    ``Unavailable`` when a field or value does not exist in this checkout."""
    if base.optim.name != arm.optimizer:
        raise ValueError(f"arm {arm.key}: base run is for {base.optim.name!r}")
    d = base.to_dict()
    changes = [(*k.split("."), v) for k, v in arm.cond] + \
        [("delay", k, v) for k, v in arm.delay]
    for section, name, value in changes:           # plain values and multiples first
        if not isinstance(value, OfSteps):
            _set(d, section, name, value, arm)
    for section, name, value in changes:           # then fractions of the final length
        if isinstance(value, OfSteps):
            _set(d, section, name, int(round(value.fraction * d["run"]["steps"])), arm)
    try:
        cfg = TrainConfig.from_dict(d)
    except (ValueError, TypeError) as exc:
        raise Unavailable(f"arm {arm.key}: {exc}") from None
    return cfg.replace(run=dataclasses.replace(cfg.run, resume=False))
