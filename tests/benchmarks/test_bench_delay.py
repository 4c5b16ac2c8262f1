"""Smoke test of benchmarks/bench_delay.py at a minimal size (the timing itself is not
asserted; the memory accounting is exact)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

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


def test_bench_delay_profile_in_the_same_call(capsys):
    bench = _load()
    assert bench.main(["--json", "--preset", "tiny", "--reps", "1", "--warmup", "1",
                       "--batch-size", "2", "--seq-len", "16", "--no-gpu", "--profile",
                       "--profile-steps", "2"]) == 0
    captured = capsys.readouterr()
    prof = json.loads(captured.out)["cpu"]["profile"]
    assert prof["steps"] == 2 and prof["kind"] == "cpu operators"
    assert 0 < len(prof["top_ops"]) <= 12
    times = [r["self_ms_per_step"] for r in prof["top_ops"]]
    assert times == sorted(times, reverse=True) and times[0] > 0
    assert 0 < prof["in_ops_share"] <= 1.0
    assert "top cpu operators by self time" in captured.err
    assert "inside operators" in captured.err


def test_device_gaps_of_a_kernel_timeline():
    """Kernels at [0, 10], [5, 20] (overlapping), [50, 60], [61, 70] us: busy 39 of 70 us,
    gaps 30 us (host-bound, over 10 us) and 1 us."""
    import sys
    from types import SimpleNamespace

    import torch

    sys.path.insert(0, str(BENCH.parent))
    from step_profile import _device_gaps

    cuda = torch.autograd.DeviceType.CUDA
    ev = [SimpleNamespace(device_type=cuda, time_range=SimpleNamespace(start=s, end=e))
          for s, e in ((0, 10), (5, 20), (50, 60), (61, 70))]
    ev.append(SimpleNamespace(device_type=torch.autograd.DeviceType.CPU,
                              time_range=SimpleNamespace(start=20, end=50)))
    out = _device_gaps(ev)
    assert out["device_busy_share"] == pytest.approx(39 / 70)
    g = out["device_gaps"]
    assert g["count"] == 2 and g["total_ms"] == pytest.approx(0.031)
    assert g["over_10us"] == 1 and g["largest_ms"] == pytest.approx(0.030)
    assert _device_gaps([]) == {"device_busy_share": None, "device_gaps": None}
