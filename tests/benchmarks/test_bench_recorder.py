"""Smoke test of benchmarks/bench_recorder.py at a minimal size (the timing itself is not
asserted: speed is measured by the benchmark, not by unit tests)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_recorder.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_recorder", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_recorder_minimal_run(capsys):
    bench, threads = _load(), torch.get_num_threads()
    try:          # one thread: a tiny model on a loaded 2-core machine is fastest so
        assert bench.main(["--json", "--reps", "10", "--warmup", "0", "--batch-size", "2",
                           "--seq-len", "8", "--threads", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = json.loads(capsys.readouterr().out)
    for name in ("rows", "stats10", "stats1"):
        assert isinstance(out[f"overhead_{name}"], float)
    assert set(out["step_s_mean"]) == {"plain", "rows", "stats10", "stats1"}
    with pytest.raises(ValueError, match="multiple"):
        bench.measure(reps=15)
