"""The delay-law ledger's reader-facing pieces: the committed-predictions check and the
lines ``ledger.md`` prints for unscored laws, unmeasured exponents and runs left out."""

from __future__ import annotations

import copy
import math

from llm_validation.delay_law import ledger, report

_REFIT = {"adamw/2bw:lag:steps": {"predictions": {"n485k/s904": {"estimate": 0.4},
                                                  "n46k/s3616": {"estimate": 0.3}}},
          "adamw/2bw:lag:n+steps+lr": {"error": "too few cells"}}


def _committed(refit, missing=()):
    return {"laws": copy.deepcopy(refit), "train_missing": list(missing)}


def test_check_predictions_reproduced_and_reported():
    check = ledger.check_predictions(_committed(_REFIT), _REFIT)
    assert check == {"committed": True, "compared": 2, "differ": [], "max_rel_diff": 0.0,
                     "train_missing": 0, "written_at": None}
    assert "reproduce all 2 committed predictions" in report._predictions_line(check)


def test_check_predictions_catches_a_changed_estimate():
    """Mutation: one estimate moved by more than the tolerance is named; one moved within it
    is not."""
    committed = _committed(_REFIT, missing=["run-a: not finished"])
    moved = copy.deepcopy(_REFIT)
    moved["adamw/2bw:lag:steps"]["predictions"]["n485k/s904"]["estimate"] *= 1 + 1e-6
    check = ledger.check_predictions(committed, moved)
    assert check["differ"] == ["adamw/2bw:lag:steps"]
    assert math.isclose(check["max_rel_diff"], 1e-6, rel_tol=1e-3)
    line = report._predictions_line(check)
    assert "not the protocol's" in line and "1 training runs missing" in line
    within = copy.deepcopy(_REFIT)
    within["adamw/2bw:lag:steps"]["predictions"]["n485k/s904"]["estimate"] *= \
        1 + ledger.PREDICTION_RTOL / 10
    assert ledger.check_predictions(committed, within)["differ"] == []


def test_check_predictions_a_law_fitted_only_on_one_side_differs():
    refit = copy.deepcopy(_REFIT)
    refit["adamw/2bw:lag:n+steps+lr"] = {"predictions": {"n485k/s904": {"estimate": 0.5}}}
    assert ledger.check_predictions(_committed(_REFIT), refit)["differ"] == [
        "adamw/2bw:lag:n+steps+lr"]


def test_no_committed_predictions_is_exploratory():
    check = ledger.check_predictions(None, _REFIT)
    assert not check["committed"] and "exploratory" in report._predictions_line(check)


def test_score_error_says_why_a_law_is_unscored():
    assert report._score_error({"mean_log_error": 0.25, "errors": {"a": 0.25}}) == "0.25"
    assert "no held-out cell has a value" in report._score_error(
        {"mean_log_error": math.inf, "errors": {}})
    assert "1 of 2 held-out cells" in report._score_error(
        {"mean_log_error": math.inf, "errors": {"a": 0.1, "b": math.nan}})


def test_missing_runs_grouped_by_reason():
    runs = [f"run-{i}: not finished" for i in range(5)] + ["run-x: diverged"]
    assert report._missing_line(runs) == "5 not finished; 1 diverged (run-x)"


def test_render_an_exponent_without_enough_seeds():
    doc = {"statements": {}, "laws": {}, "paper": {},
           "exponents": {"muon": {"estimate": math.nan, "lo": -math.inf, "hi": math.inf,
                                  "n": 0},
                         "adamw": {"estimate": -0.1, "lo": -0.3, "hi": 0.1, "n": 4}}}
    md = report.render(doc, {})
    assert "- muon: not measured (0 seeds" in md
    assert "- adamw: -0.100 [-0.300, +0.100] (95% t over 4 seeds)" in md


def test_a_predicted_lag_beyond_the_run_says_so():
    pred = {"steps": 9257, "lag": 2.15, "lo": 1.1, "hi": 4.2}
    doc = {"statements": {}, "laws": {}, "exponents": {},
           "paper": {"muon/2bw": {"statement": "Muon stays within about 0.01 nats",
                                  "models": {"SmolLM-135M": {
                                      "reading": "contradicted", "threshold": 0.037,
                                      "predictions": {"deepseek": pred}}}}}}
    md = report.render(doc, {})
    assert "215.00% [110.00%, 420.00%]" + report._BEYOND_RUN in md
    pred["lag"] = 0.5
    assert report._BEYOND_RUN not in report.render(doc, {})


def test_law_table_counts_hits_out_of_the_held_out_cells():
    """A hit count is printed over the held-out cells it was taken from, unpredicted ones
    included, so 3 of 4 does not read as 3 of 3."""
    doc = {"statements": {}, "exponents": {}, "paper": {},
           "laws": {"muon/2bw:lag": {"chosen": "steps", "scores": [
               {"law": "steps", "hits": 3, "mean_log_error": math.inf,
                "errors": {"a": 0.1, "b": 0.2, "c": 0.3, "d": math.nan}}]}}}
    md = report.render(doc, {})
    assert "| steps | 3 / 4 | " in md


def test_gap_share_at_the_paper_setting_is_labelled_exploratory():
    doc = {"statements": {}, "exponents": {}, "laws": {}, "paper": {},
           "paper_gap_share": {"adamw/2bw": {"law": "steps", "models": {"SmolLM-135M": {
               "deepseek": {"steps": 9257, "share": 0.012, "lo": 0.004, "hi": 0.03}}}},
               "muon/2bw": {"why": "no gap-share law was chosen (held-out cells missing)"}}}
    md = report.render(doc, {})
    assert "## Exploratory: the gap share at the paper's setting (not in the protocol)" in md
    assert "- adamw/2bw (steps): SmolLM-135M: deepseek 9257 steps 1.20% [0.40%, 3.00%]" in md
    assert "- muon/2bw: no gap-share law was chosen" in md
