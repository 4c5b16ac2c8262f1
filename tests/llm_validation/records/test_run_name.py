"""One home for run names (``records/run_name.py``): sweeps, the ledger, the delay-law design and
``delaybound train``'s default folder all name a run through it."""

from __future__ import annotations

import argparse
import dataclasses

from delaybound.cmd_train import config_from_args, register
from llm_validation.records.run_name import config_digest, default_out_dir, point_name, run_name
from llm_validation.sweep.grid import SweepGrid, default_base


def _train(*argv: str):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return config_from_args(parser.parse_args(["train", *argv]))


def test_run_name_is_the_point_name_and_the_digest():
    cfg = default_base("muon", steps=5)
    digest = config_digest(cfg)
    assert len(digest) == 8 and int(digest, 16) >= 0
    assert run_name(cfg) == f"{point_name(cfg)}-{digest}"
    other = cfg.replace(run=dataclasses.replace(cfg.run, eval_batches=cfg.run.eval_batches + 1))
    assert point_name(other) == point_name(cfg) and run_name(other) != run_name(cfg)


def test_sweep_points_are_named_by_the_home():
    grid = SweepGrid(optimizers=("adamw", "muon"), modes=("sync", "2bw+ef"), lrs=(1e-3, 2e-3),
                     weight_decays=(0.0, 0.1), seeds=(0,), steps=3)
    swept = grid.swept()
    points = grid.expand()
    assert len(points) == 16
    assert all(p.name == point_name(p.cfg, swept) for p in points)
    assert any("-wd0-" in p.name for p in points)          # a swept axis is in the name


def test_the_delay_law_path_is_the_same_function():
    """The delay-law design imports ``run_name`` from ``claims.plan.plan``: the same function."""
    from llm_validation.claims.plan import plan

    assert plan.run_name is run_name


def test_train_defaults_to_the_run_name_of_its_settings():
    cfg = _train("--steps", "3", "--lr", "2e-3")
    assert cfg.run.out_dir == default_out_dir(cfg) == f"runs/{run_name(cfg)}"
    assert _train("--steps", "3", "--lr", "2e-3").run.out_dir == cfg.run.out_dir   # found again
    assert _train("--steps", "3", "--lr", "3e-3").run.out_dir != cfg.run.out_dir   # never shared
    # a field set by --set is part of the name too; an explicit folder wins
    assert _train("--steps", "3", "--lr", "2e-3", "--set", "optim.beta2=0.9").run.out_dir \
        != cfg.run.out_dir
    assert _train("--steps", "3", "--out", "here").run.out_dir == "here"
    assert _train("--steps", "3", "--set", "run.out_dir=there").run.out_dir == "there"
