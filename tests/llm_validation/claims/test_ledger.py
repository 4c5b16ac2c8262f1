"""The ledger on synthetic runs: claims.json / claims.md / figures, and a second invocation
of the runner that trains nothing."""

from __future__ import annotations

import json

from llm_validation.claims.ledger import RUNS_DIR, assemble, write_ledger
from llm_validation.claims.plan import build_plan, execute
from llm_validation.claims.registry import get_claims
from llm_validation.claims.scales import get_scale
from tests.llm_validation.claims.synthetic import write_runs
from tests.llm_validation.claims.scenarios import SCENARIOS

IDS = ("adamw-vs-muon", "ef-halves-gap", "horizon")


def _ledger(tmp_path):
    claims = get_claims(IDS)
    plan = build_plan(claims, get_scale("tiny"), seeds=(0, 1, 2))
    for c in claims:
        write_runs(tmp_path / RUNS_DIR, c, plan, SCENARIOS[c.id][0])
    return plan


def test_finished_runs_are_reused_not_retrained(tmp_path):
    plan = _ledger(tmp_path)
    summary = execute(plan, tmp_path / RUNS_DIR, jobs=0, progress=False)
    assert summary.ran == 0 and summary.reused == len(plan.runs) and not summary.errors
    index = json.loads((tmp_path / RUNS_DIR / "index.json").read_text())
    assert {r["status"] for r in index["runs"]} == {"skipped"}


def test_claims_json_and_markdown(tmp_path):
    plan = _ledger(tmp_path)
    results = assemble(plan, tmp_path)
    doc = write_ledger(plan, results, tmp_path)
    saved = json.loads((tmp_path / "claims.json").read_text())
    assert [c["id"] for c in saved["claims"]] == list(IDS) == [r.id for r in results]
    assert saved["counts"] == doc["counts"] and saved["settings"]["seeds"] == [0, 1, 2]
    first = saved["claims"][0]
    assert first["result"]["status"] == "pass" and first["reason"] and first["grid"]
    assert first["result"]["checks"][0]["interval"]["n"] == 3
    md = (tmp_path / "claims.md").read_text()
    for r in results:
        assert f"## {get_claims([r.id])[0].number}. {r.id}" in md
        assert (tmp_path / r.plot).is_file() and f"]({r.plot})" in md
    assert "theory predicts:" in md and "why this grid:" in md
