"""The committed delay-law protocol (docs/delay_law/ledger/protocol.json) is this checkout's:
its rules' digest and its decision code's digest both match, so every verdict the ledger
assembles is decided by the rules written before its runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_validation.delay_law.protocol import PROTOCOL_FILE, check, code_digest
from llm_validation.records.atomic_io import read_json

LEDGER = Path(__file__).resolve().parents[3] / "docs" / "delay_law" / "ledger"


def test_the_committed_protocol_is_the_checkouts():
    recorded = read_json(LEDGER / PROTOCOL_FILE)
    state = check(LEDGER)                       # raises ProtocolMismatch on other rules
    assert state["reanalysis"] is None and state["digest"] == recorded["digest"]
    assert recorded["code_digest"] == code_digest(), (
        "the decision code changed after the delay-law protocol was committed: its verdicts "
        "would no longer be decided by the code written before the runs")


def test_the_committed_predictions_are_the_checkouts_laws():
    """Once committed, predictions.json holds every candidate law's prediction (per arm and
    quantity) for exactly the design's held-out cells, fitted on every training run, each
    estimate inside its interval."""
    from llm_validation.delay_law import design
    from llm_validation.delay_law.laws import candidate_laws
    from llm_validation.delay_law.ledger import LAW_ARMS, PREDICTIONS_FILE, QUANTITIES
    path = LEDGER / PREDICTIONS_FILE
    if not path.exists():
        pytest.skip("predictions.json is written when the training phase finishes")
    doc = read_json(path)
    held = [c.name for c in design.cells() if c.held_out]
    assert doc["held_out"] == held and doc["train_missing"] == [] and doc["written_at"]
    assert set(doc["laws"]) == {f"{a}:{q}:{law.name}" for a in LAW_ARMS for q in QUANTITIES
                                for law in candidate_laws()}
    fitted = [e["predictions"] for e in doc["laws"].values() if "predictions" in e]
    assert fitted, "no law could be fitted on the training cells"
    for preds in fitted:
        assert list(preds) == held
        assert all(p["lo"] <= p["estimate"] <= p["hi"] for p in preds.values())
