"""Bound checks: a theorem's bound at the measured constants next to the measured gap, and the
real pipeline next to its emulation.

- ``star_convex_delay_term[opt]``: theory ``star_convex_delayed`` evaluated at the run's
  measured constants (``validation.assumptions.measured_constants``) at tau and at tau = 0; the
  difference (the delay's contribution to the loss floor, 4 L eta D tau) must be above the
  measured gap for the bound to be valid. Each seed's gap is read against its own seed's bound:
  the verdict decides the ratio gap / bound over seeds against 1 (pass: the interval lies below
  1, the measurement under the bound; fail: above 1, the measurement over the bound), as the
  momentum-error lemma's check does. How loose the bound is (bound / gap) is reported, never
  decided: a bound 1000 times the gap is a valid bound. The bound's per-seed values are
  reported as their mean and smallest value (a bound is not a sample mean whose t interval
  would mean anything: it may dip below zero while every seed's bound is positive).
- ``pipeline_matches_emulation``: every run on the real PipeDream-2BW pipeline against the
  emulated run with the same config and seed; the runtime's contract is bitwise equality of
  the per-step losses on CPU, checked to :data:`PIPELINE_LOSS_TOL`.
"""

from __future__ import annotations

import math
from typing import Sequence

from llm_validation.config import optimizer_label

import numpy as np

from theory import THEOREMS

from llm_validation.validation.assumptions import measured_constants
from llm_validation.validation.groups import select
from llm_validation.validation.inference import t_interval
from llm_validation.validation.runs import RunRecord, sync_partner
from llm_validation.validation.verdict import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    Verdict,
    decide,
    missing,
)

__all__ = ["PIPELINE_LOSS_TOL", "star_convex_delay_term", "star_convex_check", "pipeline_check"]

#: The 2BW runtime promises bitwise-equal losses to the emulation on CPU; any difference at
#: all is a mismatch (0.0), but float32 losses printed and parsed through JSON round-trip
#: exactly, so no tolerance is needed.
PIPELINE_LOSS_TOL = 0.0



def star_convex_delay_term(c: dict[str, float], tau: int) -> float:
    """Bound(tau) - bound(0) of theory ``star_convex_delayed`` at the constants ``c`` (needs
    ``beta``); the terms that do not depend on tau cancel, whatever values they take."""
    thm = THEOREMS["star_convex_delayed"]
    common = dict(K=1, L=c["L"], eta=c["eta"], alpha=c["alpha"], beta=c["beta"],
                  sigma=c["sigma"], rho=c["rho"], r0=0.0)
    return thm.evaluate(tau=tau, **common) - thm.evaluate(tau=0, **common)


def star_convex_check(runs: Sequence[RunRecord], opt: str, cond: str,
                      metric: str = "final") -> Verdict:
    vid = f"star_convex_delay_term[{opt}]"
    claim = (f"{optimizer_label(opt)}: the star-convex theorem's delay term at the measured constants "
             "bounds the measured gap")
    prediction = ("star_convex_delayed: the delay adds 4 L eta D tau to the loss floor "
                  "(D = eta/beta); valid when the measured gap lies under it, however loose")
    try:
        THEOREMS["star_convex_delayed"]
    except (ImportError, KeyError) as exc:
        return missing(vid, "bound", claim, prediction, f"theory unavailable ({exc})")
    bound, gap, names = {}, {}, []
    for r in select(runs, condition=cond, mode="delay", tau=1):
        c = measured_constants(r)
        partner = sync_partner(r, runs)
        if c is None or "beta" not in c or partner is None:
            continue
        a, b = r.val_metric(metric), partner.val_metric(metric)
        if a is None or b is None:
            continue
        try:
            b_seed = star_convex_delay_term(c, r.tau)
        except ValueError:        # a measured constant outside the theorem's domain
            continue
        if not b_seed > 0:        # no delay term at these constants: nothing to bound with
            continue
        bound[r.seed] = b_seed
        gap[r.seed] = a - b
        names.append(r.name)
    if not bound:
        return missing(vid, "bound", claim, prediction,
                       "needs delayed runs with weight decay > 0 and their statistics")
    gap_iv = t_interval(list(gap.values()))
    ratio_iv = t_interval([gap[s] / bound[s] for s in gap])
    status, reason = decide(ratio_iv, boundary=1.0, predicted="below", n_seeds=len(gap))
    reason = f"measured gap / bound: {reason}"
    mean_bound = float(np.mean(list(bound.values())))
    looseness = mean_bound / gap_iv.estimate if gap_iv.estimate > 0 else math.inf
    return Verdict(id=vid, kind="bound", claim=claim, prediction=prediction, status=status,
                   reason=reason, n_seeds=len(gap),
                   measured={"measured gap": gap_iv,
                             "bound's delay term, mean over seeds": mean_bound,
                             "bound's delay term, smallest seed": min(bound.values()),
                             "measured gap / bound": ratio_iv,
                             "looseness bound / gap": looseness},
                   runs=tuple(names))


def pipeline_check(runs: Sequence[RunRecord]) -> Verdict:
    vid = "pipeline_matches_emulation"
    claim = "the real 2-stage PipeDream-2BW pipeline reproduces the emulated delay"
    prediction = ("2BW uses W(t-1) for batch t, i.e. W(t+1) = W(t) - u(grad f(W(t-1))): the "
                  "same trajectory as the emulation (bitwise on CPU)")
    pairs = []
    for p in select(runs, pipeline="2bw", completed=True):
        twins = [r for r in select(runs, condition=p.condition, mode=p.mode, tau=p.tau,
                                   lam=p.lam) if r.seed == p.seed]
        if twins:
            pairs.append((p, twins[0]))
    if not pairs:
        return missing(vid, "assumption", claim, prediction,
                       "needs a run with pipeline='2bw' and its emulated twin (same config "
                       "and seed)")
    worst, val_diff = 0.0, []
    for p, e in pairs:
        _, lp = p.series("loss")
        _, le = e.series("loss")
        m = min(lp.size, le.size)
        if lp.size != le.size:
            worst = math.inf
        if m:
            worst = max(worst, float(np.max(np.abs(lp[:m] - le[:m]))))
        val_diff.append(abs(p.final_val - e.final_val))
    status = PASS if worst <= PIPELINE_LOSS_TOL else FAIL
    reason = (f"max |loss difference| over {len(pairs)} pair(s) and all steps = {worst:.3g} "
              f"({'<=' if status == PASS else '>'} {PIPELINE_LOSS_TOL:g}); an exact identity, "
              "so one seed suffices")
    if not all(p.steps == e.steps for p, e in pairs):
        status, reason = INCONCLUSIVE, "pipeline and emulated runs have different lengths"
    return Verdict(id=vid, kind="assumption", claim=claim, prediction=prediction,
                   status=status, reason=reason, n_seeds=len(pairs),
                   measured={"max |loss difference|": worst,
                             "max |final val loss difference|": max(val_diff)},
                   runs=tuple(x.name for pair in pairs for x in pair))
