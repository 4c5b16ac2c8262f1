"""The Schedule2BW overhead benchmark runs and reports every figure (no timing asserted)."""

from __future__ import annotations

import json

from benchmarks.bench_schedule2bw_overhead import main


def test_reports_every_case(tmp_path, capsys):
    out = tmp_path / "o.json"
    assert main(["--tensors", "4", "6", "--iters", "1", "--repeats", "1", "--json",
                 "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == json.loads(out.read_text())
    assert [c["tensors"] for c in report["cases"]] == [4, 6]
    for c in report["cases"]:
        for key in ("direct_ms", "before_ms", "after_ms", "step_loops_ms", "step_foreach_ms"):
            assert c[key] > 0
