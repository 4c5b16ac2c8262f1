"""Per-optimizer answers: what the delay costs each optimizer, what EF gives back, and how the
optimizers present compare, whichever they are (AdamW, Muon, Lion, Adam, SGD, ...).

- ``delay_cost[opt]`` (a verdict, kind ``trend``): for every optimizer with synchronous and
  one-step-delayed runs paired by seed (its base condition, ``groups.base_conditions``), the
  gap (delayed minus synchronous validation loss) with its paired t interval over seeds, and the
  lag (the share of the run's steps the delayed run is behind, ``validation.lag``); the
  theory predicts a cost (gap > 0): pass when the interval lies above 0, fail when below, else
  inconclusive. When EF runs exist, EF's share of the gap removed (Fieller's interval of the
  ratio of paired means, ``contrast.share_removed_interval``) per EF coefficient is reported.
  The answer in one line: "the delay costs X nats (Y% of the run); EF removes Z% of it".
- :func:`comparisons`: every pair of optimizers with measured gaps, the difference of their
  gaps (Welch's interval, as ``gap_adamw_gt_muon``) and what it says. Descriptive, not
  verdicts: the theory predicts a direction for AdamW against Muon only (that verdict stays);
  for any other pair the 95% interval says whether a difference is measured and which way.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

from llm_validation.config import optimizer_label
from llm_validation.validation.contrast import share_removed_interval
from llm_validation.validation.groups import ef_rows, gaps_by_seed, select
from llm_validation.validation.inference import Interval, level_text, t_interval, welch_interval
from llm_validation.validation.lag import run_lag
from llm_validation.validation.runs import RunRecord, sync_partner
from llm_validation.validation.verdict import MIN_SEEDS, Verdict, decide, missing

__all__ = ["delay_cost_check", "comparisons", "answer_text"]


def _pct(iv: Interval) -> str:
    def f(x: float) -> str:
        return "nan" if math.isnan(x) else f"{x:+.1%}" if x < 0 else f"{x:.1%}"
    if not iv.bounded:
        return f"{f(iv.estimate)} [n={iv.n}: no interval]"
    return f"{f(iv.estimate)} [{f(iv.lo)}, {f(iv.hi)}]"


def answer_text(gap: Interval, lag: Interval | None,
                shares: dict[float, Interval]) -> str:
    """"the delay costs X nats (Y% of the run); EF removes Z% of it" from the intervals."""
    text = f"the delay costs {gap.fmt()} nats"
    if lag is not None:
        text += f" ({_pct(lag)} of the run's steps)"
    for lam, share in shares.items():
        ef = "EF" if lam == 1.0 else f"EF (lam = {lam:g})"
        text += f"; {ef} removes {_pct(share)} of it"
    return text


def delay_cost_check(runs: Sequence[RunRecord], opt: str, cond: str,
                     metric: str = "final") -> Verdict:
    """``delay_cost[opt]``: the gap, the lag and EF's share at ``opt``'s base condition."""
    vid = f"delay_cost[{opt}]"
    name = optimizer_label(opt)
    claim = f"{name}: what the one-step delay (2BW) costs, and EF's share of it"
    prediction = ("the delay adds a positive term to the loss (gap > 0, docs/theory.md); EF "
                  "removes part of it when consecutive updates are aligned")
    delayed = select(runs, condition=cond, mode="delay", tau=1)
    gaps = gaps_by_seed(runs, cond, metric=metric)
    if not gaps:
        return missing(vid, "trend", claim, prediction,
                       f"needs sync and 2bw runs of {name} paired by seed")
    gap_iv = t_interval(list(gaps.values()))
    status, reason = decide(gap_iv, boundary=0.0, predicted="above", n_seeds=len(gaps))
    used = [r for r in delayed if r.seed in gaps]
    names = [r.name for r in used] + [p.name for r in used if (p := sync_partner(r, runs))]
    lags = {}
    for r in used:
        lg = run_lag(r, sync_partner(r, runs))
        if lg is not None and math.isfinite(lg.fraction):
            lags[r.seed] = lg.fraction
    lag_iv = t_interval(list(lags.values())) if lags else None
    measured: dict[str, Any] = {"gap (delayed - sync)": gap_iv}
    if lag_iv is not None:
        measured["lag: share of the run's steps behind"] = lag_iv
    shares: dict[float, Interval] = {}
    for lam in sorted({r.lam for r in select(runs, condition=cond, mode="ef", tau=1)}):
        rows = ef_rows(runs, cond, lam, metric=metric)
        if not rows:
            continue
        shares[lam] = share_removed_interval({s: g0 for s, (g0, _, _) in rows.items()},
                                             {s: g1 for s, (_, g1, _) in rows.items()})
        measured[f"EF (lam = {lam:g}) share of the gap removed"] = shares[lam]
        names += [e.name for _, _, e in rows.values()]
    measured["answer"] = answer_text(gap_iv, lag_iv, shares)
    return Verdict(id=vid, kind="trend", claim=claim, prediction=prediction, status=status,
                   reason=reason, n_seeds=len(gaps), measured=measured,
                   runs=tuple(dict.fromkeys(names)), plot="loss_curves.png")


def comparisons(runs: Sequence[RunRecord], base: dict[str, str], opts: Sequence[str],
                metric: str = "final") -> list[dict[str, Any]]:
    """Every pair of ``opts`` (in that order) with measured gaps at their base conditions: the
    gaps, Welch's interval of their difference and its reading (module docstring)."""
    gaps = {o: gaps_by_seed(runs, base[o], metric=metric) for o in opts if o in base}
    gaps = {o: g for o, g in gaps.items() if g}
    out = []
    for a, b in itertools.combinations(list(gaps), 2):
        diff = welch_interval(list(gaps[a].values()), list(gaps[b].values()))
        n = min(len(gaps[a]), len(gaps[b]))
        la, lb = optimizer_label(a), optimizer_label(b)
        where = f"the {level_text(diff.level)} interval of the difference"
        if n < MIN_SEEDS or not diff.bounded:
            reading = f"undecided: {n} seed(s); a comparison needs >= {MIN_SEEDS}"
        elif diff.above(0.0):
            reading = f"the delay costs {la} more than {lb} ({where} lies above 0)"
        elif diff.below(0.0):
            reading = f"the delay costs {lb} more than {la} ({where} lies below 0)"
        else:
            reading = f"no difference measured ({where} overlaps 0)"
        out.append({"a": a, "b": b, "n_seeds": n,
                    f"gap {la}": t_interval(list(gaps[a].values())),
                    f"gap {lb}": t_interval(list(gaps[b].values())),
                    f"difference {la} - {lb}": diff, "reading": reading})
    return out
