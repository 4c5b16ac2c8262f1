"""The committed tiny ledger (docs/claims_tiny) as issue 16 accepts it: every inconclusive check
names the seeds it needs, the ladder and the lr sweep are there with their figures, and the
counts in claims.json are the counts of its own verdicts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

LEDGER = Path(__file__).resolve().parents[3] / "docs" / "claims_tiny"


@pytest.fixture(scope="module")
def ledger() -> dict:
    return json.loads((LEDGER / "claims.json").read_text())


def _walk(check: dict):
    yield check
    for part in check.get("parts") or ():
        yield from _walk(part)


def test_every_inconclusive_check_names_the_seeds_it_needs(ledger):
    checks = [c for claim in ledger["claims"] for st in claim["result"]["statements"]
              for c in _walk(st["check"])]
    open_ = [c for c in checks if c["status"] == "inconclusive"]
    assert open_, "a ledger with no open check would make this test vacuous"
    for c in open_:
        assert c["seeds_needed"] and set(c["seeds_needed"]) == {"50%", "80%"}, c["label"]


def test_the_ladder_and_the_lr_sweep_are_there_with_their_figures(ledger):
    ids = {c["id"] for c in ledger["claims"]}
    assert "horizon-ladder" in ids
    sweep = ledger["phases"]["lr_sweep"]["optimizers"]
    assert {"adamw", "muon", "normuon", "soap"} <= set(sweep)
    assert all(o["source"] == "sweep" for o in sweep.values())   # tuned, each interior
    for png in ("horizon-ladder.png", "lr_sweep.png"):
        assert (LEDGER / "figures" / png).stat().st_size > 10_000


def test_counts_are_the_verdicts_counted(ledger):
    paper = Counter(c["result"]["status"] for c in ledger["claims"]
                    if any(st["section"] == "paper" for st in c["result"]["statements"]))
    assert dict(paper) == {k: v for k, v in ledger["counts"].items() if v}


def test_recorded_extra_seeds_are_read_from_either_key(ledger):
    """``--assemble-only`` reads the seeds the extra-seeds phase ran each claim to from the
    recorded claims.json: under ``phases``, and under ``stages`` in the ledgers written before
    (the tiny ledger's first assembly, docs/claims_tiny/issue16, which its rebuild copies)."""
    from llm_validation.claims.reproduce import _recorded_phases

    old = json.loads((LEDGER / "issue16" / "claims.json").read_text())
    assert "stages" in old and "phases" not in old
    exts = _recorded_phases(old)["seeds_policy"]["extensions"]
    assert any(e.get("seeds") for e in exts)            # it extended claims: not vacuous
    assert _recorded_phases(ledger) is ledger["phases"]
    assert _recorded_phases({}) == {}
