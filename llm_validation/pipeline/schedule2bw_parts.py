"""The optimizer step of a ``Schedule2BW`` stage, its checkpoint state, and what it refuses.

STEP t of stage s (called by :class:`.schedule2bw.Schedule2BW` where the 2BW action list puts
it), on the gradients batch t left on its weight version::

    g <- g / M                       (scale_grads, torch's default for a mean loss)
    g <- (sum over dp_group of g) / D                     (dp_group: replicated stages)
    g <- g min(1, c / (||g||_P + 1e-6))   (max_norm = c > 0; ||.||_P over every stage:
                                           pipeline/clipping.StageClip on a group of the
                                           stage group's ranks, the emulator's order and sum)
    W(t+1) = W(t) - u(g) (+ EF);  lr_scheduler.step()   (DelayedOptimizer(tau=0), guarded:
                                                         pipeline/schedule_guards)

The clipping norm sums every stage's per-tensor norms in stage order, each stage in its
module's parameter order: ``clip_grad_norm_`` over ``model.parameters()`` of the unsplit model
when the split is contiguous (the emulator then clips bitwise alike). The data-parallel mean
is one SUM all-reduce of a flat buffer per dtype and one division: for D = 2 bitwise
``(S_0 + S_1) / 2`` (pipeline/grad_buckets.py's argument).

Checkpoint state (:func:`schedule_state`): ``next_batch``, ``previous`` (name -> the version
the next batch reads; the master is the module's own weights, saved with the model), ``ef``
(name -> EF buffer), and ``hyper.stage<s>`` (the optimizer's group hyperparameters and the lr
scheduler's state after the drain a save makes: a model, optimizer or scheduler state captured
before that drain may lag one step, so these are re-applied at the first step after a load).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from llm_validation.pipeline.clipping import StageClip
from llm_validation.pipeline.grad_buckets import finish_mean, launch_sum
from llm_validation.pipeline.schedule_guards import StepGuard
from llm_validation.pipeline.weight_versions import WeightVersions, trainable
from llm_validation.training.corrections import _check_lam
from llm_validation.training.delay import DelayedOptimizer

__all__ = ["StepParts", "refuse_sharded", "schedule_state", "template_state", "dp_mean"]


def refuse_sharded(module: nn.Module) -> None:
    """One-line ``ValueError`` for what two replicated weight versions cannot compose with:
    a DDP / ``replicate`` / ``fully_shard`` wrapper anywhere in the stage, a DTensor
    parameter (FSDP2, tensor parallelism)."""
    from torch.distributed._composable.contract import _get_registry
    from torch.distributed._composable_state import _get_module_state
    from torch.distributed.tensor import DTensor

    hint = "keep the stage's parameters replicated and pass dp_group= (docs/schedule2bw.md)"
    for name, m in module.named_modules():
        apis = set(_get_registry(m) or {}) - {"checkpoint"}
        if (isinstance(m, nn.parallel.DistributedDataParallel) or apis
                or _get_module_state(m) is not None):
            what = ", ".join(sorted(apis)) or type(m).__name__
            raise ValueError(f"Schedule2BW does not compose with a data-parallel wrapper "
                             f"({what} on {name or 'the stage module'}): {hint}")
    for name, p in module.named_parameters():
        if isinstance(p, DTensor):
            raise ValueError(f"Schedule2BW keeps two full versions of every weight; parameter "
                             f"{name} is sharded (a DTensor): {hint}")


def dp_mean(grads: list[Tensor | None], group: Any) -> list[Tensor | None]:
    """The replicas' mean of each gradient (one flat SUM all-reduce per dtype, then / D);
    the results are views of the flat buffers."""
    out, by_dtype = list(grads), {}
    for i, g in enumerate(grads):
        if g is not None:
            by_dtype.setdefault(g.dtype, []).append(i)
    D = dist.get_world_size(group)
    for idx in by_dtype.values():
        like = [grads[i] for i in idx]
        flat, work = launch_sum(like, group)
        for i, v in zip(idx, finish_mean(flat, work, D, like)):
            out[i] = v
    return out


class StepParts:
    """The optimizer side of one stage (module docstring): attached optimizer and scheduler,
    their guard, the ``DelayedOptimizer`` (EF, clipping), the clip and data-parallel groups."""

    def __init__(self, stage: Any, n_microbatches: int, scale_grads: bool, ef_lambda: float,
                 max_norm: float, dp_group: Any) -> None:
        self.stage, self.M, self.scale_grads = stage, n_microbatches, scale_grads
        self.ef_lambda = _check_lam(ef_lambda)
        self.max_norm = _check_lam(max_norm, "max_norm")
        self.dp_group = dp_group
        self.norm_group = None
        if self.max_norm > 0:    # a group of its own: never the p2p communicator (NCCL order)
            ranks = dist.get_process_group_ranks(stage.group or dist.group.WORLD)
            self.norm_group = dist.new_group(ranks, use_local_synchronization=True)
        self.optimizer = self.lr_scheduler = None
        self.guard: StepGuard | None = None
        self.delayed: DelayedOptimizer | None = None

    def attach(self, optimizer: Any, lr_scheduler: Any) -> None:
        """Take the optimizer (over the stage's trainable parameters) and its scheduler."""
        module = self.stage.submod
        if not any(p.is_meta for p in module.parameters()):
            self._check_params(optimizer, [p for _, p in trainable(module)])
        if self.guard is not None:
            self.guard.close()
        self.guard = StepGuard(optimizer, lr_scheduler)
        self.optimizer, self.lr_scheduler, self.delayed = optimizer, lr_scheduler, None

    def require_optimizer(self) -> None:
        if self.optimizer is None:
            raise RuntimeError("Schedule2BW steps the optimizer: call "
                               "schedule.attach(optimizer, lr_scheduler) before the first step")

    @staticmethod
    def _check_params(optimizer: Any, params: list[Tensor]) -> None:
        given = {id(p) for g in optimizer.param_groups for p in g["params"]}
        if given != {id(p) for p in params}:
            raise ValueError("the optimizer must hold exactly the stage module's trainable "
                             "parameters (build it from stage.submod.parameters() after the "
                             "weights are materialised)")

    # ------------------------------------------------------------------ materialisation
    def materialize(self, versions: WeightVersions, sd: dict | None) -> None:
        """Bind the optimizer to the (real) weights; apply a loaded state ``sd``."""
        self.require_optimizer()
        masters = versions.masters
        meta = [n for n, p in zip(versions.names, masters) if p.is_meta]
        if meta:
            raise RuntimeError(f"parameter {meta[0]} is still on the meta device: materialise "
                               "and initialise the weights (to_empty, init) before the first step")
        self._check_params(self.optimizer, masters)
        self.delayed = DelayedOptimizer(self.optimizer, tau=0, ef_lambda=self.ef_lambda,
                                        grad_clip=self.max_norm)
        self.names = {id(p): n for n, p in zip(versions.names, masters)}
        if self.norm_group is not None:
            self.delayed.clip_sq = self._stage_clip(masters).squared_norm
        if sd is not None:
            if self.delayed.ef is not None:
                self.delayed.ef.load_state_dict(
                    {"lam": self.ef_lambda,
                     "v_prev": [sd["ef"][self.names[id(p)]] for p in self.delayed.params]})
            hyper = sd[self.hyper_key]
            for g, saved in zip(self.optimizer.param_groups, hyper["param_groups"]):
                g.update(saved)
            if self.lr_scheduler is not None:
                self.lr_scheduler.load_state_dict(hyper["lr_scheduler"])
        self.guard.epochs = self.guard._epochs()    # a load may have moved the scheduler
        self.guard.armed = True

    def _stage_clip(self, masters: list[Tensor]) -> StageClip:
        """This stage's places in the pipeline's vector of norms (stage order; one
        all-reduce of the stages' parameter counts)."""
        P, s = self.stage.num_stages, self.stage.stage_index
        device = masters[0].device if masters else torch.device("cpu")
        counts = torch.zeros(P, dtype=torch.int64, device=device)
        counts[s] = len(masters)
        dist.all_reduce(counts, group=self.norm_group)
        counts = counts.tolist()
        place = {id(p): sum(counts[:s]) + i for i, p in enumerate(masters)}
        return StageClip([place[id(p)] for p in self.delayed.params], sum(counts),
                         self.norm_group, device)

    # ------------------------------------------------------------------------ the step
    def step(self, versions: WeightVersions, t: int, in_place: bool) -> None:
        """STEP t (module docstring) on the gradients of batch t's version."""
        grads = versions.take_grads(t % 2)
        versions.advance(t, in_place)
        present = [g for g in grads if g is not None]
        if present and self.scale_grads:
            torch._foreach_div_(present, self.M)
        if self.dp_group is not None and present:
            grads = dp_mean(grads, self.dp_group)
        for p, g in zip(versions.masters, grads):
            p.grad = g
        self.guard.stepping(self._apply)

    def _apply(self) -> None:
        self.delayed.step()
        self.delayed.zero_grad(set_to_none=True)
        if self.lr_scheduler is not None:
            self.lr_scheduler.step()

    def grad_norm(self) -> Tensor | None:
        return None if self.delayed is None else self.delayed._grad_norm

    # ------------------------------------------------------------------------ the state
    @property
    def hyper_key(self) -> str:
        return f"hyper.stage{self.stage.stage_index}"

    def hyper_state(self) -> dict[str, Any]:
        return {"param_groups": [{k: v for k, v in g.items() if k != "params"}
                                 for g in self.optimizer.param_groups],
                "lr_scheduler": None if self.lr_scheduler is None
                else self.lr_scheduler.state_dict()}


def schedule_state(versions: WeightVersions, parts: StepParts, next_batch: int) -> dict:
    """The checkpoint state of a materialised, drained stage (module docstring)."""
    ef = parts.delayed.ef if parts.delayed is not None else None
    return {"next_batch": next_batch,
            "previous": dict(zip(versions.names, versions.read_version(next_batch))),
            "ef": {} if ef is None else {parts.names[id(p)]: v
                                         for p, v in zip(parts.delayed.params, ef.v_prev)},
            parts.hyper_key: parts.hyper_state()}


def template_state(module: nn.Module, parts: StepParts, next_batch: int) -> dict:
    """The state's shape before the first step (what DCP loads into): fresh tensors."""
    parts.require_optimizer()
    named = trainable(module)
    if any(p.is_meta for _, p in named):
        raise RuntimeError("Schedule2BW.state_dict: the weights are still on the meta device")
    return {"next_batch": next_batch,
            "previous": {n: torch.empty_like(p) for n, p in named},
            "ef": {n: torch.zeros_like(p) for n, p in named} if parts.ef_lambda > 0 else {},
            parts.hyper_key: parts.hyper_state()}
