"""Analysis of the horizon-ladder claim: gap and lag against the horizon, per optimizer and mode.

:func:`ladder_values` reads, for every ladder arm, the per-seed gap (delayed minus synchronous
partner of the same horizon, same seed) and lag (:func:`llm_validation.validation.lag.run_lag`
against that partner); :func:`horizon_ladder` fits their log-log slopes per seed
(:mod:`llm_validation.claims.decide.ladder`) and states per optimizer whether the gap is lag-like or
floor-like. Statement 18a (the paper's "does not grow") is, per optimizer, the per-seed 2BW
slope < log2(1.25) (t interval over seeds); T18 (the theory's floor) is the same slopes inside
+-log2(1.25). The regime, the lag's slope, the EF mode's slopes and Muon's extrapolated
crossing of the paper's 0.01 are measured numbers beside them.
"""

from __future__ import annotations

import math
from typing import Any

from llm_validation.claims.record.claim import Claim
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.checks import Check, aggregate, make, not_measured
from llm_validation.claims.decide.decisions import ClaimResult, result
from llm_validation.claims.decide.ladder import FLOOR_SLOPE, PAPER_GAP, crossing, fit_slope, regime
from llm_validation.claims.catalogue.registry import LADDER, LADDER_OPTIMIZERS, ladder_key
from llm_validation.config import optimizer_label as label
from llm_validation.validation.lag import run_lag

__all__ = ["MODES", "ladder_values", "horizon_ladder"]

#: The delayed modes of the ladder.
MODES = ("2bw", "2bw+ef")


def _steps(d: ClaimData, key: str) -> int | None:
    recs = d.records(key)
    return recs[0].steps if recs else None


def ladder_values(d: ClaimData, optimizer: str, mode: str
                  ) -> tuple[dict[int, dict[int, float]], dict[int, dict[int, float]]]:
    """(horizon -> seed -> gap, horizon -> seed -> lag in steps) of one optimizer and mode
    (horizons in steps, read from the runs; rungs without finished runs are left out; a lag
    censored above is kept at its bound, one censored below is left out)."""
    gaps, lags = {}, {}
    for f in LADDER:
        key = ladder_key(optimizer, mode, f)
        try:
            arm = d.claim.arm(key)
        except KeyError:
            continue
        h = _steps(d, key)
        if h is None:
            continue
        gaps[h] = d.gaps(key)
        partner = arm.partner().key
        lag = {}
        for s in d.seeds:
            a, b = d.record(key, s), d.record(partner, s)
            if a is None or b is None:
                continue
            lg = run_lag(a, b)
            if lg is not None and math.isfinite(lg.steps):
                lag[s] = lg.steps
        lags[h] = lag
    return gaps, lags


def _fit_text(fit: Any) -> str:
    iv = fit.interval
    out = f"{iv.fmt()} over {iv.n} seed(s), horizons {list(fit.horizons)}"
    if fit.excluded:
        out += f"; left out: {dict(fit.excluded)}"
    return out


def _slope_check(label: str, kind: str, slopes: dict[int, float], **params) -> Check:
    if not slopes:
        return not_measured(label, "no seed with a slope (fewer than two horizons finished)",
                            kind)
    return make(label, kind, {"slope": slopes}, {"slope": 1.0}, **params)


def horizon_ladder(c: Claim, d: ClaimData) -> ClaimResult:
    grow, floor, measured, notes = [], [], {}, []
    for o in LADDER_OPTIMIZERS:
        for mode in MODES:
            gaps, lags = ladder_values(d, o, mode)
            name = f"{label(o)} {mode}"
            gfit, lfit = fit_slope(gaps), fit_slope(lags)
            measured[f"{name}: gap slope (log-log, per seed, t over seeds)"] = _fit_text(gfit)
            measured[f"{name}: lag slope (log-log, per seed, t over seeds)"] = _fit_text(lfit)
            measured[f"{name}: mean gap per horizon"] = ", ".join(
                f"{h}: {sum(v.values()) / len(v):.4g}" for h, v in sorted(gaps.items()) if v)
            measured[f"{name}: mean lag (steps) per horizon"] = ", ".join(
                f"{h}: {sum(v.values()) / len(v):.4g}" for h, v in sorted(lags.items()) if v)
            kind, sentence = regime(gfit.interval)
            measured[f"{name}: regime"] = f"{kind} ({sentence})"
            if mode == "2bw":
                grow.append(_slope_check(f"{label(o)}: 2BW gap slope vs horizon < "
                                         f"{FLOOR_SLOPE:.2f}", "side", dict(gfit.slopes),
                                         boundary=FLOOR_SLOPE, predicted="below"))
                floor.append(_slope_check(f"{label(o)}: 2BW gap slope inside +-{FLOOR_SLOPE:.2f}",
                                          "equivalence", dict(gfit.slopes), width=FLOOR_SLOPE))
            if o == "muon" and mode == "2bw":
                cr = crossing(gfit, gaps, PAPER_GAP)
                if cr is not None:
                    measured[f"Muon 2bw: horizon where the gap would reach {PAPER_GAP:g} "
                             "(EXTRAPOLATION)"] = (f"{cr.steps:.3g} steps [{cr.lo:.3g}, "
                                                   f"{cr.hi:.3g}]")
                    notes.append(cr.note)
    notes.append("slopes: one least-squares slope of log(value) on log(horizon) per seed, "
                 "then a t interval over seeds (horizons of one seed share its initialisation "
                 "and data order, so they are not independent replicates; seeds are)")
    return result(c, {"18a": aggregate("the gap does not grow with the horizon", "all", grow),
                      "T18": aggregate("the gap tends to a floor", "all", floor)},
                  measured=measured, notes=tuple(notes))
