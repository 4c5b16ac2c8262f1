"""PipeDream-2BW on torch.distributed: one process per stage, no flush, two weight versions.

Algorithm (stage s of P; M >= P microbatches per batch; see :mod:`pipeline_schedule` for the
schedule, the ASCII timeline and the proof that the versions are there in time)::

    W(-1) = W(0); slot[0] = slot[1] = copy of W(0); master p aliases slot[1] = W(0)
    steady 1F1B over the global microbatch stream (no flush at batch boundaries):
      F(i), B(i) of batch t = i // M use slot[t % 2] = W(t-1)  (functional_call)
      after B of the last microbatch of batch t (or later:      (STEP t)
        schedule.STEP_PLACEMENTS):
        p.grad = slot[t % 2].grad           # grad f(W(t-1)) of batch t, this stage's part
                                            #   (averaged over the D replicas first: bucketed
                                            #   all-reduces launched by hooks during B of the
                                            #   last microbatch, pipeline.grad_buckets)
        slot[t % 2] <- slot[(t+1) % 2]      # W(t); W(t-1) is free (batch t is done)
        p.data = slot[t % 2]                # the master now lives in that buffer ...
        opt.step()                          # ... W(t+1) = W(t) - u(grad f(W(t-1))) (+ EF)
                                            # slot[(t+1) % 2] still holds W(t) for batch t+1

Memory: exactly two copies of the stage's weights (the master is always one of the two
versions: before STEP t it aliases W(t) = the version of batch t+1, after it W(t+1) = the
version of batch t+2), plus the optimizer state; the step writes into the buffer whose last
reader (batch t) has finished, never into one an in-flight microbatch of batch t+1 saved for
its backward. (Transient copies during a step: the statistics' steps keep the read point
W(t-1) and the update record, and EF its ``before``; all freed after the step.)

which is exactly ``DelayedOptimizer(tau=1)`` (``W(t+1) = W(t) - u(g(W(t-1)))``) on every stage;
Error Feedback is the emulator's own code (``DelayedOptimizer(tau=0, ef_lambda)`` on the
stage's master weights), so per-step losses and weights equal the single-process emulated run
bitwise on CPU. Activations and their gradients travel with torch.distributed p2p (gloo on CPU,
NCCL on GPUs); the loss is computed on the last stage; stage 0 writes the same run directory as
the emulated path (config.json, metrics.jsonl, summary.json, checkpoints/).

Side work keeps the same numbers as the emulator and is placed where the weights it needs are
the stage's master copy: right after STEP t-1 (master = W(t)) each stage runs the validation
forward pass at W(t) (every ``eval_interval`` steps) and, every ``stats_interval`` steps, the
fresh gradient at W(t) on batch t (and the large-batch gradient of the momentum error), each a
pipelined pass on a separate process group. These passes synchronise the stages (a bubble) at
those steps only; for pure-throughput runs set ``stats_interval = 0`` and ``eval_interval = 0``.

Checkpoints (every ``checkpoint_interval`` steps and at the end): at STEP t each stage saves
its master W(t+1), the version W(t) of batch t+1, optimizer + EF state, statistics state, RNG
and data position (a long phase with its own deadline, :mod:`llm_validation.pipeline.watchdog`).
No gradient waits for a save, so the stages save in parallel; stage 0 writes the ``COMPLETE``
marker at its next flush (at the end at once), once every stage's part exists
(:mod:`llm_validation.pipeline.stage_flush`). Resume restarts the schedule at batch t+1 with a
fresh warm-up; no number changes.

No gradient is ever held back: a backward's input gradient leaves before anything else the
stage does, so the stages' optimizer steps overlap instead of running in series (the old
runtime held the batch's last gradient at every flush until after its own step).

Where STEP t goes (``schedule.STEP_PLACEMENTS``, proven by ``check_schedule``): W(t+1) is
first read by F((t+2)M), at least two pairs after B(tM + M - 1), so the step may run anywhere
in between. Without clipping it follows the batch's last backward (one gradient buffer at a
time); with global-norm clipping (:mod:`llm_validation.pipeline.clipping`) it follows
F((t+1)M + P - 1): every stage launches its norm's reduction as soon as its gradient is final
(after that last backward), and by that forward every stage's contribution has causally
arrived, so the step does not wait (the gradient of batch t then lives beside batch t+1's for
s + 1 pairs).

Divergence (:mod:`llm_validation.pipeline.stage_flush`): the batch losses stay on the device;
at each flush (every ``log_interval`` steps, checkpoint steps, the end; ``training.flush``)
the last stage reads them with its partial sums in one copy and publishes the first
non-finite step so far in the rendezvous store; at a checkpoint step and the last step every
stage acts on that verdict (waiting for it), at any other flush on the previous flush's, which
is already there. Every stage stops at the same flush, like the emulator: status ``diverged``
at step d, the rows up to d, no checkpoint after the divergence (the steps between d and the
stop are computed and dropped).
"""

from __future__ import annotations

import time

import torch

from llm_validation.config import TrainConfig
from llm_validation.pipeline.processes import WorkerContext
from llm_validation.pipeline.replicas import pop_grads
from llm_validation.pipeline.runtime import StageRun
from llm_validation.pipeline.schedule import schedule_2bw
from llm_validation.training import stats
from llm_validation.training.model import batch_loss

__all__ = ["run_2bw_stage"]


def run_2bw_stage(ctx: WorkerContext, cfg: TrainConfig, start: int,
                  dp_mode: str = "allreduce") -> None:
    """The body of one 2BW stage process (see the module docstring); ``dp_mode``: how the
    replicas average their gradients (:mod:`llm_validation.pipeline.replicas`)."""
    sr = StageRun(ctx, cfg, start, tau=1, dp_mode=dp_mode)
    setup, probe, M, N, P, dp = sr.setup, sr.probe, sr.M, sr.N, sr.P, sr.replicas
    versions = [setup.leaf_copies(), setup.leaf_copies()]        # slot t % 2 serves batch t
    if sr.loaded is not None:                                     # slot start % 2 = W(start-1)
        with torch.no_grad():
            for n, w in versions[start % 2].items():
                w.copy_(sr.loaded["previous"][n])
        sr.loaded = None
    params = list(setup.opt.params)
    for p, n in zip(params, setup.names):     # the master lives in slot (start+1) % 2 = W(start)
        p.data = versions[(start + 1) % 2][n].data
    sr.weight_tensors = [w for v in versions for w in v.values()]
    # the overlapped all-reduce: hooks on each version's leaves (None: D = 1, ordered, off)
    buckets = [sr.grad_buckets([v[n] for n in setup.names]) for v in versions]
    captured: dict[int, list[list[torch.Tensor]]] = {}     # ordered dp: microbatch gradients
    batch_data: dict[int, list[torch.Tensor]] = {}
    mb_losses: dict[int, list[torch.Tensor]] = {}
    losses: dict[int, torch.Tensor] = {}
    noise: dict[int, stats.MicrobatchGradVariance] = {}
    finished: dict[int, stats.MicrobatchGradVariance | None] = {}   # averaged, not stepped
    outcome = {"status": "completed", "done": N, "message": ""}

    def data_of(mb: int) -> torch.Tensor:
        t, j = divmod(mb, M)
        if t not in batch_data:
            batch_data[t] = setup.train_microbatches(t)
        x = batch_data[t][j]
        if j == M - 1:
            del batch_data[t]
        return x

    def on_loss(mb: int, loss: torch.Tensor) -> None:
        t = mb // M
        mb_losses.setdefault(t, []).append(loss.detach())
        if len(mb_losses[t]) == M:        # every replica's losses, in microbatch order
            losses[t] = batch_loss(dp.gather_losses(mb_losses.pop(t)))   # read at the flush

    def wants_noise(t: int) -> bool:
        return probe.active(t) and M * sr.D > 1

    def before_backward(a) -> None:
        if buckets[a.batch % 2] is not None and a.mb % M == M - 1:
            buckets[a.batch % 2].arm(1)       # this backward finishes the batch's gradient

    def average(t: int) -> None:
        """Batch t's gradient, final: averaged over the replicas (and its variance)."""
        slot = [versions[t % 2][n] for n in setup.names]
        finished[t] = dp.average(slot, M, captured=captured.pop(t, None),
                                 noise=noise.pop(t, None), want_noise=wants_noise(t),
                                 buckets=buckets[t % 2])

    def on_backward(a) -> None:
        t = a.batch
        slot = [versions[t % 2][n] for n in setup.names]
        if dp.ordered:
            captured.setdefault(t, []).append(pop_grads(slot))
        elif wants_noise(t):
            if t not in noise:
                noise[t] = stats.MicrobatchGradVariance(slot, M)
            noise[t].observe()
        if sr.clip is not None and setup.opt.gef is None and a.mb % M == M - 1:
            # the gradient is final: start the clipping norm's reduction (gradient-level EF
            # mixes the gradient inside the step, so its norm is reduced there)
            average(t)
            sr.clip.launch([w.grad for w in slot])

    def on_step(a) -> bool:
        t = a.batch
        sr.step_clock.append(time.perf_counter())
        slot, other = versions[t % 2], versions[(t + 1) % 2]
        if t not in finished:
            average(t)
        noise_t = finished.pop(t)
        # the statistics need the read point W(t-1) during the step: a copy on active steps
        read_point = [slot[n].detach().clone() for n in setup.names] if probe.active(t) else []
        with torch.no_grad():
            for n, p in zip(setup.names, params):
                p.grad, slot[n].grad = slot[n].grad, None
                slot[n].copy_(other[n])                           # W(t); W(t-1) is free
                p.data = slot[n].data                             # master: W(t) -> W(t+1)
        part, f_x = sr.optimizer_step(t, read_point, noise_t)
        loss = losses.pop(t, None)
        d = sr.end_step(t, part, loss, previous=versions[(t + 1) % 2], f_x=f_x,
                        f_y=loss if probe.active(t) else None)
        if d is not None:            # a loss of steps d..t was non-finite: stop (every stage)
            outcome.update(status="diverged", done=d, message=sr.diverged_message(d))
            return False
        return True

    def after_step(a) -> None:
        sr.side_passes(a.batch + 1)

    t0 = time.perf_counter()
    sr.side_passes(start)
    # clipping needs every stage's norm: its step goes where that has arrived (schedule.py)
    placement = "forward" if sr.clip is not None else "backward"
    done = sr.exec.run(
        schedule_2bw(sr.s, P, M, N, start, step_after=placement),
        weights=lambda t: versions[t % 2], inputs=data_of, targets=data_of, scale=M,
        on_loss=on_loss, before_backward=before_backward, on_backward=on_backward,
        on_step=on_step, after_step=after_step)
    sr.finish(outcome["status"], outcome["done"], outcome["message"])
    if done:
        sr.link.drain()
    else:  # a stopped run leaves activations nobody receives; the messages must still arrive
        sr.link.drain_messages()
    if sr.s == 0:
        print(f"[pipeline] stage 0 done: {outcome['status']} after {outcome['done']} steps in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
