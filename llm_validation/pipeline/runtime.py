"""The stage runtime both pipeline kinds share: :class:`StageRun`.

One object per stage process holds what 2BW (:mod:`llm_validation.pipeline.twobw`) and the
synchronous baselines (:mod:`llm_validation.pipeline.sync`) do alike: the stage's setup (module,
optimizer, data), the two p2p links (training and side passes), the executor, the statistics
probe (:class:`llm_validation.training.probe.StepProbe`, the emulator's own), the metrics
collector on stage 0, checkpoints, the side passes at W(t) (validation loss, the extra
gradients of the statistics), the optimizer step with its statistics, the end-of-step
bookkeeping, and divergence handling (the last stage flags a non-finite loss in the rendezvous
store; every stage stops before that step, like the emulator). The runtimes differ only in how
the step's gradient is produced.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from llm_validation.config import TrainConfig
from llm_validation.pipeline.comm import StageLink
from llm_validation.pipeline.executor import StageExecutor, detached_leaves
from llm_validation.pipeline.metrics import MetricsCollector
from llm_validation.pipeline.processes import WorkerContext
from llm_validation.pipeline.profile import ActionTimer, write_stage_profile
from llm_validation.pipeline.stage import (StageSetup, ckpt_dir, load_stage_checkpoint,
                                           mark_complete, save_stage_checkpoint)
from llm_validation.rundir import (MetricsWriter, RunPaths, diverged_message, environment,
                                   rng_state, set_rng_state, write_json)
from llm_validation.training.loop import resolve_device
from llm_validation.training.model import mean_loss
from llm_validation.training.optim import lr_factor, set_lr
from llm_validation.training.probe import StepProbe, observed_step

__all__ = ["StageRun", "DIVERGED_KEY", "grouped_sends"]

#: Rendezvous-store key holding the step whose training loss was non-finite.
DIVERGED_KEY = "delaybound/diverged_step"


def grouped_sends(backend: str) -> bool:
    """NCCL needs each receive grouped with the sends before it (see ``StageLink``); gloo does
    not, and sends at once with receives posted ahead. ``DELAYBOUND_PIPE_GROUPED=1`` forces the
    grouped mode on gloo (tests run the NCCL code path that way)."""
    return backend == "nccl" or os.environ.get("DELAYBOUND_PIPE_GROUPED") == "1"


class StageRun:
    """What the 2BW and the synchronous runtimes share on one stage: setup, links, executor,
    probe, metrics (stage 0), checkpoints, side passes and the step's bookkeeping."""

    def __init__(self, ctx: WorkerContext, cfg: TrainConfig, start: int, tau: int) -> None:
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
        self.timer = ActionTimer() if run.profile else None
        self.exec = StageExecutor(setup, self.link, self.side, ctx.heartbeat, self.timer)
        self.probe = StepProbe(setup.opt, setup.geoms, tau=tau,
                               stats_interval=run.stats_interval,
                               momentum_error_interval=run.momentum_error_interval)
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
        (if step t is active and tau = 1; the synchronous runtime takes its own). Timed as
        ``side`` with ``--profile`` (the final validation at W(N) included)."""
        t0 = time.perf_counter()
        run, master = self.cfg.run, self.setup.master()
        if self.eval_due(t):
            losses = self.exec.forward_pass(master, run.eval_batches * self.M, self.data("val"))
            if losses is not None:
                self.val_loss[t] = float(torch.stack([x.double() for x in losses]).mean())
        if t < self.N and self.probe.tau > 0 and self.probe.active(t):
            grads, losses = self.exec.gradient_pass(detached_leaves(master), self.M,
                                                    self.data("train", t))
            self.aux[t] = {"other": grads, "f_x": mean_loss(losses) if losses else None}
            if self.probe.momentum_due(t):
                k = self.M * run.large_batch_factor
                self.aux[t]["big"], _ = self.exec.gradient_pass(detached_leaves(master), k,
                                                                self.data("large", t))
        if self.timer is not None:
            self.timer.add("side", time.perf_counter() - t0, count=0)

    # ----------------------------------------------------------------------------- step
    def optimizer_step(self, t: int, read_point: list[torch.Tensor], noise: Any,
                       other: list[torch.Tensor] | None = None
                       ) -> tuple[dict[str, float], float | None]:
        """Step t with ``p.grad`` set (:func:`training.probe.observed_step`, the emulator's own
        step). Returns (partials, f_x of the side pass on the last stage of an active 2BW step)."""
        set_lr(self.setup.opt, lr_factor(t, self.cfg.optim, self.N))
        aux = self.aux.pop(t, {})
        part = observed_step(self.probe, t, read_point=read_point,
                             other_grads=aux.get("other", other), big_grad=aux.get("big"),
                             noise=noise)
        return part, aux.get("f_x")

    def end_step(self, t: int, part: dict[str, float], loss: float | None,
                 previous: dict[str, torch.Tensor], f_x: float | None = None,
                 f_y: float | None = None) -> None:
        """After step t: the checkpoint (if due; ``previous`` = the version W(t)), this stage's
        message to stage 0, stage 0's rows and ``COMPLETE`` marker, a test fault (if set)."""
        due = self.ckpt_due(t)
        if due:
            self.checkpoint(t, previous)
        self.report(t, part, loss, f_x=f_x, f_y=f_y)
        if self.s == 0:
            self.collector.write_through(t if due else t - 1, self.lr_of)
            if due:
                mark_complete(self.paths, t + 1, self.P, self.ctx.timeout_s)
        self.ctx.maybe_inject_fault(t)

    # ------------------------------------------------------------------------ divergence
    def flag_divergence(self, t: int) -> None:
        """Last stage: the training loss of step t is non-finite; every stage stops before its
        step t (it reads the flag before STEP t, which the dependency order allows)."""
        self.ctx.store.set(DIVERGED_KEY, str(t))

    def divergence(self, t: int, loss: float | None) -> str | None:
        """Before step t: None to go on; else report the diverged step, write its row (stage 0)
        and return the run's message."""
        store = self.ctx.store
        if not store.check([DIVERGED_KEY]):
            return None
        d = int(store.get(DIVERGED_KEY).decode())
        if d != t:
            raise RuntimeError(f"stage {self.s}: loss diverged at step {d}, seen at step {t}")
        self.report(t, {}, loss, diverged=True)
        if self.s == 0:
            self.collector.write_through(t, self.lr_of)
            loss = self.collector.last_row["loss"]
        return diverged_message(loss, t)

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
        if self.timer is not None:
            write_stage_profile(self.paths.root, self.s, self.timer)
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
