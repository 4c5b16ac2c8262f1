"""Candidate laws of the delay's cost in model size, step count and learning rate.

A *cell* is one training setting (model size ``N``, optimizer steps ``S``, peak lr relative to
the size's tuned lr ``r``); in each cell every seed gives one scale-free cost ``y`` (the
compute-equivalent lag or the gap share, both in ``(0, 1)`` when the delay costs something).
A law is a linear model of ``link(y)`` in some of ``log N``, ``log S``, ``log r``:

- link ``log``: a power law, ``y = e^a N^c S^b r^d``;
- link ``logit``: its saturating twin, ``y / (1 - y) = e^a N^c S^b r^d`` (``y -> 1`` where the
  power law would pass 1: a lag cannot exceed the whole run).

Algorithm
    Per seed ``s``: least squares of ``link(y_{c,s})`` on the law's features over the cells that
    seed has (a value outside the link's domain is dropped and counted). A coefficient's
    estimate is the mean of the per-seed coefficients, its interval the Student-t interval over
    seeds (``n - 1`` degrees of freedom). A prediction at a cell is the mean over seeds of the
    per-seed linear predictor, mapped back through the link, its interval the t interval of the
    per-seed predictors, mapped back.
    Held-out score (:func:`held_out_scores`): the law is fitted on the cells not held out, each
    held-out cell's prediction is compared with that cell's observed centre (the link-mean over
    its seeds, mapped back); ``log error = |log(pred / observed)|``, a hit when within
    :data:`HIT_FACTOR`. :func:`choose` takes the law with the smallest mean held-out log error,
    a tie within :data:`TIE_LOG_ERROR` going to the law with fewer coefficients.

Assumptions
    Seeds are independent replicates shared by every cell (a seed's cells share its
    initialisation and data order, so cells are *not* independent: each seed is reduced to one
    fit before any interval); the per-seed coefficients are approximately normal. Why not a
    bootstrap over seeds: with 4-5 seeds a cluster bootstrap has 35-126 distinct resamples and
    under-covers (the test suite simulates both: the t interval holds its level, the
    percentile bootstrap does not).

Guarantee
    Under those assumptions each coefficient's interval covers the mean per-seed coefficient
    with its stated level (a one-sample t interval); a simulation test checks it at 4 seeds.
    The law choice is a deterministic function of the held-out scores, fixed before the data.

Reference
    Hoffmann et al. (2022) and Kaplan et al. (2020) for power laws in ``N`` and steps; the
    logit link is the standard saturating transform of a share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from llm_validation.validation.inference import DEFAULT_LEVEL, Interval, t_interval

__all__ = ["FEATURES", "LINKS", "HIT_FACTOR", "TIE_LOG_ERROR", "Observed", "Law", "LawFit",
           "HeldOut", "candidate_laws", "fit_law", "held_out_scores", "choose"]

#: The variables a law may use: log model size, log steps, log relative lr.
FEATURES = ("log_n", "log_steps", "log_lr")
#: Link functions: a power law (``log``) and its saturating twin (``logit``).
LINKS = ("log", "logit")
#: A held-out prediction within this factor of the observation is a hit (the advice's unit).
HIT_FACTOR = 2.0
#: Mean held-out log errors closer than this are a tie (0.01 = 1% in the cost), broken
#: toward fewer coefficients.
TIE_LOG_ERROR = 0.01


@dataclass(frozen=True, kw_only=True)
class Observed:
    """One training setting and its per-seed costs, as a law reads them."""

    name: str
    """Cell name (e.g. ``n113k/s904``)."""
    n_params: int
    """Model size, all parameters counted."""
    steps: int
    """Optimizer steps."""
    lr_rel: float = 1.0
    """Peak lr relative to the size's tuned lr."""
    values: Mapping[int, float]
    """Per-seed cost (lag or gap share)."""

    def features(self) -> dict[str, float]:
        return {"log_n": math.log(self.n_params), "log_steps": math.log(self.steps),
                "log_lr": math.log(self.lr_rel)}


@dataclass(frozen=True, kw_only=True)
class Law:
    """A candidate law: which features, which link."""

    features: tuple[str, ...]
    """Features of the linear predictor (a subset of :data:`FEATURES`, in that order)."""
    link: str = "log"
    """``log`` or ``logit``."""

    def __post_init__(self) -> None:
        if self.link not in LINKS or any(f not in FEATURES for f in self.features):
            raise ValueError(f"Law: link {self.link!r} / features {self.features} unknown")

    @property
    def name(self) -> str:
        core = "+".join(f.removeprefix("log_") for f in self.features) or "const"
        return core if self.link == "log" else f"{core}/saturating"

    def forward(self, y: float) -> float:
        """``link(y)``; NaN outside the link's domain."""
        if self.link == "log":
            return math.log(y) if y > 0 else math.nan
        return math.log(y / (1 - y)) if 0 < y < 1 else math.nan

    def inverse(self, z: float) -> float:
        """``link^-1(z)``, for every ``z`` in ``[-inf, inf]`` (no overflow)."""
        with np.errstate(over="ignore"):
            return float(np.exp(z)) if self.link == "log" else float(1.0 / (1.0 + np.exp(-z)))


def candidate_laws() -> tuple[Law, ...]:
    """Every law the protocol scores: each feature set nested from none to all three, each
    single feature, in both links."""
    sets = ((), ("log_steps",), ("log_n",), ("log_n", "log_steps"),
            ("log_n", "log_steps", "log_lr"))
    return tuple(Law(features=f, link=k) for k in LINKS for f in sets)


@dataclass(frozen=True, kw_only=True)
class LawFit:
    """A law fitted per seed."""

    law: Law
    coefs: Mapping[int, np.ndarray]
    """Per-seed coefficients ``[a, *features]``."""
    dropped: int
    """Observed-seed values outside the link's domain, left out."""
    level: float = DEFAULT_LEVEL

    def coefficient(self, feature: str) -> Interval:
        """The t interval over seeds of ``feature``'s coefficient (``"const"``: the intercept)."""
        i = 0 if feature == "const" else 1 + self.law.features.index(feature)
        return t_interval([c[i] for c in self.coefs.values()], self.level)

    def predict(self, cell: Observed) -> Interval:
        """The law's value at ``cell``: the t interval over seeds of the linear predictor,
        mapped through the inverse link (monotone, so the interval maps end to end)."""
        x = np.array([1.0] + [cell.features()[f] for f in self.law.features])
        iv = t_interval([float(c @ x) for c in self.coefs.values()], self.level)
        inv = self.law.inverse
        return Interval(estimate=inv(iv.estimate), lo=inv(iv.lo), hi=inv(iv.hi),
                        level=iv.level, n=iv.n, method=iv.method)


def fit_law(law: Law, cells: Sequence[Observed], level: float = DEFAULT_LEVEL,
            min_seeds: int = 2) -> LawFit:
    """Fit ``law`` per seed over ``cells`` (see the module docstring); ``ValueError`` when fewer
    than ``min_seeds`` seeds have more usable cells than coefficients."""
    seeds = sorted({s for c in cells for s in c.values})
    k = 1 + len(law.features)
    coefs, dropped = {}, 0
    for s in seeds:
        rows, ys = [], []
        for c in cells:
            if s not in c.values:
                continue
            z = law.forward(float(c.values[s]))
            if not math.isfinite(z):
                dropped += 1
                continue
            rows.append([1.0] + [c.features()[f] for f in law.features])
            ys.append(z)
        x = np.array(rows)
        if len(ys) > k and np.linalg.matrix_rank(x) == k:
            coefs[s] = np.linalg.lstsq(x, np.array(ys), rcond=None)[0]
    if len(coefs) < min_seeds:
        raise ValueError(f"law {law.name}: {len(coefs)} seeds with an identified fit, "
                         f"need {min_seeds} (cells {[c.name for c in cells]})")
    return LawFit(law=law, coefs=coefs, dropped=dropped, level=level)


@dataclass(frozen=True, kw_only=True)
class HeldOut:
    """One law's score on held-out cells."""

    law: str
    errors: Mapping[str, float]
    """``|log(pred / observed)|`` per held-out cell (NaN: not predicted)."""
    hits: int
    """Held-out cells predicted within :data:`HIT_FACTOR`."""
    mean_log_error: float
    """Mean of the finite errors (inf when none)."""
    n_coefs: int


def _centre(law: Law, cell: Observed) -> float:
    z = [law.forward(float(v)) for v in cell.values.values()]
    z = [v for v in z if math.isfinite(v)]
    return law.inverse(float(np.mean(z))) if z else math.nan


def held_out_scores(laws: Sequence[Law], train: Sequence[Observed], held: Sequence[Observed]
                    ) -> list[HeldOut]:
    """Each law fitted on ``train`` and scored on ``held`` (see the module docstring); a law
    that cannot be fitted (too few cells for its coefficients) scores inf."""
    out = []
    for law in laws:
        try:
            fit = fit_law(law, train)
        except ValueError:
            fit = None
        errs = {}
        for c in held:
            obs = _centre(law, c)
            pred = fit.predict(c).estimate if fit is not None else math.nan
            errs[c.name] = abs(math.log(pred / obs)) if pred > 0 and obs > 0 else math.nan
        finite = [e for e in errs.values() if math.isfinite(e)]
        out.append(HeldOut(law=law.name, errors=errs,
                           hits=sum(e <= math.log(HIT_FACTOR) for e in finite),
                           mean_log_error=float(np.mean(finite)) if finite and
                           len(finite) == len(errs) else math.inf,
                           n_coefs=1 + len(law.features)))
    return out


def choose(scores: Sequence[HeldOut]) -> HeldOut:
    """The law with the smallest mean held-out log error, ties within
    :data:`TIE_LOG_ERROR` going to fewer coefficients, then to the first listed."""
    best = min(s.mean_log_error for s in scores)
    if not math.isfinite(best):
        raise ValueError("no law predicts every held-out cell")
    tied = [s for s in scores if s.mean_log_error <= best + TIE_LOG_ERROR]
    return min(tied, key=lambda s: s.n_coefs)
