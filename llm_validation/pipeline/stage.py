"""One rank's share of a pipeline run: its stage of the model, optimizer, data, checkpoints.

Everything here is what the emulated path (``train.train``) does for the whole model, restricted
to one stage, so that the two runs do the same floating-point operations:
- model: :func:`build_stage_module`: ``Transformer(cfg.model, seed)`` built on the meta device,
  ``split(P)[s]``, only this stage's parameters materialised on the host and initialised with
  the emulator's generator, whose draws for the other stages' matrices are made in chunks of
  :data:`SKIP_CHUNK` and dropped: bitwise the weights of the whole build, with host memory of
  one stage plus one chunk instead of the whole model per rank.
- optimizer: ``build_optimizer(stage, cfg.optim)`` wrapped in ``DelayedOptimizer(tau=0, lam)``:
  the wrapper applies the base step and the Error Feedback exactly as in the emulator; the delay
  itself comes from the pipeline schedule, not from the wrapper.
- data: stage 0 reads the inputs x and the last stage the targets y of the same
  ``WindowSampler`` batches. With D data-parallel replicas batch t is cut into ``D * M``
  equal chunks (``chunk(D * M)``, the emulator's microbatches of the same global batch) and
  replica d takes chunks ``d*M .. d*M + M - 1`` as its M microbatches; D = 1 is ``chunk(M)``.
  Each rank reads only its replica's rows ``d*B/D .. (d+1)*B/D - 1`` (``WindowSampler.batch(
  rows=...)``: the random draws of the whole batch, the windows of its share). On CUDA the
  share is pinned and copied with ``non_blocking=True``, and the training batch t+1 is read
  and its copy issued when batch t is taken (prefetch); on CPU the tensors are used as read.

Checkpoints: :mod:`llm_validation.pipeline.checkpoint`.
"""

from __future__ import annotations

import re
from contextlib import nullcontext
from typing import Any, Callable

import torch
from torch import Tensor, nn

from llm_validation.config import ModelConfig, TrainConfig
from llm_validation.training.data import (
    STREAM_LARGE,
    STREAM_VAL,
    WindowSampler,
    load_corpus,
)
from llm_validation.training.delay import DelayedOptimizer
from llm_validation.training.model import (Rotary, Transformer, lm_loss,
                                           stage_activation_dtype, stage_bounds)
from llm_validation.training.optim import build_optimizer, group_geometry

__all__ = ["StageSetup", "stage_param_names", "build_stage_module", "SKIP_CHUNK"]

#: Values drawn at a time when the initialisation of another stage's matrix is skipped (a
#: multiple of 16, ``model.skip_normal``): 4 MiB of float32 transient host memory.
SKIP_CHUNK = 1 << 20


def build_stage_module(cfg: ModelConfig, seed: int, stage: int, stages: int, *,
                       skip_chunk: int = SKIP_CHUNK) -> tuple[nn.Module, int]:
    """(stage ``stage`` of ``stages`` of ``Transformer(cfg, seed=seed)`` on the host, the full
    model's parameter count), materialising only that stage's parameters: the model is built
    on the meta device, the stage's tensors allocated (``to_empty``), the RoPE tables rebuilt,
    and ``reset_parameters(seed, skip_chunk=...)`` draws every matrix in the full model's
    order, dropping the other stages' draws: the same weights, bitwise, as
    ``Transformer(cfg, seed=seed).split(stages)[stage]``."""
    with torch.device("meta"):
        model = Transformer(cfg, seed=seed)
    n_params = model.num_params()
    module = model.split(stages)[stage]
    module.to_empty(device="cpu")                 # this stage's parameters, uninitialised
    model.rope = module.rope = Rotary(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
    model.reset_parameters(seed, skip_chunk=skip_chunk)
    model.blocks = nn.ModuleList()                # the other stages' (meta) parameters
    if stage != 0:
        model.embed = None
    if stage != stages - 1:
        model.norm = model.head = None
    return module, n_params


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
    """Stage ``stage`` of ``stages`` of the run ``cfg`` on ``device``, data-parallel replica
    ``replica`` of ``replicas`` (see the module docstring).

    Attributes: ``module`` (the stage, whose parameters are the master weights ``W(t)``),
    ``opt`` (DelayedOptimizer; tau = 0 in a pipeline, whose schedule makes the delay;
    ``DelayedOptimizer.from_config``, as the emulator, in the data-parallel emulation), ``names`` (parameter name of each ``opt.params``
    entry), ``geoms`` (geometry of each, for the statistics), ``act_shape``/``act_dtype`` (the
    activation ``h[b, T, C]`` between stages: bf16 with compute boundaries under bf16 autocast,
    else float32), ``autocast`` (context factory), and for the first
    / last stage the samplers of the training, validation and large-batch streams.
    """

    def __init__(self, cfg: TrainConfig, stage: int, stages: int, device: torch.device, *,
                 replica: int = 0, replicas: int = 1) -> None:
        run = cfg.run
        self.cfg, self.stage, self.stages, self.device = cfg, stage, stages, device
        self.replica, self.replicas = replica, replicas
        self.is_first, self.is_last = stage == 0, stage == stages - 1
        self.M = run.microbatches
        module, self.n_params = build_stage_module(cfg.model, run.seed, stage, stages)
        self.module = module.to(device)
        base = build_optimizer(self.module, cfg.optim)
        if run.pipeline == "none":      # the data-parallel emulation: the emulator's wrapper
            self.opt = DelayedOptimizer.from_config(base, cfg)
        else:                           # a pipeline stage: the schedule makes the delay
            self.opt = DelayedOptimizer(base, tau=0, ef_lambda=cfg.delay.ef_lambda,
                                        ef_level=cfg.delay.ef_level)
        by_id = {id(p): n for n, p in self.module.named_parameters()}
        self.names = [by_id[id(p)] for p in self.opt.params]
        self.geoms = [group_geometry(g) for g in self.opt.param_groups for _ in g["params"]]
        self.act_shape = (run.batch_size // (replicas * self.M), cfg.data.seq_len,
                          cfg.model.d_model)
        self.act_dtype = stage_activation_dtype(cfg.model, run.dtype,
                                                next(self.module.parameters()).dtype)
        self.autocast: Callable[[], Any] = (
            (lambda: torch.autocast(device.type, dtype=torch.bfloat16))
            if run.dtype == "bfloat16" else nullcontext)
        self.train_sampler = self.val_sampler = self.large_sampler = None
        self._ahead: dict[int, list[Tensor]] = {}     # training batches read ahead
        if self.is_first or self.is_last:
            corpus = load_corpus(cfg.data)
            self.corpus_description = corpus.description
            b, t = run.batch_size, cfg.data.seq_len
            self.train_sampler = WindowSampler(corpus.train, b, t, run.seed)
            self.val_sampler = WindowSampler(corpus.val, b, t, run.seed, STREAM_VAL)
            self.large_sampler = WindowSampler(corpus.train, b * run.large_batch_factor, t,
                                               run.seed, STREAM_LARGE)

    # ------------------------------------------------------------------------------ data
    def _share(self, sampler: WindowSampler, index: int) -> tuple[Tensor, Tensor]:
        """(x, y) rows of this replica's share of batch ``index`` (only they are read)."""
        per = sampler.batch_size // self.replicas
        return sampler.batch(index, rows=(self.replica * per, (self.replica + 1) * per))

    def _on_device(self, t: Tensor, parts: int) -> list[Tensor]:
        """``t`` cut into ``parts`` microbatches on the stage's device: pinned host memory and
        non-blocking copies on CUDA (no host synchronisation), the tensors as read on CPU."""
        if self.device.type != "cuda":
            return [c.to(self.device) for c in t.chunk(parts)]
        pinned = t.contiguous().pin_memory()
        return [c.to(self.device, non_blocking=True) for c in pinned.chunk(parts)]

    def _pick(self, sampler: WindowSampler, index: int, parts: int, which: int | None = None
              ) -> list[Tensor]:
        """This replica's ``parts`` microbatches of batch ``index`` (the global batch cut into
        ``replicas * parts`` chunks): of the inputs (``which`` = 0; stage 0's default) or the
        targets (1; the last stage's)."""
        pair = self._share(sampler, index)
        return self._on_device(pair[(0 if self.is_first else 1) if which is None else which],
                               parts)

    def pairs(self, kind: str, step: int = 0) -> tuple[list[Tensor], list[Tensor]]:
        """(inputs, targets) of this replica's microbatches of one stream (``train``, ``val``
        or ``large``, as :meth:`train_microbatches` etc.): what a one-stage run needs."""
        if kind == "val":
            batches = [self._share(self.val_sampler, i) for i in range(self.cfg.run.eval_batches)]
            parts = self.M
        elif kind == "large":
            batches = [self._share(self.large_sampler, step)]
            parts = self.M * self.cfg.run.large_batch_factor
        else:
            batches, parts = [self._share(self.train_sampler, step)], self.M
        return ([c for b in batches for c in self._on_device(b[0], parts)],
                [c for b in batches for c in self._on_device(b[1], parts)])

    def train_microbatches(self, step: int) -> list[Tensor]:
        """The M microbatches (x on stage 0, y on the last stage) of training batch ``step``;
        batch ``step + 1`` is read and its copy to the device issued now (prefetch)."""
        got = self._ahead.pop(step, None)
        if got is None:
            got = self._pick(self.train_sampler, step, self.M)
        if step + 1 < self.cfg.run.steps and step + 1 not in self._ahead:
            self._ahead[step + 1] = self._pick(self.train_sampler, step + 1, self.M)
        return got

    def val_microbatches(self) -> list[Tensor]:
        """All validation microbatches, batch by batch, M per batch (as ``train.evaluate``)."""
        out: list[Tensor] = []
        for i in range(self.cfg.run.eval_batches):
            out.extend(self._pick(self.val_sampler, i, self.M))
        return out

    def large_microbatches(self, step: int) -> list[Tensor]:
        """The large batch of the momentum error at ``step``, cut into M * factor microbatches."""
        return self._pick(self.large_sampler, step, self.M * self.cfg.run.large_batch_factor)

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
