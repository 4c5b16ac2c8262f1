"""Gatekeeping by the graphical procedure: textbook cases, Holm as the special case, and the
family-wise error simulated at the ledger's shape beside a naive rule that exceeds it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from llm_validation.validation.graphical import Graph, gatekeeping_graph, graph_adjusted
from llm_validation.validation.multiplicity import holm

ALPHA = 0.05
#: Monte-Carlo replicates of the family-wise simulations (standard error ~0.0022 at 5%).
REPS = 10_000
#: Simulated error allowed above alpha: 3 Monte-Carlo standard errors.
MC_SLACK = 3 * np.sqrt(ALPHA * (1 - ALPHA) / REPS)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=7))
def test_no_side_readings_is_holm(ps):
    names = [f"h{i}" for i in range(len(ps))]
    adj = graph_adjusted(gatekeeping_graph(names), dict(zip(names, ps)))
    np.testing.assert_allclose([adj[n] for n in names], holm(ps), rtol=0, atol=1e-12)


def test_textbook_two_primaries_one_child():
    # A: p 0.01 <= 0.025 rejected first, its weight 1/2 goes to its child C; C: 0.03/0.5 =
    # 0.06; B: 0.04 / 0.5 = 0.08. Then C (0.06), passing its weight on to B: B at 0.04/1.
    g = gatekeeping_graph(["A", "B"], {"C": "A"})
    adj = graph_adjusted(g, {"A": 0.01, "B": 0.04, "C": 0.03})
    assert adj == pytest.approx({"A": 0.02, "B": 0.06, "C": 0.06})


def test_child_is_never_rejected_before_its_parent():
    g = gatekeeping_graph(["A", "B"], {"C": "A", "D": "C"})
    adj = graph_adjusted(g, {"A": 0.5, "B": 0.001, "C": 1e-9, "D": 1e-9})
    assert adj["C"] >= adj["A"] and adj["D"] >= adj["C"]
    assert adj["A"] == pytest.approx(0.5)


def test_primary_verdicts_do_not_depend_on_how_many_side_readings():
    p = {"A": 0.01, "B": 0.012, "C": 0.3}
    one = graph_adjusted(gatekeeping_graph(list(p), {"s0": "A"}), {**p, "s0": 0.9})
    many = {**p, **{f"s{i}": 0.9 for i in range(40)}}
    gated = graph_adjusted(gatekeeping_graph(list(p), {f"s{i}": "A" for i in range(40)}), many)
    assert all(gated[k] == pytest.approx(one[k]) for k in p)
    # Holm over all 43 would not pass B at 5%; the gate does: the reason it exists
    assert holm(list(many.values()))[1] > ALPHA and gated["B"] <= ALPHA


def test_bad_graphs_are_refused():
    with pytest.raises(ValueError, match="sum to <= 1"):
        Graph(names=("a", "b"), weights=(0.7, 0.7), transitions=((0, 1), (1, 0)))
    with pytest.raises(ValueError, match="zero diagonal"):
        Graph(names=("a",), weights=(1.0,), transitions=((0.5,),))
    with pytest.raises(ValueError, match="not hypotheses"):
        gatekeeping_graph(["a"], {"b": "zz"})
    with pytest.raises(ValueError, match="no p-value"):
        graph_adjusted(gatekeeping_graph(["a", "b"]), {"a": 0.1})


def _fwer(rule, n_primary: int, n_child: int, false_primaries: int, seed: int) -> float:
    """Share of replicates with a true null rejected: primaries ``0..false_primaries-1`` are
    false (p ~ 0), every other hypothesis (the rest of the primaries and every child, all
    children hanging under primary 0) is a true null with a uniform p."""
    rng = np.random.default_rng(seed)
    prim = [f"P{i}" for i in range(n_primary)]
    kids = [f"C{i}" for i in range(n_child)]
    graph = gatekeeping_graph(prim, {c: "P0" for c in kids})
    errors = 0
    for _ in range(REPS):
        p = dict(zip(prim + kids, rng.uniform(size=n_primary + n_child)))
        for i in range(false_primaries):
            p[f"P{i}"] = 1e-12
        rejected = rule(graph, p)
        errors += any(h in rejected for h in p if not (h.startswith("P") and
                                                      int(h[1:]) < false_primaries))
    return errors / REPS


def _graph_rule(graph, p):
    adj = graph_adjusted(graph, p)
    return {h for h, v in adj.items() if v <= ALPHA}


def _naive_rule(graph, p):
    """Holm on the primaries; each child at the full level once its parent passes."""
    prim = [h for h in p if h.startswith("P")]
    adj = dict(zip(prim, holm([p[h] for h in prim])))
    out = {h for h in prim if adj[h] <= ALPHA}
    if "P0" in out:
        out |= {h for h in p if h.startswith("C") and p[h] <= ALPHA}
    return out


@pytest.mark.parametrize("false_primaries", [0, 1, 3])
def test_family_wise_error_is_controlled(false_primaries):
    fwer = _fwer(_graph_rule, 4, 6, false_primaries, seed=false_primaries)
    assert fwer <= ALPHA + MC_SLACK, fwer


def test_naive_gate_exceeds_the_level():
    # the parent is false (always passes), six true-null children each at 5%: ~26% error
    fwer = _fwer(_naive_rule, 4, 6, 1, seed=11)
    assert fwer > 2 * ALPHA, fwer
