"""Smoke test of benchmarks/bench_delay.py at a minimal size (the timing itself is not
asserted; the memory accounting is exact)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_delay.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_delay", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_delay_minimal_run(capsys):
    bench = _load()
    assert bench.main(["--json", "--preset", "tiny", "--reps", "1", "--warmup", "0",
                       "--batch-size", "2", "--seq-len", "16", "--no-gpu"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("overhead_delay", "overhead_ef"):
        assert isinstance(out[key], float)
    assert out["extra_weight_copies_delay"] == 1.0      # exactly tau = 1 copy
    assert out["extra_weight_copies_ef"] == 2.0         # plus the EF buffer
    assert out["cpu"]["extra_bytes_delay"] == out["cpu"]["param_bytes"]
