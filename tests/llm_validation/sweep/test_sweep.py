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
    (dict(seeds=(-1,)), "seeds"), (dict(optimizers=("lamb",)), "optimizers"),
    (dict(lrs={"lamb": (1.0,)}), "lrs"), (dict(overrides=("optim.lr",)), "override"),
    (dict(pipeline="gpipe"), "pipeline"), (dict(schedules=("step",)), "schedules"),
    (dict(corrections=("pipemare",)), "corrections"),
    (dict(corrections=("dcasgd",)), "correction_coefs"),
    (dict(corrections=("dcasgd",), correction_coefs={"nesterov": (0.9,)}), "correction_coefs"),
    (dict(correction_coefs={"pipemare": (1.0,)}), "correction_coefs"),
    (dict(sync_starts=(-1,)), "sync_starts"),
    (dict(pipeline="2bw", sync_cooldowns=(5,)), "no flush"),
])
def test_grid_validation(bad, match):
    with pytest.raises(ValueError, match=match):
        SweepGrid(**bad)


def test_grid_names_of_configs_without_the_new_fields_are_unchanged():
    """The names of the original axes' points are the ones existing run directories carry."""
    g = SweepGrid(optimizers=("adamw", "muon", "sgd"), lrs=(1e-3,), momenta=(0.9,),
                  batch_sizes=(8,), taus=(1, 2), lams=(0.5,), seeds=(0,), pipeline="2bw",
                  overrides=("optim.beta2=0.99", "optim.weight_decay=0.0"))
    names = {p.name for p in g.expand()}
    assert {"adamw-sync-lr0.001-mom0.9-bs8-s0", "muon-2bw-lr0.001-mom0.9-bs8-tau1-pp2-s0",
            "sgd-2bw-lr0.001-mom0.9-bs8-tau2-s0",
            "adamw-2bw+ef-lr0.001-mom0.9-bs8-tau1-lam0.5-s0"} <= names
    assert len(names) == 3 * 4


def test_grid_new_optimizers_and_optimizer_axes():
    g = SweepGrid(optimizers=("normuon", "soap", "lion", "adan", "nadamw"), modes=("sync",),
                  momenta=(0.8,), beta2s=(0.9, 0.99), weight_decays=(0.0,), warmups=(5,),
                  grad_clips=(1.0,), schedules=("wsd",), seeds=(0,), steps=10)
    by = {p.name: p.cfg for p in g.expand()}
    assert len(by) == 5 * 2
    c = by["lion-sync-lr0.0003-mom0.8-bs16-beta2_0.99-wd0-warm5-wsd-clip1-s0"].optim
    assert (c.name, c.beta1, c.beta2, c.weight_decay, c.warmup_steps, c.grad_clip,
            c.schedule) == ("lion", 0.8, 0.99, 0.0, 5, 1.0, "wsd")
    assert by["normuon-sync-lr0.01-mom0.8-bs16-beta2_0.9-wd0-warm5-wsd-clip1-s0"] \
        .optim.momentum == 0.8
    assert by["adan-sync-lr0.001-mom0.8-bs16-beta2_0.9-wd0-warm5-wsd-clip1-s0"].optim.beta1 == 0.8


def test_grid_delay_axes_sync_phases_and_corrections():
    g = SweepGrid(optimizers=("adamw",), taus=(1,), lams=(1.0,), seeds=(0,),
                  sync_starts=(0, 20), sync_cooldowns=(10,),
                  corrections=("none", "dcasgd", "nesterov"),
                  correction_coefs={"dcasgd": (0.1, 1.0), "nesterov": (0.9,)})
    by = {p.name: p.cfg for p in g.expand()}
    # sync: 1; 2bw: 2 phases x (none + 2 dcasgd + 1 nesterov); 2bw+ef: 2 phases
    assert len(by) == 1 + 2 * 4 + 2
    assert "adamw-sync-lr0.001-mom0.9-bs16-s0" in by           # no phase or correction parts
    d = by["adamw-2bw-lr0.001-mom0.9-bs16-tau1-dcasgd0.1-sync20-cool10-s0"].delay
    assert (d.tau, d.correction, d.correction_coef, d.sync_start, d.sync_cooldown) == \
        (1, "dcasgd", 0.1, 20, 10)
    d = by["adamw-2bw+ef-lr0.001-mom0.9-bs16-tau1-lam1-cool10-s0"].delay
    assert (d.ef_lambda, d.correction, d.sync_start, d.sync_cooldown) == (1.0, "none", 0, 10)
    assert "adamw-2bw-lr0.001-mom0.9-bs16-tau1-nesterov0.9-cool10-s0" in by
    same = SweepGrid(optimizers=("adamw",), modes=("2bw",), seeds=(0,),
                     corrections=("dcasgd",), correction_coefs=(0.5,))
    assert [p.name for p in same.expand()] == ["adamw-2bw-lr0.001-mom0.9-bs16-tau1-dcasgd0.5-s0"]
    assert SweepGrid.from_dict(g.to_dict()).expand() == g.expand()


def test_overrides():
    assert parse_override("muon:optim.aux_lr=0.003") == ("muon", "optim", "aux_lr", 0.003)
    assert parse_override("optim.schedule=constant") == (None, "optim", "schedule", "constant")
    cfg = apply_overrides(default_base("adamw"), ["optim.beta2=0.99", "muon:optim.lr=1.0"])
    assert cfg.optim.beta2 == 0.99 and cfg.optim.lr != 1.0
    with pytest.raises(ValueError, match="optim.nope is not a config field"):
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
    # the checkpoint and log intervals do not change a run's numbers (config.DIGEST_NEUTRAL):
    # the finished runs are the same points under other intervals, and are skipped
    g4 = SweepGrid(optimizers=("adamw",), modes=("sync", "2bw", "2bw+ef"), seeds=(0,),
                   steps=2, overrides=MICRO + ("run.checkpoint_interval=1", "run.log_interval=2"))
    assert [a for _, a in plan(g4.expand(), out)] == ["skip", "skip", "skip"]


def test_a_run_made_before_the_newer_config_fields_is_still_the_same_point(tmp_path):
    """config.json of an older run lacks the fields added since: they take their defaults."""
    g = SweepGrid(optimizers=("adamw",), modes=("2bw",), seeds=(0,), steps=2, overrides=MICRO)
    out = tmp_path / "s"
    [o] = run_sweep(g.expand(), out, jobs=0, progress=False)
    path = out / o.name / "config.json"
    saved = json.loads(path.read_text())
    for section, names in (("optim", ("grad_clip", "wsd_decay_fraction")),
                           ("delay", ("sync_start", "sync_cooldown", "correction",
                                      "correction_coef"))):
        for n in names:
            del saved[section][n]
    path.write_text(json.dumps(saved))
    assert [a for _, a in plan(g.expand(), out)] == ["skip"]


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
