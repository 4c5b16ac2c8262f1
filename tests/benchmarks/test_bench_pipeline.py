"""Smoke test of benchmarks/bench_pipeline.py at a minimal size: it runs the three schedules
and reports the fields the acceptance reads (the figures themselves come from a full run)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tests.llm_validation.pipeline.support import small_corpus

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_pipeline.py"


def test_bench_pipeline_smoke(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")    # main() sets it; restored afterwards
    spec = importlib.util.spec_from_file_location("bench_pipeline", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    code = bench.main(["--json", "--preset", "tiny", "--stages", "2", "--microbatches", "P",
                       "--micro-batch", "1", "--seq-len", "8", "--steps", "4", "--warmup", "1",
                       "--repeats", "1", "--data", small_corpus(tmp_path),
                       "--data-parallel", "1", "2", "--log-intervals", "1",
                       "--out", str(tmp_path / "runs")])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    row, dp_row = report["results"]
    assert row["limit"] == 1.5 and row["stages"] == 2 and row["microbatches"] == 2
    assert row["data_parallel"] == 1 and dp_row["data_parallel"] == 2
    for kind in ("2bw", "1f1b", "gpipe"):
        assert row[kind]["tokens_per_s"] > 0 and row[kind]["steps_timed"] == 2
    assert row["fraction_of_limit"] == row["ratio_2bw_over_1f1b"] / row["limit"]
    assert report["fraction_of_limit"] == row["fraction_of_limit"]
    assert "gpu" in report and report["threads_per_stage"] == 1
    for r in (row, dp_row):          # 2BW: two weight versions per stage, 1F1B: one
        assert r["weight_copies"] == {**{"2bw": [2.0, 2.0], "1f1b": [1.0, 1.0]},
                                      **({"gpipe": [1.0, 1.0]} if "gpipe" in r else {})}
    assert "gpipe" not in dp_row and dp_row["2bw"]["tokens_per_s"] > 0
