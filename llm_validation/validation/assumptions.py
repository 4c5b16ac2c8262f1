"""Assumption checks: the theorems' hypotheses measured along real training paths.

Each check reads the one-step-delayed runs (tau = 1, no EF) of an optimizer's base condition
(``validation.groups.base_conditions``), takes one number per seed from the logged statistics
(``llm_validation.training.stats``), and decides with a t interval over seeds (``verdict.decide``):

- A2 smoothness: ``smoothness_est`` = ||g_x - g_y||_* / ||x - y|| in the optimizer's norm. A
  single constant L describes the path when the estimates are not heavy-tailed: the per-seed
  spread p95 / median must stay below :data:`SPREAD_MAX`.
- A4 star-convexity along the path: the fraction of measured steps whose first-order
  star-convexity slack is negative (:data:`STAR_VIOLATION_MAX`).
- A1 noise: ``grad_noise_var`` (variance of the step's gradient, Euclidean, from its M
  microbatch gradients); bounded variance: spread p95 / median below :data:`SPREAD_MAX`.
- Momentum-error lemma (theory ``momentum_error``): the measured ||m_k - G||_* (G a large-batch
  gradient) over the lemma's bound at the measured constants, per step, averaged: below 1.
- EF criterion (docs/theory.md result 5): with the measured drift omega_bar of the EF run, omega_bar
  < 1 predicts that EF lowers the loss (gain > 0), omega_bar > 1 that it raises it.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from theory import THEOREMS

from llm_validation.config import optimizer_label
from llm_validation.validation.groups import ef_rows, select, series_stat
from llm_validation.validation.inference import Interval, t_interval
from llm_validation.validation.runs import RunRecord
from llm_validation.validation.verdict import (
    INCONCLUSIVE,
    Verdict,
    combine,
    decide,
    missing,
)

__all__ = [
    "SPREAD_MAX",
    "STAR_VIOLATION_MAX",
    "smoothness_check",
    "star_convexity_check",
    "noise_check",
    "momentum_error_check",
    "ef_criterion_check",
    "measured_constants",
]

#: A constant (L or sigma^2) "describes the path" when its 95th percentile is within one order
#: of magnitude of its median: then a bound that uses the p95 value overstates the typical
#: step by less than 10x. Heavier tails mean a global constant is not a faithful summary.
SPREAD_MAX = 10.0
#: Star-convexity "holds along the path" when fewer than 10% of measured steps violate the
#: first-order inequality; the theorems use it at every step, so this is already generous.
STAR_VIOLATION_MAX = 0.10
#: Quantile of the smoothness estimates used as "L" in evaluated bounds (a high quantile, not
#: the max: one outlier step would otherwise set the constant).
L_QUANTILE = 0.95


def _delayed(runs: Sequence[RunRecord], cond: str) -> list[RunRecord]:
    return select(runs, condition=cond, mode="delay", tau=1)


def _seeds_interval(values: dict[int, float]) -> Interval:
    return t_interval(list(values.values()))


def _spread_check(runs: Sequence[RunRecord], opt: str, cond: str, key: str, vid: str,
                  claim: str, prediction: str, label: str) -> Verdict:
    dl = _delayed(runs, cond)
    med = {r.seed: series_stat(r, key, np.median) for r in dl}
    p95 = {r.seed: series_stat(r, key, lambda v: np.quantile(v, 0.95)) for r in dl}
    seeds = [s for s in med if med[s] is not None and p95[s] is not None and med[s] > 0]
    if not seeds:
        return missing(vid, "assumption", claim, prediction,
                       f"no '{key}' statistics in the delayed {optimizer_label(opt)} runs")
    spread = {s: p95[s] / med[s] for s in seeds}
    iv = _seeds_interval(spread)
    status, reason = decide(iv, boundary=SPREAD_MAX, predicted="below", n_seeds=len(seeds))
    return Verdict(id=vid, kind="assumption", claim=claim, prediction=prediction,
                   status=status, reason=reason, n_seeds=len(seeds),
                   measured={f"median {label}": _seeds_interval({s: med[s] for s in seeds}),
                             f"p95 {label}": _seeds_interval({s: p95[s] for s in seeds}),
                             "spread p95/median": iv},
                   runs=tuple(r.name for r in dl))


def smoothness_check(runs: Sequence[RunRecord], opt: str, cond: str) -> Verdict:
    """A2: a single smoothness constant in the optimizer's norm describes the path."""
    v = _spread_check(
        runs, opt, cond, "smoothness_est", f"smoothness[{opt}]",
        f"{optimizer_label(opt)}: one smoothness constant L (in the optimizer's norm) describes "
        "the training path",
        f"A2: ||grad f(x) - grad f(y)||_* <= L ||x - y||; estimates spread p95/median < "
        f"{SPREAD_MAX:g}", "L_est")
    if v.status == INCONCLUSIVE and not v.measured:
        return v
    l2 = {r.seed: series_stat(r, "smoothness_est_l2", np.median) for r in _delayed(runs, cond)}
    l2 = {s: x for s, x in l2.items() if x is not None}
    if l2:
        v = Verdict(**{**v.__dict__, "measured": {**v.measured,
                                                  "median L_est (Euclidean)":
                                                      _seeds_interval(l2)}})
    return Verdict(**{**v.__dict__, "plot": "smoothness.png"})


def noise_check(runs: Sequence[RunRecord], opt: str, cond: str) -> Verdict:
    """A1: bounded gradient-noise variance along the path."""
    v = _spread_check(
        runs, opt, cond, "grad_noise_var", f"noise[{opt}]",
        f"{optimizer_label(opt)}: bounded gradient noise (one sigma describes the path)",
        f"A1: E||g - grad f||_2^2 <= sigma^2; estimates spread p95/median < {SPREAD_MAX:g}",
        "sigma^2")
    if not v.measured:
        return v
    med = v.measured["median sigma^2"]
    sigma = Interval(estimate=math.sqrt(max(med.estimate, 0.0)),
                     lo=math.sqrt(max(med.lo, 0.0)) if math.isfinite(med.lo) else 0.0,
                     hi=math.sqrt(med.hi) if math.isfinite(med.hi) else math.inf,
                     level=med.level, n=med.n, method=med.method)
    return Verdict(**{**v.__dict__, "measured": {**v.measured, "sigma (sqrt median)": sigma}})


def star_convexity_check(runs: Sequence[RunRecord], opt: str, cond: str) -> Verdict:
    """A4 along the path: share of measured steps whose star-convexity slack is negative."""
    vid = f"star_convexity[{opt}]"
    claim = f"{optimizer_label(opt)}: star-convexity holds along the path"
    prediction = ("A4 (first-order form at the read point, the later iterate as proxy "
                  f"minimizer): slack >= 0 at every step; accepted if < "
                  f"{STAR_VIOLATION_MAX:.0%} of steps violate it")
    dl = _delayed(runs, cond)
    frac = {r.seed: series_stat(r, "star_convex_slack", lambda v: float(np.mean(v < 0)))
            for r in dl}
    frac = {s: f for s, f in frac.items() if f is not None}
    if not frac:
        return missing(vid, "assumption", claim, prediction, "no 'star_convex_slack' statistics")
    iv = _seeds_interval(frac)
    if iv.bounded:   # a fraction: the t interval clipped to [0, 1] (the decision is unchanged
        iv = Interval(estimate=iv.estimate, lo=max(iv.lo, 0.0), hi=min(iv.hi, 1.0),  # for
                      level=iv.level, n=iv.n, method=iv.method)        # boundaries inside)
    status, reason = decide(iv, boundary=STAR_VIOLATION_MAX, predicted="below",
                            n_seeds=len(frac))
    return Verdict(id=vid, kind="assumption", claim=claim, prediction=prediction, status=status,
                   reason=reason, n_seeds=len(frac),
                   measured={"fraction of steps violating": iv},
                   runs=tuple(r.name for r in dl))


def measured_constants(run: RunRecord) -> dict[str, float] | None:
    """The constants of the theorems measured on one run (after the initial transient):
    L (p95 of smoothness_est), sigma (sqrt of the median gradient-noise variance), rho (median
    ||g||_*/||g||_2 along the path, A3's ratio where it matters), eta (median step length in
    the optimizer's norm over the last quarter), D = eta / beta with beta = lr_t * wd (the
    implicit radius of decoupled weight decay), alpha = 1 - momentum, s = 2 with weight decay
    else 1. None when a needed statistic is missing."""
    L = series_stat(run, "smoothness_est", lambda v: np.quantile(v, L_QUANTILE))
    var = series_stat(run, "grad_noise_var", np.median)
    steps, g2 = run.series("grad_norm")
    rho = None
    dual_steps, dual = run.series("grad_dual_norm")
    if dual.size:
        l2 = dict(zip(steps.tolist(), g2.tolist()))
        ratios = [d / l2[s] for s, d in zip(dual_steps.tolist(), dual.tolist())
                  if l2.get(s, 0) > 0]
        rho = float(np.median(ratios)) if ratios else None
    eta = series_stat(run, "update_primal_norm", np.median, skip=0.75)
    if None in (L, var, rho, eta) or L <= 0 or eta <= 0:
        return None
    out = {"L": L, "sigma": math.sqrt(max(var, 0.0)), "rho": max(rho, 1.0), "eta": eta,
           "alpha": run.alpha, "s": 2.0 if run.weight_decay > 0 else 1.0,
           "tau": float(run.tau)}
    lr_steps, lrs = run.series("lr")
    if run.weight_decay > 0 and lrs.size:
        late = lrs[lr_steps >= 0.75 * run.steps]
        beta = float(np.median(late)) * run.weight_decay if late.size else 0.0
        if beta > 0:
            out["beta"] = beta
            out["D"] = eta / beta
    return out


def momentum_error_check(runs: Sequence[RunRecord], opt: str, cond: str) -> Verdict:
    """The momentum-error lemma's bound at the measured constants vs the measured error."""
    vid = f"momentum_error[{opt}]"
    claim = f"{optimizer_label(opt)}: the momentum error stays below the momentum-error lemma's bound"
    prediction = ("E||m_k - grad f(p_k)||_* <= (1-alpha)^k rho sigma + sqrt(alpha) rho sigma "
                  "+ L eta (s (1-alpha)/alpha + s tau), at the measured L, sigma, rho, eta")
    try:
        thm = THEOREMS["momentum_error"]
    except (ImportError, KeyError) as exc:
        return missing(vid, "assumption", claim, prediction, f"theory unavailable ({exc})")
    ratios, bounds, measured_err = {}, {}, {}
    dl = _delayed(runs, cond)
    for r in dl:
        c = measured_constants(r)
        steps, err = r.series("momentum_error")
        keep = steps >= 1
        if c is None or not keep.any():
            continue
        b = np.array([thm.evaluate(k=int(k), L=c["L"], eta=c["eta"], alpha=c["alpha"],
                                   sigma=c["sigma"], rho=c["rho"], s=c["s"],
                                   omega_bar=c["s"] * c["tau"]) for k in steps[keep]])
        ratios[r.seed] = float(np.mean(err[keep] / b))
        bounds[r.seed] = float(np.mean(b))
        measured_err[r.seed] = float(np.mean(err[keep]))
    if not ratios:
        return missing(vid, "assumption", claim, prediction,
                       "no 'momentum_error' statistics (RunConfig.momentum_error_interval = 0?)"
                       " or constants missing")
    iv = _seeds_interval(ratios)
    status, reason = decide(iv, boundary=1.0, predicted="below", n_seeds=len(ratios))
    return Verdict(id=vid, kind="assumption", claim=claim, prediction=prediction,
                   status=status, reason=reason, n_seeds=len(ratios),
                   measured={"measured ||m - G||_*": _seeds_interval(measured_err),
                             "lemma bound": _seeds_interval(bounds),
                             "measured / bound": iv},
                   runs=tuple(r.name for r in dl))


def ef_criterion_check(runs: Sequence[RunRecord], opt: str, cond: str, lam: float = 1.0,
                       metric: str = "final") -> Verdict:
    """omega_bar < 1 predicts an EF gain, omega_bar > 1 a loss; compare with the measured gain."""
    vid = f"ef_criterion[{opt}]"
    claim = (f"{optimizer_label(opt)}: the EF criterion (drift omega_bar vs 1) predicts the sign of "
             f"EF's effect (lam = {lam:g})")
    prediction = ("docs/theory.md result 5: EF replaces tau = 1 by omega_bar = E||d_{k-1} - lam "
                  "d_{k-2}|| (in step units); omega_bar < 1 => EF lowers the loss")
    rows = ef_rows(runs, cond, lam, metric=metric)
    omega = {s: series_stat(e, "ef_drift", np.mean) for s, (_, _, e) in rows.items()}
    omega = {s: w for s, w in omega.items() if w is not None}
    if not omega:
        return missing(vid, "assumption", claim, prediction,
                       "no EF runs paired with delayed and sync runs (or no 'ef_drift')")
    gain = {s: rows[s][0] - rows[s][1] for s in omega}
    w_iv, g_iv = _seeds_interval(omega), _seeds_interval(gain)
    n = len(omega)
    w_status, w_reason = decide(w_iv, boundary=1.0, predicted="below", n_seeds=n)
    if w_status == INCONCLUSIVE:
        status, reason = INCONCLUSIVE, f"criterion undetermined: {w_reason}"
    else:
        predicted = "above" if w_status == "pass" else "below"
        status, reason = combine([decide(g_iv, boundary=0.0, predicted=predicted, n_seeds=n)])
        reason = (f"omega_bar {'<' if predicted == 'above' else '>'} 1 predicts EF "
                  f"{'helps' if predicted == 'above' else 'hurts'}; gain: {reason}")
    return Verdict(id=vid, kind="assumption", claim=claim, prediction=prediction, status=status,
                   reason=reason, n_seeds=n,
                   measured={"omega_bar": w_iv, "EF gain (val loss delayed - EF)": g_iv},
                   runs=tuple(rows[s][2].name for s in omega))
