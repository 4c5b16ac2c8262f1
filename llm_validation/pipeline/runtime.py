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

Data parallelism (``RunConfig.data_parallel`` = D, :mod:`llm_validation.pipeline.mesh`): each
rank is stage ``s`` of replica ``d``; the replicas of a stage average their gradients before
every step and side pass (:class:`llm_validation.pipeline.replicas.Replicas`), the last stages
gather their microbatch losses, so every replica computes the same statistics; replica 0
reports them, and rank 0 (stage 0 of replica 0) writes the run directory.

Build, data load, checkpoint load and save, and rank 0's wait before ``COMPLETE`` are long
phases (``ctx.phase``, deadline ``io_s``, :mod:`llm_validation.pipeline.watchdog`). No stage
holds a gradient back for its save (2BW sends every input gradient before its step), so the
stages save in parallel; rank 0 writes ``COMPLETE`` only once every stage's part exists
(:meth:`pipeline.stage_flush.StageFlush.mark_pending_complete`).

Memory: :meth:`StageRun.weight_bytes` counts the distinct storages holding this stage's
weights (the master copy and the versions a runtime registers in ``weight_tensors``); the
largest count seen after any step is reported per stage in ``logs/result.json``.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from llm_validation.config import TrainConfig
from llm_validation.pipeline.checkpoint import ckpt_dir, load_global, save_stage_checkpoint
from llm_validation.pipeline.clipping import stage_clip
from llm_validation.pipeline.comm import StageLink
from llm_validation.pipeline.devices import host_staging, rank_device
from llm_validation.pipeline.executor import StageExecutor, detached_leaves
from llm_validation.pipeline.faults import slow_save
from llm_validation.pipeline.metrics import MetricsCollector
from llm_validation.pipeline.processes import WorkerContext
from llm_validation.pipeline.profile import ActionTimer, write_stage_profile
from llm_validation.pipeline.grad_buckets import GradBuckets
from llm_validation.pipeline.replicas import Replicas, backward_order, pop_grads
from llm_validation.pipeline.reshard import globalize, localize
from llm_validation.pipeline.schedule import STEP, schedule_2bw
from llm_validation.pipeline.stage import StageSetup, stage_param_names
from llm_validation.pipeline.stage_flush import FLUSH_KEY, StageFlush
from llm_validation.rundir import MetricsWriter, RunPaths, rng_state, set_rng_state
from llm_validation.records.atomic_io import write_json
from llm_validation.records.provenance import environment
from llm_validation.training.loop import resolve_device
from llm_validation.training import stats
from llm_validation.training.determinism import configure_numerics
from llm_validation.training.flush import RowBuffer
from llm_validation.training.model import batch_loss
from llm_validation.training.optim import lr_factor, set_lr
from llm_validation.training.probe import StepProbe, observed_step

__all__ = ["StageRun", "FLUSH_KEY", "grouped_sends"]



def grouped_sends(backend: str) -> bool:
    """NCCL needs each receive grouped with the sends before it (see ``StageLink``); gloo does
    not, and sends at once with receives posted ahead. ``DELAYBOUND_PIPE_GROUPED=1`` forces the
    grouped mode on gloo (tests run the NCCL code path that way)."""
    return backend == "nccl" or os.environ.get("DELAYBOUND_PIPE_GROUPED") == "1"


class StageRun(StageFlush):
    """What the 2BW and the synchronous runtimes share on one stage: setup, links, executor,
    probe, metrics (stage 0), checkpoints, side passes and the step's bookkeeping (the end of
    a step, its flush and the divergence verdict: :class:`pipeline.stage_flush.StageFlush`)."""

    def __init__(self, ctx: WorkerContext, cfg: TrainConfig, start: int, tau: int,
                 dp_mode: str = "allreduce") -> None:
        self.ctx, self.cfg, self.start = ctx, cfg, start
        self.t_begin = time.perf_counter()   # this invocation's process clock
        # process seconds of the invocations before this one, up to its checkpoint (None: a
        # checkpoint that did not record them; read in _restore)
        self.process_before: float | None = 0.0
        self.saves: list[list[float]] = []   # [step, start, end] wall times of each save
        run, mesh = cfg.run, ctx.mesh
        self.P, self.s, self.M, self.N = run.stages, mesh.stage, run.microbatches, run.steps
        self.D, self.d = mesh.replicas, mesh.replica
        if (self.P, self.D) != (mesh.stages, mesh.replicas):
            raise ValueError(f"mesh {mesh.replicas} x {mesh.stages} does not match the run's "
                             f"data_parallel x stages = {self.D} x {self.P}")
        self.is_writer = ctx.rank == 0          # stage 0 of replica 0 writes the run directory
        self.replicas = Replicas(mesh, dp_mode)
        self.replicas.status = ctx.status    # its collectives publish waits (watchdog)
        device = rank_device(resolve_device(run.device), ctx.local_rank)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        self.numerics = configure_numerics(device, run.deterministic)
        self.device = device
        with ctx.phase("build"):          # model build and data load: their own deadline
            self.setup = setup = StageSetup(cfg, self.s, self.P, device, replica=self.d,
                                            replicas=self.D)
        common = dict(stage=self.s, stages=self.P, device=device, act_shape=setup.act_shape,
                      act_dtype=setup.act_dtype, timeout_s=ctx.timeout_s,
                      control_group=ctx.control_group, status=ctx.status, store=ctx.store,
                      grouped=grouped_sends(ctx.backend), ranks=mesh.pp_ranks,
                      staging=host_staging(ctx.backend, device))
        self.link = StageLink(group=mesh.pp_group, **common)
        self.side = StageLink(group=ctx.side_group, **common)
        self.timer = ActionTimer.for_device(device) if run.profile else None
        self.exec = StageExecutor(setup, self.link, self.side, ctx.heartbeat, self.timer)
        self.probe = StepProbe(setup.opt, setup.geoms, tau=tau,
                               stats_interval=run.stats_interval,
                               momentum_error_interval=run.momentum_error_interval)
        self.paths = RunPaths(run.out_dir)
        self.writer = self.collector = None
        self.val_loss: dict[int, torch.Tensor] = {}   # last stage: at W(t), on the device
        self.rows = RowBuffer()             # the steps since the last flush (device scalars)
        self.last_flush = start - 1
        self.aux: dict[int, dict[str, Any]] = {}
        self.loaded: dict[str, Any] | None = None
        self.step_clock: list[float] = []   # stage 0: perf_counter() when each step begins
        self.weight_tensors: list[torch.Tensor] = []   # weight versions besides the master
        self.weight_peak = 0
        local = stage_param_names(cfg, self.s, self.P, setup.names)
        self.global_names = [local[n] for n in setup.names]   # full model's, opt.params order
        # 2BW: a non-checkpoint flush acts on the previous flush's verdict (already published:
        # no stall); the synchronous runtimes and the one-stage emulation act at once
        self.lagged_verdict = run.pipeline == "2bw"
        self.diverged: int | None = None       # last stage: the first non-finite step so far
        self.verdict_before: int | None = None  # ... as published at the previous flush
        self.pending_complete: list[int] = []  # rank 0: checkpoints to mark at the next flush
        self.clip = stage_clip(cfg, ctx, self.setup.opt, self.global_names, self.d, device) \
            if cfg.optim.grad_clip > 0 and run.pipeline != "none" else None
        if start > 0:
            with ctx.phase("load"):
                self._restore(*load_global(ckpt_dir(self.paths, start), self.global_names,
                                           self.s, self.d, device))
        if self.is_writer:
            self._write_config()
            self.writer = MetricsWriter(self.paths.metrics)
            self.collector = MetricsCollector(setup, self.link, self.writer)

    # ---------------------------------------------------------------------------- plumbing
    def _write_config(self) -> None:
        setup = self.setup
        meta = {"environment": environment(), "corpus": setup.corpus_description,
                "n_params": setup.n_params, "resumed_from_step": self.start or None,
                "numerics": self.numerics,
                "pipeline": {"kind": self.cfg.run.pipeline, "stages": self.P,
                             "microbatches": self.M, "data_parallel": self.D,
                             "mesh": {"dp": self.D, "pp": self.P},
                             "dp_reduction": self.replicas.mode, "backend": self.ctx.backend,
                             "world": self.ctx.world, "threads_per_stage": torch.get_num_threads()}}
        write_json(self.paths.config, {**self.cfg.to_dict(), "meta": meta})

    def _restore(self, state: dict[str, Any], own: dict[str, Any]) -> None:
        """Load this stage's parameters' state from the global form (any saved grid);
        ``self.loaded["previous"]``: the 2BW version W(t-1), for the runtime."""
        if own["step"] != self.start:
            raise ValueError(f"checkpoint of step {own['step']} does not match step {self.start}")
        opt = self.setup.opt
        master, previous, opt_sd, probe_sd = localize(state, self.global_names,
                                                      opt.state_dict(), opt.taus)
        with torch.no_grad():
            for p, w in zip(opt.params, master):
                p.copy_(w)
        opt.load_state_dict(opt_sd)
        self.probe.load_state_dict(probe_sd)
        set_rng_state(own["rng"])
        self.process_before = own.get("process_s")
        self.loaded = {"previous": None if previous is None else
                       dict(zip(self.setup.names, previous))}

    def weight_bytes(self) -> int:
        """Bytes of the distinct storages holding this stage's weights (master + versions)."""
        seen: dict[int, int] = {}
        for t in [*self.setup.opt.params, *self.weight_tensors]:
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        return sum(seen.values())

    def grad_buckets(self, tensors: list[torch.Tensor]) -> GradBuckets | None:
        """The overlapped data-parallel all-reduce of ``tensors`` (this stage's leaves in
        ``setup.names`` order: the master parameters or a weight version), or None
        (:meth:`llm_validation.pipeline.replicas.Replicas.buckets`)."""
        module_names = [n for n, _ in self.setup.module.named_parameters()]
        return self.replicas.buckets(tensors, backward_order(self.setup.names, module_names))

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
        if self.timer is not None:
            self.timer.start("side")
        run, master = self.cfg.run, self.setup.master()
        if self.eval_due(t):
            losses = self.exec.forward_pass(master, run.eval_batches * self.M, self.data("val"))
            if losses is not None:
                self.val_loss[t] = self.val_mean(losses)
        if t < self.N and self.probe.tau > 0 and self.probe.active(t):
            grads, f_x = self.gradient_pass(detached_leaves(master), self.M, self.data("train", t))
            self.aux[t] = {"other": grads, "f_x": f_x}
            if self.probe.momentum_due(t):
                k = self.M * run.large_batch_factor
                self.aux[t]["big"], _ = self.gradient_pass(detached_leaves(master), k,
                                                           self.data("large", t))
        if self.timer is not None:
            self.timer.stop("side", count=0)

    def val_mean(self, losses: list[torch.Tensor]) -> torch.Tensor:
        """Validation loss from this replica's microbatch losses (last stage): all replicas'
        in the emulator's order (batch by batch), their float64 mean as ``loop.evaluate``
        (a device tensor, read at the next flush)."""
        every = self.replicas.gather_losses(losses, per_batch=self.M)
        return torch.stack([x.double() for x in every]).mean()

    def gradient_pass(self, weights: dict[str, torch.Tensor], count: int,
                      data: list[torch.Tensor] | None
                      ) -> tuple[list[torch.Tensor], torch.Tensor | None]:
        """A side pass of ``count`` microbatches per replica through the pipeline at
        ``weights`` (``detached_leaves``): the gradient of the global batch averaged over the
        replicas (``setup.names`` order) and, on the last stage, the batch's mean loss (a device
        tensor, read with the step's statistics)."""
        if not self.replicas.ordered:
            grads, losses = self.exec.gradient_pass(weights, count, data)
            grads = self.replicas.reduce(grads)
        else:   # the executor's gradient_pass, keeping each microbatch's gradient apart
            leaves = [weights[n] for n in self.setup.names]
            captured: list[list[torch.Tensor]] = []
            losses = []
            acts = [a for a in schedule_2bw(self.s, self.P, count, 1) if a.kind != STEP]
            self.exec.run(acts, weights=lambda t: weights, scale=count, link=self.side,
                          inputs=lambda mb: data[mb], targets=lambda mb: data[mb],
                          on_loss=lambda mb, loss: losses.append(loss.detach()),
                          on_backward=lambda a: captured.append(pop_grads(leaves)))
            self.side.drain()
            grads = self.replicas.fold(captured, leaves)
        if not self.setup.is_last:
            return grads, None
        return grads, batch_loss(self.replicas.gather_losses(losses))

    # ----------------------------------------------------------------------------- step
    def optimizer_step(self, t: int, read_point: list[torch.Tensor], noise: Any,
                       other: list[torch.Tensor] | None = None,
                       f_other: torch.Tensor | None = None
                       ) -> tuple[dict[str, Any], torch.Tensor | None]:
        """Step t with ``p.grad`` set (:func:`training.probe.observed_step`, the emulator's own
        step). Returns (partials, the loss of the pair's other point: f_x of the side pass on
        the last stage of an active 2BW step, or ``f_other``), all on the device: nothing is
        read here (:meth:`end_step` buffers them until the flush)."""
        set_lr(self.setup.opt, lr_factor(t, self.cfg.optim, self.N))
        aux = self.aux.pop(t, {})
        part = observed_step(self.probe, t, read_point=read_point,
                             other_grads=aux.get("other", other), big_grad=aux.get("big"),
                             noise=noise)
        return part, aux.get("f_x", f_other)

    def checkpoint(self, t: int, previous: dict[str, torch.Tensor] | None) -> None:
        """Save this stage's state after step t (``previous``: the version W(t) of 2BW), one
        DCP checkpoint per stage written by its replicas together (``pipeline.checkpoint``):
        a long phase (``ctx.phase("save")``, deadline ``io_s``: peers waiting on this stage
        keep waiting), its wall-clock interval recorded in ``saves``."""
        with self.ctx.phase("save"):
            began = time.time()
            self._save(t, previous)
            self.saves.append([t + 1, began, time.time()])

    def _save(self, t: int, previous: dict[str, torch.Tensor] | None) -> None:
        """The body of :meth:`checkpoint` (inside its phase)."""
        master = self.setup.master()
        self.replicas.check_identical(list(master.values()), f"weights of stage {self.s}")
        shared = globalize(self.global_names, list(master.values()),
                           None if previous is None else [previous[n] for n in self.setup.names],
                           self.setup.opt.state_dict(), self.probe.state_dict())
        own = {"step": t + 1, "stage": self.s, "stages": self.P, "replica": self.d,
               "replicas": self.D, "rng": rng_state(), "sampler_position": t + 1,
               "config": self.cfg.to_dict(),
               "process_s": None if self.process_before is None else
               self.process_before + time.perf_counter() - self.t_begin}
        slow_save(self.ctx.rank)     # tests: a slow file system
        save_stage_checkpoint(self.paths, t + 1, self.s, self.d, shared, own,
                              self.ctx.mesh.dp_control)

    def finish(self, status: str, done: int, message: str) -> None:
        """Rank 0: final val row (completed runs) and the result record for the launcher, with
        every stage's weight memory; the other stages of replica 0 send theirs."""
        self.replicas.check_identical(list(self.setup.master().values()),
                                      f"final weights of stage {self.s}")
        if self.timer is not None and self.d == 0:
            write_stage_profile(self.paths.root, self.s, self.timer)
        memory = {"stage": self.s, "weight_bytes_peak": self.weight_peak,
                  "weight_bytes_one_copy": sum(p.numel() * p.element_size()
                                               for p in self.setup.opt.params),
                  "staged": {k: self.link.staged[k] + self.side.staged[k]
                             for k in self.link.staged},
                  "sends_peak": self.link.sends_peak, "saves": self.saves,
                  "message_peak": self.link.message_peak}
        final_val, stages_memory = None, [memory]
        final = self.val_loss.pop(self.N, None)
        own = {"step": "final", "memory": memory,
               "val_loss": None if final is None else stats.to_host({}, v=final)["v"]}
        if self.is_writer:
            if status == "completed":
                final_val, msgs = self.collector.final(done, own)
                stages_memory = [m.get("memory") for m in msgs]
            self.writer.close()
            write_json(self.paths.root / "logs" / "result.json",
                       {"status": status, "steps": done, "message": message,
                        "final_val_loss": final_val, "n_params": self.setup.n_params,
                        "start": self.start, "process_before": self.process_before,
                        "step_clock": self.step_clock,
                        "stage_memory": stages_memory})
        elif status == "completed" and self.d == 0:
            self.link.send_message(own, 0, "the delivery of the final validation loss to stage 0")
