"""Smoke tests of the statistics-norm, compiled-loop and loop-rate benchmarks at minimal sizes
(the timings themselves are not asserted; the norms' agreement with the SVD is)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_compile  # noqa: E402
import bench_loop_rate  # noqa: E402
import bench_stats_norms  # noqa: E402

from theory.matrix_norms import NUCLEAR_RTOL, SPECTRAL_RTOL  # noqa: E402


def test_bench_stats_norms_minimal_run(capsys):
    assert bench_stats_norms.main(["--json", "--preset", "tiny", "--small-preset", "tiny",
                                   "--batch-size", "4", "--seq-len", "16", "--steps", "4",
                                   "--small-steps", "5", "--reps", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    norms = out["norms"]
    assert norms["matrices"] == 28 and sum(norms["shapes"].values()) == 28
    assert norms["max_rel_err_vs_svd"]["nuclear"] <= NUCLEAR_RTOL
    assert norms["max_rel_err_vs_svd"]["spectral"] <= SPECTRAL_RTOL
    for part in ("evaluation", "interval"):
        for method in ("before", "after"):
            r = out[part][method]
            assert r["stats_step_s"] > 0 and r["plain_step_s"] > 0
            assert r["eval_over_step"] == (r["stats_step_s"] - r["plain_step_s"]) / \
                r["plain_step_s"]
        assert isinstance(out[part]["goal_met"], bool)


def test_bench_compile_minimal_run(capsys):
    assert bench_compile.main(["--json", "--sizes", "n46k", "--steps", "5", "--reps", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    r = out["sizes"]["n46k"]
    assert r["runs"]["compiled"][0]["steady_tokens_per_s"] > 0
    assert r["speedup"] == r["speedups"][0] > 0 and isinstance(r["goal_met"], bool)


def test_bench_loop_rate_minimal_run(capsys):
    assert bench_loop_rate.main(["--json", "--preset", "tiny", "--batch-size", "2",
                                 "--seq-len", "16", "--steps", "4", "--reps", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ratio"] == out["ratios"][0] > 0
    assert out["loop"][0]["steady_tokens_per_s"] > 0 and isinstance(out["goal_met"], bool)
