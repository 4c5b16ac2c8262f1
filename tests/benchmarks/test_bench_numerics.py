"""Smoke test of benchmarks/bench_numerics.py at a minimal size (the real run is `make bench`)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path


def test_bench_numerics_smoke(capsys):
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_numerics.py"
    spec = importlib.util.spec_from_file_location("bench_numerics", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--json", "--steps", "8", "--seeds", "1", "--naive-runs", "1",
                     "--ns-size", "32", "--threads", "1", "--workers", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["grid_runs"] == 5 * 5 * 4 * 3 * 2 and out["naive_extrapolated"] is True
    assert out["speedup"] > 0 and out["batched_s"] > 0
    assert all(p["naive_matches_batched_bitwise"] for p in out["per_problem"])
    assert out["newton_schulz_vs_svd"]["size"] == 32
