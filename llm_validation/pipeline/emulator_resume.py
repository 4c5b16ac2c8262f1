"""Continue a pipeline run in the single-process emulator (P x D -> P = 1).

The emulated loop (:mod:`llm_validation.training.loop`) resumes from its own checkpoint file
(``checkpoints/step_<N>.pt``); a pipeline saves DCP checkpoints keyed by global parameter
names (:mod:`llm_validation.pipeline.reshard`). :func:`emulator_checkpoint` writes the
emulator's checkpoint of the newest complete pipeline checkpoint: the model at W(N), the base
optimizer, EF and statistics state by parameter name, 2BW's version W(N-1) as the emulator's
one-slot delay ring (tau = 1), the data position N and the RNG state of stage 0. The loop then
resumes from it as from its own, bitwise on CPU where the maths is the same (the global
microbatch split ``data_parallel x microbatches`` kept: ``rundir.check_resumable``).
"""

from __future__ import annotations

from pathlib import Path

import torch

from llm_validation.config import TrainConfig
from llm_validation.pipeline.checkpoint import load_global, newest_intact
from llm_validation.pipeline.reshard import localize
from llm_validation.rundir import (RunPaths, checkpoint_step, latest_checkpoint, load_config,
                                   check_resumable, save_checkpoint)
from llm_validation.training.data import STREAM_TRAIN
from llm_validation.training.delay import DelayedOptimizer
from llm_validation.training.model import Transformer
from llm_validation.training.optim import build_optimizer

__all__ = ["emulator_checkpoint"]


def emulator_checkpoint(cfg: TrainConfig) -> Path | None:
    """For an emulated ``cfg`` resuming a directory whose newest checkpoint is a pipeline's:
    write the emulator's checkpoint of it and return its path (None: nothing to convert)."""
    run = cfg.run
    paths = RunPaths(run.out_dir)
    found = newest_intact(paths)
    own_file = latest_checkpoint(paths)
    if not run.resume or run.pipeline != "none" or found is None or (
            own_file is not None and checkpoint_step(own_file) >= found[0]):
        return None
    if paths.config.exists():
        check_resumable(load_config(paths.root), cfg)   # same maths, before any write
    step, directory = found
    model = Transformer(cfg.model, seed=run.seed)
    opt = DelayedOptimizer.from_config(build_optimizer(model, cfg.optim), cfg)
    by_id = {id(p): n for n, p in model.named_parameters()}
    names = [by_id[id(p)] for p in opt.params]
    state, own = load_global(directory, names, 0, 0, torch.device("cpu"))
    master, _, opt_sd, probe_sd = localize(state, names, opt.state_dict(), opt.taus)
    with torch.no_grad():
        for p, w in zip(opt.params, master):
            p.copy_(w)
    opt.load_state_dict(opt_sd)            # the wrapper's own checks (delays, EF settings)
    if own["step"] != step:
        raise ValueError(f"checkpoint {directory} holds step {own['step']}")
    return save_checkpoint(paths, step, {
        "step": step, "model": model.state_dict(), "optimizer": opt.state_dict(),
        "sampler": {"seed": run.seed, "stream": STREAM_TRAIN, "position": step},
        "probe": probe_sd, "rng": own["rng"], "config": cfg.to_dict()})
