"""The demo's orchestration at the cheapest settings: every stage runs and writes its outputs,
the report links what exists, --json prints the verdict list, re-running reuses the runs."""

from __future__ import annotations

import json

import pytest

from delaybound.demo import FULL, QUICK, DemoSettings, demo_points, run_demo
from llm_validation.sweep.runner import run_sweep

MICRO = ("model.n_layer=2", "model.d_model=16", "model.n_head=2", "model.n_kv_head=1",
         "model.d_ff=32", "data.seq_len=16", "run.batch_size=4", "run.eval_batches=1",
         "run.eval_interval=2", "run.stats_interval=1", "run.momentum_error_interval=2",
         "run.large_batch_factor=2")
TINY = DemoSettings(steps=4, seeds=(0,), verify_examples=1, verify_steps=10, rate_steps=20,
                    rate_quick=True, quick=True, overrides=MICRO)


def test_demo_points_cover_the_brief():
    grid, points = demo_points(FULL)
    names = [p.name for p in points]
    # 2 optimizers x {sync, 2bw, 2bw+ef} x 3 seeds + one real pipeline run
    assert len(points) == 2 * 3 * 3 + 1
    assert sum(p.cfg.run.pipeline == "2bw" for p in points) == 1
    assert {p.cfg.optim.name for p in points} == {"adamw", "muon"}
    assert any(n.startswith("muon-2bw+ef") for n in names)
    assert QUICK.quick and len(QUICK.seeds) == 1 and QUICK.steps < FULL.steps


def test_demo_end_to_end_smallest(tmp_path, capsys):
    out = tmp_path / "demo"
    code, rep = run_demo(out, TINY, jobs=0, json_stream=True)
    printed = json.loads(capsys.readouterr().out)
    status = json.loads((out / "demo_status.json").read_text())
    assert [s["status"] for s in status["stages"]] == ["ok"] * 5, status["stages"]
    assert code == 0
    assert printed["quick"] and printed["verdicts"]
    assert all(v["status"] == "inconclusive" and v["quick"] for v in printed["verdicts"])
    for f in ("theorems.json", "verify.json", "validation.json", "report.md",
              "runs/index.json"):
        assert (out / f).is_file(), f
    assert len(list((out / "runs").glob("*/summary.json"))) == 7
    md = (out / "report.md").read_text()
    assert "QUICK run" in md and "gap_adamw_gt_muon" in md
    for line in md.splitlines():              # every image link resolves
        if line.startswith("!["):
            assert (out / line.split("](")[1].rstrip(")")).is_file(), line
    assert "7 trained, 0 reused" in status["stages"][2]["output"]
    # re-running the demo's training reuses every finished run
    again = run_sweep(demo_points(TINY)[1], out / "runs", jobs=0, progress=False)
    assert [o.status for o in again] == ["skipped"] * 7


def test_demo_settings_validation():
    with pytest.raises(ValueError, match="steps"):
        DemoSettings(steps=0, seeds=(0,), verify_examples=1, verify_steps=1, rate_steps=1,
                     rate_quick=True)
