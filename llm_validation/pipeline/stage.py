"""One rank's share of a pipeline run: its stage of the model, optimizer, data, checkpoints.

Everything here is what the emulated path (``train.train``) does for the whole model, restricted
to one stage, so that the two runs do the same floating-point operations:
- model: ``Transformer(cfg.model, seed)`` built whole (the initialisation is a function of the
  seed and the parameter order), then ``split(P)[s]``; the other stages' blocks are dropped.
- optimizer: ``build_optimizer(stage, cfg.optim)`` wrapped in ``DelayedOptimizer(tau=0, lam)``:
  the wrapper applies the base step and the Error Feedback exactly as in the emulator; the delay
  itself comes from the pipeline schedule, not from the wrapper.
- data: stage 0 reads the inputs x and the last stage the targets y of the same
  ``WindowSampler`` batches; batch t is cut into M microbatches with ``chunk(M)``.

Checkpoints (per stage): ``checkpoints/step_<N>/stage<s>.pt`` (temporary file + atomic rename)
and ``checkpoints/step_<N>/COMPLETE``, written by stage 0 once every stage file exists. Only
complete checkpoints are resumed; the newest :data:`KEEP_CHECKPOINTS` complete ones are kept.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor, nn

from llm_validation.config import TrainConfig
from llm_validation.rundir import KEEP_CHECKPOINTS, RunPaths
from llm_validation.training.data import (
    STREAM_LARGE,
    STREAM_VAL,
    WindowSampler,
    load_corpus,
)
from llm_validation.training.delay import DelayedOptimizer
from llm_validation.training.model import Transformer, lm_loss, stage_bounds
from llm_validation.training.optim import build_optimizer, group_geometry

__all__ = [
    "StageSetup",
    "stage_param_names",
    "ckpt_dir",
    "save_stage_checkpoint",
    "mark_complete",
    "latest_complete",
    "load_stage_checkpoint",
    "COMPLETE",
]

COMPLETE = "COMPLETE"
_STEP_DIR = re.compile(r"^step_(\d+)$")


def stage_param_names(cfg: TrainConfig, stage: int, stages: int, names: list[str]) -> dict[str, str]:
    """Map a stage's parameter ``names`` to the full model's (``blocks.<i>`` of the stage is
    ``blocks.<lo + i>`` of the model, ``lo`` its first block; other names are unchanged)."""
    lo, _ = stage_bounds(cfg.model.n_layer, stages)[stage]
    out = {}
    for n in names:
        m = re.match(r"^blocks\.(\d+)\.(.*)$", n)
        out[n] = f"blocks.{lo + int(m.group(1))}.{m.group(2)}" if m else n
    return out


class StageSetup:
    """Stage ``stage`` of ``stages`` of the run ``cfg`` on ``device`` (see the module docstring).

    Attributes: ``module`` (the stage, whose parameters are the master weights ``W(t)``),
    ``opt`` (DelayedOptimizer, tau = 0), ``names`` (parameter name of each ``opt.params``
    entry), ``geoms`` (geometry of each, for the statistics), ``act_shape``/``act_dtype`` (the
    activation ``h[b, T, C]`` between stages), ``autocast`` (context factory), and for the first
    / last stage the samplers of the training, validation and large-batch streams.
    """

    def __init__(self, cfg: TrainConfig, stage: int, stages: int, device: torch.device) -> None:
        run = cfg.run
        self.cfg, self.stage, self.stages, self.device = cfg, stage, stages, device
        self.is_first, self.is_last = stage == 0, stage == stages - 1
        self.M = run.microbatches
        model = Transformer(cfg.model, seed=run.seed)
        self.n_params = model.num_params()
        module = model.split(stages)[stage]
        # drop the other stages' weights (the stage holds its own references)
        model.blocks = nn.ModuleList()
        if not self.is_first:
            model.embed = None
        self.module = module.to(device)
        base = build_optimizer(self.module, cfg.optim)
        self.opt = DelayedOptimizer(base, tau=0, ef_lambda=cfg.delay.ef_lambda,
                                    ef_level=cfg.delay.ef_level)
        by_id = {id(p): n for n, p in self.module.named_parameters()}
        self.names = [by_id[id(p)] for p in self.opt.params]
        self.geoms = [group_geometry(g) for g in self.opt.param_groups for _ in g["params"]]
        self.act_shape = (run.batch_size // self.M, cfg.data.seq_len, cfg.model.d_model)
        self.act_dtype = next(self.module.parameters()).dtype
        self.autocast: Callable[[], Any] = (
            (lambda: torch.autocast(device.type, dtype=torch.bfloat16))
            if run.dtype == "bfloat16" else nullcontext)
        self.train_sampler = self.val_sampler = self.large_sampler = None
        if self.is_first or self.is_last:
            corpus = load_corpus(cfg.data)
            self.corpus_description = corpus.description
            b, t = run.batch_size, cfg.data.seq_len
            self.train_sampler = WindowSampler(corpus.train, b, t, run.seed)
            self.val_sampler = WindowSampler(corpus.val, b, t, run.seed, STREAM_VAL)
            self.large_sampler = WindowSampler(corpus.train, b * run.large_batch_factor, t,
                                               run.seed, STREAM_LARGE)

    # ------------------------------------------------------------------------------ data
    def _pick(self, pair: tuple[Tensor, Tensor], parts: int) -> list[Tensor]:
        """Stage 0 gets the inputs, the last stage the targets, cut into ``parts`` chunks."""
        t = pair[0] if self.is_first else pair[1]
        return [c.to(self.device) for c in t.chunk(parts)]

    def train_microbatches(self, step: int) -> list[Tensor]:
        """The M microbatches (x on stage 0, y on the last stage) of training batch ``step``."""
        return self._pick(self.train_sampler.batch(step), self.M)

    def val_microbatches(self) -> list[Tensor]:
        """All validation microbatches, batch by batch, M per batch (as ``train.evaluate``)."""
        out: list[Tensor] = []
        for i in range(self.cfg.run.eval_batches):
            out.extend(self._pick(self.val_sampler.batch(i), self.M))
        return out

    def large_microbatches(self, step: int) -> list[Tensor]:
        """The large batch of the momentum error at ``step``, cut into M * factor microbatches."""
        return self._pick(self.large_sampler.batch(step), self.M * self.cfg.run.large_batch_factor)

    def loss(self, logits: Tensor, target: Tensor) -> Tensor:
        """``lm_loss`` of one microbatch (last stage)."""
        with self.autocast():
            return lm_loss(logits, target)

    # ----------------------------------------------------------------------- weights
    def master(self) -> dict[str, Tensor]:
        """name -> master parameter (the optimizer's tensors)."""
        return dict(zip(self.names, self.opt.params))

    def leaf_copies(self) -> dict[str, Tensor]:
        """A detached copy of every master weight that requires grad (a weight version)."""
        with torch.no_grad():
            return {n: p.detach().clone().requires_grad_(True) for n, p in self.master().items()}


# ------------------------------------------------------------------------------ checkpoints
def ckpt_dir(paths: RunPaths, step: int) -> Path:
    """Directory of the checkpoint taken after ``step`` optimizer steps."""
    return paths.checkpoints / f"step_{step:08d}"


def save_stage_checkpoint(paths: RunPaths, step: int, stage: int, payload: dict[str, Any]) -> Path:
    """Write ``step_<N>/stage<s>.pt`` atomically (temporary file + rename)."""
    d = ckpt_dir(paths, step)
    d.mkdir(parents=True, exist_ok=True)
    final = d / f"stage{stage}.pt"
    tmp = d / f".stage{stage}.pt.tmp"
    torch.save(payload, tmp)
    os.replace(tmp, final)
    return final


def mark_complete(paths: RunPaths, step: int, stages: int, wait_s: float) -> None:
    """Stage 0: once all ``stages`` files of ``step`` exist (waiting up to ``wait_s``; on one
    machine they already do, see the runtime's ordering), write ``COMPLETE`` atomically and
    delete older checkpoints beyond the newest :data:`KEEP_CHECKPOINTS` complete ones, and any
    incomplete one older than this."""
    d = ckpt_dir(paths, step)
    deadline = time.monotonic() + wait_s
    missing = [s for s in range(stages) if not (d / f"stage{s}.pt").exists()]
    while missing and time.monotonic() < deadline:
        time.sleep(0.02)
        missing = [s for s in range(stages) if not (d / f"stage{s}.pt").exists()]
    if missing:
        raise RuntimeError(f"checkpoint {d}: stage files {missing} did not appear within {wait_s} s "
                           "(several machines need a shared run directory)")
    tmp = d / f".{COMPLETE}.tmp"
    tmp.write_text(f"{stages}\n")
    os.replace(tmp, d / COMPLETE)
    complete, stale = [], []
    for child in paths.checkpoints.iterdir():
        m = _STEP_DIR.match(child.name)
        if m and child.is_dir():
            (complete if (child / COMPLETE).exists() else stale).append((int(m.group(1)), child))
    for _, old in sorted(complete)[:-KEEP_CHECKPOINTS]:
        shutil.rmtree(old, ignore_errors=True)
    for n, old in stale:
        if n < step:
            shutil.rmtree(old, ignore_errors=True)


def latest_complete(paths: RunPaths, stages: int) -> tuple[int, Path] | None:
    """``(step, dir)`` of the newest complete pipeline checkpoint for ``stages`` stages."""
    if not paths.checkpoints.is_dir():
        return None
    found = []
    for child in paths.checkpoints.iterdir():
        m = _STEP_DIR.match(child.name)
        if m and (child / COMPLETE).exists():
            if int((child / COMPLETE).read_text().strip() or 0) != stages:
                raise ValueError(f"checkpoint {child} has {(child / COMPLETE).read_text().strip()} "
                                 f"stages; this run has {stages}")
            found.append((int(m.group(1)), child))
    return max(found) if found else None


def load_stage_checkpoint(directory: Path, stage: int, device: torch.device) -> dict[str, Any]:
    """The payload of one stage of a complete checkpoint."""
    path = directory / f"stage{stage}.pt"
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint file not found: {path}")
    return torch.load(path, map_location=device, weights_only=False)
