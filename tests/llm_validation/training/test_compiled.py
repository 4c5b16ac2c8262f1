"""``run.compile``: the config field, its names, and a short compiled run against eager.

Compilation on a shared 2-core CPU is slow to warm up, so the compiled runs are few (three) and
tiny (the n46k ledger shape for 40 steps); the eager runs that give the seed noise are cheap.
"""

from __future__ import annotations

import dataclasses
import statistics

import pytest
import torch

from llm_validation.config import (DIGEST_LEGACY, DataConfig, DelayConfig, OptimConfig,
                                   RunConfig, TrainConfig, preset)
from llm_validation.rundir import RunPaths, read_metrics
from llm_validation.records.run_name import point_name
from llm_validation.sweep.grid import SweepGrid
from llm_validation.training.compiled import COMPILED_FINAL_LOSS_RTOL
from llm_validation.training.loop import train

SEEDS = (0, 1, 2)


def _cfg(out, *, tau: int, seed: int, compile: bool, steps: int = 40) -> TrainConfig:
    return TrainConfig(
        model=preset("n46k"), data=DataConfig(seq_len=64),
        optim=OptimConfig(name="adamw", lr=3e-3, warmup_steps=2),
        delay=DelayConfig(tau=tau),
        run=RunConfig(steps=steps, seed=seed, batch_size=16, microbatches=2, eval_interval=20,
                      eval_batches=2, stats_interval=15, compile=compile, out_dir=str(out)))


def test_config_field_is_validated_and_recorded():
    with pytest.raises(TypeError, match="RunConfig.compile"):
        RunConfig(compile="yes")
    with pytest.raises(ValueError, match="RunConfig.compile"):
        RunConfig(compile=True, pipeline="2bw", stages=2)
    with pytest.raises(ValueError, match="RunConfig.compile"):
        RunConfig(compile=True, data_parallel=2)
    cfg = _cfg("x", tau=1, seed=0, compile=True)
    assert cfg.to_dict()["run"]["compile"] is True
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    assert DIGEST_LEGACY["run.compile"] is False


def test_compiled_runs_have_their_own_names():
    from llm_validation.records.run_name import run_name

    eager, comp = (_cfg("x", tau=1, seed=0, compile=c) for c in (False, True))
    assert run_name(eager) != run_name(comp)
    # an eager config's name is the name it had before the field existed: the digest leaves
    # the field out while it holds its legacy value
    d = eager.to_dict()
    del d["run"]["compile"]
    assert run_name(TrainConfig.from_dict(d)) == run_name(eager)
    assert point_name(comp).endswith("-compiled-s0") and "compiled" not in point_name(eager)
    grid = SweepGrid(optimizers=("adamw",), modes=("sync",), seeds=(0,), steps=2,
                     overrides=("run.compile=true",))
    (point,) = grid.expand()
    assert point.cfg.run.compile and "compiled" in point.name


def test_train_flag_maps_to_the_field_and_the_default_name():
    import argparse

    from delaybound.cmd_train import config_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    cfg = config_from_args(parser.parse_args(["train", "--compile", "--steps", "3"]))
    assert cfg.run.compile is True and "-compiled-s0-" in cfg.run.out_dir
    cfg = config_from_args(parser.parse_args(["train", "--steps", "3"]))
    assert cfg.run.compile is False and "compiled" not in cfg.run.out_dir


def _losses(out) -> list[float]:
    return [r["loss"] for r in read_metrics(RunPaths(out).metrics) if r.get("kind") == "train"]


def test_compiled_run_repeats_bitwise_and_stays_within_tolerance_and_seed_noise(tmp_path,
                                                                                one_thread):
    eager = {(tau, s): train(_cfg(tmp_path / f"e{tau}{s}", tau=tau, seed=s, compile=False),
                             progress=False) for tau in (0, 1) for s in SEEDS}
    comp = {tau: train(_cfg(tmp_path / f"c{tau}", tau=tau, seed=0, compile=True),
                       progress=False) for tau in (0, 1)}
    again = train(_cfg(tmp_path / "c0again", tau=0, seed=0, compile=True), progress=False)
    # same seed, same machine: the compiled run repeats bitwise (every step's loss, the end)
    assert _losses(tmp_path / "c0again") == _losses(tmp_path / "c0")
    assert again.final_val_loss == comp[0].final_val_loss
    assert again.steady_tokens_per_s is not None
    for tau in (0, 1):
        e, c = eager[(tau, 0)].final_val_loss, comp[tau].final_val_loss
        assert abs(c - e) <= COMPILED_FINAL_LOSS_RTOL * abs(e), (tau, c, e)
    # the paired sync/2BW gap: compiled vs eager within the eager gap's seed spread
    gaps = [eager[(1, s)].final_val_loss - eager[(0, s)].final_val_loss for s in SEEDS]
    noise = statistics.stdev(gaps)
    gap_c = comp[1].final_val_loss - comp[0].final_val_loss
    assert noise > 0
    assert abs(gap_c - gaps[0]) <= noise, (gap_c, gaps, noise)


def test_steady_rate_is_recorded_beside_the_whole_invocation_rate(tmp_path):
    short = dataclasses.replace(_cfg(tmp_path / "r", tau=1, seed=0, compile=False).run,
                                steps=2)
    res = train(_cfg(tmp_path / "r", tau=1, seed=0, compile=False).replace(run=short),
                progress=False)
    assert res.tokens_per_s > 0
    assert res.steady_tokens_per_s is None          # both steps are warm-up
    res = train(_cfg(tmp_path / "r6", tau=1, seed=0, compile=False, steps=6), progress=False)
    assert res.steady_tokens_per_s > 0
