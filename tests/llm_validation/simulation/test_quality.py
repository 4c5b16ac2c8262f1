"""Reading the measured loss gap of one optimizer from a validate report or a claims ledger."""

from __future__ import annotations

import json

import pytest

from llm_validation.simulation.quality import format_gap, read_gaps
from llm_validation.validation.inference import Interval
from llm_validation.validation.verdict import ValidationReport, Verdict


def _report() -> dict:
    iv = lambda e, lo, hi: Interval(estimate=e, lo=lo, hi=hi, n=3)   # noqa: E731
    verdicts = [
        Verdict(id="gap_adamw_gt_muon", kind="trend", claim="c", prediction="p", status="pass",
                reason="r", n_seeds=3,
                measured={"gap AdamW": iv(0.47, 0.40, 0.54), "gap Muon": iv(0.155, 0.124, 0.186),
                          "difference AdamW - Muon": iv(0.3, 0.2, 0.4)}),
        Verdict(id="ef_gain[muon]", kind="trend", claim="c", prediction="p", status="pass",
                reason="r", n_seeds=3,
                measured={"gap without EF": iv(0.15, 0.12, 0.18),
                          "gap with EF": iv(0.07, 0.05, 0.09),
                          "share of gap removed": iv(0.55, 0.53, 0.57)}),
        Verdict(id="gap_vs_lr[muon]", kind="trend", claim="c", prediction="p",
                status="inconclusive", reason="r", measured={"slope d gap / d lr": 3.0}),
    ]
    return ValidationReport(verdicts=tuple(verdicts), gap_definition="final").to_dict()


def test_gaps_of_one_optimizer_from_a_validate_report(tmp_path):
    path = tmp_path / "validate.json"
    path.write_text(json.dumps(_report()))
    muon = read_gaps(path, "muon")
    assert [(g["id"], g["name"]) for g in muon["gaps"]] == [
        ("gap_adamw_gt_muon", "gap Muon"), ("ef_gain[muon]", "gap without EF"),
        ("ef_gain[muon]", "gap with EF")]
    assert muon["gaps"][0]["estimate"] == 0.155 and muon["gaps"][0]["lo"] == 0.124
    assert format_gap(muon["gaps"][0]) == "gap Muon = 0.155 [0.124, 0.186] (gap_adamw_gt_muon, pass)"
    adamw = read_gaps(path, "adamw")
    assert [g["name"] for g in adamw["gaps"]] == ["gap AdamW"]


def test_a_nested_ledger_and_a_missing_optimizer(tmp_path):
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"claims": [{"id": "C1", "status": "fail", "measured": {
        "final gap NorMuon": {"estimate": 0.02, "lo": 0.01, "hi": 0.03, "n": 3},
        "final gap Muon": 0.04}}]}))
    assert [g["name"] for g in read_gaps(path, "normuon")["gaps"]] == ["final gap NorMuon"]
    assert [g["estimate"] for g in read_gaps(path, "muon")["gaps"]] == [0.04]
    with pytest.raises(ValueError, match="no measured loss gap for optimizer 'sgd'"):
        read_gaps(path, "sgd")
