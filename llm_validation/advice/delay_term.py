"""The theory predictor: the delay cost from a synchronous pilot's statistics, through the PL gap law.

Algorithm
    the PL gap law (docs/theory.md) (``theory.get_theorem("pl_delay_gap")``, extra ``gap_leading``) is
    ``2 L^2 eta^2 tau (tau + 2(1-alpha)/alpha + 1/2) / mu``. A synchronous pilot measures
    ``L`` (``smoothness_est``: the local smoothness in the optimizer's norm) and ``eta``
    (``update_primal_norm``: the length of an applied step in that norm, which follows the lr
    schedule), both as means over steps >= 10% of the run; ``mu`` (PL) it cannot measure. The
    predictor therefore keeps one factor of ``L`` over ``mu`` inside a constant and makes the law
    scale-free by dividing by the synchronous loss decrease ``v_0 - v_T``:

    ``Z = K(tau, alpha) L eta^2 / (v_0 - v_T)``,  ``K = gap_leading(L = mu = eta = 1)``,

    and predicts the gap fraction ``g = c_F Z``, with one constant ``c_F`` per optimizer family
    ``F`` (:data:`FAMILIES`) and mode (2BW, 2BW + EF), the geometric mean of ``g_i / Z_i`` over
    the calibration pairs. The interval is the t prediction interval of one more log ratio:
    ``c_F Z exp(+- t_{n-1} s sqrt(1 + 1/n))`` (``s`` the standard deviation of ``log(g_i/Z_i)``).
    Pairs whose measured gap is <= 0 (delayed run no worse) have no log ratio and are left out
    of the calibration (counted in ``dropped``).

Assumptions
    The PL law's ``L / mu`` is the same within a family (absorbed by ``c_F``); the statistics of
    the synchronous run stand for those along the delayed one; the law has no horizon term, so
    the predicted ``g`` is the same at every horizon (where it fails: see docs/advise.md).

Guarantee
    None beyond the fit: the law is a difference of upper bounds for a deterministic PL
    problem, used here as a shape (``eta^2``, the momentum factor, ``tau``) with an empirical
    constant; the leave-one-out evaluation (:mod:`llm_validation.advice.loo`) measures how well.

Reference
    theory/pl_gap.py (proofs_md/pl_delay_gap.md); the calibration is ordinary least squares on
    log ratios.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from llm_validation.advice.horizon import LEVEL, GapPrediction, ols_predict

__all__ = ["FAMILIES", "SMOOTHNESS_KEY", "STEP_KEY", "family", "momentum_factor",
           "delay_statistic", "Calibration", "calibrate", "predict_theory"]

#: Optimizer -> family sharing one calibration constant (same geometry of the update).
FAMILIES = {"adamw": "adam", "nadamw": "adam", "adan": "adam", "soap": "adam",
            "lion": "sign", "muon": "orthogonal", "normuon": "orthogonal", "sgd": "sgd"}
#: The statistics the predictor reads (docs/llm_validation.md, "Metrics").
SMOOTHNESS_KEY = "smoothness_est"
STEP_KEY = "update_primal_norm"


def family(optimizer: str) -> str:
    """The calibration family of ``optimizer`` (``ValueError`` for an unknown one)."""
    if optimizer not in FAMILIES:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose from {', '.join(FAMILIES)}")
    return FAMILIES[optimizer]


def _default_momentum(optimizer: str) -> float:
    from llm_validation.config import OptimConfig
    base = OptimConfig()
    return base.beta1 if optimizer == "adamw" else base.momentum


@lru_cache(maxsize=None)
def momentum_factor(tau: int, momentum: float) -> float:
    """``K(tau, alpha) = gap_leading(L = mu = eta = 1)`` of the PL gap law, alpha = 1 - momentum."""
    import theory
    alpha = 1.0 - momentum
    return float(theory.get_theorem("pl_delay_gap").evaluate_extra(
        "gap_leading", L=1.0, mu=1.0, eta=1.0, tau=tau, alpha=alpha))


def delay_statistic(sync: Any, tau: int = 1) -> float:
    """``Z`` of the module docstring from a synchronous :class:`~.pilot.PilotRun`; ``ValueError``
    naming the missing statistic when the run did not log it."""
    for key in (SMOOTHNESS_KEY, STEP_KEY):
        v = sync.stats.get(key)
        if v is None or not math.isfinite(v):
            raise ValueError(f"synchronous run {sync.name}: statistic {key!r} was not logged "
                             f"(train with --stats-interval > 0)")
    drop = sync.val_curve[0][1] - sync.val_curve[-1][1]
    if not drop > 0:
        raise ValueError(f"synchronous run {sync.name}: validation loss did not decrease")
    mom = sync.momentum if sync.momentum is not None else _default_momentum(sync.optimizer)
    L, eta = sync.stats[SMOOTHNESS_KEY], sync.stats[STEP_KEY]
    return momentum_factor(tau, mom) * L * eta ** 2 / drop


class Calibration:
    """The constant ``c_F`` of one family and mode, and the spread of its log ratios."""

    def __init__(self, *, family: str, mode: str, log_ratios: Sequence[float], dropped: int):
        self.family, self.mode = family, mode
        self.log_ratios = np.asarray(log_ratios, dtype=np.float64)
        self.dropped = dropped

    @property
    def n(self) -> int:
        return int(self.log_ratios.size)

    @property
    def constant(self) -> float:
        return float(math.exp(self.log_ratios.mean())) if self.n else math.nan

    def half_width(self, level: float = LEVEL) -> float:
        """Half width of the log-scale prediction interval of one more ratio, ``t_{n-1} s
        sqrt(1 + 1/n)`` (:func:`~llm_validation.advice.horizon.ols_predict` on a constant; inf
        with fewer than 2 ratios)."""
        if self.n < 2:
            return math.inf
        est, _, hi, _ = ols_predict(np.ones((self.n, 1)), self.log_ratios, np.ones(1), level)
        return hi - est

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "mode": self.mode, "constant": self.constant,
                "n": self.n, "dropped": self.dropped,
                "log_sd": float(self.log_ratios.std(ddof=1)) if self.n > 1 else None}


def calibrate(pairs: Sequence[Any], optimizer: str, mode: str) -> Calibration:
    """``c_F`` of ``optimizer``'s family and ``mode`` from ``pairs`` (:class:`~.pilot.DelayPair`);
    pairs whose partner lacks the statistics are skipped."""
    fam = family(optimizer)
    ratios, dropped = [], 0
    for p in pairs:
        if p.mode != mode or FAMILIES.get(p.optimizer) != fam:
            continue
        try:
            z = delay_statistic(p.sync, p.delayed.tau)
        except ValueError:
            continue
        if not (p.gap_fraction > 0 and z > 0):
            dropped += 1
            continue
        ratios.append(math.log(p.gap_fraction / z))
    return Calibration(family=fam, mode=mode, log_ratios=ratios, dropped=dropped)


def predict_theory(syncs: Sequence[Any], calibration: Calibration, tau: int = 1,
                   level: float = LEVEL) -> GapPrediction:
    """``g = c_F Z`` with ``Z`` the mean of :func:`delay_statistic` over the synchronous pilot
    runs ``syncs`` (seeds of one setting), with the interval of the module docstring;
    ``ValueError`` when the calibration has no pair."""
    if calibration.n == 0:
        raise ValueError(f"no calibration pair for the {calibration.family} family in mode "
                         f"{calibration.mode!r} (the theory predictor needs a ledger with "
                         f"delayed runs of that family)")
    if not syncs:
        raise ValueError("the theory predictor needs a synchronous pilot run")
    z = float(np.mean([delay_statistic(s, tau) for s in syncs]))
    est, h = calibration.constant * z, calibration.half_width(level)
    return GapPrediction(estimate=est, lo=est * math.exp(-h), hi=est * math.exp(h),
                         n=calibration.n, method="theory",
                         detail={"statistic_Z": z, "calibration": calibration.to_dict(),
                                 "trend": "none (the PL law has no horizon term)"})
