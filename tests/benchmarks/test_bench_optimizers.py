"""Smoke test of benchmarks/bench_optimizers.py at a minimal size: the JSON's shape and the
ratios' definitions (the timings themselves are not asserted)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_optimizers.py"
#: Shrink the tiny base runs so the whole benchmark takes seconds.
SMALL = ["--set", "run.batch_size=2", "--set", "run.microbatches=1", "--set",
         "data.seq_len=16", "--set", "run.eval_batches=1", "--final-eval-batches", "2"]


def _load():
    spec = importlib.util.spec_from_file_location("bench_optimizers", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_optimizers_json_shape(capsys):
    bench = _load()
    assert bench.main(["--json", "--optimizers", "adamw,muon", "--reps", "1", "--steps", "3",
                       *SMALL]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["optimizers"]) == {"adamw", "muon"}
    assert set(out["optimizers"]["muon"]) >= {"before", "after_ns", "after",
                                              "speedup_after_over_before"}
    assert "after_ns" not in out["optimizers"]["adamw"]       # no Newton-Schulz there
    for variants in out["optimizers"].values():
        for v in ("before", "after"):
            e = variants[v]
            assert e["tokens_per_s"] > 0 and e["sec_per_step"] > 0 and e["train_step_s"] > 0
            assert isinstance(e["step_ratio_over_adamw"], float)
    assert out["optimizers"]["adamw"]["before"]["step_ratio_over_adamw"] == 1.0
    assert out["optimizers"]["muon"]["before"]["ns_dtype"] == "bfloat16"
    assert out["optimizers"]["muon"]["after"]["ns_dtype"] == out["machine"]["auto_ns_dtype"]
    assert out["goal_met"] == (out["worst_ns_step_ratio_after"] <= bench.GOAL_RATIO)


def test_bench_optimizers_refuses_an_unknown_optimizer(capsys):
    assert _load().main(["--json", "--optimizers", "adam"]) == 2
    assert "--optimizers" in capsys.readouterr().err
