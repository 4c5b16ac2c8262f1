"""Checkpoints keyed by global parameter names: a run saved on one grid continues on another
where the maths is the same, bitwise on CPU (``ordered`` data-parallel reduction)."""

from __future__ import annotations

import dataclasses

import pytest

from llm_validation.config import OptimConfig
from llm_validation.pipeline.checkpoint import grid_of, latest_complete
from llm_validation.rundir import RunPaths, load_config
from llm_validation.records.atomic_io import read_json
from llm_validation.run import run as launch
from tests.llm_validation.pipeline.support import (assert_same_run, dp_cfgs, emulate, pipe_cfg,
                                                   small_corpus)

#: The first leg stops after this many steps (a checkpoint), the second finishes the run.
FIRST, STEPS = 2, 4
#: A constant learning rate: the first leg's shorter ``steps`` leaves the schedule unchanged.
CONSTANT = OptimConfig(name="muon", lr=0.02, schedule="constant")


@pytest.fixture(autouse=True)
def _ordered_reduce(pipeline_env, monkeypatch):
    monkeypatch.setenv("DELAYBOUND_DP_REDUCE", "ordered")


def _leg(cfg, **run):
    return dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, **run))


def test_p2_x_d2_continues_as_p2_x_d1(tmp_path):
    """P2 x D2 with M = 2 for 2 steps, then P2 x D1 with M = 4 (the same 4 microbatches of
    every batch): the same run as the emulator with M = 4, metrics and weights bitwise."""
    corpus = small_corpus(tmp_path)
    cfg, ref_cfg = dp_cfgs(tmp_path, corpus, pipeline="2bw", P=2, D=2, steps=STEPS,
                           optim=CONSTANT)
    first = launch(_leg(cfg, steps=FIRST))
    assert first.status == "completed"
    assert grid_of(latest_complete(RunPaths(cfg.run.out_dir))[1]) == (2, 2)
    second = _leg(cfg, data_parallel=1, microbatches=4, resume=True)
    got = launch(second)
    assert got.status == "completed" and got.steps == STEPS
    assert read_json(f"{got.run_dir}/config.json")["meta"]["resumed_from_step"] == FIRST
    assert grid_of(latest_complete(RunPaths(cfg.run.out_dir))[1]) == (2, 1)
    assert_same_run(got.run_dir, emulate(ref_cfg).run_dir, second)


def test_p2_continues_in_the_emulator_and_other_maths_is_refused(tmp_path):
    """2BW on P = 2 for 2 steps, then the emulator (tau = 1, P = 1): bitwise the emulated run.
    A change of the microbatch split, or to a synchronous schedule, is refused."""
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, M=2, steps=STEPS,
                   optim=CONSTANT)
    assert launch(_leg(cfg, steps=FIRST)).status == "completed"
    with pytest.raises(ValueError, match="data_parallel x microbatches"):
        launch(_leg(cfg, microbatches=4, resume=True))
    sync = dataclasses.replace(cfg, delay=dataclasses.replace(cfg.delay, tau=0),
                               run=dataclasses.replace(cfg.run, pipeline="1f1b", resume=True))
    with pytest.raises(ValueError, match="schedule's delay"):
        launch(sync)
    emulated = _leg(cfg, pipeline="none", stages=1, resume=True)
    got = launch(emulated)
    assert got.status == "completed" and got.steps == STEPS
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", M=2, steps=STEPS,
                            optim=CONSTANT))
    assert_same_run(got.run_dir, ref.run_dir, emulated, weights=False)
    assert load_config(got.run_dir).run.pipeline == "none"


@pytest.mark.parametrize("name,lam", [("muon", 1.0), ("adamw", 0.0)])
def test_global_form_round_trips_the_optimizer_state(name, lam):
    """globalize -> localize gives back the state dicts (Muon: a chained optimizer, each
    inner one indexing its parameters from 0), saved as two stages and merged."""
    import torch

    from llm_validation.config import OptimConfig
    from llm_validation.pipeline.reshard import globalize, localize, merge
    from llm_validation.training.delay import DelayedOptimizer
    from llm_validation.training.model import Transformer
    from llm_validation.training.optim import build_optimizer
    from tests.llm_validation.helpers import MICRO

    def fresh():
        model = Transformer(MICRO, seed=0)
        opt = DelayedOptimizer(build_optimizer(model, OptimConfig(name=name, lr=0.02)), tau=0,
                               ef_lambda=lam)
        by_id = {id(p): n for n, p in model.named_parameters()}
        return model, opt, [by_id[id(p)] for p in opt.params]

    model, opt, names = fresh()
    for _ in range(2):
        for p in opt.params:
            p.grad = torch.randn_like(p)
        opt.step()
    probe = {"prev_base": None, "prev_applied": None, "prev_step": -1}
    g = globalize(names, [p.detach() for p in opt.params], None, opt.state_dict(), probe)
    half = len(names) // 2     # two "stages" saved apart, merged
    parts = [{"params": dict(list(g["params"].items())[:half]), "scalars": g["scalars"]},
             {"params": dict(list(g["params"].items())[half:]), "scalars": g["scalars"]}]
    _, opt2, names2 = fresh()
    master, previous, opt_sd, probe_sd = localize(merge(parts), names2, opt2.state_dict(),
                                                  opt2.taus)
    opt2.load_state_dict(opt_sd)
    assert previous is None and probe_sd == probe
    assert all(torch.equal(a, b) for a, b in zip(master, [p.detach() for p in opt.params]))
    flat = lambda sd: torch.cat([t.reshape(-1).double() for t in _tensors(sd)])  # noqa: E731
    assert torch.equal(flat(opt2.state_dict()), flat(opt.state_dict()))


def _tensors(x):
    import torch
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        return [t for k in sorted(x, key=str) for t in _tensors(x[k])]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    return []
