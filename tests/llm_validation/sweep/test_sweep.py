"""Sweep grids expand as documented; the runner skips finished runs and resumes."""

from __future__ import annotations

import json

import pytest

from llm_validation.sweep.grid import (
    SweepGrid,
    apply_overrides,
    default_base,
    parse_override,
)
from llm_validation.sweep.runner import INDEX_FILE, plan, run_sweep
from llm_validation.validation.runs import is_complete

#: A model small enough that a 2-step run takes well under a second on one core.
MICRO = ("model.n_layer=1", "model.d_model=16", "model.n_head=2", "model.n_kv_head=1",
         "model.d_ff=32", "data.seq_len=16", "run.batch_size=4", "run.eval_batches=1",
         "run.stats_interval=1", "run.momentum_error_interval=0")


def test_grid_expansion_counts_and_names():
    g = SweepGrid(optimizers=("adamw", "muon"), lrs={"adamw": (1e-3, 3e-3), "muon": (0.02,)},
                  taus=(1, 2), lams=(0.5, 1.0), seeds=(0, 1), steps=10)
    pts = g.expand()
    # per (optimizer, lr): sync 1 + 2bw 2 taus + ef 2 lams = 5 modes-points, x 2 seeds
    assert len(pts) == (2 + 1) * 5 * 2
    names = [p.name for p in pts]
    assert len(set(names)) == len(names)
    assert "muon-2bw+ef-lr0.02-mom0.95-bs16-tau1-lam0.5-s1" in names
    assert "adamw-2bw-lr0.001-mom0.9-bs16-tau2-s0" in names
    by = {p.name: p.cfg for p in pts}
    c = by["adamw-2bw-lr0.001-mom0.9-bs16-tau2-s0"]
    assert c.delay.tau == 2 and c.delay.ef_lambda == 0 and c.optim.lr == 1e-3 and c.run.seed == 0
    c = by["muon-sync-lr0.02-mom0.95-bs16-s1"]
    assert c.delay.tau == 0 and c.run.steps == 10


def test_grid_momentum_axis_sets_beta1_for_adamw_and_pipeline_points():
    g = SweepGrid(optimizers=("adamw", "muon"), modes=("2bw",), momenta=(0.8,), seeds=(3,),
                  pipeline="2bw")
    by = {p.cfg.optim.name: p.cfg for p in g.expand()}
    assert by["adamw"].optim.beta1 == 0.8 and by["muon"].optim.momentum == 0.8
    assert by["muon"].run.pipeline == "2bw" and by["muon"].run.stages == 2
    assert by["muon"].run.microbatches >= 2


@pytest.mark.parametrize("bad, match", [
    (dict(modes=("async",)), "modes"), (dict(taus=(0,)), "taus"), (dict(lams=(0.0,)), "lams"),
    (dict(seeds=(-1,)), "seeds"), (dict(optimizers=("lion",)), "optimizers"),
    (dict(lrs={"lion": (1.0,)}), "lrs"), (dict(overrides=("optim.lr",)), "override"),
    (dict(pipeline="gpipe"), "pipeline"),
])
def test_grid_validation(bad, match):
    with pytest.raises(ValueError, match=match):
        SweepGrid(**bad)


def test_overrides():
    assert parse_override("muon:optim.aux_lr=0.003") == ("muon", "optim", "aux_lr", 0.003)
    assert parse_override("optim.schedule=constant") == (None, "optim", "schedule", "constant")
    cfg = apply_overrides(default_base("adamw"), ["optim.beta2=0.99", "muon:optim.lr=1.0"])
    assert cfg.optim.beta2 == 0.99 and cfg.optim.lr != 1.0
    with pytest.raises(ValueError, match="no field"):
        apply_overrides(default_base("adamw"), ["optim.nope=1"])
    with pytest.raises(ValueError):
        apply_overrides(default_base("adamw"), ["optim.beta2=7"])   # TrainConfig validation


def test_sweep_is_resumable_and_skips_finished_runs(tmp_path):
    g = SweepGrid(optimizers=("adamw",), modes=("sync", "2bw"), seeds=(0,), steps=2,
                  overrides=MICRO)
    out = tmp_path / "sweep"
    first = run_sweep(g.expand(), out, jobs=0, progress=False, grid=g.to_dict())
    assert [o.status for o in first] == ["completed", "completed"]
    assert all(is_complete(out / o.name) for o in first)
    index = json.loads((out / INDEX_FILE).read_text())
    assert [r["status"] for r in index["runs"]] == ["completed", "completed"]
    mtime = (out / first[0].name / "metrics.jsonl").stat().st_mtime_ns

    # a bigger grid over the same --out: the two finished runs are skipped, one new run
    g2 = SweepGrid(optimizers=("adamw",), modes=("sync", "2bw", "2bw+ef"), seeds=(0,),
                   steps=2, overrides=MICRO)
    second = run_sweep(g2.expand(), out, jobs=0, progress=False)
    assert [o.status for o in second] == ["skipped", "skipped", "completed"]
    assert (out / first[0].name / "metrics.jsonl").stat().st_mtime_ns == mtime
    assert second[0].final_val_loss == first[0].final_val_loss

    # a started run without checkpoint is restarted; same-name different config is refused
    victim = out / second[2].name
    (victim / "summary.json").unlink()
    (victim / "checkpoints").rename(tmp_path / "gone")
    assert dict((p.name, a) for p, a in plan(g2.expand(), out))[victim.name] == "start"
    third = run_sweep(g2.expand(), out, jobs=0, progress=False)
    assert [o.status for o in third] == ["skipped", "skipped", "completed"]
    g3 = SweepGrid(optimizers=("adamw",), modes=("sync",), seeds=(0,), steps=2,
                   overrides=MICRO + ("optim.beta2=0.99",))
    with pytest.raises(ValueError, match="different config"):
        run_sweep(g3.expand(), out, jobs=0, progress=False)


def test_unfinished_run_with_checkpoint_is_resumed(tmp_path):
    g = SweepGrid(optimizers=("adamw",), modes=("sync",), seeds=(0,), steps=4,
                  overrides=MICRO + ("run.checkpoint_interval=2",))
    out = tmp_path / "s"
    [o] = run_sweep(g.expand(), out, jobs=0, progress=False)
    full = json.loads((out / o.name / "summary.json").read_text())
    # pretend it was killed after step 2: drop the end and the final checkpoint
    run_dir = out / o.name
    (run_dir / "summary.json").unlink()
    for ck in (run_dir / "checkpoints").iterdir():
        if ck.name != "step_00000002.pt":
            ck.unlink()
    [(p, action)] = plan(g.expand(), out)
    assert action == "resume" and p.cfg.run.resume
    [o2] = run_sweep(g.expand(), out, jobs=0, progress=False)
    assert o2.status == "completed"
    assert o2.final_val_loss == full["final_val_loss"]     # bitwise continuation on CPU
