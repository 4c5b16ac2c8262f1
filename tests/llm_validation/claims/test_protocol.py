"""The ledger's protocol: its digest, the refusal of other rules, the committed 20:1 protocols."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from delaybound.cli import main
from llm_validation.claims.catalogue import registry
from llm_validation.claims.report.protocol import (ProtocolMismatch, check_protocol, digest, protocol,
                                            write_protocol)
from llm_validation.claims.catalogue.registry import get_claims
from llm_validation.claims.plan.scales import SIZE_LADDER, get_scale
from llm_validation.claims.decide.sequential import DEFAULT_POLICY

ROOT = Path(__file__).resolve().parents[3]


def _rethreshold(monkeypatch, claim_id: str, **values: float) -> None:
    """The catalogue with claim ``claim_id``'s thresholds changed (a changed rule)."""
    c = registry.CLAIMS[claim_id]
    monkeypatch.setitem(registry.CLAIMS, claim_id, dataclasses.replace(
        c, thresholds={**c.thresholds, **values}))


def _doc(scale="n46k", claims=None):
    s = get_scale(scale)
    return protocol(get_claims(claims or s.claims), s, DEFAULT_POLICY, (0, 1, 2))


def test_the_digest_is_deterministic_and_moves_with_any_rule(monkeypatch):
    a = _doc()
    assert digest(a) == digest(_doc()) and len(digest(a)) == 64
    _rethreshold(monkeypatch, "horizon", growth_tolerance=1.5)     # a changed threshold
    assert digest(_doc()) != digest(a)


def test_central_statements_and_readings_are_in_the_protocol():
    doc = _doc()
    for c in doc["claims"]:
        roles = [s["role"] for s in c["statements"]]
        if any(r != "theory" for r in roles):
            assert roles.count("central") == 1, c["id"]
    alignment = next(c for c in doc["claims"] if c["id"] == "alignment")
    assert {s["id"]: s["role"] for s in alignment["statements"]}["15c"] == "project"
    assert doc["family"]["method"] == "gatekeeping" and doc["family"]["alpha"] == 0.05
    assert 0.03 < doc["margins"]["paper_lag_fraction"] < 0.05


def test_a_changed_rule_is_refused_unless_reanalysed(tmp_path, monkeypatch):
    rec = check_protocol(tmp_path, _doc())
    assert rec["reanalysis"] is None and (tmp_path / "protocol.json").exists()
    assert check_protocol(tmp_path, _doc())["reanalysis"] is None     # same rules: fine
    _rethreshold(monkeypatch, "alignment", aligned_cos=0.5)
    with pytest.raises(ProtocolMismatch, match="--reanalyse"):
        check_protocol(tmp_path, _doc())
    rec = check_protocol(tmp_path, _doc(), reanalyse=True)
    assert rec["reanalysis"]["recorded"] == json.loads(
        (tmp_path / "protocol.json").read_text())["digest"]
    assert (tmp_path / "protocol.reanalysis.json").exists()


def test_a_folder_with_runs_but_no_protocol_is_a_reanalysis(tmp_path):
    run = tmp_path / "runs" / "r0"
    run.mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    assert check_protocol(tmp_path, _doc())["reanalysis"]["recorded"] is None


def test_cli_refuses_a_changed_rule_with_one_line(tmp_path, monkeypatch, capsys):
    out = str(tmp_path)
    assert main(["reproduce", "--protocol", "--scale", "n46k", "--claims", "horizon",
                 "--out", out]) == 0
    _rethreshold(monkeypatch, "horizon", growth_tolerance=2.0)
    capsys.readouterr()
    assert main(["reproduce", "--scale", "n46k", "--claims", "horizon", "--out", out,
                 "--assemble-only", "--jobs", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--reanalyse" in err[0]


@pytest.mark.parametrize("scale", [s.name for s in SIZE_LADDER])
def test_the_committed_20tpp_protocols_are_this_checkouts_rules(scale):
    """The 20:1 ledgers were trained under these committed protocols: a rule changed since
    would make their assembly refuse (or be labelled a re-analysis); this test says so first."""
    folder = ROOT / "docs" / "claims_20tpp" / scale
    committed = json.loads((folder / "protocol.json").read_text())
    if committed["digest"] == digest(_doc(scale)):
        return
    # rules changed after the runs: the committed ledger must be the labelled re-analysis
    # under this checkout's rules, the original protocol kept beside it
    again = folder / "protocol.reanalysis.json"
    assert again.exists(), f"the rules of scale {scale} changed: re-read it (--reanalyse)"
    assert json.loads(again.read_text())["digest"] == digest(_doc(scale)), (
        f"the rules of scale {scale} changed since its re-analysis was committed")
    ledger = json.loads((folder / "claims.json").read_text())
    assert ledger["settings"]["protocol"]["reanalysis"]["recorded"] == committed["digest"]
    assert "RE-ANALYSIS" in (folder / "claims.md").read_text()


def test_write_protocol_records_digest_and_markdown(tmp_path):
    full = write_protocol(tmp_path, _doc("n113k"))
    md = (tmp_path / "protocol.md").read_text()
    assert full["digest"][:12] in md and "central" in md and "gatekeeping" in md
