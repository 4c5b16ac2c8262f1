"""The README's advise projection table comes from a command: one row per (P, tokens), its
columns read from advise's own result."""

from __future__ import annotations

import json

from benchmarks import advise_projection


def test_one_row_from_the_committed_ledger(capsys):
    assert advise_projection.main(["--stages", "8", "--tokens", "1e9", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (r,) = doc["rows"]
    assert (r["stages"], r["microbatches"], r["tokens"]) == (8, 32, 1e9)
    assert r["speedup_2bw"] > 1 and r["extra_gib_2bw"] > 0           # 2BW: no flush, 2 copies
    assert r["time_2bw"]["lo"] <= r["time_2bw"]["ratio"] <= r["time_2bw"]["hi"]
    assert r["recommended"] in ("1f1b", "2bw", "2bw+ef", "zb-h1", "gpipe")
    assert advise_projection.main(["--stages", "8", "--tokens", "1e9"]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert len(table) == 3 and table[2].startswith("| 8 | 32 | 1e9 | 15,259 |")


def test_a_law_that_never_reaches_the_target_prints_never():
    assert advise_projection._ratio_text(float("inf")) == "never"
    assert advise_projection._ratio_text(0.954) == "0.95"
