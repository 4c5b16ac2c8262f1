"""How the verdicts move with the regime: hand-built ledgers, every cell read back."""

from __future__ import annotations

import pytest

from delaybound.cli import main
from llm_validation.claims.report.regime_table import (RegimeRow, claim_statuses, read_ledger,
                                                regime_markdown, regime_rows)
from llm_validation.records.atomic_io import write_json


def _claim(number, cid, status, statements=()):
    return {"number": number, "id": cid, "wording": f"Sentence {number}. More text.",
            "result": {"status": status,
                       "statements": [{"id": s, "status": st} for s, st in statements]}}


TINY = {"claims": [_claim(1, "adamw-vs-muon", "inconclusive"),
                   _claim(2, "ef-halves-gap", "fail"), _claim(15, "alignment", "pass")]}
SMALL = {"claims": [_claim(1, "adamw-vs-muon", "pass"), _claim(2, "ef-halves-gap", "pass"),
                    _claim(15, "alignment", "inconclusive"),
                    _claim(19, "size-ladder", "pass", [("19a", "pass"), ("19b", "pass")])]}
LARGE = {"claims": [_claim(4, "horizon", "inconclusive"),
                    _claim(19, "size-ladder", "pass", [("19a", "pass"), ("19b", "inconclusive"),
                                                       ("19d", "inconclusive")])]}
#: A larger size assembled before claim 19 carried claim 1's synchronous-start arm (19d).
OLD = {"claims": [_claim(19, "size-ladder", "pass", [("19a", "pass"), ("19b", "pass")])]}


def test_cells_read_each_ledger_and_larger_sizes_borrow_the_size_ladder_statement():
    rows = {r.number: r for r in regime_rows(TINY, {"a": SMALL, "b": LARGE, "c": None})}
    # claim 1 at a larger size is 19d (with the synchronous-start arm), never 19a alone
    assert rows[1].cells == {"tiny": "inconclusive", "a": "pass", "b": "inconclusive (19d)",
                             "c": "not run"}
    assert rows[2].cells == {"tiny": "fail", "a": "pass", "b": "inconclusive (19b)",
                             "c": "not run"}
    assert rows[15].cells == {"tiny": "pass", "a": "inconclusive", "b": "-", "c": "not run"}
    assert rows[4].cells["tiny"] == "-" and rows[4].cells["b"] == "inconclusive"
    assert rows[19].cells["tiny"] == "-"
    # the per-size words (no extrapolation across the ladder); size c is not run, so every
    # trend is preliminary
    assert rows[1].trend == "preliminary (c not run): a pass, b inconclusive (19d)"
    assert rows[2].trend == "preliminary (c not run): a pass, b inconclusive (19b)"
    assert rows[15].trend == "-"                    # decided at one size only


def test_a_size_without_the_synchronous_start_arm_leaves_claim_1_inconclusive():
    rows = {r.number: r for r in regime_rows(TINY, {"a": SMALL, "b": OLD})}
    assert rows[1].cells["b"] == ("inconclusive (no synchronous-start arm at this size: claim "
                                  "1's sentence names it)")
    assert rows[2].cells["b"] == "pass (19b)"
    assert rows[1].trend.startswith("a pass, b inconclusive")       # every size run


def test_markdown_has_one_line_per_claim_and_bolds_decided_cells():
    rows = regime_rows(TINY, {"a": SMALL})
    lines = regime_markdown(rows, {"tiny": "tiny", "a": "A"})
    assert lines[0] == "| claim | tiny | A | size trend |"
    assert len(lines) == 2 + len(rows)
    assert "| 1 adamw-vs-muon: Sentence 1. | inconclusive | **pass** |" in lines[2]


def test_statuses_and_reading(tmp_path):
    assert claim_statuses(SMALL)[19] == ("pass", {"19a": "pass", "19b": "pass"})
    assert read_ledger(tmp_path) is None
    write_json(tmp_path / "claims.json", SMALL)
    assert read_ledger(tmp_path) == read_ledger(tmp_path / "claims.json") == SMALL
    with pytest.raises(ValueError, match="number"):
        RegimeRow(number=0, claim_id="x", wording="y")


def test_cli_writes_the_regime_table(tmp_path, capsys):
    (tmp_path / "tiny").mkdir()
    write_json(tmp_path / "tiny" / "claims.json", TINY)
    (tmp_path / "R").mkdir()
    assert main(["reproduce", "--size-ladder", str(tmp_path / "R"),
                 "--tiny", str(tmp_path / "tiny")]) == 0
    out = capsys.readouterr().out
    assert "regime.md" in out
    text = (tmp_path / "R" / "regime.md").read_text()
    assert "| 15 alignment: Sentence 15. | **pass** | not run | not run | not run | - |" in text
    assert main(["reproduce", "--size-ladder", str(tmp_path / "R"),
                 "--tiny", str(tmp_path / "nope")]) == 2
    assert "no claims.json" in capsys.readouterr().err
