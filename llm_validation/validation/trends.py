"""Trend checks: does the sync-vs-async gap move as the theory predicts?

Gaps are paired by seed (``validation.runs.paired_gaps``). Checks and their decision rules:

- ``gap_adamw_gt_muon``: gap(AdamW) - gap(Muon) at each optimizer's base condition, Welch
  interval above 0 (docs/theory.md trend 7; the paper's headline).
- ``ef_gain[opt]``: EF gain = val(delayed) - val(EF), paired by seed, interval above 0; the
  share of the gap removed (Fieller's interval of the ratio of paired means) is reported.
- ``ef_share_vs_alignment[opt]``: across one optimizer's EF settings (lam, momentum), the
  per-seed share of the gap removed against the mean cosine of consecutive base updates of the
  EF run: slope above 0 (trend 6); needs :data:`MIN_TREND_LEVELS` settings. Optimizers are not
  pooled: their updates live in different norms, so their cosines are not comparable.
- ``gap_vs_lr[opt]``: exponent p of gap = A lr^p (nonlinear least squares over all per-seed
  gaps) inside :data:`EXPONENT_BAND` (trend 3: about 2).
- ``gap_vs_tau[opt]``: the PL shape gap = A tau (tau + 2(1-alpha)/alpha + 1/2): A above 0; the
  free constant c (Fieller interval) is reported next to theory's 1/2.
- ``gap_vs_momentum[opt]``: slope of the gap against the PL factor 2(1-alpha)/alpha + 3/2 at
  tau = 1 above 0 (more momentum, larger gap at fixed lr).
- ``gap_vs_batch[opt]``: slope of the gap against log2(batch size) above 0 (trend 4: smaller
  batches hide the delay).
"""

from __future__ import annotations

import math
from typing import Sequence

from llm_validation.config import optimizer_label

import numpy as np

from llm_validation.validation.groups import (
    ef_rows,
    families,
    gaps_by_seed,
    select,
    series_stat,
)
from llm_validation.validation.contrast import share_removed_interval
from llm_validation.validation.inference import (
    fit_linear,
    fit_pl_tau_shape,
    fit_power_law,
    pl_shape,
    t_interval,
    welch_interval,
)
from llm_validation.validation.runs import RunRecord
from llm_validation.validation.verdict import Verdict, combine, decide, missing

__all__ = [
    "EXPONENT_BAND",
    "MIN_TREND_LEVELS",
    "adamw_vs_muon_check",
    "ef_gain_check",
    "ef_share_check",
    "lr_exponent_check",
    "tau_shape_check",
    "momentum_check",
    "batch_check",
    "best_family",
    "family_points",
]

#: "Gap grows like lr^2": the fitted exponent's interval must exclude linear (1) and cubic (3)
#: growth; that is the resolution a handful of lrs can give.
EXPONENT_BAND = (1.0, 3.0)
#: Fewest distinct settings for a fitted trend (an exponent, a slope across conditions); two
#: settings give a difference, not a trend.
MIN_TREND_LEVELS = 3



def adamw_vs_muon_check(runs: Sequence[RunRecord], base: dict[str, str],
                        metric: str = "final") -> Verdict:
    vid, claim = "gap_adamw_gt_muon", "AdamW's sync-async gap exceeds Muon's"
    prediction = ("LMO steps are bounded (<= 2 eta), so Muon degrades less under one-step delay "
                  "(docs/theory.md trend 7; paper: > 0.2 vs ~0.01)")
    if "adamw" not in base or "muon" not in base:
        return missing(vid, "trend", claim, prediction,
                       "needs sync and 2bw runs of both AdamW and Muon")
    ga, gm = gaps_by_seed(runs, base["adamw"], metric=metric), \
        gaps_by_seed(runs, base["muon"], metric=metric)
    diff = welch_interval(list(ga.values()), list(gm.values()))
    n = min(len(ga), len(gm))
    status, reason = decide(diff, boundary=0.0, predicted="above", n_seeds=n)
    cos = {}
    for opt in ("adamw", "muon"):
        vals = {r.seed: series_stat(r, "cos_delayed_fresh", np.mean, skip=0.0)
                for r in select(runs, condition=base[opt], mode="delay", tau=1)}
        vals = {s: v for s, v in vals.items() if v is not None}
        if vals:
            cos[f"cos(delayed, fresh update) {optimizer_label(opt)}"] = t_interval(list(vals.values()))
    measured = {"gap AdamW": t_interval(list(ga.values())),
                "gap Muon": t_interval(list(gm.values())),
                "difference AdamW - Muon": diff, **cos}
    if len(ga) >= 2 and len(gm) >= 2 and np.mean(list(gm.values())) > 0:
        measured["ratio AdamW / Muon"] = float(np.mean(list(ga.values()))
                                               / np.mean(list(gm.values())))
    used = select(runs, condition=base["adamw"]) + select(runs, condition=base["muon"])
    return Verdict(id=vid, kind="trend", claim=claim, prediction=prediction, status=status,
                   reason=reason, n_seeds=n, measured=measured,
                   runs=tuple(r.name for r in used), plot="loss_curves.png")


def ef_gain_check(runs: Sequence[RunRecord], opt: str, cond: str, lam: float = 1.0,
                  metric: str = "final") -> Verdict:
    vid = f"ef_gain[{opt}]"
    claim = f"{optimizer_label(opt)}: Error Feedback (lam = {lam:g}) reduces the sync-async gap"
    prediction = ("EF makes the virtual iterate z_k = x_k - lam v_{k-1} see drift omega_bar "
                  "instead of tau = 1; with aligned consecutive updates (heavy momentum) "
                  "omega_bar < 1 and the gap shrinks (docs/theory.md result 5, trend 6)")
    rows = ef_rows(runs, cond, lam, metric=metric)
    if not rows:
        return missing(vid, "trend", claim, prediction,
                       f"needs sync, 2bw and 2bw+ef (lam={lam:g}) runs of {optimizer_label(opt)} per seed")
    arr = np.array([[g0, g1] for g0, g1, _ in rows.values()])   # [seeds, (gap, gap with EF)]
    gain = t_interval(arr[:, 0] - arr[:, 1])
    status, reason = decide(gain, boundary=0.0, predicted="above", n_seeds=len(rows))
    share = share_removed_interval(dict(enumerate(arr[:, 0])), dict(enumerate(arr[:, 1])))
    return Verdict(id=vid, kind="trend", claim=claim, prediction=prediction, status=status,
                   reason=reason, n_seeds=len(rows),
                   measured={"gap without EF": t_interval(arr[:, 0]),
                             "gap with EF": t_interval(arr[:, 1]),
                             "EF gain": gain, "share of gap removed": share},
                   runs=tuple(e.name for _, _, e in rows.values()), plot="loss_curves.png")


def ef_share_check(runs: Sequence[RunRecord], opt: str, metric: str = "final") -> Verdict:
    vid = f"ef_share_vs_alignment[{opt}]"
    claim = (f"{optimizer_label(opt)}: EF's share of the gap removed grows with the alignment of "
             "consecutive updates")
    prediction = ("omega^2 = 1 + lam^2 - 2 lam cos(d_{k-1}, d_{k-2}) (unit steps): higher cosine, "
                  "smaller drift, larger share removed (docs/theory.md trend 6); across this "
                  "optimizer's EF settings (lam, momentum)")
    xs, ys, conds, names, no_share = [], [], set(), [], 0
    for cond in sorted({r.condition for r in select(runs, optimizer=opt, mode="ef")}):
        for lam in sorted({r.lam for r in select(runs, condition=cond, mode="ef")}):
            for s, (g0, g1, e) in ef_rows(runs, cond, lam, metric=metric).items():
                c = series_stat(e, "cos_consecutive_update", np.mean)
                if c is not None and g0 <= 0:   # no gap, no share of it: counted, reported
                    no_share += 1
                if c is None or g0 <= 0:
                    continue
                xs.append(c)
                ys.append(1.0 - g1 / g0)
                conds.add((cond, lam))
                names.append(e.name)
    if len(conds) < MIN_TREND_LEVELS:
        return missing(vid, "trend", claim, prediction,
                       f"needs {optimizer_label(opt)} EF runs in >= {MIN_TREND_LEVELS} settings (lam or "
                       f"momentum); have {len(conds)}")
    fit = fit_linear(np.stack([np.ones(len(xs)), np.asarray(xs)], axis=1), ys)
    slope = fit.coef[1]
    n = len(xs) // len(conds)
    status, reason = decide(slope, boundary=0.0, predicted="above", n_seeds=n)
    return Verdict(id=vid, kind="trend", claim=claim, prediction=prediction, status=status,
                   reason=reason, n_seeds=n,
                   measured={"slope d share / d cos": slope, "settings": len(conds),
                             "points": len(xs),
                             "points left out (gap <= 0: no share to take)": no_share},
                   runs=tuple(names), plot="ef_vs_lam.png")


def family_points(runs: Sequence[RunRecord], family: dict[float, str], metric: str
                  ) -> tuple[list[float], list[float], dict[float, int], list[str]]:
    """(x values, gaps, paired seeds per x, run names) of a family's per-seed gaps."""
    xs, ys, counts, names = [], [], {}, []
    for value, cond in family.items():
        g = gaps_by_seed(runs, cond, metric=metric)
        counts[value] = len(g)
        xs += [value] * len(g)
        ys += list(g.values())
        names += [r.name for r in select(runs, condition=cond)]
    return xs, ys, counts, names


def best_family(runs: Sequence[RunRecord], opt: str, axis: str, metric: str
                ) -> dict[float, str] | None:
    """The largest family of ``opt``'s conditions along ``axis`` with >= 2 measured gaps."""
    fams = [f for f in families(select(runs, optimizer=opt, pipeline="none"), axis)]
    fams = [f for f in fams if sum(1 for c in f.values()
                                   if gaps_by_seed(runs, c, metric=metric)) >= 2]
    return max(fams, key=len) if fams else None


def lr_exponent_check(runs: Sequence[RunRecord], opt: str, metric: str = "final") -> Verdict:
    vid = f"gap_vs_lr[{opt}]"
    claim = f"{optimizer_label(opt)}: the gap grows like lr^2"
    prediction = ("PL gap ~ 2 L^2 eta^2 tau (tau + 2(1-alpha)/alpha + 1/2) / mu: exponent 2 "
                  f"(accepted: interval inside ({EXPONENT_BAND[0]:g}, {EXPONENT_BAND[1]:g}))")
    fam = best_family(runs, opt, "lr", metric)
    xs, ys, counts, names = family_points(runs, fam, metric) if fam else ([], [], {}, [])
    levels = [v for v, c in counts.items() if c > 0]
    if len(levels) < MIN_TREND_LEVELS:
        return missing(vid, "trend", claim, prediction,
                       f"needs paired gaps at >= {MIN_TREND_LEVELS} learning rates; have "
                       f"{len(levels)}")
    fit = fit_power_law(xs, ys)
    n = min(counts[v] for v in levels)
    status, reason = combine([
        decide(fit.exponent, boundary=EXPONENT_BAND[0], predicted="above", n_seeds=n),
        decide(fit.exponent, boundary=EXPONENT_BAND[1], predicted="below", n_seeds=n)])
    return Verdict(id=vid, kind="trend", claim=claim, prediction=prediction, status=status,
                   reason=reason, n_seeds=n,
                   measured={"exponent": fit.exponent, "prefactor A": fit.prefactor,
                             "learning rates": ", ".join(f"{v:g}" for v in levels)},
                   runs=tuple(names), plot="gap_vs_lr.png")


def tau_shape_check(runs: Sequence[RunRecord], opt: str, cond: str,
                    metric: str = "final") -> Verdict:
    vid = f"gap_vs_tau[{opt}]"
    claim = f"{optimizer_label(opt)}: the gap grows with tau as tau (tau + 2(1-alpha)/alpha + c)"
    prediction = "PL law, docs/theory.md result 6: scale A > 0 and c = 1/2"
    def n_taus(c: str) -> int:
        return sum(1 for t in {r.tau for r in select(runs, condition=c, mode="delay")}
                   if gaps_by_seed(runs, c, tau=t, metric=metric))
    conds = sorted({r.condition for r in select(runs, optimizer=opt, mode="delay")})
    if conds and n_taus(cond) < 2:     # the base has one tau: use the condition with the most
        cond = max(conds, key=lambda c: (n_taus(c), c == cond))
    taus = sorted({r.tau for r in select(runs, condition=cond, mode="delay")})
    xs, ys, counts, names = [], [], {}, []
    for t in taus:
        g = gaps_by_seed(runs, cond, tau=t, metric=metric)
        counts[t] = len(g)
        xs += [float(t)] * len(g)
        ys += list(g.values())
        names += [r.name for r in select(runs, condition=cond, mode="delay", tau=t)]
    levels = [t for t, c in counts.items() if c > 0]
    if len(levels) < 2:
        return missing(vid, "trend", claim, prediction,
                       f"needs paired gaps at >= 2 delays tau; have {levels}")
    alpha = select(runs, condition=cond)[0].alpha
    fit = fit_pl_tau_shape(xs, ys, alpha)
    n = min(counts[t] for t in levels)
    status, reason = decide(fit.scale_fixed_c, boundary=0.0, predicted="above", n_seeds=n)
    lo_t, hi_t = min(levels), max(levels)
    mean_gap = {t: float(np.mean([y for x, y in zip(xs, ys) if x == t])) for t in levels}
    measured = {"scale A (c = 1/2)": fit.scale_fixed_c, "free c": fit.c,
                "R^2 (c = 1/2)": fit.r2_fixed_c, "alpha": alpha,
                f"gap(tau={hi_t}) / gap(tau={lo_t}) measured":
                    mean_gap[hi_t] / mean_gap[lo_t] if mean_gap[lo_t] > 0 else float("nan"),
                f"gap(tau={hi_t}) / gap(tau={lo_t}) predicted":
                    float(pl_shape([hi_t], alpha)[0] / pl_shape([lo_t], alpha)[0])}
    return Verdict(id=vid, kind="trend", claim=claim, prediction=prediction, status=status,
                   reason=reason, n_seeds=n, measured=measured, runs=tuple(names),
                   plot="gap_vs_tau.png")


def _slope_check(runs: Sequence[RunRecord], opt: str, axis: str, transform, vid: str,
                 claim: str, prediction: str, xlabel: str, plot: str,
                 metric: str) -> Verdict:
    fam = best_family(runs, opt, axis, metric)
    xs, ys, counts, names = family_points(runs, fam, metric) if fam else ([], [], {}, [])
    levels = [v for v, c in counts.items() if c > 0]
    if len(levels) < 2:
        return missing(vid, "trend", claim, prediction,
                       f"needs paired gaps at >= 2 values of {axis}; have {len(levels)}")
    tx = np.array([transform(x, fam[x], runs) for x in xs])
    fit = fit_linear(np.stack([np.ones(len(tx)), tx], axis=1), ys)
    n = min(counts[v] for v in levels)
    status, reason = decide(fit.coef[1], boundary=0.0, predicted="above", n_seeds=n)
    means = {v: float(np.mean([y for x, y in zip(xs, ys) if x == v])) for v in levels}
    return Verdict(id=vid, kind="trend", claim=claim, prediction=prediction, status=status,
                   reason=reason, n_seeds=n,
                   measured={f"slope d gap / d {xlabel}": fit.coef[1],
                             **{f"mean gap at {axis}={v:g}": m for v, m in means.items()}},
                   runs=tuple(names), plot=plot)


def momentum_check(runs: Sequence[RunRecord], opt: str, metric: str = "final") -> Verdict:
    def factor(mom: float, cond: str, runs: Sequence[RunRecord]) -> float:
        return float(pl_shape([1.0], 1.0 - mom)[0])
    knob = "beta1" if opt == "adamw" else "momentum"
    return _slope_check(
        runs, opt, "momentum", factor, f"gap_vs_momentum[{opt}]",
        f"{optimizer_label(opt)}: more momentum ({knob}) gives a larger gap at fixed lr",
        "PL law at tau = 1: gap proportional to 3/2 + 2(1-alpha)/alpha, alpha = 1 - momentum",
        "PL factor", "gap_vs_momentum.png", metric)


def batch_check(runs: Sequence[RunRecord], opt: str, metric: str = "final") -> Verdict:
    def log2(b: float, cond: str, runs: Sequence[RunRecord]) -> float:
        return math.log2(b)
    return _slope_check(
        runs, opt, "batch_size", log2, f"gap_vs_batch[{opt}]",
        f"{optimizer_label(opt)}: larger batches expose the delay (smaller batches hide it)",
        "docs/theory.md trend 4: the noise terms (sigma) dominate small-batch runs, so the delay "
        "term shows more with larger batches", "log2 batch", "gap_vs_batch.png", metric)

