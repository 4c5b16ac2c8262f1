"""The ledger's gatekeeping family: by hand, on the committed n46k ledger, and the family-wise
simulation on the claims' own structure that can fail.

The simulation takes the n46k ledger's paper statements (``docs/claims_20tpp/n46k/claims.json``:
every claim, 3-6 seeds): each leaf's kind, seed counts and margins in sd units (as
``test_family.py`` does), its claim and whether its statement is the claim's central one. The
structure (primaries, which central leaf each side leaf hangs from) is
:func:`~llm_validation.claims.decide.gatekeeping.gated_structure`'s, the production code's.
Per replicate every leaf draws independent normal per-seed values at its least-favourable
truth (``test_family._truth``, scenario ``a``), and the leaves are decided as
:func:`~llm_validation.claims.decide.gatekeeping.decide_gated` decides them: p_raw = 2 p_nom,
the graph's adjusted p-values (a vectorised copy of
:func:`~llm_validation.validation.graphical.graph_adjusted`, checked against it), each rejected
leaf read at ``1 - (alpha p_raw / p_adj) / 2``. Two truths:

- ``null``: every leaf at its least-favourable null (any decision of a leaf is an error);
- ``gate open``: every central effect real and certain (its leaves pass at any level: no
  error), every side reading at its null: the gate always opens, the side readings are where
  the errors are.

Measured (2,000 replicates, K = 66 leaves of which 34 central, alpha 5%, two looks; null /
gate open): gatekeeping 0.0170 / 0.0255 (Monte-Carlo standard error 0.0029 / 0.0035); the
mutation that tests every side reading at the full level without waiting for its parent (each
at 97.5%): 0.55 / 0.55. The
assertions: gatekeeping <= alpha + 3 standard errors in both; the mutation above alpha + 3
standard errors (the test fails on it).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from llm_validation.claims.decide.checks import diff, make
from llm_validation.claims.decide.familywise import LOOKS, check_from_dict, leaves
from llm_validation.claims.decide.gatekeeping import decide_gated, gated_levels, gated_structure
from llm_validation.claims.decide.pvalues import group_routes, seed_routes, status_at
from llm_validation.validation.graphical import gatekeeping_graph, graph_adjusted
from llm_validation.validation.verdict import INCONCLUSIVE, MIN_SEEDS, PASS

from .test_family import ALPHA, _rates, _sd, _truth, _within

LEDGER = Path(__file__).resolve().parents[3] / "docs" / "claims_20tpp" / "n46k" / "claims.json"
#: Replicates: a family-wise error near 2.5% then has a Monte-Carlo standard error of 0.0035.
REPS = 2_000
#: Replicates per block of the vectorised graph (memory: block x K x K floats).
BLOCK = 500


def _spec(c) -> dict | None:
    """A leaf's kind, seeds and params in sd units (``test_family._specs``); None: no p-value."""
    if c.kind in ("same_sign", "no_consistent_effect"):
        if len(c.inputs) < 2 or min(len(v) for v in c.inputs.values()) < MIN_SEEDS:
            return None
        widths = {k: float(c.params["widths"][k]) / _sd(v) for k, v in c.inputs.items()} \
            if c.kind == "no_consistent_effect" else {}
        return {"kind": c.kind, "n": {k: len(v) for k, v in c.inputs.items()},
                "params": {"widths": widths}}
    if c.kind == "divergence" or len(c.samples) < MIN_SEEDS:
        return None
    if c.kind == "side":
        return {"kind": "side", "n": len(c.samples),
                "params": {"boundary": 0.0, "predicted": c.params["predicted"]}}
    return {"kind": c.kind, "n": len(c.samples),
            "params": {"width": float(c.params["width"]) / _sd(c.samples)}}


def _structure():
    """(specs of every leaf or None, groups, central flags, leaves per statement)."""
    d = json.loads(LEDGER.read_text())
    specs, groups, central, sizes = [], [], [], []
    for cl in d["claims"]:
        for s in cl["result"]["statements"]:
            if s["section"] != "paper":
                continue
            ls = leaves(check_from_dict(s["check"]))
            specs += [_spec(x) for x in ls]
            groups.append(cl["id"])
            central.append(bool(s["central"]))
            sizes.append(len(ls))
    return specs, groups, central, sizes


def _graph(specs, groups, central, sizes):
    """(usable leaf indices, the graph's weights and transitions over them, primary mask)."""
    usable = [s is not None for s in specs]
    primary, parent, untested = gated_structure(groups, central, sizes, usable)
    assert not untested
    order = [*primary, *parent]
    names = {k: f"h{k}" for k in order}
    g = gatekeeping_graph([names[k] for k in primary],
                          {names[c]: names[p] for c, p in parent.items()})
    assert [names[k] for k in order] == list(g.names)          # the graph keeps this order
    return order, np.array(g.weights), np.array(g.transitions), np.isin(order, primary)


def _adjusted(p, w0, g0, alpha, stop_early=True):
    """Adjusted p-values of the rows of ``p`` under the graph (w0, g0): Bretz et al.'s
    Algorithm 2 vectorised over replicates, as ``graph_adjusted``; with ``stop_early`` the
    loop ends once no replicate has a ratio <= alpha (the rest stay 1: not rejected)."""
    reps, k = p.shape
    w = np.tile(w0, (reps, 1))
    g = np.tile(g0, (reps, 1, 1))
    alive = np.ones((reps, k), bool)
    adj = np.ones((reps, k))
    level = np.zeros(reps)
    rows = np.arange(reps)
    off = ~np.eye(k, dtype=bool)
    for _ in range(k):
        ratio = np.where(alive & (w > 0), p / np.where(w > 0, w, 1.0), np.inf)
        j = ratio.argmin(axis=1)
        r = ratio[rows, j]
        live = alive.any(axis=1) & np.isfinite(r)
        if not live.any() or (stop_early and not (live & (r <= alpha)).any()):
            break
        level = np.where(live, np.minimum(1.0, np.maximum(level, r)), level)
        adj[rows[live], j[live]] = level[live]
        alive[rows[live], j[live]] = False
        gj, gcol, wj = g[rows, j, :], g[rows, :, j], w[rows, j]
        w = np.where(alive, w + (wj * live)[:, None] * gj, w)
        den = 1.0 - gcol * gj
        new = np.where(den[:, :, None] > 0, (g + gcol[:, :, None] * gj[:, None, :])
                       / np.where(den > 0, den, 1.0)[:, :, None], 0.0)
        keep = alive[:, :, None] & alive[:, None, :] & off
        g = np.where(live[:, None, None], np.where(keep, new, 0.0), g)
        w[rows[live], j[live]] = 0.0
    return adj


def _routes(specs, idx, reps, seed):
    """Per usable leaf (graph order): its routes and its erroneous statuses."""
    rng = np.random.default_rng(seed)
    out = []
    for k in idx:
        spec = specs[k]
        mean, errors = _truth(spec, "a")
        if isinstance(spec["n"], dict):
            data = {g: rng.normal(mean[g], 1.0, (reps, n)) for g, n in spec["n"].items()}
            rts = group_routes(spec["kind"], data, spec["params"])
        else:
            rts = seed_routes(spec["kind"], rng.normal(mean, 1.0, (reps, spec["n"])),
                              spec["params"])
        out.append((rts, errors))
    return out


def _open_gate(drawn, is_primary):
    """Every central leaf a certain effect: it passes at any level, which is no error."""
    reps = np.shape(drawn[0][0][0][1])[0]
    return [(((PASS, np.zeros(reps)),), set()) if prim else d
            for d, prim in zip(drawn, is_primary)]


def _decide(drawn, w0, g0, looks=LOOKS, mutant=False, is_primary=None):
    """[reps, K] statuses as decide_gated decides them (``mutant``: every side leaf at the
    full level, without waiting for its parent)."""
    p_raw = np.minimum(1.0, looks * np.stack(
        [np.minimum.reduce([t for _, t in r]) for r, _ in drawn], axis=-1))
    out = []
    for lo in range(0, p_raw.shape[0], BLOCK):
        p = p_raw[lo:lo + BLOCK]
        adj = _adjusted(p, w0, g0, ALPHA)
        level = np.where(adj <= ALPHA, ALPHA * p / np.where(adj > 0, adj, 1.0), np.nan)
        if mutant:
            level = np.where(is_primary, level, np.where(p <= ALPHA, ALPHA, np.nan))
        out.append(level)
    level = np.concatenate(out) / looks
    return np.stack([status_at(r, level[:, j]) for j, (r, _) in enumerate(drawn)], axis=-1)


@pytest.fixture(scope="module")
def structure():
    specs, groups, central, sizes = _structure()
    idx, w0, g0, is_primary = _graph(specs, groups, central, sizes)
    return specs, idx, w0, g0, is_primary


def test_the_vectorised_graph_is_graph_adjusted(structure):
    specs, idx, w0, g0, _ = structure
    _, groups, central, sizes = _structure()
    prim, par, _ = gated_structure(groups, central, sizes, [s is not None for s in specs])
    p = np.random.default_rng(3).uniform(0, 0.2, (6, len(idx))) ** 2
    mine = _adjusted(p, w0, g0, ALPHA, stop_early=False)
    for r in range(len(p)):
        full = np.ones(len(specs))
        full[idx] = p[r]
        adj, _ = gated_levels(full, prim, par, ALPHA)
        assert mine[r] == pytest.approx(adj[idx], abs=1e-12)


@pytest.mark.parametrize("truth", ["null", "gate open"])
def test_gatekeeping_keeps_the_family_wise_error_and_ungated_side_readings_do_not(structure,
                                                                                 truth):
    specs, idx, w0, g0, is_primary = structure
    drawn = _routes(specs, idx, REPS, seed=7)
    if truth == "gate open":
        drawn = _open_gate(drawn, is_primary)
    gated = _rates(_decide(drawn, w0, g0), drawn)
    mutant = _rates(_decide(drawn, w0, g0, mutant=True, is_primary=is_primary), drawn)
    print(f"{truth}: K={len(idx)} ({int(is_primary.sum())} primary) gatekeeping "
          f"{gated['fwer']:.4f}+-{gated['fwer_se']:.4f}, ungated side readings "
          f"{mutant['fwer']:.4f}")
    assert len(idx) > 50 and 10 < is_primary.sum() < len(idx)
    assert _within(gated["fwer"], gated["fwer_se"])
    assert not _within(mutant["fwer"], mutant["fwer_se"])        # the mutation breaks it
    assert mutant["fwer"] > 4 * ALPHA


A = {0: 0.30, 1: 0.32, 2: 0.31, 3: 0.33, 4: 0.30}
B = {0: 0.10, 1: 0.11, 2: 0.09, 3: 0.10, 4: 0.12}


def _side(name: str, a, b) -> object:
    return diff(name, "side", ("a", a), ("b", b), boundary=0.0, predicted="above")


def test_a_central_verdict_does_not_depend_on_how_many_side_checks_the_ledger_carries():
    """A central check that Holm over a large flat family leaves open (the committed n46k's
    19a: t = 10.1 over 5 seeds among 64 checks) passes whatever the side readings."""
    rng = np.random.default_rng(0)
    near = {s: 0.20 + 0.02 * v for s, v in enumerate(rng.normal(size=5))}   # t ~ 10
    centrals = [_side(f"central {i}", near, B) for i in range(4)]
    sides = [_side(f"side {i}", {s: v + 0.05 * rng.normal() for s, v in B.items()}, B)
             for i in range(60)]
    for k in (0, 1, 10, 60):
        checks = centrals + sides[:k]
        groups = [f"c{i}" for i in range(4)] + [f"c{i % 4}" for i in range(k)]
        out, summary = decide_gated(checks, groups, [True] * 4 + [False] * k, ALPHA)
        assert [c.status for c in out[:4]] == [PASS] * 4, k
        assert summary["primary_size"] == 4 and summary["family_size"] == 4 + k
    from llm_validation.claims.decide.familywise import decide_family
    flat, _ = decide_family(centrals + sides, ALPHA, "holm")
    assert all(c.status == INCONCLUSIVE for c in flat[:4])         # Holm over 64: open


def test_side_readings_wait_for_their_central_statement():
    weak = _side("weak central", {0: 0.1, 1: 0.3, 2: 0.0}, {0: 0.1, 1: 0.1, 2: 0.1})
    strong_side = _side("strong side", A, B)
    out, _ = decide_gated([weak, strong_side], ["c", "c"], [True, False], ALPHA)
    assert out[0].status == INCONCLUSIVE and out[1].status == INCONCLUSIVE
    assert "was not decided" in out[1].reason and out[1].params["role"] == "child"
    out, _ = decide_gated([_side("central", A, B), strong_side], ["c", "c"], [True, False],
                          ALPHA)
    assert [c.status for c in out] == [PASS, PASS]
    # a claim whose central statement has no p-value gives its side readings no level
    div = make("div", "divergence", {"gradient-level": {0: 0.0}, "update-level": {0: 0.0}})
    out, summary = decide_gated([_side("other", A, B), div, strong_side], ["o", "c", "c"],
                                [True, True, False], ALPHA)
    assert out[2].status == INCONCLUSIVE and out[2].reason.startswith("not tested")
    assert summary["untested"] == 1


def test_graph_adjusted_is_the_production_graph():
    """gated_levels builds the graph with gatekeeping_graph and adjusts with graph_adjusted."""
    p = [0.001, 0.02, 0.004, 0.3]
    adj, level = gated_levels(p, [0, 1], {2: 0, 3: 1}, ALPHA)
    g = gatekeeping_graph(["h0", "h1"], {"h2": "h0", "h3": "h1"})
    ref = graph_adjusted(g, {f"h{i}": v for i, v in enumerate(p)})
    assert adj.tolist() == [ref[f"h{i}"] for i in range(4)]
    assert np.isnan(level[3]) and level[0] <= ALPHA * 0.5 + 1e-15
