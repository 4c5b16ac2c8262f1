"""The delay-law ledger's statements and their verdicts under one gatekeeping family.

Primary statements (the paper's sentences, plainest reading, on the compute-equivalent lag or
the gap share, pooled over the sizes' shared-step cells, paired by seed):

- ``P1`` "AdamW degrades substantially under one-step delay; Muon's final gap is much
  smaller": per seed, the mean over sizes of ``lag(AdamW 2BW) - 2 lag(Muon 2BW)`` > 0 (Muon's
  lag less than half of AdamW's).
- ``P2a`` / ``P2b`` "Update-level EF cuts the gap by more than half", AdamW / Muon: per seed,
  the mean over the sizes with EF arms of ``share(2BW) - 2 share(2BW + EF)`` > 0.

Side readings, each tested only after its parent passes (:mod:`llm_validation.validation.
graphical`): ``P1@<size>`` and ``P2a@<size>`` / ``P2b@<size>`` at each size; ``P1-substantial``
(AdamW's lag above the paper's 0.01 nats as a lag, :data:`PAPER_LAG`); the project's readings
``N-adamw`` / ``N-muon`` (the lag's exponent in N at the shared step count differs from 0) and
``S-adamw`` / ``S-muon`` (its exponent in the step count at fixed N differs from 0), all under
``P1``.

Algorithm
    Each statement reduces to one value per seed ``x_s``; its p-value is the two-sided one-sample
    t p-value of ``mean x = 0`` (``n - 1`` degrees of freedom); the graph's adjusted p-values
    decide at :data:`ALPHA`: a rejected statement passes when ``mean x`` lies on the predicted
    side and fails otherwise; a statement not rejected is inconclusive. The sign-flip p-value
    (:mod:`llm_validation.validation.permutation`) is printed beside each t p-value with its
    floor (1/16 at 4 seeds), never used to decide.

Assumptions
    Seeds are independent replicates; the per-seed values are approximately normal (the
    sign-flip p-value shows where that assumption carries a verdict).

Guarantee
    Family-wise error (type I) at most :data:`ALPHA` over every statement under any dependence
    (the graphical procedure); direction errors as Holm's with directional decisions
    (:mod:`llm_validation.validation.multiplicity`).

Reference
    Bretz et al. (2009); the paper's Figs. 2-3 sentences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy import stats

from llm_validation.claims.decide.regime import PAPER_LAG_FRACTION
from llm_validation.delay_law.measure import CellCosts
from llm_validation.validation.graphical import gatekeeping_graph, graph_adjusted
from llm_validation.validation.permutation import min_pvalue, sign_flip_pvalue
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, PASS

__all__ = ["ALPHA", "PAPER_LAG", "Statement", "PRIMARY", "Verdict", "statements",
           "statement_values", "decide"]

#: Family-wise error of the whole ledger.
ALPHA = 0.05
#: The paper's 0.01 nats as a compute-equivalent lag at SmolLM-135M (Chinchilla's data term).
PAPER_LAG = PAPER_LAG_FRACTION


@dataclass(frozen=True, kw_only=True)
class Statement:
    """One statement of the ledger."""

    id: str
    text: str
    """What is claimed, in words."""
    rule: str
    """The per-seed value and its predicted side."""
    parent: str | None = None
    """The statement that must pass first (None: primary)."""
    reading: str = "paper"
    """``paper`` or ``project``."""


def _size_children(parent: str, text: str, sizes: Sequence[str]) -> list[Statement]:
    return [Statement(id=f"{parent}@{s}", text=f"{text} (at {s})", rule=f"as {parent}, at "
                      f"{s}'s shared-step cell only", parent=parent) for s in sizes]


def statements(sizes: Sequence[str], ef_sizes: Sequence[str]) -> tuple[Statement, ...]:
    """Every statement of the ledger for the design's sizes."""
    p1 = "AdamW degrades substantially under one-step delay; Muon's final gap is much smaller"
    ef = "Update-level EF (lam = 1) cuts the gap by more than half"
    out = [Statement(id="P1", text=p1, rule="mean over sizes of lag(AdamW) - 2 lag(Muon) > 0"),
           Statement(id="P2a", text=ef + " (AdamW)", rule="mean over sizes of share(2BW) - 2 "
                     "share(2BW + EF) > 0, AdamW"),
           Statement(id="P2b", text=ef + " (Muon)", rule="mean over sizes of share(2BW) - 2 "
                     "share(2BW + EF) > 0, Muon")]
    out += _size_children("P1", p1, sizes)
    out += _size_children("P2a", ef + " (AdamW)", ef_sizes)
    out += _size_children("P2b", ef + " (Muon)", ef_sizes)
    out.append(Statement(id="P1-substantial", text="AdamW's delay cost exceeds the paper's "
                         "0.01 nats", rule=f"mean over sizes of lag(AdamW) - {PAPER_LAG:.4f} > 0",
                         parent="P1"))
    for o in ("adamw", "muon"):
        out.append(Statement(id=f"N-{o}", text=f"{o}'s lag depends on the model size at a fixed "
                             "step count", rule="per-seed slope of log lag on log N over the "
                             "shared-step cells != 0", parent="P1", reading="project"))
        out.append(Statement(id=f"S-{o}", text=f"{o}'s lag depends on the step count at a "
                             "fixed size", rule="per-seed slope of log lag on log steps within "
                             "each size, averaged over sizes, != 0", parent="P1",
                             reading="project"))
    return tuple(out)


#: The primary statements.
PRIMARY = ("P1", "P2a", "P2b")
#: Statements whose predicted side is below 0 (every other predicts above; the project's
#: readings are two-sided and report the sign they find).
_TWO_SIDED = ("N-", "S-")


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    x, y = np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float))
    return float(np.polyfit(x, y, 1)[0]) if len(set(xs)) >= 2 else math.nan


def _mean_over(per_cell: Sequence[Mapping[int, float]]) -> dict[int, float]:
    """Per seed, the mean over cells (a seed missing in a cell is left out of every cell)."""
    seeds = set.intersection(*(set(m) for m in per_cell)) if per_cell else set()
    return {s: float(np.mean([m[s] for m in per_cell])) for s in sorted(seeds)}


def statement_values(shared: Mapping[str, CellCosts], by_size: Mapping[str, Sequence[CellCosts]]
                     ) -> dict[str, dict[int, float]]:
    """Per statement, the per-seed values (``shared``: size -> its shared-step cell;
    ``by_size``: size -> its cells at the tuned lr)."""
    out: dict[str, dict[int, float]] = {}

    def p1(c: CellCosts) -> dict[int, float]:
        a, m = c.lag_fraction("adamw/2bw"), c.lag_fraction("muon/2bw")
        return {s: a[s] - 2 * m[s] for s in a if s in m and math.isfinite(a[s] - 2 * m[s])}

    def p2(c: CellCosts, o: str) -> dict[int, float]:
        g, e = c.gap_share.get(f"{o}/2bw", {}), c.gap_share.get(f"{o}/2bw+ef", {})
        return {s: g[s] - 2 * e[s] for s in g if s in e}

    ef_sizes = [s for s, c in shared.items() if "adamw/2bw+ef" in c.cell.arms]
    out["P1"] = _mean_over([p1(c) for c in shared.values()])
    for sid, o in (("P2a", "adamw"), ("P2b", "muon")):
        out[sid] = _mean_over([p2(shared[s], o) for s in ef_sizes])
        for s in ef_sizes:
            out[f"{sid}@{s}"] = p2(shared[s], o)
    for s, c in shared.items():
        out[f"P1@{s}"] = p1(c)
    lag_a = [{k: v for k, v in c.lag_fraction("adamw/2bw").items() if math.isfinite(v)}
             for c in shared.values()]
    out["P1-substantial"] = {s: v - PAPER_LAG for s, v in _mean_over(lag_a).items()}
    sizes = list(shared)
    for o in ("adamw", "muon"):
        per = [shared[s].lag_fraction(f"{o}/2bw") for s in sizes]
        seeds = set.intersection(*(set(m) for m in per)) if per else set()
        out[f"N-{o}"] = {k: _slope([shared[s].cell.n_params for s in sizes],
                                   [m[k] for m in per]) for k in sorted(seeds)
                         if all(m[k] > 0 for m in per)}
        slopes: dict[int, list[float]] = {}
        for cells in by_size.values():
            per = [c.lag_fraction(f"{o}/2bw") for c in cells]
            for k in set.intersection(*(set(m) for m in per)) if per else set():
                if all(m[k] > 0 for m in per) and len(cells) >= 2:
                    slopes.setdefault(k, []).append(_slope([c.cell.steps for c in cells],
                                                           [m[k] for m in per]))
        out[f"S-{o}"] = {k: float(np.mean(v)) for k, v in slopes.items()}
    return out


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """One statement's decision."""

    id: str
    status: str
    mean: float
    n: int
    p_t: float
    """Two-sided t p-value (what the family decides on)."""
    p_adjusted: float
    p_sign_flip: float
    """Two-sided sign-flip p-value, beside (not deciding)."""
    p_floor: float
    """The sign-flip test's smallest possible p-value at ``n`` seeds."""
    reason: str


#: Relative spread below which per-seed values count as identical (float noise of equal
#: slopes): the t statistic is then undefined, and the p-value is 0 for a non-zero mean.
SAME_RTOL = 1e-9


def _t_p(x: Sequence[float]) -> float:
    """Two-sided one-sample t p-value of mean 0 (1 with fewer than two values)."""
    x = np.asarray([v for v in x if math.isfinite(v)], float)
    if x.size < 2:
        return 1.0
    scale = max(float(np.abs(x).max()), 1e-12)      # below 1e-12: zero, not a signal
    if np.std(x, ddof=1) <= SAME_RTOL * scale:
        return 0.0 if abs(x.mean()) > SAME_RTOL * scale else 1.0
    return float(stats.ttest_1samp(x, 0.0).pvalue)


def decide(stmts: Sequence[Statement], values: Mapping[str, Mapping[int, float]],
           alpha: float = ALPHA) -> dict[str, Verdict]:
    """Every statement's verdict (see the module docstring)."""
    graph = gatekeeping_graph([s.id for s in stmts if s.parent is None],
                              {s.id: s.parent for s in stmts if s.parent is not None})
    raw = {s.id: _t_p(list(values.get(s.id, {}).values())) for s in stmts}
    adj = graph_adjusted(graph, raw)
    out = {}
    for s in stmts:
        x = [v for v in values.get(s.id, {}).values() if math.isfinite(v)]
        n, mean = len(x), float(np.mean(x)) if x else math.nan
        two = s.id.startswith(_TWO_SIDED)
        if n < 2:
            status, reason = INCONCLUSIVE, f"{n} seed(s) with a value: not measured"
        elif adj[s.id] <= alpha:
            status = PASS if (mean > 0 or two) else FAIL
            reason = (f"mean {mean:+.4g} over {n} seeds, adjusted p {adj[s.id]:.3g} <= {alpha}"
                      + (f" ({'positive' if mean > 0 else 'negative'})" if two else ""))
        else:
            status = INCONCLUSIVE
            gate = (f"; its parent {s.parent} did not pass" if s.parent and
                    adj[s.parent] > alpha else "")
            reason = f"mean {mean:+.4g} over {n} seeds, adjusted p {adj[s.id]:.3g} > {alpha}{gate}"
        out[s.id] = Verdict(id=s.id, status=status, mean=mean, n=n, p_t=raw[s.id],
                            p_adjusted=adj[s.id],
                            p_sign_flip=sign_flip_pvalue(x, alternative="two-sided")
                            if n else math.nan,
                            p_floor=min_pvalue(n, "two-sided") if n else math.nan, reason=reason)
    return out
