"""Seeds needed: filled for inconclusive checks only, larger for smaller effects."""

from __future__ import annotations

import pytest

from llm_validation.claims.decide.checks import aggregate, diff
from llm_validation.claims.decide.seeds import distances, with_seeds_needed


def _undecided(effect):
    a = {0: effect + 0.05, 1: effect - 0.06, 2: effect + 0.01}
    return diff("x", "side", ("a", a), ("z", {0: 0.0, 1: 0.0, 2: 0.0}), boundary=0.0,
                predicted="above")


def test_inconclusive_checks_get_counts_and_decided_ones_none():
    small, large = with_seeds_needed(_undecided(0.01)), with_seeds_needed(_undecided(0.04))
    assert small.status == large.status == "inconclusive"
    assert large.seeds_needed["50%"] <= small.seeds_needed["50%"]
    assert large.seeds_needed["50%"] <= large.seeds_needed["80%"]
    agg = with_seeds_needed(aggregate("all", "all", [_undecided(0.01), _undecided(0.04)]))
    assert agg.seeds_needed["80%"] == small.seeds_needed["80%"]
    decided = with_seeds_needed(diff("d", "side", ("a", {0: 1.0, 1: 1.1, 2: 1.05}),
                                     ("z", {0: 0.0, 1: 0.0, 2: 0.0}), boundary=0.0,
                                     predicted="above"))
    assert decided.status == "pass" and decided.seeds_needed is None


def test_distances_per_kind():
    assert distances("side", 0.3, {"boundary": 0.1}) == pytest.approx([0.2])
    assert distances("equivalence", 0.02, {"width": 0.05}) == pytest.approx([0.03])
    assert distances("not_better", -0.01, {"width": 0.05}) == pytest.approx([0.01, 0.04])


def test_an_effect_on_the_boundary_reads_more_than_the_search_limit_in_the_ledger():
    from llm_validation.claims.report.markdown import _needed
    from llm_validation.validation.power import MAX_SEEDS
    tiny = with_seeds_needed(_undecided(0.0005))     # ~1/100 of the spread: > 1000 seeds
    assert tiny.status == "inconclusive"
    assert set(tiny.seeds_needed.values()) == {None}
    assert _needed(tiny) == f"more than {MAX_SEEDS} / more than {MAX_SEEDS}"
    assert _needed(with_seeds_needed(_undecided(0.04))) == " / ".join(
        str(v) for v in with_seeds_needed(_undecided(0.04)).seeds_needed.values())
