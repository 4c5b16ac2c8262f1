"""The gap against the training horizon and the pipeline depth: claim 4 (two horizons),
claim 5 (PipeDream's stage delays) and the horizon ladder, claim 18 (four doublings, lag-like or
floor-like).

Each claim here is a :class:`~llm_validation.claims.record.claim.Claim` that carries
everything that decides it: the paper's wording and figure, its statements (the paper's
sentences it tests, the theory's predictions), its arms, grid and the reason for them, its
analysis (one check per statement, on finished runs only:
:class:`~llm_validation.claims.decide.data.ClaimData`) and the thresholds its rules use (read
by the protocol, :mod:`llm_validation.claims.report.protocol`). Every comparison is a per-seed
contrast of the arms, decided on its paired t interval (:mod:`llm_validation.claims.decide.checks`).

The ladder: :func:`ladder_values` reads, for every ladder arm, the per-seed gap (delayed minus
synchronous partner of the same horizon, same seed) and lag
(:func:`llm_validation.validation.lag.run_lag` against that partner); its analysis fits their
log-log slopes per seed (:mod:`llm_validation.claims.decide.ladder`) and states per optimizer
whether the gap is lag-like or floor-like. Statement 18a (the paper's "does not grow") is, per
optimizer, the per-seed 2BW slope < log2(1.25) (t interval over seeds); T18 (the theory's
floor) is the same slopes inside +-log2(1.25). The regime, the lag's slope, the EF mode's
slopes and Muon's extrapolated crossing of the paper's 0.01 are measured numbers beside them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from llm_validation.claims.catalogue.vocabulary import (HALF, LADDER, LADDER_OPTIMIZERS, PAIRED,
                                                        central, ef_arm, ladder_key,
                                                        prediction, rung, statement)
from llm_validation.claims.decide.checks import Check, aggregate, make, not_measured
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.decisions import ClaimResult, result
from llm_validation.claims.decide.ladder import (FLOOR_SLOPE, PAPER_GAP, crossing, fit_slope,
                                                 regime)
from llm_validation.claims.decide.measure import above, gap_interval, gap_ratio_interval, need
from llm_validation.claims.record.arms import delayed
from llm_validation.claims.record.claim import Claim, FigureSpec
from llm_validation.config import optimizer_label as label
from llm_validation.config import pipedream_taus
from llm_validation.validation.lag import run_lag

__all__ = ["HORIZON", "PIPEDREAM_DEPTH", "HORIZON_LADDER", "GROWTH_TOL", "MODES",
           "ladder_values"]

#: Claim 4: "grows" = the gap of the full run exceeds 1.25x the half run's.
GROWTH_TOL = 1.25
#: The delayed modes of the ladder.
MODES = ("2bw", "2bw+ef")


# ---------------------------------------------------------------------- horizon
def _horizon(c: Claim, d: ClaimData) -> ClaimResult:
    growth, gains, measured = [], [], {}
    tol = c.threshold("growth_tolerance")
    for o in c.optimizers():
        full, half = f"{o}/2bw", f"{o}/2bw/steps=0.5x"
        growth.append(need(above(f"{label(o)}: {tol:g} gap(half run) - gap(full run) "
                                 "> 0", ("gap half", d.gaps(half)), ("gap full", d.gaps(full)),
                                 scale=tol), d, full, half))
        for tag, key in (("full", full), ("half", half)):
            ef = key.replace("2bw", "2bw+ef", 1)
            gains.append(need(above(f"{label(o)}: EF gain at the {tag} run > 0",
                                    ("gap", d.gaps(key)), ("gap EF", d.gaps(ef))), d, key, ef))
        measured[f"{label(o)}: gap full / half run (Fieller)"] = gap_ratio_interval(d, half, full)
    grows = aggregate("the gap does not grow with the horizon", "all", growth)
    return result(c, {"4a": grows, "4b": aggregate("EF keeps reducing the gap", "all", gains),
                      "T4": grows}, measured=measured)


HORIZON = Claim(
    id="horizon", number=4, figure="Fig. 5",
    statements=(
        central("4a", "The gap does not grow with the training horizon.", "Fig. 5",
                 f"per optimizer 1.25 gap(half run) - gap(full run) > 0 (= ratio full/half < 1.25), "
                 f"{PAIRED}; all optimizers",
                 "was a bootstrap ratio interval ([0.97, 1.31] for Muon at 3 seeds); the ratio is "
                 "shown with Fieller's interval"),
        statement("4b", "EF keeps reducing it.", "Fig. 5",
                   f"gap - gap(EF) > 0 at both horizons, {PAIRED}; all optimizers"),
        prediction("T4", "the gap does not grow with the horizon (the PL floor is a limsup): "
                   "statement 4a's checks")),
    wording="The gap does not grow with the training horizon; EF keeps reducing it.",
    arms=tuple(a for o in ("adamw", "muon") for a in (
        delayed(o), ef_arm(o), delayed(o, cond=HALF, tag="steps=0.5x"),
        ef_arm(o, cond=HALF, tag="steps=0.5x"))),
    grid="AdamW, Muon x {half, full run} x {sync, 2bw, 2bw+ef}",
    reason="Two horizons (the full run and its half, each with its own full lr schedule as "
           "in the paper); a longer horizon would cost 2x per run: the budget.",
    theory="PL floor (theory pl_delay_gap) is a limsup: the delay raises the floor and the "
           "gap tends to a constant, it does not grow with K",
    plot=FigureSpec(kind="lines", title="Gap vs training horizon", x="run.steps",
                    xlabel="training steps"),
    analyse=_horizon, thresholds={"growth_tolerance": GROWTH_TOL})


# ---------------------------------------------------------------------- pipedream-depth
def _pipedream_depth(c: Claim, d: ClaimData) -> ClaimResult:
    ps = (2, 3, 4)
    inputs = {f"gap P={p}": d.gaps(f"muon/pipedream P={p}") for p in ps}
    centred = np.asarray(ps, dtype=float) - np.mean(ps)
    weights = {f"gap P={p}": float(w) for p, w in zip(ps, centred / (centred @ centred))}
    keys = [f"muon/pipedream P={p}" for p in ps]
    slope = need(make("per-seed slope of the PipeDream gap vs P > 0", "side", inputs, weights,
                      boundary=0.0, predicted="above"), d, *keys)
    deep = need(above("gap(PipeDream P=4) - gap(2BW) > 0", ("gap P=4", inputs["gap P=4"]),
                      ("gap 2BW", d.gaps("muon/2bw"))), d, "muon/pipedream P=4", "muon/2bw")
    measured = {f"gap PipeDream P={p}": gap_interval(d, f"muon/pipedream P={p}") for p in ps}
    measured["gap 2BW (tau = 1 at every P)"] = gap_interval(d, "muon/2bw")
    return result(c, {"5a": slope, "5b": deep, "T5": slope}, measured=measured,
                  notes=("2BW's emulated delay is one step at every P: its run is the same "
                         "for every P (the real pipeline matches the emulator exactly, "
                         "tests/llm_validation/pipeline).",))


PIPEDREAM_DEPTH = Claim(
    id="pipedream-depth", number=5, figure="Fig. 6",
    statements=(
        central("5a", "Original PipeDream (stage s reads weights P-1-s steps old) degrades as P "
                 "grows.", "Fig. 6",
                 f"per seed the least-squares slope of the PipeDream gap against P, > 0, {PAIRED}",
                 "was one least-squares fit over all seeds (treats the gaps of one seed as "
                 "independent)"),
        statement("5b", "2BW's constant one-step delay does not.", "Fig. 6",
                   f"gap(PipeDream, P = 4) - gap(2BW) > 0, {PAIRED} (2BW's emulated run is the same at "
                   "every P)"),
        prediction("T5", "d gap / d tau > 0: statement 5a's slope")),
    wording="Original PipeDream (stage s reads weights P-1-s steps old) degrades as P "
            "grows; 2BW's constant one-step delay does not.",
    arms=(delayed("muon"),) + tuple(
        delayed("muon", f"pipedream P={p}", tau=p - 1, stage_taus=pipedream_taus(p),
                series="PipeDream") for p in (2, 3, 4)),
    grid="Muon, PipeDream stage delays (P-1-s) for P in {2, 3, 4}, and 2bw",
    reason="P up to 4, the tiny model's block count (a stage needs a block); Muon, the "
           "paper's main optimizer.",
    theory="PL gap law: d gap / d tau > 0 (theory pl_delay_gap), so larger stage delays "
           "give a larger gap; a constant tau = 1 gives a constant gap",
    plot=FigureSpec(kind="lines", title="Gap vs pipeline depth", x="stages",
                    xlabel="pipeline stages P", reference="muon/2bw"),
    analyse=_pipedream_depth)


# ---------------------------------------------------------------------- horizon-ladder
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


def _horizon_ladder(c: Claim, d: ClaimData) -> ClaimResult:
    grow, floor, measured, notes = [], [], {}, []
    band = c.threshold("floor_slope")
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
            kind, sentence = regime(gfit.interval, band)
            measured[f"{name}: regime"] = f"{kind} ({sentence})"
            if mode == "2bw":
                grow.append(_slope_check(f"{label(o)}: 2BW gap slope vs horizon < "
                                         f"{band:.2f}", "side", dict(gfit.slopes),
                                         boundary=band, predicted="below"))
                floor.append(_slope_check(f"{label(o)}: 2BW gap slope inside +-{band:.2f}",
                                          "equivalence", dict(gfit.slopes), width=band))
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


HORIZON_LADDER = Claim(
    id="horizon-ladder", number=18, figure="Fig. 5, four horizons",
    statements=(
        central("18a", "The gap does not grow with the training horizon.", "Fig. 5",
                 "per optimizer (AdamW, Muon; 2BW) the per-seed least-squares slope of log gap on "
                 "log horizon over H, 2H, 4H, 8H (each horizon with its own lr schedule) < "
                 "log2(1.25) (less than 25% growth per doubling, claim 4's threshold), t interval over "
                 "seeds (one slope per seed: the horizons of a seed are not independent)",
                 "new in the second tiny ledger: four horizons instead of claim 4's two"),
        prediction("T18", "the PL floor is a limsup: the gap tends to a constant, so the 2BW gap's "
                   "log-log slope lies inside +-log2(1.25) (floor-like) for AdamW and Muon; a slope "
                   "below the band is lag-like (lost early progress), reported per optimizer")),
    wording="The gap does not grow with the training horizon, measured over four doublings; "
            "and is the gap here lost early progress (lag-like: it shrinks as the horizon "
            "grows) or a floor (it stays)?",
    arms=tuple(rung(o, m, f) for o in LADDER_OPTIMIZERS for m in ("2bw", "2bw+ef")
               for f in LADDER),
    grid="AdamW, Muon x {sync, 2bw, 2bw+ef} x horizon {1, 2, 4, 8} x the base run (200, 400, "
         "800, 1600 steps at tiny), each with its own full lr schedule",
    reason="Four doublings reach 1600 steps (1.6 tokens per parameter at tiny, still far from "
           "the paper's 20+); AdamW and Muon only (NorMuon and SOAP would add ~80 "
           "process-minutes each: the budget). The base rung is the base block of claims 1-2 "
           "(shared); --quick runs the first two rungs.",
    theory="PL floor (theory pl_delay_gap) is a limsup: once the loss is near its floor the "
           "gap tends to a constant (floor-like); far from it the delay costs steps (lag-like)",
    plot=FigureSpec(kind="ladder", title="Gap and lag vs training horizon"),
    analyse=_horizon_ladder, thresholds={"floor_slope": FLOOR_SLOPE})

