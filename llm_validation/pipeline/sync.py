"""Synchronous pipeline baselines on ``torch.distributed.pipelining``: GPipe and 1F1B.

Same stage split, data, optimizer, statistics, run directory and checkpoints as the 2BW
runtime (:class:`llm_validation.pipeline.runtime.StageRun`); only the gradient of a step comes from torch's own
schedules, which flush the pipeline at every optimizer step::

    stage = PipelineStage(stage_module, s, P, device, input_args=..., output_args=...)
    schedule = ScheduleGPipe(stage, M, loss_fn, scale_grads=False)   # or Schedule1F1B
    for t in steps:
        schedule.step(x_t)            # stage 0 (the whole batch; torch cuts it into M chunks)
        schedule.step()               # middle stages
        schedule.step(target=y_t)     # last stage
        opt.step(); opt.zero_grad()   # every stage, W(t+1) = W(t) - u(grad f(W(t)))

``loss_fn`` returns ``lm_loss / M`` with ``scale_grads=False``, so each microbatch backward is
``(loss_m / M).backward()`` exactly as in ``training.loop.forward_backward``: the run equals the
single-process synchronous run (tau = 0) bitwise on CPU. The unscaled microbatch losses are
kept for the logged loss. Torch's schedules wait on their p2p ops with the process group's
deadline (``timeout_s``); a failure there is reported as a lost/timed-out neighbour.

Ranks sharing a GPU talk over gloo (:mod:`llm_validation.pipeline.devices`), whose send and
receive carry host tensors only (a CUDA tensor fails in gloo's ``writev``: "Bad address", seen
on an H200). Torch's stage then lives on the host (receive buffers, sends, the warm-up votes)
and :class:`_HostIO` runs the stage module on the GPU: the input is copied on, the output
copied off, the last stage's loss computed on the GPU; copies are exact and autograd carries
the gradients back the same way, so the numbers are those of the unstaged run.

With D data-parallel replicas each pipeline row runs its own schedule on its ``pp`` group
(``PipelineStage(group=...)``) over its share of the batch; the stage's gradients are averaged
over its replicas (:mod:`llm_validation.pipeline.replicas`): bucketed all-reduces launched by
post-accumulate-grad hooks once a bucket's parameters have accumulated their M-th microbatch
gradient, inside ``schedule.step`` (:mod:`llm_validation.pipeline.grad_buckets`), waited for
before the step; in the ``ordered`` mode a hook keeps each microbatch's gradient apart.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from llm_validation.pipeline.comm import LOST, TIMEOUT, StageFailure, is_timeout
from llm_validation.pipeline.executor import detached_leaves
from llm_validation.pipeline.processes import WorkerContext
from llm_validation.pipeline.replicas import pop_grads
from llm_validation.pipeline.runtime import StageRun
from llm_validation.training import stats
from llm_validation.training.model import batch_loss

__all__ = ["run_sync_stage", "SCHEDULES"]

#: ``RunConfig.pipeline`` value -> torch schedule class name.
SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B"}


class _Autocast(nn.Module):
    """The stage module under the run's autocast (torch's stage calls ``forward`` directly)."""

    def __init__(self, inner: nn.Module, autocast) -> None:
        super().__init__()
        self.inner, self._autocast = inner, autocast

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self._autocast():
            return self.inner(x)


class _HostIO(nn.Module):
    """The stage module on ``device`` behind host-tensor inputs and outputs (the schedule's
    p2p over gloo with ranks sharing a GPU; see the module docstring)."""

    def __init__(self, inner: nn.Module, device: torch.device) -> None:
        super().__init__()
        self.inner, self.device = inner, device

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (b, t) tokens or (b, t, C) activations on the host -> the same on the host
        return self.inner(x.to(self.device)).cpu()


def _is_transport_error(exc: BaseException) -> bool:
    """True for errors of the p2p transport (a peer gone or silent), not of our own code."""
    text = str(exc)
    return any(k in text for k in ("gloo", "Connection", "Timed out", "timed out", "NCCL",
                                   "closed by peer"))


def _build_schedule(sr: StageRun, loss_fn):
    from torch.distributed import pipelining

    setup, cfg = sr.setup, sr.cfg
    b, t = setup.act_shape[0], setup.act_shape[1]
    dev = sr.link.comm_device                     # the host when ranks share a GPU
    if setup.is_first:
        example_in = torch.zeros((b, t), dtype=torch.long, device=dev)
    else:
        example_in = torch.zeros(setup.act_shape, dtype=setup.act_dtype, device=dev)
    if setup.is_last:
        out_dtype = torch.bfloat16 if cfg.run.dtype == "bfloat16" else setup.act_dtype
        example_out = torch.zeros((b, t, cfg.model.vocab_size), dtype=out_dtype, device=dev)
    else:
        example_out = torch.zeros(setup.act_shape, dtype=setup.act_dtype, device=dev)
    # static metadata: float example tensors must require grad, or torch plans no gradients
    for ex in (example_in, example_out):
        if ex.is_floating_point():
            ex.requires_grad_(True)
    module = _Autocast(setup.module, setup.autocast)
    if sr.link.staging:
        module = _HostIO(module, setup.device)
        print(f"stage {sr.s}: torch's schedule on host tensors, the module on {setup.device} "
              "(host I/O)", flush=True)
    stage = pipelining.PipelineStage(module, sr.s, sr.P, dev,
                                     input_args=example_in, output_args=example_out,
                                     group=sr.ctx.mesh.pp_group)
    cls = getattr(pipelining, SCHEDULES[cfg.run.pipeline])
    return cls(stage, sr.M, loss_fn=loss_fn, scale_grads=False)


class _NoiseTrigger:
    """Calls ``MicrobatchGradVariance.observe`` once per microbatch backward inside torch's
    schedule: after every parameter of the stage has accumulated its gradient (a
    post-accumulate-grad hook counts them)."""

    def __init__(self, params: list[torch.Tensor]) -> None:
        self.params, self.count, self.target = params, 0, None
        self.handles = [p.register_post_accumulate_grad_hook(self._hook) for p in params]

    def _hook(self, _p: torch.Tensor) -> None:
        if self.target is None:
            return
        self.count += 1
        if self.count == len(self.params):
            self.count = 0
            self.target.observe()


class _Capture:
    """``ordered`` data parallelism inside torch's schedule: after every microbatch backward
    (each parameter's post-accumulate-grad hook) the gradient is taken out of ``p.grad``, so
    each microbatch's gradient stays apart (``microbatches()``, one list per microbatch)."""

    def __init__(self, params: list[torch.Tensor]) -> None:
        self.params, self.on = params, False
        self.got: dict[int, list[torch.Tensor]] = {id(p): [] for p in params}
        for p in params:
            p.register_post_accumulate_grad_hook(self._hook)

    def _hook(self, p: torch.Tensor) -> None:
        if self.on:
            self.got[id(p)].extend(pop_grads([p]))

    def microbatches(self) -> list[list[torch.Tensor]]:
        per_param = [self.got[id(p)] for p in self.params]
        out = [list(gs) for gs in zip(*per_param)]
        for gs in per_param:
            gs.clear()
        return out


class _SyncTimer:
    """``--profile`` inside torch's schedule: forward via module hooks (and the loss), backward
    from the module's backward pre-hook to the last parameter's post-accumulate-grad hook of that
    microbatch; the whole ``schedule.step()`` as the window ``schedule``, whose time outside
    forward and backward the timer reports as communication (``recv_wait``)."""

    def __init__(self, timer, module: nn.Module, params: list[torch.Tensor]) -> None:
        self.timer, self.n, self.count = timer, len(params), 0
        self.on = False   # hooks count only inside schedule.step()
        module.register_forward_pre_hook(lambda *_: self._start("forward"))
        module.register_forward_hook(lambda *_: self._stop("forward"))
        module.register_full_backward_pre_hook(lambda *_: self._start("backward"))
        for p in params:
            p.register_post_accumulate_grad_hook(self._accumulated)

    def _start(self, kind: str) -> None:
        if self.on:
            self.timer.start(kind)

    def _stop(self, kind: str) -> None:
        if self.on:
            self.timer.stop(kind)

    def _accumulated(self, _p: torch.Tensor) -> None:
        self.count += 1
        if self.count == self.n:
            self.count = 0
            self._stop("backward")

    def schedule_step(self, step_fn) -> None:
        """Run one ``schedule.step`` inside the timed window ``schedule``."""
        self.on = True
        self.timer.start("schedule")
        try:
            step_fn()
        finally:
            self.on = False
            self.timer.stop("schedule", count=0)


def run_sync_stage(ctx: WorkerContext, cfg, start: int, dp_mode: str = "allreduce") -> None:
    """The body of one GPipe / 1F1B stage process (see the module docstring)."""
    sr = StageRun(ctx, cfg, start, tau=0, dp_mode=dp_mode)
    setup, probe, M, N, dp = sr.setup, sr.probe, sr.M, sr.N, sr.replicas
    opt = setup.opt
    mb_losses: list[torch.Tensor] = []
    step_loss: list[torch.Tensor] = []      # the step's loss (last stage), read at the flush

    def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        # out: (b, t, V) logits, target: (b, t); on the host when ranks share a GPU
        loss = setup.loss(out.to(setup.device), target.to(setup.device))
        mb_losses.append(loss.detach())
        if len(mb_losses) == M:
            step_loss[:] = [batch_loss(dp.gather_losses(mb_losses))]
        return loss / M

    schedule = _build_schedule(sr, loss_fn)
    def progress(*_: object) -> None:      # compute inside the schedule is not a hang
        ctx.status["since"] = time.time()
    setup.module.register_forward_pre_hook(progress)
    setup.module.register_full_backward_pre_hook(progress)
    trigger = _NoiseTrigger(list(opt.params))
    capture = _Capture(list(opt.params)) if dp.ordered else None
    buckets = sr.grad_buckets(list(opt.params))      # None: D = 1, ordered, or overlap off
    prof = _SyncTimer(sr.timer, setup.module, list(opt.params)) if sr.timer is not None else None
    status, done, message = "completed", N, ""
    if sr.timer is not None:
        sr.timer.start("wall")   # the whole loop: its untimed rest is bookkeeping
    for step in range(start, N):
        ctx.heartbeat()
        sr.side_passes(step)                              # validation at W(t) (tau = 0: no aux)
        active = probe.active(step)
        want_noise = active and M * sr.D > 1
        noise = stats.MicrobatchGradVariance(opt.params, M) \
            if want_noise and not dp.ordered else None
        trigger.target, trigger.count = noise, 0
        if capture is not None:
            capture.on = True
        if buckets is not None:
            buckets.arm(M)           # the M-th accumulation of each parameter is its last
        batch = sr.data("train", step)
        whole = torch.cat(batch).to(sr.link.comm_device) if batch is not None else None
        mb_losses.clear()
        def step_fn() -> None:
            if setup.is_first:
                schedule.step(whole)
            elif setup.is_last:
                schedule.step(target=whole)
            else:
                schedule.step()
        # inside torch's schedule this stage waits on its row's neighbours: published as a
        # wait on every rank of the row, restarted at each forward / backward (watchdog)
        ctx.status.update(what=f"a neighbour inside torch's schedule at step {step}",
                          since=time.time())
        ctx.status["waiting_on"] = list(sr.link.ranks)
        try:
            if prof is not None:
                prof.schedule_step(step_fn)
            else:
                step_fn()
        except RuntimeError as exc:
            if not _is_transport_error(exc):
                raise
            kind = TIMEOUT if is_timeout(exc) else LOST
            raise StageFailure(sr.s, None, kind, f"a neighbour inside torch's schedule at step {step}",
                               str(exc).splitlines()[0][:300]) from exc
        finally:
            ctx.status["waiting_on"] = None
        trigger.target = None
        sr.step_clock.append(time.perf_counter())
        ctx.heartbeat()
        loss = step_loss[0] if setup.is_last else None
        if capture is not None:
            capture.on = False
        noise = dp.average(list(opt.params), M,
                           captured=capture.microbatches() if capture is not None else None,
                           noise=noise, want_noise=want_noise, buckets=buckets)
        other = big = f_y = None
        if sr.timer is not None:
            sr.timer.start("side")
        if active:   # tau = 0: the pair's other point is W(t-1), on the same batch
            y_pt = probe.other_point(step)
            if y_pt is not None:
                leaves = detached_leaves(dict(zip(setup.names, y_pt)))
                other, f_y = sr.gradient_pass(leaves, M, batch)
            if probe.momentum_due(step):
                big, _ = sr.gradient_pass(detached_leaves(setup.master()),
                                          M * cfg.run.large_batch_factor, sr.data("large", step))
        sr.aux[step] = {"big": big} if big is not None else {}
        if sr.timer is not None:
            sr.timer.stop("side", count=0)
            sr.timer.start("step")
        part, f_y = sr.optimizer_step(step, [p.detach() for p in opt.params], noise, other,
                                      f_other=f_y)
        have_pair = active and other is not None
        d = sr.end_step(step, part, loss, previous=None, f_x=loss if have_pair else None,
                        f_y=f_y if have_pair else None)
        if sr.timer is not None:
            sr.timer.stop("step")
        if d is not None:            # a loss of steps d..step was non-finite: stop (every stage)
            status, done, message = "diverged", d, sr.diverged_message(d)
            break
    else:
        sr.side_passes(N)                                 # final validation at W(N)
    if sr.timer is not None:
        sr.timer.stop("wall")
    sr.finish(status, done, message)
    if status == "completed":
        sr.link.drain()
        sr.side.drain()
    else:
        sr.link.drain_messages()
