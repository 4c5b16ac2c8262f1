"""The committed delay-law protocol (docs/delay_law/ledger/protocol.json) is this checkout's:
its rules' digest and its decision code's digest both match, so every verdict the ledger
assembles is decided by the rules written before its runs."""

from __future__ import annotations

from pathlib import Path

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
