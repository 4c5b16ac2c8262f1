"""The verdict rule: pass / fail / inconclusive, and the report's JSON and markdown."""

from __future__ import annotations

import json

import pytest

from llm_validation.validation.inference import Interval, t_interval
from llm_validation.validation.verdict import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    ValidationReport,
    Verdict,
    combine,
    decide,
    missing,
)


def iv(lo, hi, est=None):
    return Interval(estimate=(lo + hi) / 2 if est is None else est, lo=lo, hi=hi, n=3)


@pytest.mark.parametrize("interval, predicted, expected", [
    (iv(0.1, 0.3), "above", PASS),
    (iv(-0.3, -0.1), "above", FAIL),
    (iv(-0.1, 0.3), "above", INCONCLUSIVE),
    (iv(-0.3, -0.1), "below", PASS),
    (iv(0.1, 0.3), "below", FAIL),
    (iv(0.0, 0.3), "above", INCONCLUSIVE),   # touching the boundary is not strictly above
])
def test_decide_three_way(interval, predicted, expected):
    status, reason = decide(interval, boundary=0.0, predicted=predicted, n_seeds=3)
    assert status == expected and reason


def test_fewer_than_three_seeds_is_never_a_pass_or_fail():
    narrow = iv(0.1, 0.11)
    assert decide(narrow, boundary=0.0, predicted="above", n_seeds=2)[0] == INCONCLUSIVE
    assert decide(narrow, boundary=1.0, predicted="above", n_seeds=1)[0] == INCONCLUSIVE
    # and one seed cannot give a bounded t interval in the first place
    assert decide(t_interval([5.0]), boundary=0.0, predicted="above", n_seeds=3)[0] \
        == INCONCLUSIVE


def test_nan_estimate_is_inconclusive_and_bad_arguments_raise():
    nan = Interval.unbounded()
    assert decide(nan, boundary=0.0, predicted="above", n_seeds=5)[0] == INCONCLUSIVE
    with pytest.raises(ValueError, match="predicted"):
        decide(iv(0, 1), boundary=0.0, predicted="up", n_seeds=3)


def test_combine():
    assert combine([(PASS, "a"), (PASS, "b")])[0] == PASS
    assert combine([(PASS, "a"), (INCONCLUSIVE, "b")])[0] == INCONCLUSIVE
    assert combine([(PASS, "a"), (FAIL, "b"), (INCONCLUSIVE, "c")])[0] == FAIL
    assert combine([])[0] == INCONCLUSIVE


def _verdict(status=PASS, **kw):
    return Verdict(id="gap_adamw_gt_muon", kind="trend", claim="AdamW's gap exceeds Muon's",
                   prediction="gap(AdamW) - gap(Muon) > 0", status=status, reason="r",
                   measured={"difference": iv(0.1, 0.2), "ratio": 3.0}, n_seeds=3,
                   runs=("a", "b"), **kw)


def test_verdict_validation_and_quick_marking():
    with pytest.raises(ValueError, match="kind"):
        Verdict(id="x", kind="vibe", claim="c", prediction="p", status=PASS, reason="r")
    with pytest.raises(ValueError, match="status"):
        Verdict(id="x", kind="trend", claim="c", prediction="p", status="ok", reason="r")
    with pytest.raises(ValueError, match="quick"):
        _verdict(quick=True)
    q = _verdict().as_quick()
    assert q.quick and q.status == INCONCLUSIVE and "would read pass" in q.reason


def test_report_json_roundtrip_and_markdown():
    rep = ValidationReport(verdicts=(_verdict(), _verdict(FAIL),
                                     missing("tau_shape", "trend", "gap grows with tau",
                                             "PL shape", "no tau sweep")),
                           gap_definition="final validation loss, paired by seed",
                           runs=({"name": "a", "seed": 0},), notes=("n1",))
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["counts"] == {PASS: 1, FAIL: 1, INCONCLUSIVE: 1}
    back = ValidationReport.from_dict(d)
    assert back == rep
    md = rep.to_markdown()
    assert "1 pass, 1 fail, 1 inconclusive" in md
    assert "0.15 [0.1, 0.2]" in md and "not measured: no tau sweep" in md
    assert rep.get("tau_shape").status == INCONCLUSIVE
    with pytest.raises(KeyError):
        rep.get("nope")
