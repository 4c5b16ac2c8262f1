"""Global-norm gradient clipping across the stages of a pipeline, equal to the emulator's.

The emulator clips the whole model's gradient (``DelayedOptimizer._clip``, torch's
``clip_grad_norm_`` rule)::

    n_i   = ||g_i||_2 in float32 for every parameter i, in the optimizer's order (torch._foreach_norm)
    total = sqrt(sum_i float64(n_i)^2)        # one torch .sum() over the float64 vector
    g_i  <- g_i * min(1, c / (total + 1e-6))   # the factor applied to float32 gradients

A pipeline stage holds only its own parameters, so the norm spans the stages. Algorithm
(stage s of a pipeline row, after its gradient of batch t is final, i.e. averaged over the
replicas)::

    v = zeros(n_model, float32); v[pos_i] = n_i for this stage's i   # pos: the emulator's order
    all_reduce(v, SUM) on the row's clip group (async; one group per pipeline row, NOT the p2p
                                                communicator)
    ... later, at STEP t (``schedule.STEP_PLACEMENTS``: ``forward``) ...
    wait; sq = sum(float64(v)^2)                        # the emulator's sum, bit for bit
    g_i <- g_i * min(1, c / (sqrt(sq) + 1e-6))          # training.delay.clip_grads_, as the
                                                        #   emulator, on the device

Guarantee: every element of ``v`` has exactly one non-zero contributor, so the sum is exact
(``x + 0 = x``) in any reduction order: every stage of every replica holds the emulator's vector
of norms bit for bit, reduces it with the same torch operation to the same squared norm, and
hands it to the same function for the root, the factor and the product
(``training.delay.clip_grads_``): the clipped gradients are the emulator's bitwise
(``tests/llm_validation/pipeline/test_clipping.py``). Nothing is read on the host: the norm,
the factor and the product stay on the device. Assumption: every parameter of the model has a
gradient (the emulator's norm skips parameters without one; a language model's all get one).

Reference: Pascanu et al., "On the difficulty of training recurrent neural networks", ICML
2013 (norm clipping); ``torch.nn.utils.clip_grad_norm_``.
"""

from __future__ import annotations

from typing import Any, Sequence

import datetime

import torch
import torch.distributed as dist
from torch import Tensor

from llm_validation.config import TrainConfig
from llm_validation.pipeline.watchdog import published_wait

__all__ = ["model_param_order", "StageClip", "clip_groups", "stage_clip"]


def model_param_order(cfg: TrainConfig) -> list[str]:
    """The full model's parameter names in the order of the emulator's optimizer
    (``build_optimizer(model, cfg.optim)``'s groups, which ``DelayedOptimizer.params`` follows),
    built on the meta device (no memory, no initialisation)."""
    from llm_validation.training.model import Transformer
    from llm_validation.training.optim import build_optimizer

    with torch.device("meta"):
        model = Transformer(cfg.model, seed=cfg.run.seed)
        opt = build_optimizer(model, cfg.optim)
    by_id = {id(p): n for n, p in model.named_parameters()}
    return [by_id[id(p)] for g in opt.param_groups for p in g["params"]]


def clip_groups(pp_ranks: Sequence[Sequence[int]], backend: str, timeout: Any) -> list[Any]:
    """One process group per pipeline row (``pp_ranks[d]``: the global ranks of row d, stage
    order), created in the same order on every rank (``dist.new_group`` is collective)."""
    return [dist.new_group(list(ranks), backend=backend, timeout=timeout) for ranks in pp_ranks]


class StageClip:
    """The clipping norm of one stage (module docstring). ``positions[i]``: the place of this
    stage's i-th parameter (``opt.params`` order) in :func:`model_param_order`; ``size``: the
    model's parameter count; ``group``: this row's clip group (None: a single process holding
    the whole model, no reduction)."""

    def __init__(self, positions: Sequence[int], size: int, group: Any,
                 device: torch.device) -> None:
        if len(set(positions)) != len(positions) or not all(0 <= p < size for p in positions):
            raise ValueError(f"clip positions {list(positions)} are not distinct places in "
                             f"0..{size - 1}")
        self.index = torch.tensor(list(positions), dtype=torch.long, device=device)
        self.size, self.group, self.device = size, group, device
        self._pending: tuple[list[int], Tensor, Any] | None = None
        self.launched = 0   # reductions started (tests: one per step)
        # the rank's published status and the row's other ranks (set by stage_clip): the wait
        # for the norm is a published wait (pipeline.watchdog), so a peer saving a checkpoint
        # (a long phase) is waited for, and a hung one is diagnosed as for a p2p neighbour
        self.status: dict | None = None
        self.peers: list[int] = []

    def launch(self, grads: Sequence[Tensor]) -> None:
        """Start the reduction of these gradients' norms (asynchronous): call once the
        gradient of the batch is final; :meth:`norm` of the same tensors waits for it."""
        norms = torch._foreach_norm(list(grads))                         # float32, as torch
        v = torch.zeros(self.size, dtype=torch.float32, device=self.device)
        v[self.index] = torch.stack(norms).to(torch.float32)
        work = None if self.group is None else dist.all_reduce(v, group=self.group,
                                                               async_op=True)
        self._pending = ([id(g) for g in grads], v, work)
        self.launched += 1

    def squared_norm(self, grads: Sequence[Tensor]) -> Tensor:
        """The model's squared gradient norm (a float64 device scalar, the emulator's sum) for
        these gradients: the reduction :meth:`launch` started for the same tensors, else one
        started now (``DelayedOptimizer(clip_sq=...)``)."""
        if self._pending is None or self._pending[0] != [id(g) for g in grads]:
            self.launch(grads)
        _, v, work = self._pending
        self._pending = None
        if work is not None:
            with published_wait(self.status, self.peers, "the other stages of this pipeline "
                                                         "row (the clipping norm)"):
                work.wait()
        return v.double().square().sum()


def stage_clip(cfg: TrainConfig, ctx: Any, opt: Any, global_names: Sequence[str], replica: int,
               device: torch.device) -> StageClip:
    """Clipping for one rank of a pipeline run (``ctx``: its ``WorkerContext``; ``opt``: the
    stage's ``DelayedOptimizer``, whose step then takes its squared norm from here;
    ``global_names``: the full model's names of ``opt.params``): one clip group per pipeline
    row, every rank creating every group in row order."""
    from llm_validation.pipeline.mesh import rank_of

    P, D = ctx.mesh.stages, ctx.mesh.replicas
    order = model_param_order(cfg)
    place = {n: i for i, n in enumerate(order)}
    rows = [[rank_of(d, k, P) for k in range(P)] for d in range(D)]
    groups = clip_groups(rows, ctx.backend, datetime.timedelta(seconds=ctx.timeout_s))
    clip = StageClip([place[n] for n in global_names], len(order), groups[replica], device)
    clip.status, clip.peers = ctx.status, [r for r in rows[replica] if r != ctx.rank]
    opt.grad_clip, opt.clip_sq = cfg.optim.grad_clip, clip.squared_norm
    return clip
