"""Emulated delay and Error Feedback under data parallelism: ``--data-parallel D``, no pipeline.

For users who want a delayed optimizer (``DelayedOptimizer.from_config``: tau, EF, gradient
clipping, as the emulator builds it) without pipelining: D processes (the same launcher, a
(D, 1) mesh), each holding the whole model.

Algorithm (replica d of D; batch t of B sequences cut into D*M microbatches, replica d takes
``k = d*M .. d*M + M - 1``; :class:`llm_validation.pipeline.stage.StageSetup` with one stage)::

    with opt.delayed_weights():                     # parameters hold W(max(t - tau, 0))
        for j in range(M):                          # this replica's microbatches, in order
            (lm_loss(model(x_j), y_j) / M).backward()
    p.grad <- average over the D replicas           # pipeline.replicas (allreduce | ordered);
                                                    #   allreduce: buckets launched during the
                                                    #   backward (pipeline.grad_buckets)
    opt.step(); opt.zero_grad()                     # base step on W(t), then EF

Assumptions: every replica starts from the same seed and applies the same averaged gradient,
so weights, optimizer and EF state stay bitwise equal across replicas (checked at every
checkpoint and at the end). Guarantee: the update is ``DelayedOptimizer(tau)``'s on the global
batch: with ``DELAYBOUND_DP_REDUCE=ordered`` (D a power of two) every number equals the
single-process emulated run bitwise (statistics to float64 summation order); with the default
all-reduce, up to the float32 rounding of the gradient sum. Statistics, validation, checkpoints
and the run directory are the pipeline runtime's (:class:`llm_validation.pipeline.runtime.
StageRun` with P = 1); the side passes (validation, the statistics' extra gradients) are this
module's, as one stage needs no schedule. ``DelayConfig`` knobs beyond tau and EF are rejected
by ``TrainConfig`` for D > 1.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import torch
from torch import Tensor

from llm_validation.config import TrainConfig
from llm_validation.pipeline.processes import WorkerContext
from llm_validation.pipeline.replicas import pop_grads
from llm_validation.pipeline.runtime import StageRun
from llm_validation.training import stats
from llm_validation.training.loop import weights_as
from llm_validation.training.model import batch_loss, lm_loss

__all__ = ["run_dp_replica", "DataParallelRun"]


class DataParallelRun(StageRun):
    """One replica of a data-parallel emulated run (a one-stage :class:`StageRun`)."""

    def __init__(self, ctx: WorkerContext, cfg: TrainConfig, start: int, dp_mode: str) -> None:
        super().__init__(ctx, cfg, start, tau=cfg.delay.tau, dp_mode=dp_mode)
        self.params = list(self.setup.opt.params)

    def microbatches(self, xs: Sequence[Tensor], ys: Sequence[Tensor], scale: int,
                     observe: Any = None) -> list[Tensor]:
        """Forward/backward of this replica's microbatches in order, ``(loss / scale)``;
        ``observe()`` after each backward; the microbatch losses."""
        setup, losses = self.setup, []
        for x, y in zip(xs, ys):
            self.ctx.heartbeat()
            with setup.autocast():
                loss = lm_loss(setup.module(x), y)
            (loss / scale).backward()
            losses.append(loss.detach())
            if observe is not None:
                observe()
        return losses

    def local_gradient(self, weights: Sequence[Tensor] | None, xs: Sequence[Tensor],
                       ys: Sequence[Tensor]) -> tuple[list[Tensor], Tensor]:
        """(the global batch's gradient at ``weights`` (None: the current ones), averaged over
        the replicas; its mean loss), leaving every ``p.grad`` as it was."""
        params, count = self.params, len(xs)
        saved = [p.grad for p in params]
        for p in params:
            p.grad = None
        captured: list[list[Tensor]] = []
        ordered = self.replicas.ordered
        with weights_as(params, weights):
            losses = self.microbatches(xs, ys, count,
                                       (lambda: captured.append(pop_grads(params)))
                                       if ordered else None)
        if ordered:
            grads = self.replicas.fold(captured, params)
        else:
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            grads = self.replicas.reduce(grads)
        for p, g in zip(params, saved):
            p.grad = g
        return grads, batch_loss(self.replicas.gather_losses(losses))   # a device tensor

    def side_passes(self, t: int) -> None:
        """At W(t): the validation loss (if due); for tau > 0 on active steps the fresh
        gradient at W(t) and the large-batch gradient (tau = 0 takes its own in the step)."""
        if self.timer is not None:
            self.timer.start("side")
        setup = self.setup
        if self.eval_due(t):
            xs, ys = setup.pairs("val")
            with torch.no_grad():
                losses = []
                for x, y in zip(xs, ys):
                    with setup.autocast():
                        losses.append(lm_loss(setup.module(x), y).detach())
            self.val_loss[t] = self.val_mean(losses)
        if t < self.N and self.probe.tau > 0 and self.probe.active(t):
            grads, f_x = self.local_gradient(None, *setup.pairs("train", t))
            self.aux[t] = {"other": grads, "f_x": f_x}
            if self.probe.momentum_due(t):
                self.aux[t]["big"], _ = self.local_gradient(None, *setup.pairs("large", t))
        if self.timer is not None:       # the final validation at W(N) is not a step's
            if t < self.N:
                self.timer.stop("side", count=0)
            else:
                self.timer.cancel("side")


def run_dp_replica(ctx: WorkerContext, cfg: TrainConfig, start: int,
                   dp_mode: str = "allreduce") -> None:
    """The body of one replica process (see the module docstring)."""
    sr = DataParallelRun(ctx, cfg, start, dp_mode)
    setup, probe, M, N, dp, opt = sr.setup, sr.probe, sr.M, sr.N, sr.replicas, sr.setup.opt
    params = sr.params
    buckets = sr.grad_buckets(params)      # None: D = 1, ordered, or overlap off
    sr.loaded = None
    status, done, message = "completed", N, ""
    t0 = time.perf_counter()
    for step in range(start, N):
        ctx.heartbeat()
        sr.side_passes(step)                                      # at W(t)
        active = probe.active(step)
        want_noise = active and M * sr.D > 1
        noise = stats.MicrobatchGradVariance(params, M) if want_noise and not dp.ordered else None
        captured: list[list[Tensor]] = []
        observe = (lambda: captured.append(pop_grads(params))) if dp.ordered else \
            (noise.observe if noise is not None else None)
        xs, ys = setup.pairs("train", step)
        if buckets is not None:
            buckets.arm(M)                # each parameter's M-th accumulation is its last
        with opt.delayed_weights():                               # W(t - tau)
            local = sr.microbatches(xs, ys, M, observe)
        sr.step_clock.append(time.perf_counter())
        loss = batch_loss(dp.gather_losses(local))                # read at the flush
        noise = dp.average(params, M, captured=captured if dp.ordered else None, noise=noise,
                           want_noise=want_noise, buckets=buckets)
        read_point = opt.read_weights() if active else []
        other = f_y = None
        if active and probe.tau == 0:     # the pair (W(t), W(t-1)), same batch
            y_pt = probe.other_point(step)
            if y_pt is not None:
                other, f_y = sr.local_gradient(y_pt, xs, ys)
            if probe.momentum_due(step):
                sr.aux[step] = {"big": sr.local_gradient(None, *setup.pairs("large", step))[0]}
        part, f_x = sr.optimizer_step(step, read_point, noise, other)
        if probe.tau == 0:
            have_pair = active and other is not None
            f_x, f_y = (loss, f_y) if have_pair else (None, None)
        else:
            f_y = loss if active else None
        d = sr.end_step(step, part, loss, previous=None, f_x=f_x, f_y=f_y)
        if d is not None:            # a loss of steps d..step was non-finite: stop (every rank)
            status, done, message = "diverged", d, sr.diverged_message(d)
            break
    else:
        sr.side_passes(N)                                         # final validation at W(N)
    sr.finish(status, done, message)
    sr.link.drain_messages()
    if ctx.rank == 0:
        print(f"[data-parallel] rank 0 done: {status} after {done} steps in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
