"""Gatekeeping: a primary family decided first, side readings only after their parent passes.

A ledger's central statements (AdamW degrades more than Muon, EF removes more than half the
gap, ...) must not lose power because the ledger also carries side readings (the project's own
readings, secondary contrasts). Holm over every check ties each verdict to the family's size:
the same ``t`` over 5 seeds passes in a 9-check family and not in a 64-check one. A gatekeeping
procedure spends the level on the primary statements only; a side reading gets a share of the
level only when its parent statement has been rejected (passed), so adding side readings never
changes a primary verdict.

:func:`gatekeeping_graph` builds such a procedure as a graph (weights and transitions) and
:func:`graph_adjusted` gives every hypothesis's adjusted p-value under it.

Algorithm
    The graphical approach of Bretz et al. (2009): hypotheses ``H_1..H_K`` with initial weights
    ``w`` (``sum w <= 1``) and a transition matrix ``G`` (``g_jj = 0``, rows summing to at most
    1). Repeat: among the hypotheses not yet rejected, take ``j`` minimising ``p_j / w_j`` (``w_j
    = 0``: never); its adjusted p-value is ``max(previous adjusted, p_j / w_j)`` (capped at 1);
    remove it and pass its weight along its row: ``w_l <- w_l + w_j g_jl``, ``g_lk <- (g_lk +
    g_lj g_jk) / (1 - g_lj g_jl)`` (0 where the denominator is 0). ``H_j`` is rejected at level
    ``alpha`` iff its adjusted p-value is ``<= alpha``.

    :func:`gatekeeping_graph`: the ``m`` primary hypotheses start with weight ``1/m`` each, the
    side readings with 0. A primary with children passes its whole weight to them, evenly; one
    without children passes it to the other primaries, evenly (Holm among the primaries when no
    primary has children). A child passes its weight evenly over its siblings and the primaries
    other than its root (so no level is lost when the last side reading of a branch passes). A
    child is only ever tested after its parent: its weight is 0 until the parent is removed.

Assumptions
    Each ``p_j`` is valid under its null: ``P(p_j <= u) <= u``. Nothing is assumed about the
    dependence between the p-values (the procedure is a shortcut of a closed test of weighted
    Bonferroni tests).

Guarantee
    Strong family-wise error control at ``alpha`` over all ``K`` hypotheses under any
    dependence (Bretz et al. 2009, Theorem 1); a simulation test checks it, beside a naive
    "test the child at the full level once its parent passes" rule that exceeds it
    (``tests/llm_validation/validation/test_graphical.py``). With no side readings the adjusted
    p-values equal Holm's (:func:`llm_validation.validation.multiplicity.holm`). A primary's
    adjusted p-value depends on the primaries and on which of them have side readings (fixed
    in the protocol), never on how many side readings a primary carries.

Reference
    F. Bretz, W. Maurer, W. Brannath, M. Posch (2009), "A graphical approach to sequentially
    rejective multiple test procedures", Statistics in Medicine 28; A. Dmitrienko, A. C.
    Tamhane (2007), "Gatekeeping procedures with clinical trial applications", Pharmaceutical
    Statistics 6.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = ["Graph", "gatekeeping_graph", "graph_adjusted", "WEIGHT_TOL"]

#: Slack on "weights sum to at most 1" and "rows of G sum to at most 1" (float sums of 1/m).
WEIGHT_TOL = 1e-12


@dataclass(frozen=True, kw_only=True)
class Graph:
    """A graphical multiple-test procedure over named hypotheses."""

    names: tuple[str, ...]
    """The hypotheses, in order."""
    weights: tuple[float, ...]
    """Initial weight of each (the share of ``alpha`` it is first tested at)."""
    transitions: tuple[tuple[float, ...], ...]
    """``G[j][l]``: the share of ``H_j``'s weight passed to ``H_l`` once ``H_j`` is rejected."""

    def __post_init__(self) -> None:
        k = len(self.names)
        if len(set(self.names)) != k:
            raise ValueError(f"Graph: duplicate hypothesis names in {self.names}")
        w = np.asarray(self.weights, dtype=np.float64)
        g = np.asarray(self.transitions, dtype=np.float64)
        if w.shape != (k,) or g.shape != (k, k):
            raise ValueError(f"Graph: {k} names need {k} weights and a {k}x{k} transition "
                             f"matrix, got {w.shape} and {g.shape}")
        if np.any(w < 0) or w.sum() > 1 + WEIGHT_TOL:
            raise ValueError(f"Graph: weights must be >= 0 and sum to <= 1, got {w.tolist()}")
        if np.any(g < 0) or np.any(g.sum(axis=1) > 1 + WEIGHT_TOL) or np.any(np.diag(g) != 0):
            raise ValueError("Graph: transitions must be >= 0, rows summing to <= 1, and a "
                             "zero diagonal")


def gatekeeping_graph(primary: Sequence[str], parent: Mapping[str, str] | None = None) -> Graph:
    """The gatekeeping graph of the module docstring: ``primary`` hypotheses share the level;
    each side reading ``child`` (a key of ``parent``) is tested only after ``parent[child]``
    (a primary or another side reading) is rejected."""
    parent = dict(parent or {})
    primary = list(primary)
    if not primary:
        raise ValueError("gatekeeping_graph: at least one primary hypothesis is needed")
    names = primary + [c for c in parent if c not in primary]
    if len(set(names)) != len(names) or any(c in primary for c in parent):
        raise ValueError("gatekeeping_graph: a hypothesis is both primary and a side reading, "
                         "or named twice")
    unknown = sorted(p for p in parent.values() if p not in names)
    if unknown:
        raise ValueError(f"gatekeeping_graph: parents {unknown} are not hypotheses")
    index = {n: i for i, n in enumerate(names)}
    children: dict[str, list[str]] = {n: [] for n in names}
    for c, p in parent.items():
        children[p].append(c)
    k, m = len(names), len(primary)
    w = np.zeros(k)
    w[:m] = 1.0 / m
    g = np.zeros((k, k))

    def spread(j: int, targets: Sequence[str]) -> None:
        for t in targets:
            g[j, index[t]] = 1.0 / len(targets)

    for n in names:
        j = index[n]
        if children[n]:
            spread(j, children[n])
        elif n in primary:
            spread(j, [q for q in primary if q != n])
        else:
            root = n
            while root in parent:
                root = parent[root]
            spread(j, [s for s in children[parent[n]] if s != n]
                   + [q for q in primary if q != root])
    return Graph(names=tuple(names), weights=tuple(w.tolist()),
                 transitions=tuple(tuple(r) for r in g.tolist()))


def graph_adjusted(graph: Graph, p: Mapping[str, float]) -> dict[str, float]:
    """Adjusted p-values of every hypothesis of ``graph`` (Bretz et al. 2009, Algorithm 2):
    ``H_j`` is rejected at ``alpha`` iff its value is ``<= alpha``. ``p`` maps each name to
    its raw p-value in [0, 1]."""
    missing = sorted(set(graph.names) - set(p))
    if missing:
        raise ValueError(f"graph_adjusted: no p-value for {missing}")
    raw = np.array([float(p[n]) for n in graph.names])
    if not np.all((raw >= 0) & (raw <= 1)):
        raise ValueError(f"graph_adjusted: p-values must lie in [0, 1], got {raw.tolist()}")
    w = np.array(graph.weights, dtype=np.float64)
    g = np.array(graph.transitions, dtype=np.float64)
    alive = list(range(len(raw)))
    adj = np.ones(len(raw))
    level = 0.0
    while alive:
        ratios = [raw[j] / w[j] if w[j] > 0 else np.inf for j in alive]
        pick = int(np.argmin(ratios))
        j = alive.pop(pick)
        level = min(1.0, max(level, ratios[pick]))
        adj[j] = level
        if not np.isfinite(ratios[pick]):          # every remaining weight is 0
            for rest in alive:
                adj[rest] = 1.0
            break
        new_g = np.zeros_like(g)
        for a in alive:
            w[a] += w[j] * g[j, a]
            for b in alive:
                if a == b:
                    continue
                den = 1.0 - g[a, j] * g[j, a]
                new_g[a, b] = (g[a, b] + g[a, j] * g[j, b]) / den if den > 0 else 0.0
        g = new_g
        w[j] = 0.0
    return {n: float(adj[i]) for i, n in enumerate(graph.names)}
