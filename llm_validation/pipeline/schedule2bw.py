"""``Schedule2BW``: PipeDream-2BW for any model on ``torch.distributed.pipelining``.

A drop-in for ``Schedule1F1B`` that takes the user's own ``PipelineStage`` and never flushes
the pipeline between optimizer steps (docs/schedule2bw.md)::

    schedule = Schedule2BW(stage, n_microbatches, loss_fn, optimizer, ef_lambda=0.0)
    for x, y in batches:                  # batch t
        losses = schedule.step(x) | step() | step(target=y)   # first | middle | last stage
        # no optimizer.step(): the schedule took the steps the 2BW action list places here;
        # `losses` (last stage): the microbatch losses of batch t - 1, the batch just completed
    losses = schedule.finish()           # drain; the last step; the last batch's losses

Algorithm (stage s of P, M >= P microbatches; :mod:`llm_validation.pipeline.schedule` has the
action lists and the proof that two versions suffice; :mod:`.segments` cuts them per batch):
``step(batch_t)`` runs :func:`segment_2bw` (all forwards of batch t, the backwards batch t - 1
left in flight, the step of batch t - 1; of batch t on the last stage); ``finish()`` runs
:func:`drain_2bw`. Batch t reads ``W(t-1)`` on every stage (``W(-1) = W(0)``) for its forward
and its backward, and STEP t applies::

    W(t+1) = W(t) - u(grad f(W(t-1)))        (+ update-level EF: DelayedOptimizer(tau=0, lam))

Weight versions: two sets of leaves, ``slot[t % 2]`` serving batch t; the stage's module is
wrapped so that its forward is ``torch.func.functional_call(module, slot, args)`` (autograd
saves the slot leaves, never the module's parameters, so nothing is corrupted when another
version is in use meanwhile, and the gradients land on the slot's leaves). The module's own
parameters (the optimizer's master copy) always alias one of the slots: at STEP t the slot of
W(t-1) (batch t has finished) receives a copy of W(t), the parameters are pointed at it
(``p.data``), the gradients are moved onto them (``/ M`` when ``scale_grads``, as torch's
``scale_grads``) and the optimizer steps there to W(t+1) while the other slot keeps W(t) for
batch t+1. Exactly two copies of the weights (:meth:`Schedule2BW.weight_bytes`).

What torch's ``PipelineScheduleSingle`` does that 2BW must not, and what is done instead:
``step`` clears the stage's runtime state every call (in-flight microbatches of the previous
batch would be lost): not called, the per-chunk input gradients are cleared after each send;
the caches are keyed 0..M-1: microbatch ``i`` uses chunk ``i % M`` (at most ``P <= M``
consecutive microbatches are in flight, so no two share a chunk); the user's loop calls
``optimizer.step()``: here the schedule owns the step and the version swap.

Communication follows the project's posting discipline (docs/pipeline.md): every op goes
through :func:`llm_validation.pipeline.comm.post_batch` (one kind, batched, on both ends),
sends are held back and posted in one group with the next receive (NCCL's deadlock rule) or
flushed at a step and at the end of each call, every host wait has a deadline.

Assumptions: one stage per rank (``PipelineStage``), ``P >= 2``, ``M >= P``, D = 1 (no DDP /
FSDP around the stage module: their hooks sit on the module's parameters, which the 2BW
forward does not use), a module whose forward is a function of its parameters and inputs
(buffers are used as they are; dropout draws its own random numbers). Guarantee (tests/
llm_validation/pipeline/test_schedule2bw.py, CPU, gloo): per-step losses and final weights
bitwise equal to the single-process ``DelayedOptimizer(tau=1)`` run.

Reference: Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training"
(PipeDream-2BW), ICML 2021; torch 2.13 ``torch/distributed/pipelining/schedules.py``.
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
from torch.func import functional_call

from llm_validation.pipeline.comm import LOST, TIMEOUT, StageFailure, is_timeout, post_batch
from llm_validation.pipeline.watchdog import Deadlines
from llm_validation.pipeline.schedule import (BACKWARD, FORWARD, check_schedule,
                                              validate_pipeline_shape)
from llm_validation.pipeline.segments import drain_2bw, segment_2bw
from llm_validation.training.delay import DelayedOptimizer

__all__ = ["Schedule2BW", "VersionedModule"]


class VersionedModule(nn.Module):
    """The stage module run on a chosen weight version: ``forward`` is
    ``functional_call(inner, weights, args, kwargs)`` (``weights``: name -> tensor, set by the
    schedule before each forward; parameters it does not name and buffers are the module's)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.weights: dict[str, Tensor] = {}

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return functional_call(self.inner, self.weights, args, kwargs)


class Schedule2BW(PipelineScheduleSingle):
    """PipeDream-2BW over ``stage`` (module docstring).

    ``stage``: this rank's ``PipelineStage`` (its module is wrapped in :class:`VersionedModule`);
    ``n_microbatches``: M >= the number of stages; ``loss_fn(output, target)``: the loss of one
    microbatch, as for torch's schedules; ``optimizer``: a torch optimizer (or anything with
    ``param_groups``, ``step``, ``zero_grad``) over exactly the stage module's trainable
    parameters, stepped by the schedule; ``ef_lambda``: update-level Error Feedback coefficient
    (0: off); ``lr_scheduler``: stepped by the schedule right after each optimizer step (do not
    step it yourself: stages take step t in different calls); ``scale_grads``: divide the
    accumulated gradients by M before each step (torch's default, for a mean loss);
    ``timeout_s``: deadline of every host wait on a peer (gloo; NCCL waits on the stream);
    None: the runtime's hang deadline (``DELAYBOUND_PIPE_TIMEOUT_S``, 30 s by default).
    """

    def __init__(self, stage: _PipelineStageBase, n_microbatches: int,
                 loss_fn: Callable[..., Tensor], optimizer: Any, ef_lambda: float = 0.0, *,
                 lr_scheduler: Any = None, scale_grads: bool = True,
                 args_chunk_spec: tuple[TensorChunkSpec, ...] | None = None,
                 kwargs_chunk_spec: dict[str, TensorChunkSpec] | None = None,
                 timeout_s: float | None = None) -> None:
        if not isinstance(stage, _PipelineStageBase):
            raise TypeError(f"Schedule2BW needs a PipelineStage, got {type(stage).__name__}")
        validate_pipeline_shape(stage.num_stages, n_microbatches)
        # the 2BW invariants (versions in time, two in flight, no flush), replayed for this
        # stage's (P, M) over a fill, a steady batch and a drain before anything runs
        check_schedule(stage.stage_index, stage.num_stages, n_microbatches, 3)
        if loss_fn is None:
            raise ValueError("Schedule2BW trains: loss_fn is required")
        if timeout_s is None:            # the runtime's hang deadline (pipeline/watchdog.py)
            timeout_s = Deadlines.from_env().hang_s
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        inner = stage.submod
        if isinstance(inner, VersionedModule):
            raise ValueError("this PipelineStage already belongs to a Schedule2BW")
        if isinstance(inner, nn.parallel.DistributedDataParallel) or hasattr(inner, "unshard"):
            raise ValueError("Schedule2BW runs D = 1: DDP/FSDP hooks sit on the module's "
                             "parameters, which the 2BW forward does not use "
                             "(docs/schedule2bw.md, 'Data parallelism')")
        super().__init__(stage, n_microbatches, loss_fn=loss_fn,
                         args_chunk_spec=args_chunk_spec, kwargs_chunk_spec=kwargs_chunk_spec,
                         scale_grads=scale_grads)
        self._named = [(n, p) for n, p in inner.named_parameters() if p.requires_grad]
        given = {id(p) for g in optimizer.param_groups for p in g["params"]}
        if given != {id(p) for _, p in self._named}:
            raise ValueError("the optimizer must hold exactly the stage module's trainable "
                             "parameters (build it from stage.submod.parameters())")
        self.optimizer = DelayedOptimizer(optimizer, tau=0, ef_lambda=ef_lambda)
        self.lr_scheduler = lr_scheduler
        self._timeout = timedelta(seconds=float(timeout_s))
        self._host_waits = torch.device(stage.device).type == "cpu"
        with torch.no_grad():        # slot 0 = W(-1) = W(0); the master lives in slot 1 = W(0)
            self._versions = [{n: p.detach().clone().requires_grad_(True) for n, p in self._named}
                              for _ in range(2)]
            for n, p in self._named:
                p.data = self._versions[1][n].data
        self._wrapper = self._wrap(inner)
        stage.submod = self._wrapper
        self._t = 0            # the next batch
        self._start = 0        # the batch the schedule (re)started at (after a finish())
        self._running = False  # batches in flight (between the first step() and finish())
        self._outbox: list[dist.P2POp] = []               # sends held back
        self._sends: deque[tuple[Any, list]] = deque()    # posted sends, kept until complete
        self._loss_graph: dict[int, Tensor] = {}          # last stage: mb -> loss (with graph)
        self._batch_losses: dict[int, list[Tensor]] = {}  # last stage: t -> detached losses

    # ------------------------------------------------------------------ overridable pieces
    def _wrap(self, inner: nn.Module) -> nn.Module:
        """The module the stage runs (the tests' mutations replace it)."""
        return VersionedModule(inner)

    def _use_version(self, batch: int) -> None:
        """Point the wrapper at the version of ``batch``: slot ``batch % 2`` = W(batch - 1)."""
        self._wrapper.weights = self._versions[batch % 2]

    def _take_grads(self, t: int) -> list[Tensor | None]:
        """The gradients of batch t (on its slot's leaves), detached from the slot."""
        slot, out = self._versions[t % 2], []
        for n, _ in self._named:
            out.append(slot[n].grad)
            slot[n].grad = None
        return out

    def _refresh(self, stale: Tensor, current: Tensor) -> None:
        """The slot of W(t-1) receives W(t) before the step writes W(t+1) into it."""
        stale.copy_(current)

    # ------------------------------------------------------------------------- the step
    @torch.no_grad()
    def _optimizer_step(self, t: int) -> None:
        """STEP t: W(t+1) = W(t) - u(grad f(W(t-1))) in the slot batch t has just freed."""
        slot, other = self._versions[t % 2], self._versions[(t + 1) % 2]
        for (n, p), g in zip(self._named, self._take_grads(t)):
            if g is not None and self.scale_grads:
                g.div_(self._n_microbatches)
            p.grad = g
            self._refresh(slot[n], other[n])
            p.data = slot[n].data
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.lr_scheduler is not None:
            self.lr_scheduler.step()

    # -------------------------------------------------------------------- communication
    def _wait(self, work: Any, ops: list[dist.P2POp], what: str) -> None:
        try:
            work.wait(self._timeout if self._host_waits else None)
        except Exception as exc:  # gloo/NCCL raise RuntimeError with the transport's text
            peer = ops[-1].peer if ops else None
            raise StageFailure(self._stage.stage_index, peer,
                               TIMEOUT if is_timeout(exc) else LOST, what,
                               str(exc).splitlines()[0][:300]) from exc

    def _recv(self, ops: list[dist.P2POp], what: str) -> None:
        """Post ``ops`` (receives) in one batch with the sends held back; wait for all."""
        batch, self._outbox = self._outbox + ops, []
        if batch:
            self._wait(post_batch(batch), batch, what)

    def _flush(self) -> None:
        """Post the sends held back (one batch); keep them alive until they complete."""
        sends, self._outbox = self._outbox, []
        if sends:
            self._sends.append((post_batch(sends), sends))
        while self._sends and self._sends[0][0].is_completed():
            work, ops = self._sends.popleft()
            self._wait(work, ops, "a send")

    def _drain_sends(self) -> None:
        self._flush()
        while self._sends:
            work, ops = self._sends.popleft()
            self._wait(work, ops, "the delivery of a send")

    # -------------------------------------------------------------------- the actions
    def _run(self, acts: list, arg_mbs: list, kwarg_mbs: list, target_mbs: list | None) -> None:
        stage, M = self._stage, self._n_microbatches
        for a in acts:
            j = a.mb % M
            if a.kind == FORWARD:
                self._use_version(a.batch)
                if not stage.is_first:
                    self._recv(stage.get_fwd_recv_ops(j), f"the activation of microbatch {a.mb}")
                out = stage.forward_one_chunk(j, arg_mbs[j], kwarg_mbs[j],
                                              save_forward_output=False)
                if stage.is_last:
                    self._loss_graph[a.mb] = self._compute_loss(out, target_mbs[j])
                else:
                    self._outbox.extend(stage.get_fwd_send_ops(j))
            elif a.kind == BACKWARD:
                self._use_version(a.batch)
                if not stage.is_last:
                    self._recv(stage.get_bwd_recv_ops(j), f"the gradient of microbatch {a.mb}")
                loss = self._loss_graph.pop(a.mb, None)
                stage.backward_one_chunk(j, loss=loss, last_backward=False)
                if loss is not None:
                    self._batch_losses.setdefault(a.batch, []).append(loss.detach())
                if stage.is_first:
                    stage.bwd_cache.pop(j, None)
                else:
                    self._outbox.extend(stage.get_bwd_send_ops(j))
                    for info in stage.args_recv_info[j]:   # torch clears these once per step()
                        if not info.is_root_arg and info.buffer is not None:
                            info.buffer.grad = None
            else:
                self._flush()                 # nothing may wait on a send held back here
                self._optimizer_step(a.batch)
        self._flush()

    def _completed(self, t: int, losses: list | None) -> list[Tensor]:
        done = self._batch_losses.pop(t, []) if t >= 0 else []
        if losses is not None:
            losses.clear()
            losses.extend(done)
        return done

    def _step_microbatches(self, *args: Any, **kwargs: Any) -> None:
        """torch's one-batch-with-a-flush entry point; 2BW has no such unit (use :meth:`step`)."""
        raise NotImplementedError("Schedule2BW runs across batches: call step() and finish()")

    # ---------------------------------------------------------------------- public API
    def step(self, *args: Any, target: Any = None, losses: list | None = None,
             return_outputs: bool = False, **kwargs: Any) -> list[Tensor]:
        """Take batch t in (``args``/``kwargs`` on the first stage, ``target`` on the last, as
        torch's ``step``) and run its segment of the 2BW action list, optimizer steps
        included. Returns (and puts into ``losses``) the last stage's microbatch losses of
        batch t - 1, the batch completed by this call ([] on other stages and at t = start)."""
        if return_outputs:
            raise ValueError("Schedule2BW.step returns the completed batch's losses, not outputs")
        if not torch.is_grad_enabled():
            raise RuntimeError("Schedule2BW.step needs gradients enabled (not under no_grad)")
        stage, M = self._stage, self._n_microbatches
        if stage.is_first and not args and not kwargs:
            raise ValueError("the first stage's step needs the batch's inputs")
        if stage.is_last and target is None:
            raise ValueError("the last stage's step needs target=")
        stage.has_backward = True
        arg_mbs, kwarg_mbs = self._split_inputs(args, kwargs)
        target_mbs = None if target is None else list(_split_tensor(target, TensorChunkSpec(0), M))
        if not self._stage_forward_initialized or not self._stage_backward_initialized:
            self._use_version(self._t)
            self._initialize_stage(arg_mbs[0], kwarg_mbs[0],
                                   target_mbs[0] if target_mbs else None)
        t = self._t
        self._running = True
        self._run(segment_2bw(stage.stage_index, self._num_stages, M, t, self._start),
                  arg_mbs, kwarg_mbs, target_mbs)
        self._t += 1
        return self._completed(t - 1, losses)

    def finish(self, losses: list | None = None) -> list[Tensor]:
        """Drain the pipeline (the last backwards and the last step) and return the last
        batch's losses (last stage). Afterwards the stage module holds W(N) and :meth:`eval`
        may run; a later :meth:`step` restarts with a fresh warm-up and the same numbers."""
        if not self._running:
            raise RuntimeError("Schedule2BW.finish: no batch in flight")
        self._run(drain_2bw(self._stage.stage_index, self._num_stages, self._n_microbatches,
                            self._t, self._start), [], [], None)
        self._drain_sends()
        self._start, self._running = self._t, False
        return self._completed(self._t - 1, losses)

    @torch.no_grad()
    def eval(self, *args: Any, target: Any = None, losses: list | None = None,
             **kwargs: Any) -> list[Tensor]:
        """Forward only with the master weights W(N), after :meth:`finish` (2BW never stops
        otherwise). Returns (and puts into ``losses``) the last stage's microbatch losses."""
        if self._running:
            raise RuntimeError("Schedule2BW.eval: batches are in flight; call finish() first")
        if not self._stage_forward_initialized:
            raise RuntimeError("Schedule2BW.eval: run at least one step() first")
        stage, M = self._stage, self._n_microbatches
        arg_mbs, kwarg_mbs = self._split_inputs(args, kwargs)
        target_mbs = None if target is None else list(_split_tensor(target, TensorChunkSpec(0), M))
        self._wrapper.weights = dict(self._named)
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
        self._drain_sends()
        if losses is not None:
            losses.clear()
            losses.extend(out)
        return out

    # -------------------------------------------------------------------------- memory
    def weight_bytes(self) -> int:
        """Bytes of the distinct storages holding this stage's weights: the master parameters
        and both versions (2 x :meth:`param_bytes`: the master is one of the versions)."""
        seen: dict[int, int] = {}
        for t in [p for _, p in self._named] + [w for v in self._versions for w in v.values()]:
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        return sum(seen.values())

    def param_bytes(self) -> int:
        """Bytes of one copy of the stage's trainable parameters."""
        return sum(p.numel() * p.element_size() for _, p in self._named)
