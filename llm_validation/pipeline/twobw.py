"""PipeDream-2BW on torch.distributed: one process per stage, no flush, two weight versions.

Algorithm (stage s of P; M >= P microbatches per batch; see :mod:`pipeline_schedule` for the
schedule, the ASCII timeline and the proof that the versions are there in time)::

    W(-1) = W(0); slot[0] = slot[1] = copy of W(0)      # two stashed versions per stage
    steady 1F1B over the global microbatch stream (no flush at batch boundaries):
      F(i), B(i) of batch t = i // M use slot[t % 2] = W(t-1)  (functional_call)
      after B of the last microbatch of batch t:                (STEP t)
        p.grad = slot[t % 2].grad           # grad f(W(t-1)) of batch t, this stage's part
        opt.step()                          # master: W(t+1) = W(t) - u(grad f(W(t-1))) (+ EF)
        slot[t % 2] <- W(t+1)               # the version of batch t + 2 (W(t-1) is free now)

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

Checkpoints (every ``checkpoint_interval`` steps and at the end): after STEP t each stage saves
its master W(t+1), the version W(t) of batch t+1, optimizer + EF state, statistics state, RNG
and data position, BEFORE sending the input gradient of batch t's last microbatch; hence stage 0
finishes STEP t only after every stage has saved, and it then writes the ``COMPLETE`` marker.
Resume restarts the schedule at batch t+1 with a fresh warm-up; no number changes.

Divergence: the last stage publishes a non-finite batch loss at step t in the rendezvous store;
every stage reads it before its STEP t (it can, by the dependency order) and stops there, like
the emulator (status ``diverged``, no step t, no final checkpoint).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import torch

from llm_validation.config import TrainConfig
from llm_validation.pipeline.comm import StageLink
from llm_validation.pipeline.executor import StageExecutor, detached_leaves
from llm_validation.pipeline.processes import WorkerContext
from llm_validation.pipeline.schedule import schedule_2bw
from llm_validation.pipeline.stage import (
    StageSetup,
    ckpt_dir,
    load_stage_checkpoint,
    mark_complete,
    save_stage_checkpoint,
)
from llm_validation.pipeline.stage_stats import MetricsCollector, StageProbe, batch_loss
from llm_validation.rundir import (
    MetricsWriter,
    RunPaths,
    environment,
    rng_state,
    set_rng_state,
    write_json,
)
from llm_validation.training import stats
from llm_validation.training.optim import lr_factor, set_lr

__all__ = ["launch", "run_2bw_stage", "StageRun", "DIVERGED_KEY"]

#: Rendezvous-store key holding the step whose training loss was non-finite.
DIVERGED_KEY = "delaybound/diverged_step"


def launch(cfg: TrainConfig, progress: bool = True):
    """Run ``cfg`` (``cfg.run.pipeline`` in {2bw, gpipe, 1f1b}) as a multi-process pipeline and
    return the ``RunResult`` (see :mod:`llm_validation.pipeline.launch`); ``progress``: echo stage
    0's ``[train]`` lines to stderr."""
    from llm_validation.pipeline.launch import launch_pipeline

    return launch_pipeline(cfg, progress=progress)


def grouped_sends(backend: str) -> bool:
    """NCCL needs each receive grouped with the sends before it (see ``StageLink``); gloo does
    not, and sends at once with receives posted ahead. ``DELAYBOUND_PIPE_GROUPED=1`` forces the
    grouped mode on gloo (tests run the NCCL code path that way)."""
    return backend == "nccl" or os.environ.get("DELAYBOUND_PIPE_GROUPED") == "1"


class StageRun:
    """What the 2BW and the synchronous runtimes share on one stage: setup, links, executor,
    probe, metrics (stage 0), checkpoints, side passes and the step's bookkeeping."""

    def __init__(self, ctx: WorkerContext, cfg: TrainConfig, start: int, tau: int) -> None:
        from llm_validation.training.loop import resolve_device

        self.ctx, self.cfg, self.start = ctx, cfg, start
        run = cfg.run
        self.P, self.s, self.M, self.N = run.stages, ctx.rank, run.microbatches, run.steps
        device = resolve_device(run.device)
        if device.type == "cuda":
            device = torch.device("cuda", ctx.local_rank)
            torch.cuda.set_device(device)
        self.device = device
        self.setup = setup = StageSetup(cfg, self.s, self.P, device)
        common = dict(stage=self.s, stages=self.P, device=device, act_shape=setup.act_shape,
                      act_dtype=setup.act_dtype, timeout_s=ctx.timeout_s,
                      control_group=ctx.control_group, status=ctx.status, store=ctx.store,
                      grouped=grouped_sends(ctx.backend))
        self.link = StageLink(group=None, **common)
        self.side = StageLink(group=ctx.side_group, **common)
        self.exec = StageExecutor(setup, self.link, self.side, ctx.heartbeat)
        self.probe = StageProbe(setup, tau)
        self.paths = RunPaths(run.out_dir)
        self.writer = self.collector = None
        self.val_loss: dict[int, float] = {}
        self.aux: dict[int, dict[str, Any]] = {}
        self.loaded: dict[str, Any] | None = None
        self.step_clock: list[float] = []   # stage 0: perf_counter() when each step begins
        if start > 0:
            self.loaded = load_stage_checkpoint(ckpt_dir(self.paths, start), self.s, device)
            self._restore(self.loaded)
        if self.s == 0:
            self._write_config()
            self.writer = MetricsWriter(self.paths.metrics)
            self.collector = MetricsCollector(setup, self.link, self.writer)

    # ---------------------------------------------------------------------------- plumbing
    def _write_config(self) -> None:
        setup = self.setup
        meta = {"environment": environment(), "corpus": setup.corpus_description,
                "n_params": setup.n_params, "resumed_from_step": self.start or None,
                "pipeline": {"kind": self.cfg.run.pipeline, "stages": self.P,
                             "microbatches": self.M, "backend": self.ctx.backend,
                             "world": self.ctx.world, "threads_per_stage": torch.get_num_threads()}}
        write_json(self.paths.config, {**self.cfg.to_dict(), "meta": meta})

    def _restore(self, ck: dict[str, Any]) -> None:
        if ck["stages"] != self.P or ck["step"] != self.start:
            raise ValueError(f"checkpoint of step {ck['step']} with {ck['stages']} stages does not "
                             f"match step {self.start} with {self.P} stages")
        with torch.no_grad():
            for n, p in self.setup.master().items():
                p.copy_(ck["master"][n])
        self.setup.opt.load_state_dict(ck["optimizer"])
        self.probe.load_state_dict(ck["probe"])
        set_rng_state(ck["rng"])

    def lr_of(self, step: int) -> float:
        return self.cfg.optim.lr * lr_factor(step, self.cfg.optim, self.N)

    def eval_due(self, step: int) -> bool:
        k = self.cfg.run.eval_interval
        return step == self.N or (k > 0 and step % k == 0)

    def ckpt_due(self, step: int) -> bool:
        k = self.cfg.run.checkpoint_interval
        return step == self.N - 1 or (k > 0 and (step + 1) % k == 0)

    def data(self, kind: str, step: int = 0) -> list[torch.Tensor] | None:
        setup = self.setup
        if not (setup.is_first or setup.is_last):
            return None
        if kind == "train":
            return setup.train_microbatches(step)
        if kind == "val":
            return setup.val_microbatches()
        return setup.large_microbatches(step)

    # ------------------------------------------------------------------------- side passes
    def side_passes(self, t: int) -> None:
        """At W(t) = master: the validation loss (if due) and the statistics' extra gradients
        (if step t is active and tau = 1; the synchronous runtime takes its own)."""
        run, master = self.cfg.run, self.setup.master()
        if self.eval_due(t):
            losses = self.exec.forward_pass(master, run.eval_batches * self.M, self.data("val"))
            if losses is not None:
                self.val_loss[t] = float(torch.stack([x.double() for x in losses]).mean())
        if t < self.N and self.probe.tau > 0 and self.probe.active(t):
            grads, losses = self.exec.gradient_pass(detached_leaves(master), self.M,
                                                    self.data("train", t))
            self.aux[t] = {"other": grads, "f_x": batch_loss(losses) if losses else None}
            if self.probe.momentum_due(t):
                k = self.M * run.large_batch_factor
                self.aux[t]["big"], _ = self.exec.gradient_pass(detached_leaves(master), k,
                                                                self.data("large", t))

    # ----------------------------------------------------------------------------- step
    def optimizer_step(self, t: int, read_point: list[torch.Tensor], noise: Any,
                       other: list[torch.Tensor] | None = None
                       ) -> tuple[dict[str, float], float | None]:
        """Step t with ``p.grad`` set: statistics before, step (+EF), statistics after.
        Returns (partials, f_x of the side pass on the last stage of an active 2BW step)."""
        opt, probe = self.setup.opt, self.probe
        set_lr(opt, lr_factor(t, self.cfg.optim, self.N))
        aux = self.aux.pop(t, {})
        pre = probe.before_step(t, read_point, aux.get("other", other), aux.get("big")) \
            if probe.active(t) else None
        part = pre["partials"] if pre else stats.grad_partials([p.grad for p in opt.params])
        opt.step(record=probe.record(t))                          # W(t+1)
        opt.zero_grad()
        part.update(probe.after_step(t, pre))
        if noise is not None:
            part.update(noise.partials())
        return part, aux.get("f_x")

    def report(self, t: int, part: dict[str, float], loss: float | None,
               f_x: float | None = None, f_y: float | None = None, diverged: bool = False) -> None:
        """Send (or, on stage 0, keep) this stage's message of step t."""
        msg: dict[str, Any] = {"step": t, "partials": part}
        if self.setup.is_last:
            msg.update(loss=loss, val_loss=self.val_loss.pop(t, None), f_x=f_x, f_y=f_y)
        if diverged:
            msg["diverged"] = True
        if self.s == 0:
            self.collector.add(t, msg)
        else:
            self.link.send_message(msg, 0, f"the delivery of the statistics of step {t} to stage 0")

    def checkpoint(self, t: int, previous: dict[str, torch.Tensor]) -> None:
        """Save this stage's state after step t (``previous``: the version W(t))."""
        payload = {"step": t + 1, "stage": self.s, "stages": self.P,
                   "master": {n: p.detach().clone() for n, p in self.setup.master().items()},
                   "previous": {n: w.detach().clone() for n, w in previous.items()},
                   "optimizer": self.setup.opt.state_dict(), "probe": self.probe.state_dict(),
                   "rng": rng_state(), "sampler_position": t + 1, "config": self.cfg.to_dict()}
        save_stage_checkpoint(self.paths, t + 1, self.s, payload)

    def finish(self, status: str, done: int, message: str) -> None:
        """Stage 0: final val row (completed runs) and the result record for the launcher."""
        final_val = None
        if self.s == 0:
            if status == "completed":
                final_val = self.collector.final(done)
            self.writer.close()
            write_json(self.paths.root / "logs" / "result.json",
                       {"status": status, "steps": done, "message": message,
                        "final_val_loss": final_val, "n_params": self.setup.n_params,
                        "start": self.start, "step_clock": self.step_clock})
        elif status == "completed":
            self.link.send_message({"step": "final", "val_loss": self.val_loss.pop(self.N, None)},
                                   0, "the delivery of the final validation loss to stage 0")


def run_2bw_stage(ctx: WorkerContext, cfg: TrainConfig, start: int) -> None:
    """The body of one 2BW stage process (see the module docstring)."""
    sr = StageRun(ctx, cfg, start, tau=1)
    setup, probe, M, N, P = sr.setup, sr.probe, sr.M, sr.N, sr.P
    store = ctx.store
    versions = [setup.leaf_copies(), setup.leaf_copies()]        # slot t % 2 serves batch t
    if sr.loaded is not None:                                     # slot start % 2 = W(start-1)
        with torch.no_grad():
            for n, w in versions[start % 2].items():
                w.copy_(sr.loaded["previous"][n])
        sr.loaded = None
    batch_data: dict[int, list[torch.Tensor]] = {}
    mb_losses: dict[int, list[torch.Tensor]] = {}
    losses: dict[int, float] = {}
    noise: dict[int, stats.MicrobatchGradVariance] = {}
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
        if len(mb_losses[t]) == M:
            losses[t] = batch_loss(mb_losses.pop(t))
            if not math.isfinite(losses[t]):
                store.set(DIVERGED_KEY, str(t))

    def on_backward(a) -> None:
        t = a.batch
        if probe.active(t) and M > 1:
            if t not in noise:
                slot = versions[t % 2]
                noise[t] = stats.MicrobatchGradVariance([slot[n] for n in setup.names], M)
            noise[t].observe()

    def on_step(a) -> bool:
        t = a.batch
        sr.step_clock.append(time.perf_counter())
        if store.check([DIVERGED_KEY]):
            d = int(store.get(DIVERGED_KEY).decode())
            if d != t:
                raise RuntimeError(f"stage {sr.s}: loss diverged at step {d}, seen at step {t}")
            loss = losses.get(t)
            sr.report(t, {}, loss, diverged=True)
            message = f"non-finite training loss at step {t}; run stopped"
            if sr.s == 0:
                sr.collector.write_through(t, sr.lr_of)
                message = (f"non-finite training loss {sr.collector.last_row['loss']} at step {t}; "
                           "run stopped")
            outcome.update(status="diverged", done=t, message=message)
            return False
        slot = versions[t % 2]
        with torch.no_grad():
            for n, p in zip(setup.names, setup.opt.params):
                p.grad, slot[n].grad = slot[n].grad, None
        part, f_x = sr.optimizer_step(t, [slot[n].detach() for n in setup.names],
                                      noise.pop(t, None))
        with torch.no_grad():                                     # slot t % 2 <- W(t+1)
            for n, p in zip(setup.names, setup.opt.params):
                slot[n].copy_(p)
        due = sr.ckpt_due(t)
        if due:
            sr.checkpoint(t, versions[(t + 1) % 2])
        loss = losses.pop(t, None)
        active = probe.active(t)
        sr.report(t, part, loss, f_x=f_x, f_y=loss if active else None)
        if sr.s == 0:
            sr.collector.write_through(t if due else t - 1, sr.lr_of)
            if due:
                mark_complete(sr.paths, t + 1, P, ctx.timeout_s)
        ctx.maybe_inject_fault(t)
        return True

    def after_step(a) -> None:
        sr.side_passes(a.batch + 1)

    t0 = time.perf_counter()
    sr.side_passes(start)
    finished = sr.exec.run(
        schedule_2bw(sr.s, P, M, N, start), weights=lambda t: versions[t % 2],
        inputs=data_of, targets=data_of, scale=M, on_loss=on_loss, on_backward=on_backward,
        on_step=on_step, after_step=after_step, defer_grad=sr.ckpt_due)
    sr.finish(outcome["status"], outcome["done"], outcome["message"])
    if finished:
        sr.link.drain()
    else:  # a stopped run leaves activations nobody receives; the messages must still arrive
        sr.link.drain_messages()
    if sr.s == 0:
        print(f"[pipeline] stage 0 done: {outcome['status']} after {outcome['done']} steps in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
