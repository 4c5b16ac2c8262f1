"""Check kinds on hand-made per-seed numbers: each can pass and fail, and recheck agrees."""

from __future__ import annotations

import pytest

from llm_validation.claims.decide.checks import aggregate, diff, make, recheck

A = {0: 0.30, 1: 0.32, 2: 0.31}
B = {0: 0.10, 1: 0.11, 2: 0.09}


def _both(c):
    assert recheck(c.to_dict()) == c.status
    return c.status


def test_side_is_a_paired_contrast():
    assert _both(diff("a - b > 0", "side", ("a", A), ("b", B), boundary=0.0,
                      predicted="above")) == "pass"
    assert _both(diff("b - a > 0", "side", ("b", B), ("a", A), boundary=0.0,
                      predicted="above")) == "fail"
    # gap - 2 gap_EF > 0: 0.3 - 2 * 0.1 = 0.1 per seed
    c = make("share > 1/2", "side", {"g": A, "e": B}, {"g": 1.0, "e": -2.0}, boundary=0.0,
             predicted="above")
    assert _both(c) == "pass" and c.samples == pytest.approx({0: 0.1, 1: 0.1, 2: 0.13})


def test_margin_kinds():
    same = {0: 0.301, 1: 0.319, 2: 0.311}
    assert _both(diff("eq", "equivalence", ("a", A), ("s", same), width=0.05)) == "pass"
    assert _both(diff("eq", "equivalence", ("a", A), ("b", B), width=0.05)) == "fail"
    assert _both(diff("d", "differs", ("a", A), ("b", B), width=0.05)) == "pass"
    assert _both(diff("d", "differs", ("a", A), ("s", same), width=0.05)) == "fail"
    assert _both(diff("nb", "not_better", ("b", B), ("a", A), width=0.05)) == "fail"
    assert _both(diff("nb", "not_better", ("s", same), ("a", A), width=0.05)) == "pass"


def test_no_consistent_effect_passes_an_effect_beside_a_null():
    effect = {0: 0.10, 1: 0.12, 2: 0.11}
    null = {0: 0.001, 1: -0.002, 2: 0.0}
    widths = {"AdamW": 0.05, "SOAP": 0.05}
    assert _both(make("b2", "no_consistent_effect", {"AdamW": effect, "SOAP": null},
                      widths=widths)) == "pass"
    assert _both(make("b2", "no_consistent_effect", {"AdamW": effect, "SOAP": effect},
                      widths=widths)) == "fail"
    assert _both(make("s", "same_sign", {"AdamW": effect, "SOAP": effect})) == "pass"


def test_divergence_and_aggregates_and_too_few_seeds():
    def runs(grad: float, upd: float, n: int) -> dict:
        return {"gradient-level": {i: grad for i in range(n)},
                "update-level": {i: upd for i in range(n)}}
    # "diverges" is a rate >= 1/2 decided with exact bounds: 3 runs cannot show it either way
    # (at 95% the fewest whose zero divergences refute it is 5), 6 can
    assert _both(make("div", "divergence", runs(1.0, 0.0, 3))) == "inconclusive"
    assert _both(make("div", "divergence", runs(1.0, 0.0, 6))) == "pass"
    assert _both(make("div", "divergence", runs(0.0, 0.0, 6))) == "fail"
    absent = make("div", "divergence", runs(0.0, 0.0, 3))
    assert absent.status == "inconclusive" and "5 runs with no event" in absent.reason
    short = make("div", "divergence", runs(0.0, 0.0, 6), short_runs="0.8 tokens per parameter")
    assert short.status == "inconclusive" and "too short" in short.reason
    both = make("div", "divergence", runs(1.0, 1.0, 6))
    assert both.status == "inconclusive" and both.reason.startswith("update-level")
    passing = diff("p", "side", ("a", A), ("b", B), boundary=0.0, predicted="above")
    failing = diff("f", "side", ("b", B), ("a", A), boundary=0.0, predicted="above")
    assert _both(aggregate("all", "all", [passing, failing])) == "fail"
    assert _both(aggregate("most", "most", [passing, passing, failing])) == "pass"
    two = diff("two seeds", "side", ("a", {0: 0.3, 1: 0.31}), ("b", {0: 0.1, 1: 0.1}),
               boundary=0.0, predicted="above")
    assert _both(two) == "inconclusive" and "only 2 seed" in two.reason


def test_at_level_decides_again_from_the_stored_numbers():
    """A side check whose 95% interval clears its boundary but whose 99.9% one does not: at
    the higher level it is inconclusive, its interval is wider, the level is recorded and
    recheck (from JSON) decides at it; parts, groups and missing-run notes follow."""
    from llm_validation.claims.decide.checks import at_level, with_missing
    from llm_validation.validation.inference import t_interval

    x = {0: 0.10, 1: 0.30, 2: 0.20}            # mean 0.2, sd 0.1: t95 lo = -0.048
    c = make("x > -0.1", "side", {"x": x}, {"x": 1.0}, boundary=-0.1, predicted="above")
    assert _both(c) == "pass"
    hi = at_level(c, 0.999)
    assert hi.status == "inconclusive" and hi.params["level"] == 0.999
    assert hi.interval.lo == pytest.approx(t_interval(list(x.values()), 0.999).lo)
    assert hi.interval.lo < c.interval.lo and "99.9% interval" in hi.reason
    assert _both(hi) == "inconclusive"
    assert at_level(hi, 0.95).status == "pass"           # and back
    agg = at_level(aggregate("all", "all", [c, c]), 0.999)
    assert agg.status == "inconclusive" and agg.parts[0].params["level"] == 0.999
    assert _both(agg) == "inconclusive"
    y = {k: v + 0.1 for k, v in x.items()}     # t95 lo = 0.052 > 0, t99.9 lo < 0
    grp = make("s", "same_sign", {"A": y, "B": y})
    assert grp.status == "pass" and at_level(grp, 0.999).status == "inconclusive"
    noted = at_level(with_missing(hi, "muon/2bw: 2 of 3 seeds finished"), 0.97)
    assert noted.reason.endswith("(missing: muon/2bw: 2 of 3 seeds finished)")
    with pytest.raises(ValueError, match="level"):
        at_level(c, 1.0)
