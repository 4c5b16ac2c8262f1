"""Seeds where they decide: a two-look design that adds seeds to undecided checks.

Algorithm (two looks, alpha split between them, Bonferroni)
    Look 1 uses the first ``first`` seeds (3). Every check's interval is taken at level
    ``1 - alpha_1`` (``alpha_1 = split * alpha``). A check whose interval excludes its boundary
    is decided there. For an undecided check, :func:`seeds_needed` gives the seed count at
    which an interval at the second look's level ``1 - alpha_2`` (``alpha_2 = alpha -
    alpha_1``) would exclude the boundary with probability ``power`` if the measured mean and
    spread were the truth (the noncentral-t count of
    :func:`llm_validation.validation.power.seeds_needed` at level ``1 - alpha_2``). When that count is at most ``max_seeds`` the check's arms are run
    to it (at least ``first + 1``) and the check is decided once more, at level ``1 -
    alpha_2``, on all its seeds (look 2). Otherwise it stays inconclusive and is reported
    "needs N seeds" (N at the second look's level; ``None``: no finite N, the measured mean
    sits on the boundary).

Assumptions
    Per-seed values of a check are independent and approximately normal (the paired t
    interval's assumptions); the look-2 sample contains the look-1 sample.

Guarantee
    The probability that the reported interval misses the true mean (and so the
    probability of a wrong pass or fail) is at most ``alpha_1 + alpha_2 = alpha`` by the union
    bound over the two looks when the second look's size is fixed in advance. Here that size
    depends on look 1's data (fewer seeds when the check is nearly decided); the union bound
    does not cover that choice by itself, so :func:`simulate` measures it:
    ``tests/llm_validation/claims/test_sequential.py`` asserts a coverage of at least
    ``1 - alpha`` within Monte-Carlo error at n = 3 -> up to 8, for true means on the
    boundary (the worst case for a wrong verdict) and away from it, and that the same
    procedure *without* the alpha split (95% at both looks) falls below it.

Reference
    Group-sequential designs: Pocock (1977), O'Brien & Fleming (1979); the Bonferroni split is
    the simplest alpha-spending rule (Jennison & Turnbull, *Group Sequential Methods*, 2000).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

import numpy as np
from llm_validation.claims.decide.checks import at_level, make
from llm_validation.validation.inference import Interval
from llm_validation.validation.power import seeds_needed

__all__ = ["SeedPolicy", "DEFAULT_POLICY", "second_look", "simulate"]


@dataclass(frozen=True, kw_only=True)
class SeedPolicy:
    """The two-look design of the ledger's seeds (``reproduce --max-seeds``)."""

    alpha: float = 0.05
    """Total two-sided error rate over both looks (the ledger's 95%)."""
    split: float = 0.5
    """Share of ``alpha`` spent at look 1 (0.5: Bonferroni halves)."""
    first: int = 3
    """Seeds of look 1 (every arm)."""
    max_seeds: int = 8
    """Most seeds an arm is run to at look 2 (``--max-seeds``)."""
    power: float = 0.8
    """Probability, at the measured mean and spread, that look 2 decides the check."""
    budget_min: float = 60.0
    """Process-minutes look 2 may add (``--extra-budget``); claims are extended cheapest
    first while the added runs fit, the rest report their need. 60: the tiny ledger's lr sweep
    (~17) and claims (~409 process-minutes at 3 seeds) leave ~55 of a 4-hour, 2-core budget."""

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"SeedPolicy.alpha={self.alpha!r} must be in (0, 1)")
        if not 0 < self.split < 1:
            raise ValueError(f"SeedPolicy.split={self.split!r} must be in (0, 1)")
        for name in ("first", "max_seeds"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 2:
                raise ValueError(f"SeedPolicy.{name}={v!r} must be an int >= 2")
        if self.max_seeds < self.first:
            raise ValueError(f"--max-seeds {self.max_seeds} must be >= the first look's "
                             f"{self.first} seeds")
        if not 0 < self.power < 1:
            raise ValueError(f"SeedPolicy.power={self.power!r} must be in (0, 1)")
        if not (isinstance(self.budget_min, (int, float)) and math.isfinite(self.budget_min)
                and self.budget_min >= 0):
            raise ValueError(f"--extra-budget {self.budget_min!r}: must be a finite number of "
                             "process-minutes >= 0")

    @property
    def level1(self) -> float:
        """Interval level of look 1."""
        return 1.0 - self.alpha * self.split

    @property
    def level2(self) -> float:
        """Interval level of look 2."""
        return 1.0 - self.alpha * (1.0 - self.split)

    def level_at(self, n_seeds: int) -> float:
        """The level a check on ``n_seeds`` seeds decides at: look 1's up to ``first`` seeds,
        look 2's beyond."""
        return self.level1 if n_seeds <= self.first else self.level2

    def to_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "split": self.split, "first": self.first,
                "max_seeds": self.max_seeds, "power": self.power,
                "budget_min": self.budget_min, "level1": self.level1,
                "level2": self.level2,
                "rule": "two looks, Bonferroni alpha split; look 2 only for checks that "
                        "the seeds needed (power, level2) <= max_seeds decide, cheapest "
                        "claims first within budget_min process-minutes"}


DEFAULT_POLICY = SeedPolicy()
#: Largest standardised effect searched for a threshold (an effect of 50 sd is decided by any
#: two seeds) and the bisection steps (2^-30 of it: far below any measured spread's precision).
Z_MAX = 50.0
Z_BISECT = 30


@lru_cache(maxsize=32)
def _z_thresholds(power: float, level: float, max_seeds: int) -> tuple[float, ...]:
    """For n = 2..max_seeds: the smallest standardised effect ``|mean - boundary| / sd`` at
    which :func:`~llm_validation.validation.power.seeds_needed` answers <= n (bisection on the
    effect; the count is monotone in it). The two-look design then reads off its second
    look's size without a power search per check."""
    out = []
    for n in range(2, max_seeds + 1):
        lo, hi = 0.0, Z_MAX
        for _ in range(Z_BISECT):
            mid = (lo + hi) / 2
            need = seeds_needed(mid, 1.0, power, level=level)
            lo, hi = (lo, mid) if need is not None and need <= n else (mid, hi)
        out.append(hi)
    return tuple(out)


def second_look(samples: Sequence[float], boundary: float,
                policy: SeedPolicy = DEFAULT_POLICY, level: float | None = None,
                count: bool = True) -> tuple[int | None, int | None]:
    """(seeds to run the check's arms to, seeds it needs) after an undecided look 1 on
    ``samples``; the first is None when the need exceeds ``max_seeds`` (the second is then
    the full count, None when it exceeds :data:`~llm_validation.validation.power.MAX_SEEDS`
    or the mean sits on the boundary). ``level``: the second look's interval level (default
    ``policy.level2``; ``count=False`` skips the full count past ``max_seeds``: None)."""
    x = np.asarray(samples, dtype=np.float64)
    if x.size < 2:
        return None, None
    level = policy.level2 if level is None else level
    delta, sd = abs(float(x.mean()) - boundary), float(x.std(ddof=1))
    if sd == 0:
        return (x.size + 1, 2) if delta > 0 else (None, None)
    z = delta / sd
    for n, zn in enumerate(_z_thresholds(policy.power, level, policy.max_seeds), start=2):
        if z >= zn:
            return max(n, x.size + 1), n
    return None, seeds_needed(delta, sd, policy.power, level=level) if count else None


def _decided(iv: Interval, boundary: float) -> bool:
    return iv.lo > boundary or iv.hi < boundary


def _ledger_interval(x: np.ndarray, boundary: float, level: float) -> Interval:
    """The interval the ledger decides a ``side`` check on: built by ``checks.make`` and
    decided at ``level`` by ``checks.at_level`` (the code path of ``ledger.assemble``)."""
    c = make("simulated", "side", {"x": dict(enumerate(x.tolist()))}, {"x": 1.0},
             boundary=boundary, predicted="above")
    return at_level(c, level).interval


def simulate(policy: SeedPolicy, *, mean: float, sd: float = 1.0, boundary: float = 0.0,
             reps: int = 4000, seed: int = 0, split_alpha: bool = True) -> dict[str, float]:
    """Monte-Carlo of the two-look procedure on normal per-seed values: the coverage of the
    reported interval (look 2's where the check went on, else look 1's), the share of
    checks that went to look 2, and the share decided. Every interval is the ledger's own:
    a ``side`` check decided at ``policy.level_at(n)`` (:func:`_ledger_interval`).
    ``split_alpha=False`` runs the same procedure at ``1 - alpha`` at both looks (what the
    split protects against)."""
    rng = np.random.default_rng(seed)

    def level(n: int) -> float:
        return policy.level_at(n) if split_alpha else 1 - policy.alpha

    cover = went = decided = 0
    for _ in range(reps):
        x = rng.normal(mean, sd, policy.first)
        iv = _ledger_interval(x, boundary, level(x.size))
        if not _decided(iv, boundary):
            n, _ = second_look(x, boundary, policy, level=level(policy.first + 1), count=False)
            if n is not None:
                went += 1
                x = np.concatenate([x, rng.normal(mean, sd, n - x.size)])
                iv = _ledger_interval(x, boundary, level(x.size))
        cover += iv.lo <= mean <= iv.hi
        decided += _decided(iv, boundary)
    return {"coverage": cover / reps, "second_look": went / reps, "decided": decided / reps}
