"""`delaybound verify` and `delaybound plot`: JSON output, exit codes, figures."""

from __future__ import annotations

import dataclasses
import json

import pytest

from delaybound.cli import main


def test_verify_json_reports_zero_violations(capsys):
    code = main(["verify", "--theorem", "star_convex_sync", "--theorem", "nonconvex_delayed",
                 "--examples", "4", "--steps", "40", "--seeds", "2", "--no-predicates", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["violations"] == 0
    assert [r["theorem"] for r in out["theorems"]] == ["star_convex_sync", "nonconvex_delayed"]
    for r in out["theorems"]:
        assert r["instances"] == 4 and r["violations"] == 0
        assert 0 < r["worst"]["ratio"] <= 1.5 and "tau" in r["worst"]["config"]


def test_verify_exits_1_on_a_violation(monkeypatch, capsys):
    """A planted too-small bound must give exit code 1 and be listed."""
    import theory

    thm = theory.THEOREMS["nonconvex_delayed"]
    planted = {**theory.THEOREMS, "nonconvex_delayed": dataclasses.replace(thm, bound=thm.bound / 1000)}
    monkeypatch.setattr(theory, "THEOREMS", planted)
    code = main(["verify", "--theorem", "nonconvex_delayed", "--examples", "3", "--steps", "30",
                 "--no-predicates"])
    out = capsys.readouterr().out
    assert code == 1 and "VIOLATION" in out


def test_verify_unknown_theorem_is_a_one_line_error(capsys):
    assert main(["verify", "--theorem", "nope", "--examples", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "theorem='nope'" in err[0]


def test_verify_rejects_bad_examples():
    with pytest.raises(SystemExit) as exc:
        main(["verify", "--examples", "0"])
    assert exc.value.code == 2


def test_plot_rates_quick_writes_four_pngs(tmp_path, capsys):
    assert main(["plot", "rates", "--out", str(tmp_path), "--quick", "--steps", "100"]) == 0
    names = sorted(p.name for p in tmp_path.glob("*.png"))
    assert names == ["ef_gain.png", "gap_heatmap.png", "pl_law.png", "rates.png"]
    assert all(p.stat().st_size > 10_000 for p in tmp_path.glob("*.png"))
