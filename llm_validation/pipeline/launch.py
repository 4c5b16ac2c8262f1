"""Entry point of a pipeline or data-parallel run: checks, resume, P x D processes, the result.

``launch_pipeline(cfg)`` (called by :func:`llm_validation.run.run` when ``cfg.run.pipeline`` is
``2bw``, ``gpipe`` or ``1f1b``, or when it is ``none`` with ``data_parallel > 1``):

1. validates the shape (P >= 2, M >= P for a pipeline; ``batch_size`` divisible by D x M is
   checked by ``RunConfig``) and the run directory (a new run needs an empty one; ``resume``
   needs a checkpoint and the same config up to ``rundir.RESUMABLE`` fields, P and D included:
   :func:`llm_validation.rundir.start_step`, the emulated run's own checks) and finds the
   newest complete checkpoint; metrics rows at or after its step are dropped. Nothing is
   started or written when a check fails;
2. single machine: starts P x D processes (:func:`processes.spawn_stages`; gloo on CPU, NCCL
   with one GPU per rank) on a (dp, pp) mesh (:mod:`llm_validation.pipeline.mesh`) and waits;
   under ``torchrun`` (RANK/WORLD_SIZE/MASTER_ADDR set) this process is one of the ranks and
   ``WORLD_SIZE`` must be P x D;
3. composes the ``RunResult`` from rank 0's record and ``metrics.jsonl`` exactly as the
   emulated path does and writes ``summary.json``.

Several machines (one rank per GPU, run directory on a shared filesystem; docs/pipeline.md has
the Slurm recipe)::

    torchrun --nnodes=2 --nproc-per-node=4 --node-rank=<0|1> \\
        --rdzv-backend=c10d --rdzv-endpoint=<host of node 0>:29500 \\
        -m delaybound train --pipeline 2bw --stages 4 --data-parallel 2 --microbatches 8 \\
        --device cuda --dtype bfloat16 ...

Under torchrun rank 0 alone decides the step to start from (:func:`agree_start`) and
broadcasts it; every rank checks it can load that checkpoint from where it runs and the run
stops with one error naming the ranks that cannot (:func:`settle_start`).

Environment: ``DELAYBOUND_PIPE_TIMEOUT_S`` (hang deadline, default 30 s; with
``DELAYBOUND_PIPE_COLLECTIVE_TIMEOUT_S`` and ``DELAYBOUND_PIPE_IO_TIMEOUT_S``:
:mod:`llm_validation.pipeline.watchdog`), ``DELAYBOUND_PIPE_ALLOW_GLOO=1`` (CUDA ranks over
gloo with host staging across nodes, :mod:`llm_validation.pipeline.devices`),
``DELAYBOUND_PIPE_THREADS`` (CPU threads per rank, default cores // ranks on this machine),
``DELAYBOUND_DP_REDUCE`` (``allreduce`` or ``ordered``, :mod:`llm_validation.pipeline.replicas`),
``DELAYBOUND_PIPE_FAULT`` (tests only, see :mod:`llm_validation.pipeline.processes`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from llm_validation.config import PIPELINE_KINDS, TrainConfig
from llm_validation.pipeline.checkpoint import (drop_checkpoints_after, latest_complete,
                                                loadable, newest_intact)
from llm_validation.pipeline.data_parallel import run_dp_replica
from llm_validation.pipeline.devices import pipeline_backend
from llm_validation.pipeline.faults import PipelineFailure, parse_fault
from llm_validation.pipeline.processes import (WorkerContext, run_worker, spawn_stages,
                                               torchrun_env)
from llm_validation.pipeline.watchdog import Deadlines
from llm_validation.pipeline.profile import merge_stage_profiles
from llm_validation.pipeline.replicas import dp_reduction
from llm_validation.pipeline.schedule import validate_pipeline_shape
from llm_validation.pipeline.sync import run_sync_stage
from llm_validation.pipeline.twobw import run_2bw_stage
from llm_validation.rundir import (RunPaths, RunResult, compose_result, rewrite_metrics_before,
                                   start_step)
from llm_validation.records.atomic_io import read_json
from llm_validation.training.loop import resolve_device

__all__ = ["launch_pipeline", "stage_body", "threads_per_stage", "agree_start", "settle_start"]


def threads_per_stage(ranks: int) -> int:
    """CPU threads of each rank: ``DELAYBOUND_PIPE_THREADS`` or ``cores // ranks`` (``ranks``:
    the processes on this machine; at least 1)."""
    env = os.environ.get("DELAYBOUND_PIPE_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"DELAYBOUND_PIPE_THREADS={env!r} must be an integer >= 1")
        return n
    return max(1, (os.cpu_count() or 1) // ranks)


def settle_start(decided: int, verdicts: list[str | None]) -> int:
    """The start step once rank 0 ``decided`` it and every rank said whether it can load it
    (``verdicts[r]``: None, or why rank r cannot): ``decided``, or a one-line error naming
    every rank that cannot (so no rank starts from a step another cannot load)."""
    bad = [(r, why) for r, why in enumerate(verdicts) if why is not None]
    if not bad:
        return decided
    listed = "; ".join(f"rank {r}: {why}" for r, why in bad)
    raise RuntimeError(f"rank 0 resumes from step {decided} but {len(bad)} of {len(verdicts)} "
                       f"ranks cannot load it ({listed}); the run directory must be on a "
                       "filesystem every node sees, in sync")


def agree_start(ctx: WorkerContext, cfg: TrainConfig) -> int:
    """Under torchrun: rank 0 prepares the run directory and decides the start step
    (:func:`_prepare`), broadcasts it on the control group; every rank checks that it can load
    that checkpoint (:func:`checkpoint.loadable`), the verdicts are gathered, and every rank
    returns the step or raises the same error (:func:`settle_start`)."""
    import torch.distributed as dist

    paths = RunPaths(cfg.run.out_dir)
    box: list[Any] = [None]
    if ctx.rank == 0:
        try:
            box[0] = _prepare(cfg, paths, write=True)
        except Exception as exc:  # noqa: BLE001 - every rank must learn it, not hang
            box[0] = f"{type(exc).__name__}: {exc}"
    dist.broadcast_object_list(box, src=0, group=ctx.control_group)
    if isinstance(box[0], str):
        raise RuntimeError(f"rank 0 could not prepare the run: {box[0]}")
    every: list[Any] = [None] * ctx.world
    dist.all_gather_object(every, loadable(paths, int(box[0])), group=ctx.control_group)
    return settle_start(int(box[0]), every)


def stage_body(ctx: WorkerContext, cfg_dict: dict[str, Any], start: int | None, threads: int,
               torchrun: bool, dp_mode: str = "allreduce") -> None:
    """What every rank runs (2BW, a synchronous baseline, or the data-parallel emulation);
    ``start`` None: the ranks agree on it first (:func:`agree_start`)."""
    import torch.distributed as dist

    torch.set_num_threads(threads)
    cfg = TrainConfig.from_dict(cfg_dict)
    if start is None:
        with ctx.phase("resume"):
            start = agree_start(ctx, cfg)
    t0 = time.perf_counter()
    if cfg.run.pipeline == "2bw":
        run_2bw_stage(ctx, cfg, start, dp_mode)
    elif cfg.run.pipeline == "none":
        run_dp_replica(ctx, cfg, start, dp_mode)
    else:
        run_sync_stage(ctx, cfg, start, dp_mode)
    if torchrun:  # no parent process: rank 0 writes the summary once every rank has finished
        with ctx.phase("finish", ctx.deadlines.collective_s):
            dist.barrier(group=ctx.control_group)
            if ctx.rank == 0:
                _result(cfg, start, time.perf_counter() - t0)
            dist.barrier(group=ctx.control_group)


def _result(cfg: TrainConfig, start: int, wall: float) -> RunResult:
    """The RunResult from stage 0's record (``logs/result.json``) and the metrics."""
    paths = RunPaths(cfg.run.out_dir)
    info = read_json(paths.root / "logs" / "result.json")
    if cfg.run.profile:
        merge_stage_profiles(paths.root, cfg, info.get("step_clock", []))
    return compose_result(cfg, paths, status=info["status"], done=int(info["steps"]), start=start,
                          final_val_loss=info.get("final_val_loss"),
                          n_params=int(info["n_params"]), wall=wall,
                          message=info.get("message", ""),
                          process_before=info.get("process_before"))


def _prepare(cfg: TrainConfig, paths: RunPaths, write: bool) -> int:
    """Run-directory checks; returns the step to start from (``write``: rank 0's edits)."""
    run = cfg.run
    found = newest_intact(paths) if run.resume else None
    start = start_step(cfg, paths, found[0] if found is not None else None)
    if write:
        (paths.root / "logs").mkdir(parents=True, exist_ok=True)
        rewrite_metrics_before(paths.metrics, start)
        drop_checkpoints_after(paths, start)   # damaged or incomplete: this run rewrites them
        stale = paths.root / "logs" / "result.json"
        if stale.exists():
            stale.unlink()
    return start


def launch_pipeline(cfg: TrainConfig, progress: bool = True) -> RunResult:
    """Run ``cfg`` on P x D processes (see the module docstring); returns the RunResult.
    Raises ``ValueError`` for a bad configuration and ``pipeline_faults.PipelineFailure`` (naming the
    failed rank) when a process dies or hangs. ``progress``: echo rank 0's progress lines."""
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"launch_pipeline needs a TrainConfig, got {type(cfg).__name__}")
    run = cfg.run
    if run.pipeline not in PIPELINE_KINDS and not (run.pipeline == "none"
                                                   and run.data_parallel > 1):
        raise ValueError(f"RunConfig.pipeline={run.pipeline!r} is not one of "
                         f"{list(PIPELINE_KINDS)} (or 'none' with data_parallel > 1)")
    if run.pipeline != "none":
        validate_pipeline_shape(run.stages, run.microbatches)
        if cfg.delay.correction != "none":
            raise ValueError("DelayConfig.correction is not implemented on the real pipelines "
                             "yet; use the emulated run (--pipeline none)")
    world = run.stages * run.data_parallel
    dp_mode = dp_reduction()
    device = resolve_device(run.device)
    env = torchrun_env()
    local = world if env is None else int(os.environ.get("LOCAL_WORLD_SIZE", env["world"]))
    # ranks sharing a GPU: gloo + host staging (refused across nodes unless asked for)
    backend = pipeline_backend(device, local, across_nodes=env is not None and env["world"] > local)
    deadlines = Deadlines.from_env()
    fault = parse_fault(os.environ.get("DELAYBOUND_PIPE_FAULT"))
    paths = RunPaths(run.out_dir)
    t0 = time.perf_counter()
    if env is None:
        start = _prepare(cfg, paths, write=True)
        args = (cfg.to_dict(), start, threads_per_stage(world), False, dp_mode)
        try:
            spawn_stages(stage_body, args, world=world, run_dir=paths.root, backend=backend,
                         deadlines=deadlines, fault=fault, progress=progress, stages=run.stages)
        except PipelineFailure as exc:
            found = latest_complete(paths)
            where = (f"last complete checkpoint: step {found[0]} ({found[1]}); continue with "
                     "--resume" if found else "no complete checkpoint yet")
            raise PipelineFailure(f"{exc}; {where}", exc.stage) from None
        return _result(cfg, start, time.perf_counter() - t0)
    if env["world"] != world:
        raise ValueError(f"torchrun started {env['world']} processes but --stages {run.stages} x "
                         f"--data-parallel {run.data_parallel} needs {world}")
    _prepare(cfg, paths, write=False)   # every rank: one-line errors before anything starts
    # the start step: decided by rank 0 inside the process group (agree_start), not here
    args = (cfg.to_dict(), None, threads_per_stage(local), True, dp_mode)
    run_worker(stage_body, args, rank=env["rank"], world=env["world"], local_rank=env["local_rank"],
               run_dir=str(paths.root), backend=backend, deadlines=deadlines, fault=fault,
               store_addr=None, redirect_logs=False, stages=run.stages)
    return RunResult(**read_json(paths.summary))
