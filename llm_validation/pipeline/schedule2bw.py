"""``Schedule2BW``: PipeDream-2BW for any model on ``torch.distributed.pipelining``.

A single-stage schedule with torch's constructor and ``step`` (docs/schedule2bw.md) that never
flushes the pipeline between optimizer steps::

    schedule = Schedule2BW(stage, n_microbatches, loss_fn)     # e.g. on a meta-device model
    ... materialise and initialise the weights, build the optimizer ...
    schedule.attach(optimizer, lr_scheduler)                  # the schedule steps both
    for x, y in batches:                                      # batch t
        schedule.step(x) | step() | step(target=y, losses=losses)   # first | middle | last
        # no optimizer.step(), lr_scheduler.step() or clip: the schedule took them
    schedule.finish()                                         # drain: the last step

Algorithm (stage s of P, M >= P microbatches; :mod:`.schedule` has the action lists and the
proof that two versions suffice, :mod:`.segments` cuts them per batch): ``step(batch_t)`` runs
:func:`segment_2bw` (all forwards of batch t, the backwards batch t - 1 left in flight, the
step of batch t - 1; of batch t on the last stage); ``finish()`` runs :func:`drain_2bw`. Batch
t reads ``W(t-1)`` (``W(-1) = W(0)``) for its forward and its backward (and any recompute in
it), through :class:`.weight_versions.WeightVersions`; STEP t applies::

    g     = sum of batch t's microbatch gradients (/ M: scale_grads), averaged over dp_group
    g    <- g min(1, max_norm / (||g||_pipeline + 1e-6))       (max_norm > 0: .clipping)
    W(t+1) = W(t) - u(g)   (+ update-level EF: DelayedOptimizer(tau=0, ef_lambda)); lr step

Losses: the last stage computes batch t's microbatch losses in ``step(batch_t)`` (all its
forwards are there), so ``losses=`` receives this batch's losses and ``return_outputs`` this
batch's outputs, as torch's schedules. State (``state_dict``, Stateful for DCP): a save drains
the pipeline first (one fill and drain; the numbers are unchanged) and holds the version the
next batch reads, the next batch, the EF buffers and the optimizer's hyperparameters and
scheduler (re-applied at the first step after a load, whatever order the states loaded in).

Communication (:mod:`.schedule2bw_comm`): every op batched through :func:`.comm.post_batch`;
sends held back until the next receive or a flush, reaped :data:`SEND_LAG_CALLS` calls later.

Assumptions: one stage per rank, ``P >= 2``, ``M >= P``; replicated parameters (no DTensor,
FSDP or DDP wrapper: refused; ``dp_group=`` averages the gradients instead); dropout draws its
own random numbers. Guarantee (tests/llm_validation/pipeline/test_schedule2bw*.py, CPU, gloo):
losses and weights bitwise equal to ``DelayedOptimizer(tau=1)`` on the unsplit model.

Reference: Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training" (PipeDream-2BW),
ICML 2021; torch 2.13 ``torch/distributed/pipelining/schedules.py``.
"""

from __future__ import annotations

from collections import deque
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.pipelining.microbatch import TensorChunkSpec, _split_tensor
from torch.distributed.pipelining.schedules import PipelineScheduleSingle
from torch.distributed.pipelining.stage import _PipelineStageBase
from torch.utils._pytree import tree_map

from llm_validation.pipeline.schedule import (BACKWARD, FORWARD, check_schedule,
                                              validate_pipeline_shape)
from llm_validation.pipeline.schedule2bw_comm import SEND_LAG_CALLS, StageSends
from llm_validation.pipeline.schedule2bw_parts import (StepParts, refuse_sharded,
                                                       schedule_state, template_state)
from llm_validation.pipeline.schedule_guards import guard_grads, register_schedule
from llm_validation.pipeline.segments import drain_2bw, segment_2bw
from llm_validation.pipeline.watchdog import Deadlines
from llm_validation.pipeline.weight_versions import WeightVersions, trainable

__all__ = ["Schedule2BW", "SEND_LAG_CALLS"]

class Schedule2BW(StageSends, PipelineScheduleSingle):
    """PipeDream-2BW over ``stage`` (module docstring); torch's ``Schedule1F1B`` arguments.

    ``optimizer`` / ``lr_scheduler``: or later through :meth:`attach` (torchtitan builds the
    schedule before the optimizer); ``ef_lambda``: update-level Error Feedback (0: off);
    ``max_norm``: global-norm clipping over the pipeline (0: off); ``dp_group``: the
    data-parallel group of this stage's replicas (gradients averaged before the step);
    ``timeout_s``: deadline of every host wait on a peer (None: the runtime's hang deadline).
    """

    def __init__(self, stage: _PipelineStageBase, n_microbatches: int,
                 loss_fn: Callable[..., Tensor] | None = None,
                 args_chunk_spec: tuple[TensorChunkSpec, ...] | None = None,
                 kwargs_chunk_spec: dict[str, TensorChunkSpec] | None = None,
                 output_merge_spec: Any = None, scale_grads: bool = True, *,
                 optimizer: Any = None, lr_scheduler: Any = None, ef_lambda: float = 0.0,
                 max_norm: float = 0.0, dp_group: Any = None,
                 timeout_s: float | None = None) -> None:
        if not isinstance(stage, _PipelineStageBase):
            raise TypeError(f"Schedule2BW needs a PipelineStage, got {type(stage).__name__}")
        validate_pipeline_shape(stage.num_stages, n_microbatches)
        check_schedule(stage.stage_index, stage.num_stages, n_microbatches, 3)
        if loss_fn is None:
            raise ValueError("Schedule2BW trains: loss_fn is required")
        timeout_s = Deadlines.from_env().hang_s if timeout_s is None else timeout_s
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if getattr(stage.submod, "_schedule2bw", None) is not None:
            raise ValueError("this PipelineStage already belongs to a Schedule2BW")
        refuse_sharded(stage.submod)
        super().__init__(stage, n_microbatches, loss_fn=loss_fn,
                         args_chunk_spec=args_chunk_spec, kwargs_chunk_spec=kwargs_chunk_spec,
                         output_merge_spec=output_merge_spec, scale_grads=scale_grads)
        self._parts = StepParts(stage, n_microbatches, scale_grads, ef_lambda, max_norm,
                                dp_group)
        self._timeout = timedelta(seconds=float(timeout_s))
        self._host_waits = torch.device(stage.device).type == "cpu"
        self._versions: WeightVersions | None = None
        self._loaded: dict | None = None   # a state to apply at the next materialisation
        self._marks: list | None = None    # the masters' identities/versions after our last call
        self._t = self._start = 0          # the next batch; the batch of the last (re)start
        self._running = False
        self._forwarded = -1               # the newest batch with a forward on this stage
        self._calls = 0
        self._outbox: list[dist.P2POp] = []
        self._sends: deque[tuple[int, Any, list]] = deque()   # (call, work, ops) posted
        self._loss_graph: dict[int, Tensor] = {}
        self._batch_losses: dict[int, list[Tensor]] = {}
        self.optimizer = self.lr_scheduler = None
        if optimizer is not None:
            self.attach(optimizer, lr_scheduler)
        elif lr_scheduler is not None:
            raise ValueError("lr_scheduler= needs optimizer= (or attach both)")
        stage.submod._schedule2bw = True

    # ------------------------------------------------------------------- set-up, state
    def attach(self, optimizer: Any, lr_scheduler: Any = None) -> None:
        """Give the schedule the optimizer over this stage's trainable parameters (and its
        lr scheduler): it steps both inside :meth:`step`; stepping them in the loop, or
        clipping there, is refused (:mod:`.schedule_guards`)."""
        if self._running:
            raise RuntimeError("Schedule2BW.attach: batches are in flight; call finish() first")
        self._parts.attach(optimizer, lr_scheduler)
        self.optimizer, self.lr_scheduler = optimizer, lr_scheduler

    def sync_weights(self) -> None:
        """Take both versions from the module's current weights (a fresh start from them,
        ``W(-1) = W(0)``): after loading weights into the module outside a resume."""
        if self._running:
            raise RuntimeError("Schedule2BW.sync_weights: batches are in flight; call finish()")
        self._loaded, self._versions = None, None
        self._materialize()

    def _materialize(self) -> None:
        """Take the versions from the module (its weights now real) and apply a loaded state."""
        module = self._stage.submod
        refuse_sharded(module)
        sd, self._loaded = self._loaded, None
        self._t = self._start = sd["next_batch"] if sd else self._t
        self._forwarded = self._t - 1
        named = trainable(module)
        previous = [sd["previous"][n] for n, _ in named] if sd and sd["previous"] else None
        self._versions = self._make_versions(module, self._t, previous)
        self._parts.materialize(self._versions, sd)
        self._marks = self._versions.marks()

    def _check_weights(self) -> None:
        if self._versions is None or self._loaded is not None:
            self._materialize()
        elif [(id(p), p._version) for _, p in trainable(self._stage.submod)] != self._marks:
            raise RuntimeError("the stage's weights changed outside Schedule2BW since its last "
                               "call: call schedule.sync_weights() (a fresh start from them) or "
                               "schedule.load_state_dict() (an exact resume)")

    def state_dict(self) -> dict[str, Any]:
        """The schedule's part of a checkpoint (drains first if batches are in flight; every
        stage must call it, as every rank calls DCP's save)."""
        if self._running:
            self._drain()
        if self._loaded is not None:
            return self._loaded
        if self._versions is None:
            return template_state(self._stage.submod, self._parts, self._t)
        return schedule_state(self._versions, self._parts, self._t)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`'s output; applied at the next :meth:`step` (after
        the model, optimizer and scheduler loads, in whatever order they happen)."""
        if self._running:
            raise RuntimeError("Schedule2BW.load_state_dict: batches are in flight")
        self._loaded = dict(state)
        self._t = int(state["next_batch"])

    # ------------------------------------------------- overridable pieces (the mutations)
    def _make_versions(self, module: nn.Module, next_batch: int,
                       previous: list | None) -> WeightVersions:
        return WeightVersions(module, next_batch, previous)

    def _install(self, batch: int, kind: str) -> None:
        """Before each forward and backward of ``batch``: its version into the module."""
        self._versions.install(batch % 2)

    # -------------------------------------------------------------------- the actions
    def _run(self, acts: list, arg_mbs: list, kwarg_mbs: list, target_mbs: list | None,
             loss_kwargs: dict | None, outputs: list | None) -> None:
        stage, M, versions = self._stage, self._n_microbatches, self._versions
        for a in acts:
            j = a.mb % M
            if a.kind == FORWARD:
                self._install(a.batch, a.kind)
                self._forwarded = max(self._forwarded, a.batch)
                if not stage.is_first:
                    self._recv(stage.get_fwd_recv_ops(j), f"the activation of microbatch {a.mb}")
                out = stage.forward_one_chunk(j, arg_mbs[j], kwarg_mbs[j],
                                              save_forward_output=False)
                if stage.is_last:
                    loss = self._compute_loss(out, target_mbs[j], loss_kwargs)
                    self._loss_graph[a.mb] = loss
                    self._batch_losses.setdefault(a.batch, []).append(loss.detach())
                    if outputs is not None:
                        outputs.append(tree_map(lambda v: v.detach() if isinstance(v, Tensor)
                                                else v, out))
                else:
                    self._outbox.extend(stage.get_fwd_send_ops(j))
            elif a.kind == BACKWARD:
                self._install(a.batch, a.kind)
                if not stage.is_last:
                    self._recv(stage.get_bwd_recv_ops(j), f"the gradient of microbatch {a.mb}")
                stage.backward_one_chunk(j, loss=self._loss_graph.pop(a.mb, None),
                                         last_backward=False)
                if stage.is_first:
                    stage.bwd_cache.pop(j, None)
                else:
                    self._outbox.extend(stage.get_bwd_send_ops(j))
                    for info in stage.args_recv_info[j]:   # torch clears these once per step()
                        if not info.is_root_arg and info.buffer is not None:
                            info.buffer.grad = None
            else:
                self._flush()                 # nothing may wait on a send held back here
                self._parts.step(versions, a.batch, in_place=self._forwarded <= a.batch)
        self._flush()

    def _end_call(self) -> None:
        self._versions.restore()
        guard_grads(self._versions.masters)
        self._reap(self._calls - SEND_LAG_CALLS)
        self._calls += 1
        self._marks = self._versions.marks()

    def _drain(self) -> None:
        self._check_weights()
        try:
            self._run(drain_2bw(self._stage.stage_index, self._num_stages, self._n_microbatches,
                                self._t, self._start), [], [], None, None, None)
            self._reap(self._calls)
        finally:
            self._end_call()
        self._start, self._running = self._t, False

    # ---------------------------------------------------------------------- public API
    def step(self, *args: Any, target: Any = None, losses: list | None = None,
             return_outputs: bool = True, loss_kwargs: dict | None = None,
             arg_mbs: list | None = None, kwarg_mbs: list | None = None,
             target_mbs: list | None = None, **kwargs: Any) -> Any:
        """Batch t in (torch's arguments: the whole batch, split into M microbatches, or the
        microbatch lists ``arg_mbs`` / ``kwarg_mbs`` / ``target_mbs``); runs its segment of
        the 2BW action list, optimizer steps included. ``losses``: this batch's microbatch
        losses (last stage); returns this batch's merged outputs there when
        ``return_outputs``, else None."""
        M = self._n_microbatches
        if arg_mbs is None and kwarg_mbs is None and target_mbs is None:
            arg_mbs, kwarg_mbs = self._split_inputs(args, kwargs)
            if target is not None:
                target_mbs = list(_split_tensor(target, TensorChunkSpec(0), M))
        elif args or kwargs or target is not None:
            raise ValueError("give the batch either whole (args, target=) or as microbatch "
                             "lists (arg_mbs=, kwarg_mbs=, target_mbs=), not both")
        return self._step_microbatches(arg_mbs, kwarg_mbs, target_mbs, losses, return_outputs,
                                       loss_kwargs=loss_kwargs)

    def _step_microbatches(self, arg_mbs: list | None = None, kwarg_mbs: list | None = None,
                           target_mbs: list | None = None, losses: list | None = None,
                           return_outputs: bool = True,
                           loss_kwargs: dict | None = None) -> Any:
        """torch's microbatch-list entry: one 2BW segment (:meth:`step`)."""
        if not torch.is_grad_enabled():
            raise RuntimeError("Schedule2BW.step needs gradients enabled (not under no_grad)")
        stage, M = self._stage, self._n_microbatches
        arg_mbs = [()] * M if arg_mbs is None else list(arg_mbs)
        kwarg_mbs = [{}] * M if kwarg_mbs is None else list(kwarg_mbs)
        for name, mbs in (("arg_mbs", arg_mbs), ("kwarg_mbs", kwarg_mbs),
                          ("target_mbs", target_mbs)):
            if mbs is not None and len(mbs) != M:
                raise ValueError(f"{name} has {len(mbs)} microbatches, the schedule runs {M}")
        if stage.is_first and not any(arg_mbs) and not any(kwarg_mbs):
            raise ValueError("the first stage's step needs the batch's inputs")
        if stage.is_last and target_mbs is None:
            raise ValueError("the last stage's step needs target=")
        self._parts.require_optimizer()
        self._check_weights()
        self._parts.guard.check()
        stage.has_backward = True
        t, self._running = self._t, True
        outputs = [] if stage.is_last and return_outputs else None
        try:
            if not self._stage_forward_initialized or not self._stage_backward_initialized:
                self._versions.install(t % 2)
                self._initialize_stage(arg_mbs[0], kwarg_mbs[0],
                                       target_mbs[0] if target_mbs else None, loss_kwargs)
            self._run(segment_2bw(stage.stage_index, self._num_stages, M, t, self._start),
                      arg_mbs, kwarg_mbs, target_mbs, loss_kwargs, outputs)
        finally:
            self._end_call()
        self._t += 1
        done = self._batch_losses.pop(t, [])
        if losses is not None:
            losses.clear()
            losses.extend(done)
        return None if outputs is None else self._merge_outputs(outputs)

    def finish(self) -> None:
        """Drain the pipeline (the last backwards and the last step). Afterwards the stage
        module holds W(N), :meth:`eval` may run, and a later :meth:`step` restarts with a
        fresh warm-up and the same numbers."""
        if not self._running:
            raise RuntimeError("Schedule2BW.finish: no batch in flight")
        self._drain()

    @torch.no_grad()
    def eval(self, *args: Any, target: Any = None, losses: list | None = None,
             **kwargs: Any) -> list[Tensor]:
        """Forward only with the master weights W(N), after :meth:`finish`. Returns (and puts
        into ``losses``) the last stage's microbatch losses."""
        if self._running:
            raise RuntimeError("Schedule2BW.eval: batches are in flight; call finish() first")
        if not self._stage_forward_initialized:
            raise RuntimeError("Schedule2BW.eval: run at least one step() first")
        stage, M = self._stage, self._n_microbatches
        arg_mbs, kwarg_mbs = self._split_inputs(args, kwargs)
        target_mbs = None if target is None else list(_split_tensor(target, TensorChunkSpec(0), M))
        out: list[Tensor] = []
        for j in range(M):
            if not stage.is_first:
                self._recv(stage.get_fwd_recv_ops(j), f"the evaluation activation {j}")
            y = stage.forward_one_chunk(j, arg_mbs[j], kwarg_mbs[j], save_forward_output=False)
            if stage.is_last:
                if target_mbs is not None:
                    out.append(self._compute_loss(y, target_mbs[j]))
            else:
                self._outbox.extend(stage.get_fwd_send_ops(j))
                self._flush()
            stage.fwd_cache.pop(j, None)
        self._flush()
        self._reap(self._calls)
        if losses is not None:
            losses.clear()
            losses.extend(out)
        return out

    # ------------------------------------------------------------------------ reporting
    @property
    def last_grad_norm(self) -> Tensor | None:
        """The pre-clip global gradient norm of this stage's last step (a device scalar,
        the whole pipeline's; None without ``max_norm``)."""
        return self._parts.grad_norm()

    def weight_bytes(self) -> int:
        """Bytes of the distinct storages holding this stage's weights (2 x
        :meth:`param_bytes`: the master is one of the versions; after the first step)."""
        return self._taken().weight_bytes()

    def param_bytes(self) -> int:
        """Bytes of one copy of the stage's trainable parameters (after the first step)."""
        return self._taken().param_bytes()

    def _taken(self) -> WeightVersions:
        if self._versions is None:
            raise RuntimeError("Schedule2BW takes its weight versions at the first step()")
        return self._versions


register_schedule("2BW", Schedule2BW)
register_schedule("Schedule2BW", Schedule2BW)
register_schedule("PipeDream2BW", Schedule2BW)
