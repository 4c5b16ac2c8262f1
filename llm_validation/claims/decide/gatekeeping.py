"""The paper's checks decided by gatekeeping: the central statements first, side readings after.

A flat Holm family over every leaf check of a ledger ties each verdict to the number of checks
the ledger carries: the same ``t`` over 5 seeds decides in a 9-check family and not in a
64-check one. :func:`decide_gated` spends the family-wise level on the claims' central
statements only; the leaves of a claim's side readings and of the project's readings get a
share of the level only once their claim's central statement has been decided (its first
check rejected), so adding side readings to a ledger never changes a central verdict.

Algorithm
    1. Collect the leaves of the statement checks (depth first, as
       :func:`~llm_validation.claims.decide.familywise.decide_family` does). Leaves without a
       p-value (``divergence``, too few seeds, a group not measured) stay outside and keep
       their status.
    2. The **primary** hypotheses are the leaves of the central statements (one per claim).
       Each leaf of a claim's side or project reading is a **child** of its claim's central
       statement: of the first of its leaves with a p-value (the statement's main contrast).
       A claim whose central statement has no leaf with a p-value gives its side readings no
       level: they are not tested (inconclusive, saying why). A section without central
       statements (the theory's) makes every leaf primary: Holm.
    3. The graph of :func:`llm_validation.validation.graphical.gatekeeping_graph` (primaries at
       ``1/m`` each, children at 0; a rejected primary passes its weight to its children, one
       without children to the other primaries) and its adjusted p-values
       (:func:`~llm_validation.validation.graphical.graph_adjusted`) of ``p_raw = min(1, LOOKS
       p_nom)`` (:mod:`~llm_validation.claims.decide.familywise`, step 2).
    4. A leaf with adjusted ``p_adj <= alpha`` is decided at level ``1 - l / LOOKS`` with ``l
       = alpha p_raw / p_adj``: ``p_raw <= l`` (so the interval excludes what it must) and
       ``l`` is at most the weight ``alpha w_j`` it was rejected at (``p_adj >= p_raw / w_j``),
       so its direction is read at a level the procedure spent on it. With no children the
       procedure is Holm and ``l`` is at most Holm's level for its rank. A leaf not rejected
       is inconclusive, its reason giving both p-values and its per-check reading.
    5. Aggregates are rebuilt from their new parts
       (:func:`~llm_validation.claims.decide.familywise.rebuild`).

Assumptions
    Those of :func:`~llm_validation.claims.decide.familywise.decide_family` (each ``p_nom``
    valid; reading a rejected leaf's direction rests on Shaffer / Finner for independent t
    statistics and on the simulation for the ledger's shared arms).

Guarantee
    Strong family-wise control at ``alpha`` over all the leaves under any dependence (Bretz
    et al. 2009, Theorem 1). A central leaf's adjusted p-value depends on the other central
    leaves and on which central statements have side readings, never on how many. Simulated
    on the claims' own structure (``tests/llm_validation/claims/test_gatekeeping.py``: the
    n46k ledger's 66 paper leaves, 34 of them central): family-wise error 0.017 at the
    global null and 0.026 with every central effect real and every side reading null (alpha
    5%); testing the side readings without their parent (each at the full level) gives 0.55.

Reference
    F. Bretz, W. Maurer, W. Brannath, M. Posch (2009), Statistics in Medicine 28; A.
    Dmitrienko, A. C. Tamhane (2007), Pharmaceutical Statistics 6.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from llm_validation.claims.decide.checks import Check, at_level
from llm_validation.claims.decide.familywise import (LOOKS, leaves, outside_reason, rebuild,
                                                     redecide, status_counts)
from llm_validation.claims.decide.pvalues import decidable, nominal_pvalue
from llm_validation.validation.graphical import gatekeeping_graph, graph_adjusted
from llm_validation.validation.verdict import INCONCLUSIVE

__all__ = ["METHOD", "gated_structure", "gated_levels", "decide_gated"]

#: The method's name in a leaf's params and in the summary.
METHOD = "gatekeeping"


def gated_structure(groups: Sequence[str], central: Sequence[bool], sizes: Sequence[int],
                    usable: Sequence[bool]) -> tuple[list[int], dict[int, int], list[int]]:
    """The gatekeeping structure of a ledger's leaves.

    ``groups[i]``, ``central[i]``, ``sizes[i]``: statement ``i``'s claim, whether it is its
    claim's central statement, its number of leaves; ``usable[k]``: leaf ``k`` (over all
    statements, depth first) has a p-value. Returns (the primary leaves, child leaf -> parent
    leaf, the usable leaves left untested: their claim's central statement has none). With no
    central statement at all every usable leaf is primary."""
    first, start = [], 0
    for n in sizes:
        first.append(start)
        start += n
    if start != len(usable):
        raise ValueError(f"gated_structure: {start} leaves by the sizes, {len(usable)} usable")
    of_stmt = [i for i, n in enumerate(sizes) for _ in range(n)]
    if not any(central):
        return [k for k, u in enumerate(usable) if u], {}, []
    head: dict[str, int | None] = {}
    for i, g in enumerate(groups):
        if central[i]:
            head[g] = next((k for k in range(first[i], first[i] + sizes[i]) if usable[k]), None)
    primary = [k for k, u in enumerate(usable) if u and central[of_stmt[k]]]
    parent, untested = {}, []
    for k, u in enumerate(usable):
        if not u or central[of_stmt[k]]:
            continue
        p = head.get(groups[of_stmt[k]])
        if p is None:
            untested.append(k)
        else:
            parent[k] = p
    return primary, parent, untested


def gated_levels(p_raw: Sequence[float], primary: Sequence[int], parent: dict[int, int],
                 alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(adjusted p-values, decision levels ``l``; NaN where not rejected) of the hypotheses
    ``primary`` + ``parent``'s children, indexed like ``p_raw`` (NaN for the others)."""
    names = {k: f"h{k}" for k in [*primary, *parent]}
    graph = gatekeeping_graph([names[k] for k in primary],
                              {names[c]: names[p] for c, p in parent.items()})
    adj_by = graph_adjusted(graph, {names[k]: float(p_raw[k]) for k in names})
    adj = np.full(len(p_raw), np.nan)
    level = np.full(len(p_raw), np.nan)
    for k, n in names.items():
        adj[k] = adj_by[n]
        if adj[k] <= alpha:
            # p_raw = 0 is decided at any level: the smallest primary share stands in
            level[k] = alpha * p_raw[k] / adj[k] if adj[k] > 0 else alpha / len(primary)
    return adj, level


def _untested(c: Check, per: Check, parent_label: str) -> Check:
    """A side reading's leaf that gets no level (its central statement has no p-value)."""
    return Check(**{**per.__dict__, "status": INCONCLUSIVE, "reason": (
        f"not tested: a side reading is tested only once its claim's central statement is "
        f"decided, and {parent_label}; per check: {per.status}"),
        "params": {**per.params, "method": METHOD}})


def decide_gated(checks: Sequence[Check], groups: Sequence[str], central: Sequence[bool],
                 alpha: float = 0.05, *, looks: float = LOOKS
                 ) -> tuple[list[Check], dict[str, Any]]:
    """The statement ``checks`` (``groups``: each one's claim; ``central``: whether it is its
    claim's central statement) with their leaves decided by gatekeeping (module docstring).

    Returns the rebuilt checks in the order given and a summary: ``method``, ``alpha``,
    ``looks``, ``family_size`` (the leaves with a p-value), ``primary_size`` (those of the
    central statements), ``untested``, ``decided`` and ``per_check`` (per status), and
    ``outside`` (label, kind, why, for each leaf without a p-value)."""
    if not (len(checks) == len(groups) == len(central)):
        raise ValueError("decide_gated: checks, groups and central need one entry each")
    if not 0 < alpha < 1 or not looks >= 1:
        raise ValueError(f"decide_gated: alpha={alpha!r} must be in (0, 1), looks={looks!r} "
                         ">= 1")
    per_stmt = [leaves(c) for c in checks]
    flat = [leaf for ls in per_stmt for leaf in ls]
    usable = [decidable(c) for c in flat]
    primary, parent, untested = gated_structure(groups, central, [len(x) for x in per_stmt],
                                                usable)
    inside = [k for k, u in enumerate(usable) if u]
    p_raw = np.ones(len(flat))
    for k in inside:
        p_raw[k] = min(1.0, looks * float(nominal_pvalue(flat[k])))
    adj, level = (gated_levels(p_raw, primary, parent, alpha) if primary
                  else (np.full(len(flat), np.nan), np.full(len(flat), np.nan)))
    per_check = {k: at_level(flat[k], 1.0 - alpha / looks) for k in inside}
    new = {}
    for k in inside:
        if k in untested:
            new[k] = _untested(flat[k], per_check[k], "its central statement has no check "
                                                       "with a p-value")
            continue
        out = redecide(flat[k], per_check[k], p_raw=float(p_raw[k]), p_adj=float(adj[k]),
                       level=float(level[k]), alpha=alpha, method=METHOD, k=len(inside),
                       looks=looks)
        if k in parent and np.isnan(level[k]) and np.isnan(level[parent[k]]):
            out = out.with_reason(f"{out.reason} (gated: its central statement's check "
                                  f"'{flat[parent[k]].label}' was not decided)")
        extra = {"primary_size": len(primary), "role": "primary" if k in primary else "child"}
        new[k] = Check(**{**out.__dict__, "params": {**out.params, **extra}})
    counter = [0]
    out_checks = [rebuild(c, new, counter) for c in checks]
    summary = {"method": METHOD, "alpha": alpha, "looks": looks, "family_size": len(inside),
               "primary_size": len(primary), "untested": len(untested),
               "decided": status_counts(list(new.values())),
               "per_check": status_counts(list(per_check.values())),
               "outside": [{"label": c.label, "kind": c.kind, "why": outside_reason(c)}
                           for k, c in enumerate(flat) if k not in new]}
    return out_checks, summary
