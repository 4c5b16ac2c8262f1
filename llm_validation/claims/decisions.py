"""Checks of the claims ledger and the record of one claim's outcome.

A :class:`Check` is one measured condition with its status. The rules are ``validate``'s
(:func:`llm_validation.validation.verdict.decide`): ``pass`` when the 95% interval lies on the
claimed side of the boundary with at least ``MIN_SEEDS`` seeds, ``fail`` when it lies on the
other side, ``inconclusive`` otherwise. Three more shapes of claim, each reducing to the same
interval-versus-boundary rule:

- *equivalence* ("little effect", "similar", "insensitive"): pass when the interval of the
  difference lies inside ``(-margin, margin)``, fail when it lies entirely outside it;
- *difference* ("sensitive"): pass when the interval excludes 0, fail when it lies inside
  ``(-margin, margin)``;
- *most* ("for most optimizers"): pass when a strict majority of the per-optimizer checks
  pass, fail when a majority can no longer pass.

The equivalence margin is ``max(EQUIV_ABS, EQUIV_REL * |reference gap|)`` (:func:`margin`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from llm_validation.validation.inference import (Interval, bootstrap_interval, t_interval,
                                                 welch_interval)
from llm_validation.validation.verdict import (FAIL, INCONCLUSIVE, MIN_SEEDS, PASS, Verdict,
                                               combine, decide)

__all__ = ["EQUIV_REL", "EQUIV_ABS", "BOOTSTRAP_SEED", "Check", "ClaimResult", "margin",
           "side_check", "welch_check", "ratio_check", "equivalence_check", "differs_check",
           "most", "not_measured", "agreement", "result", "conj", "same_sign_check",
           "not_better_check"]

#: Relative equivalence margin: a change of less than a quarter of the reference gap is "no
#: effect" (a smaller margin than that is below what 3 seeds resolve at this scale).
EQUIV_REL = 0.25
#: Absolute floor of the margin in nats: the paper's own resolution ("within about 0.01").
EQUIV_ABS = 0.01
#: Seed of every bootstrap in the ledger (results must not change between invocations).
BOOTSTRAP_SEED = 20240601


@dataclass(frozen=True, kw_only=True)
class Check:
    """One measured condition of a claim."""

    label: str
    """What is measured and what is claimed, in words."""
    status: str
    """``pass``, ``fail`` or ``inconclusive``."""
    reason: str
    """The interval and the boundary it was compared with (or what is missing)."""
    interval: Interval | None = None
    """The measured interval (None when not measured)."""
    n_seeds: int = 0
    """Independent seeds behind the interval."""

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "status": self.status, "reason": self.reason,
                "interval": self.interval.to_dict() if self.interval else None,
                "n_seeds": self.n_seeds}


def margin(reference_gap: float) -> float:
    """The equivalence margin around a reference gap (see the module docstring)."""
    ref = abs(reference_gap) if math.isfinite(reference_gap) else 0.0
    return max(EQUIV_ABS, EQUIV_REL * ref)


def not_measured(label: str, what: str) -> Check:
    return Check(label=label, status=INCONCLUSIVE, reason=f"not measured: {what}")


def _check(label: str, iv: Interval, n: int, status_reason: tuple[str, str]) -> Check:
    return Check(label=label, status=status_reason[0], reason=status_reason[1], interval=iv,
                 n_seeds=n)


def side_check(label: str, samples: Mapping[int, float], boundary: float,
               predicted: str) -> Check:
    """t interval of the per-seed ``samples`` on the ``predicted`` side of ``boundary``."""
    if not samples:
        return not_measured(label, "no paired runs")
    iv = t_interval(list(samples.values()))
    return _check(label, iv, len(samples),
                  decide(iv, boundary=boundary, predicted=predicted, n_seeds=len(samples)))


def welch_check(label: str, a: Mapping[int, float], b: Mapping[int, float], boundary: float,
                predicted: str) -> Check:
    """Welch interval of mean(a) - mean(b) on the ``predicted`` side of ``boundary``."""
    if not a or not b:
        return not_measured(label, "no paired runs")
    iv = welch_interval(list(a.values()), list(b.values()))
    n = min(len(a), len(b))
    return _check(label, iv, n, decide(iv, boundary=boundary, predicted=predicted, n_seeds=n))


def ratio_check(label: str, rows: Sequence[tuple[float, float]], boundary: float,
                predicted: str, statistic: Callable[[np.ndarray], float]) -> Check:
    """Bootstrap interval (rows resampled together) of ``statistic`` vs ``boundary``."""
    if not rows:
        return not_measured(label, "no paired runs")
    iv = bootstrap_interval(np.asarray(rows, dtype=np.float64), statistic, seed=BOOTSTRAP_SEED)
    return _check(label, iv, len(rows),
                  decide(iv, boundary=boundary, predicted=predicted, n_seeds=len(rows)))


def _margin_interval(label: str, samples: Mapping[int, float]
                     ) -> tuple[Check | None, Interval | None, int, str]:
    """What the margin checks share: (a Check to return at once when there are no samples or
    too few seeds, else None; the t interval; the seed count; the interval as text)."""
    if not samples:
        return not_measured(label, "no paired runs"), None, 0, ""
    iv, n = t_interval(list(samples.values())), len(samples)
    where = f"{iv.level:.0%} interval [{iv.lo:.4g}, {iv.hi:.4g}]"
    if n < MIN_SEEDS:
        return (Check(label=label, status=INCONCLUSIVE, interval=iv, n_seeds=n,
                      reason=f"only {n} seed(s); a verdict needs >= {MIN_SEEDS}"), iv, n, where)
    return None, iv, n, where


def equivalence_check(label: str, samples: Mapping[int, float], width: float) -> Check:
    """Pass when the t interval of ``samples`` lies inside (-width, width)."""
    early, iv, n, where = _margin_interval(label, samples)
    if early is not None:
        return early
    if iv.lo > -width and iv.hi < width:
        return Check(label=label, status=PASS, interval=iv, n_seeds=n,
                     reason=f"{where} lies inside +-{width:.3g} (no effect)")
    if iv.lo > width or iv.hi < -width:
        return Check(label=label, status=FAIL, interval=iv, n_seeds=n,
                     reason=f"{where} lies outside +-{width:.3g} (an effect)")
    return Check(label=label, status=INCONCLUSIVE, interval=iv, n_seeds=n,
                 reason=f"{where} overlaps the margin +-{width:.3g}")


def differs_check(label: str, samples: Mapping[int, float], width: float) -> Check:
    """Pass when the t interval of ``samples`` excludes 0; fail when it lies inside
    (-width, width)."""
    eq = equivalence_check(label, samples, width)
    if eq.interval is None or eq.n_seeds < MIN_SEEDS:
        return eq
    iv = eq.interval
    where = f"{iv.level:.0%} interval [{iv.lo:.4g}, {iv.hi:.4g}]"
    if iv.lo > 0 or iv.hi < 0:
        return Check(label=label, status=PASS, interval=iv, n_seeds=eq.n_seeds,
                     reason=f"{where} excludes 0 (an effect)")
    if eq.status == PASS:
        return Check(label=label, status=FAIL, interval=iv, n_seeds=eq.n_seeds,
                     reason=f"{where} lies inside +-{width:.3g} (no effect)")
    return Check(label=label, status=INCONCLUSIVE, interval=iv, n_seeds=eq.n_seeds,
                 reason=f"{where} contains 0 but not inside +-{width:.3g}")


def most(label: str, checks: Sequence[Check]) -> Check:
    """Strict-majority aggregate (see the module docstring)."""
    n = len(checks)
    if not n:
        return not_measured(label, "no checks")
    p = sum(c.status == PASS for c in checks)
    f = sum(c.status == FAIL for c in checks)
    counts = f"{p} of {n} pass, {f} fail"
    seeds = min(c.n_seeds for c in checks)
    if p > n / 2:
        return Check(label=label, status=PASS, reason=f"{counts} (a majority passes)",
                     n_seeds=seeds)
    if n - f <= n / 2:
        return Check(label=label, status=FAIL, reason=f"{counts} (no majority can pass)",
                     n_seeds=seeds)
    open_ = "; ".join(f"{c.label}: {c.reason}" for c in checks if c.status == INCONCLUSIVE)
    return Check(label=label, status=INCONCLUSIVE, reason=f"{counts} (undecided: {open_})",
                 n_seeds=seeds)


def conj(label: str, checks: Sequence[Check]) -> Check:
    """One check that passes when all pass and fails when any fails (``combine``)."""
    status, reason = combine([(c.status, f"{c.label}: {c.reason}") for c in checks])
    seeds = [c.n_seeds for c in checks if c.n_seeds > 0]
    return Check(label=label, status=status, reason=reason, n_seeds=min(seeds) if seeds else 0)


def same_sign_check(label: str, samples: Mapping[str, Mapping[int, float]]) -> Check:
    """Pass when every group's t interval lies on one side of 0 (all above or all below),
    fail when two lie on opposite sides, inconclusive otherwise."""
    ivs = {k: t_interval(list(v.values())) for k, v in samples.items() if v}
    ns = {k: len(v) for k, v in samples.items() if v}
    text = "; ".join(f"{k}: [{iv.lo:.4g}, {iv.hi:.4g}]" for k, iv in ivs.items())
    enough = {k for k, n in ns.items() if n >= MIN_SEEDS}
    above = {k for k in enough if ivs[k].lo > 0}
    below = {k for k in enough if ivs[k].hi < 0}
    n = min(ns.values()) if ns else 0
    if above and below:
        return Check(label=label, status=FAIL, n_seeds=n,
                     reason=f"opposite directions ({text})")
    if len(ivs) == len(samples) >= 2 and (above == set(samples) or below == set(samples)):
        side = "above" if above else "below"
        return Check(label=label, status=PASS, n_seeds=n,
                     reason=f"every interval lies {side} 0 ({text})")
    why = f"only {n} seed(s); a verdict needs >= {MIN_SEEDS}" if n < MIN_SEEDS else \
        f"not every interval excludes 0 ({text})"
    if len(ivs) < len(samples):
        why = f"not measured for {sorted(set(samples) - set(ivs))}"
    return Check(label=label, status=INCONCLUSIVE, n_seeds=n, reason=why)


def not_better_check(label: str, samples: Mapping[int, float], width: float) -> Check:
    """For "X does not beat the baseline" with ``samples`` = val(X) - val(baseline): fail when
    the t interval lies below 0 (X is better), pass when it lies above ``-width`` (X cannot be
    better by more than the margin)."""
    early, iv, n, where = _margin_interval(label, samples)
    if early is not None:
        return early
    if iv.hi < 0:
        return Check(label=label, status=FAIL, interval=iv, n_seeds=n,
                     reason=f"{where} lies below 0 (it beats the baseline)")
    if iv.lo > -width:
        return Check(label=label, status=PASS, interval=iv, n_seeds=n,
                     reason=f"{where} lies above -{width:.3g} (not better by more than the "
                            "margin)")
    return Check(label=label, status=INCONCLUSIVE, interval=iv, n_seeds=n,
                 reason=f"{where} overlaps -{width:.3g} and 0")


def agreement(check: Check | None) -> str | None:
    """``agrees`` / ``disagrees`` / ``undetermined`` for the check of the theory's direction."""
    if check is None:
        return None
    return {PASS: "agrees", FAIL: "disagrees"}.get(check.status, "undetermined")


@dataclass(frozen=True, kw_only=True)
class ClaimResult:
    """The measured outcome of one claim."""

    id: str
    status: str
    reason: str
    checks: tuple[Check, ...]
    """The claim's conditions; the status is their conjunction (``combine``) unless the rule
    says otherwise."""
    details: tuple[Check, ...] = ()
    """Per-optimizer checks behind a ``most`` aggregate (shown, not combined again)."""
    measured: Mapping[str, Any] = field(default_factory=dict)
    """Named numbers: :class:`Interval` or plain values."""
    theory_check: Check | None = None
    """The theory's predicted direction tested on the same runs (None: no prediction)."""
    theory_verdicts: tuple[Verdict, ...] = ()
    """``validate``'s trend checks (``validation.trends``) run on this claim's runs."""
    n_seeds: int = 0
    runs: tuple[str, ...] = ()
    plot: str | None = None
    quick: bool = False
    notes: tuple[str, ...] = ()

    @property
    def agreement(self) -> str | None:
        return agreement(self.theory_check)

    def with_plot(self, plot: str | None) -> "ClaimResult":
        return ClaimResult(**{**self.__dict__, "plot": plot})

    def as_quick(self) -> "ClaimResult":
        """Quick runs are not evidence: status inconclusive, the would-be status in the reason."""
        if self.quick or self.status == INCONCLUSIVE:
            return ClaimResult(**{**self.__dict__, "quick": True})
        return ClaimResult(**{**self.__dict__, "quick": True, "status": INCONCLUSIVE,
                              "reason": f"quick run (not evidence; would read {self.status}): "
                                        f"{self.reason}"})

    def to_dict(self) -> dict[str, Any]:
        def val(v: Any) -> Any:
            return v.to_dict() if isinstance(v, Interval) else v
        return {"id": self.id, "status": self.status, "reason": self.reason,
                "checks": [c.to_dict() for c in self.checks],
                "details": [c.to_dict() for c in self.details],
                "measured": {k: val(v) for k, v in self.measured.items()},
                "theory_check": self.theory_check.to_dict() if self.theory_check else None,
                "agreement": self.agreement,
                "theory_verdicts": [v.to_dict() for v in self.theory_verdicts],
                "n_seeds": self.n_seeds, "runs": list(self.runs), "plot": self.plot,
                "quick": self.quick, "notes": list(self.notes)}


def result(claim_id: str, checks: Sequence[Check], **kw: Any) -> ClaimResult:
    """A :class:`ClaimResult` whose status is the conjunction of ``checks``."""
    status, reason = combine([(c.status, f"{c.label}: {c.reason}") for c in checks])
    seeds = [c.n_seeds for c in checks if c.n_seeds > 0]
    return ClaimResult(id=claim_id, status=status, reason=reason, checks=tuple(checks),
                       n_seeds=min(seeds) if seeds else 0, **kw)
