"""Process launcher for the pipeline runtimes: one process per stage, a watchdog, one error.

Two ways in, one worker body (:func:`run_worker`):
- single machine (:func:`spawn_stages`): this process hosts the rendezvous store on 127.0.0.1
  (port chosen by the OS, so no port races), starts ``P x D`` workers from a forkserver that
  has imported torch once, sends each worker's stdout/stderr to ``<run_dir>/logs/stage<r>.log``
  (``r`` the global rank) and watches them. CPU: gloo; CUDA: NCCL with one GPU per rank
  (``cuda:<r>``).
- several machines (:func:`torchrun_env` is not None): ``torchrun`` started this process as one
  rank; the rendezvous comes from its environment (``env://``) and torchrun's agent tears the
  group down when a rank fails. The run directory must be on a shared filesystem.

Faults (:mod:`pipeline_faults`, :mod:`pipeline.watchdog`): the process groups get the long
``collective_s`` timeout; each stage publishes what it waits on and runs a watchdog that names
a hung peer after ``hang_s`` (unless the peer is in a long phase: build, load, save, each
with the ``io_s`` deadline); a failing worker writes a report and exits 1. The launcher polls
the workers; at the first non-zero exit it stops the others (SIGTERM, then SIGKILL after
``KILL_GRACE_S``) and raises ``PipelineFailure`` naming the failed stage. With the default
``hang_s`` every rank is gone well within 60 s of a hang outside a phase. ``DELAYBOUND_*`` variables are
handed to the workers explicitly (forkserver children do not see later environment changes).
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from llm_validation.pipeline.comm import StageFailure
from llm_validation.pipeline.faults import (
    FaultSpec,
    PipelineFailure,
    blame,
    inject_fault,
    logs_dir,
    parse_fault,
    read_reports,
    write_report,
)
from llm_validation.pipeline.watchdog import Deadlines, Watchdog
from llm_validation.pipeline.mesh import Mesh, build_mesh, rank_label
from llm_validation.pipeline import p2p_trace
from llm_validation.training import host_syncs

__all__ = [
    "WorkerContext",
    "Deadlines",
    "KILL_GRACE_S",
    "spawn_stages",
    "run_worker",
    "torchrun_env",
    # re-exported from pipeline_faults for the callers of the launcher
    "PipelineFailure",
    "FaultSpec",
    "parse_fault",
]

#: Seconds between SIGTERM and SIGKILL when the launcher stops the surviving workers.
KILL_GRACE_S = 3.0

_POLL_S = 0.05


@dataclass(frozen=True)
class WorkerContext:
    """What a worker body receives besides its own arguments."""

    rank: int
    world: int
    local_rank: int
    run_dir: str
    backend: str
    timeout_s: float
    """The transport's deadline of every host wait (``deadlines.collective_s``)."""
    deadlines: Deadlines
    fault: FaultSpec | None
    heartbeat: Callable[[], None]
    """Call once per schedule action: proof of progress for the watchdog."""
    phase: Callable[..., Any]
    """``with ctx.phase("save"):`` a long phase with its own deadline (``io_s`` by default):
    the watchdog waits that long, and peers waiting on this rank keep waiting."""
    mesh: Mesh
    """This rank's place on the (dp, pp) mesh and its groups (:mod:`pipeline.mesh`)."""
    side_group: Any
    """A second group over this rank's pipeline row (same backend) for the side passes
    (evaluation, the statistics' extra gradients): their messages never match receives of the
    training stream."""
    control_group: Any
    """A gloo group over all ranks for small CPU messages (statistics, results)."""
    store: Any
    """The rendezvous key-value store (early-stop flag, stage status)."""
    status: dict
    """This stage's published status: ``waiting_on`` is the peer of the current p2p wait."""

    def maybe_inject_fault(self, step: int) -> None:
        """Tests: kill or hang this process after optimizer step ``step`` if told to."""
        inject_fault(self.run_dir, self.rank, self.fault, step)


def torchrun_env() -> dict[str, int] | None:
    """``{"rank", "world", "local_rank"}`` when started by torchrun (or any ``env://`` launcher
    setting RANK, WORLD_SIZE and MASTER_ADDR), else None."""
    env = os.environ
    if not all(k in env for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")):
        return None
    return {
        "rank": int(env["RANK"]),
        "world": int(env["WORLD_SIZE"]),
        "local_rank": int(env.get("LOCAL_RANK", env["RANK"])),
    }


def run_worker(
    body: Callable[..., Any],
    body_args: tuple,
    *,
    rank: int,
    world: int,
    local_rank: int,
    run_dir: str,
    backend: str,
    deadlines: Deadlines,
    fault: FaultSpec | None,
    store_addr: tuple[str, int] | None,
    redirect_logs: bool,
    stages: int | None = None,
) -> Any:
    """One rank's process: logs, process group (``store_addr``: our store; None: ``env://``),
    the (dp, pp) mesh with ``stages`` ranks per row (None: one row, D = 1), watchdog, then
    ``body(ctx, *body_args)``. A failure is written to ``logs/fault_stage<r>.json`` and
    re-raised (the process then exits non-zero)."""
    import torch
    import torch.distributed as dist

    if redirect_logs:
        fd = os.open(logs_dir(run_dir) / f"stage{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)
    stale = logs_dir(run_dir) / f"fault_stage{rank}.json"
    if stale.exists():
        stale.unlink()
    timeout = datetime.timedelta(seconds=deadlines.collective_s)   # the transport's deadline
    trace = os.environ.get(p2p_trace.TRACE_ENV)
    if trace:
        p2p_trace.install()
    counts = os.environ.get(host_syncs.HOST_SYNCS_ENV)
    try:
        init: dict[str, Any] = {}
        if backend == "nccl":   # one GPU per rank, chosen before any NCCL communicator exists
            torch.cuda.set_device(local_rank)
            # eager init: the group's communicator exists at once, subgroups are split from
            # it, and p2p ops use it instead of a lazily created two-rank communicator
            init["device_id"] = torch.device("cuda", local_rank)
        if store_addr is not None:
            store = dist.TCPStore(store_addr[0], store_addr[1], is_master=False, timeout=timeout)
            dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                                    timeout=timeout, **init)
        else:   # torchrun: the agent's store outlives restarts; each attempt gets its own
            # key space, so a restarted rank never reads the dead attempt's gloo addresses
            attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
            agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
            base = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                                 world_size=world, is_master=rank == 0 and not agent,
                                 timeout=timeout)
            store = dist.PrefixStore(f"delaybound/attempt{attempt}/", base)
            dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                                    timeout=timeout, **init)
        mesh = build_mesh(rank, world, stages or world, backend, timeout)
        control = dist.new_group(backend="gloo", timeout=timeout)
        store = dist.distributed_c10d._get_default_store()
        status: dict = {"waiting_on": None}
        dog = Watchdog(run_dir, rank, deadlines, store, status, world, label=mesh.label).start()
        ctx = WorkerContext(rank=rank, world=world, local_rank=local_rank, run_dir=run_dir,
                            backend=backend, timeout_s=deadlines.collective_s,
                            deadlines=deadlines, fault=fault, heartbeat=dog.beat,
                            phase=dog.phase, mesh=mesh, side_group=mesh.side_group,
                            control_group=control, store=store, status=status)
        print(f"{mesh.label()} of {world} ranks up (pid {os.getpid()}, backend {backend}, "
              f"mesh dp={mesh.replicas} x pp={mesh.stages})", flush=True)
        if counts:
            host_syncs.install()
        result = body(ctx, *body_args)
    except StageFailure as exc:
        write_report(run_dir, rank, {"stage": rank, "peer": exc.peer, "kind": exc.kind,
                                     "message": str(exc), "time": time.time()})
        print(f"FAILED: {exc}", file=sys.stderr, flush=True)
        traceback.print_exc()
        raise
    except BaseException as exc:
        write_report(run_dir, rank, {"stage": rank, "peer": None, "kind": "error",
                                     "message": f"stage {rank}: {type(exc).__name__}: {exc}",
                                     "time": time.time()})
        traceback.print_exc()
        raise
    finally:
        if trace:
            p2p_trace.write(trace, rank)
        if counts:
            host_syncs.write(counts, rank)
    try:
        with dog.phase("exit", deadlines.collective_s):
            dist.destroy_process_group()
    except Exception:  # pragma: no cover - teardown only
        pass
    return result


def _spawned(body, body_args, rank, world, stages, run_dir, backend, deadlines, fault,
             store_addr, env) -> None:
    """Entry of a forkserver child: take the launcher's ``DELAYBOUND_*`` environment (the
    forkserver's is from when it started), run the worker, exit 1 on any failure (reported)."""
    for k in [k for k in os.environ if k.startswith("DELAYBOUND_")]:
        del os.environ[k]
    os.environ.update(env)
    try:
        run_worker(body, body_args, rank=rank, world=world, local_rank=rank, run_dir=run_dir,
                   backend=backend, deadlines=deadlines, fault=fault, store_addr=store_addr,
                   redirect_logs=True, stages=stages)
    except BaseException:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


_CTX: Any = None


class _main_module_hidden:
    """While starting workers, hide the ``__main__`` script from multiprocessing so the children
    do not re-run it (a script without an ``if __name__ == "__main__"`` guard would otherwise
    launch the pipeline again inside every worker). The workers only run library functions."""

    def __enter__(self) -> None:
        main = sys.modules.get("__main__")
        self.main = main
        self.saved = {k: getattr(main, k) for k in ("__file__", "__spec__") if hasattr(main, k)}
        if "__file__" in self.saved:
            del main.__file__
        main.__spec__ = None

    def __exit__(self, *exc: Any) -> None:
        for k, v in self.saved.items():
            setattr(self.main, k, v)


def _context() -> Any:
    global _CTX
    if _CTX is None:
        _CTX = mp.get_context("forkserver")
        # torch._dynamo: imported lazily by the first torch.optim.Optimizer (seconds per process)
        _CTX.set_forkserver_preload(["torch", "torch.distributed", "torch._dynamo",
                                     "torch.distributed.pipelining", "llm_validation.pipeline.launch",
                                     "llm_validation.pipeline.twobw", "llm_validation.pipeline.sync"])
    return _CTX


class _Follower:
    """Copies the ``[train]`` lines a log file gains to stderr."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, ""

    def poll(self) -> None:
        try:
            with open(self.path, "r", errors="replace") as f:
                f.seek(self.offset)
                text = f.read()
                self.offset = f.tell()
        except OSError:
            return
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        for line in lines:
            if line.startswith("[train]"):
                print(line, file=sys.stderr, flush=True)


def _stop(procs: list, grace_s: float) -> set[int]:
    """SIGTERM every live worker, SIGKILL those still alive after ``grace_s``; return their ranks."""
    live = {r for r, p in enumerate(procs) if p.pid is not None and p.exitcode is None}
    for r in live:
        procs[r].terminate()
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(procs[r].exitcode is None for r in live):
        time.sleep(_POLL_S)
    for r in live:
        if procs[r].exitcode is None:
            procs[r].kill()
    for r in live:
        procs[r].join(5.0)
    return live


def spawn_stages(
    body: Callable[..., Any],
    body_args: tuple,
    *,
    world: int,
    run_dir: str | Path,
    backend: str,
    deadlines: Deadlines,
    fault: FaultSpec | None = None,
    progress: bool = False,
    stages: int | None = None,
) -> float:
    """Run ``body(ctx, *body_args)`` in ``world`` fresh processes (ranks 0..world-1, ``stages``
    per pipeline row; None: one row) on this machine and wait for them. Returns the wall time in seconds; raises :class:`PipelineFailure`
    naming the failed stage when any worker fails (all workers are gone when it is raised).
    ``progress``: copy stage 0's ``[train]`` lines to stderr while waiting."""
    import torch.distributed as dist

    run_dir = str(run_dir)
    logs_dir(run_dir)
    store = dist.TCPStore("127.0.0.1", 0, world + 1, is_master=True,
                          timeout=datetime.timedelta(seconds=deadlines.collective_s),
                          wait_for_workers=False)
    ctx = _context()
    env = {k: v for k, v in os.environ.items() if k.startswith("DELAYBOUND_")}
    t0 = time.monotonic()
    procs = [ctx.Process(target=_spawned, name=f"stage{r}", daemon=False,
                         args=(body, body_args, r, world, stages or world, run_dir, backend,
                               deadlines, fault, ("127.0.0.1", store.port), env))
             for r in range(world)]
    killed: set[int] = set()
    try:
        with _main_module_hidden():
            for p in procs:
                p.start()
        echo = _Follower(Path(run_dir) / "logs" / "stage0.log") if progress else None
        while True:
            if echo is not None:
                echo.poll()
            codes = [p.exitcode for p in procs]
            if all(c == 0 for c in codes):
                return time.monotonic() - t0
            if any(c not in (0, None) for c in codes):
                first_fail = time.monotonic()
                killed = _stop(procs, KILL_GRACE_S)
                stopped_in = time.monotonic() - first_fail
                break
            time.sleep(_POLL_S)
    except BaseException:
        _stop(procs, KILL_GRACE_S)
        raise
    finally:
        del store
    exitcodes = {r: p.exitcode for r, p in enumerate(procs)}
    P = stages or world
    rank, why = blame(exitcodes, killed, read_reports(run_dir, world),
                      label=lambda r: rank_label(r, P, world // P))
    stage = None if rank is None else rank % P
    logs = Path(run_dir) / "logs"
    raise PipelineFailure(
        f"pipeline failed: {why}; all {world} processes stopped "
        f"{stopped_in:.1f} s after the first exit (logs: {logs})", stage)
