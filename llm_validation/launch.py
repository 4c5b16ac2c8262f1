"""Process launcher for the pipeline runtimes: one process per stage, a watchdog, one error.

Two ways in, one worker body (:func:`run_worker`):
- single machine (:func:`spawn_stages`): this process hosts the rendezvous store on 127.0.0.1
  (port chosen by the OS, so no port races), starts ``P`` workers from a forkserver that has
  imported torch once, sends each worker's stdout/stderr to ``<run_dir>/logs/stage<s>.log`` and
  watches them. CPU: gloo; CUDA: NCCL with one GPU per stage (``cuda:<s>``).
- several machines (:func:`torchrun_env` is not None): ``torchrun`` started this process as one
  rank; the rendezvous comes from its environment (``env://``) and torchrun's agent tears the
  group down when a rank fails. The run directory must be on a shared filesystem.

Faults. Every point-to-point wait has a deadline (``timeout_s``, see :mod:`pipeline_comm`); a
worker whose wait fails writes ``logs/fault_stage<s>.json`` (the peer at fault and why) and
exits 1. A timed-out wait blames the end of the chain of waits (each stage publishes the peer it
waits on in the store, :func:`follow_waits`): stage 0 waiting on stage 1 that waits on a hung
stage 2 names stage 2. A per-worker watchdog thread exits the worker (code 70) when its loop made no progress
for ``timeout_s + WATCHDOG_SLACK_S`` (a hang inside the stage itself, not in a wait). The
launcher polls the workers; at the first non-zero exit it stops the others (SIGTERM, then
SIGKILL after ``KILL_GRACE_S``) and raises :class:`PipelineFailure` naming the failed stage:
a worker that died without a report (a signal, a crash) is the culprit; else a stage that reported
an error in its own code; else the peer named by the earliest timeout (the silent one, i.e. hung);
else the peer of the earliest lost connection. With the default ``timeout_s`` every rank is gone
well within 60 s of the fault.

Fault injection for tests (never set in normal runs): the environment variable
``DELAYBOUND_PIPE_FAULT="stage=S,step=T,kind=die|hang"`` makes stage S kill itself (SIGKILL) or
sleep forever right after its optimizer step T. It is read by the launcher and handed to the
workers explicitly (forkserver children do not see later environment changes).
"""

from __future__ import annotations

import datetime
import json
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

__all__ = [
    "PipelineFailure",
    "WorkerContext",
    "FaultSpec",
    "DEFAULT_TIMEOUT_S",
    "WATCHDOG_SLACK_S",
    "KILL_GRACE_S",
    "spawn_stages",
    "run_worker",
    "torchrun_env",
    "parse_fault",
    "follow_waits",
]

#: Deadline of every point-to-point wait and collective (seconds). A healthy pipeline never waits
#: this long for a neighbour (a wait lasts about one microbatch's compute, or one checkpoint
#: save), and 30 s + the kill grace keeps the whole group's exit within 60 s of a fault. Override
#: with ``DELAYBOUND_PIPE_TIMEOUT_S`` (e.g. for huge checkpoints on slow disks).
DEFAULT_TIMEOUT_S = 30.0
#: The watchdog fires this long after the p2p deadline, so a stage blocked in a legitimate wait
#: is always reported by the wait (which names the peer), not by the watchdog.
WATCHDOG_SLACK_S = 10.0
#: Seconds between SIGTERM and SIGKILL when the launcher stops the surviving workers.
KILL_GRACE_S = 3.0
#: Exit code of a worker stopped by its own watchdog.
WATCHDOG_EXIT = 70

_POLL_S = 0.05


class PipelineFailure(RuntimeError):
    """The pipeline run failed; ``stage`` is the stage held responsible (None if unknown)."""

    def __init__(self, message: str, stage: int | None):
        super().__init__(message)
        self.stage = stage


@dataclass(frozen=True)
class FaultSpec:
    """An injected fault (tests only): ``kind`` in {die, hang} on ``stage`` after step ``step``."""

    stage: int
    step: int
    kind: str


def parse_fault(text: str | None) -> FaultSpec | None:
    """Parse ``"stage=S,step=T,kind=die|hang"``; None/empty gives None."""
    if not text:
        return None
    try:
        kv = dict(part.split("=", 1) for part in text.split(","))
        spec = FaultSpec(stage=int(kv["stage"]), step=int(kv["step"]), kind=kv["kind"])
    except (ValueError, KeyError) as exc:
        raise ValueError(f"DELAYBOUND_PIPE_FAULT={text!r} must look like 'stage=1,step=3,kind=die'") from exc
    if spec.kind not in ("die", "hang"):
        raise ValueError(f"DELAYBOUND_PIPE_FAULT kind={spec.kind!r} must be 'die' or 'hang'")
    return spec


@dataclass(frozen=True)
class WorkerContext:
    """What a worker body receives besides its own arguments."""

    rank: int
    world: int
    local_rank: int
    run_dir: str
    backend: str
    timeout_s: float
    fault: FaultSpec | None
    heartbeat: Callable[[], None]
    """Call once per schedule action: proof of progress for the watchdog."""
    side_group: Any
    """A second group over all ranks (same backend) for the side passes (evaluation, the
    statistics' extra gradients): their messages never match receives of the training stream."""
    control_group: Any
    """A gloo group over all ranks for small CPU messages (statistics, results)."""
    store: Any
    """The rendezvous key-value store (early-stop flag, stage status)."""
    status: dict
    """This stage's published status: ``waiting_on`` is the peer of the current p2p wait."""

    def maybe_inject_fault(self, step: int) -> None:
        """Tests: kill or hang this process after optimizer step ``step`` if told to."""
        f = self.fault
        if f is None or f.stage != self.rank or f.step != step:
            return
        print(f"[fault injection] stage {self.rank}: {f.kind} after step {step}", flush=True)
        _write_fault(self.run_dir, self.rank, {"stage": self.rank, "step": step, "kind": f.kind,
                                               "time": time.time()}, name="fault_injected.json")
        if f.kind == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        while True:  # hang: a silent, live process
            time.sleep(3600)


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


def _logs(run_dir: str | Path) -> Path:
    path = Path(run_dir) / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write_fault(run_dir: str, rank: int, report: dict, name: str | None = None) -> None:
    path = _logs(run_dir) / (name or f"fault_stage{rank}.json")
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report))
    os.replace(tmp, path)


#: How often each stage publishes its status (progress, the peer it waits on) to the store.
STATUS_EVERY_S = 0.5


def _status_key(rank: int) -> str:
    return f"delaybound/status/{rank}"


def _start_watchdog(run_dir: str, rank: int, limit_s: float, store: Any,
                    status: dict) -> Callable[[], None]:
    """Daemon thread that publishes this stage's ``status`` (``waiting_on``: the peer of the
    current p2p wait, or None) to the store and exits the process when ``heartbeat`` was not
    called for ``limit_s``."""
    last = [time.monotonic()]

    def heartbeat() -> None:
        last[0] = time.monotonic()

    def watch() -> None:
        while True:
            time.sleep(min(STATUS_EVERY_S, limit_s / 4))
            try:
                store.set(_status_key(rank), json.dumps(
                    {"waiting_on": status.get("waiting_on"), "time": time.time()}))
            except Exception:  # pragma: no cover - the store is gone: the run is ending
                pass
            idle = time.monotonic() - last[0]
            if idle > limit_s:
                msg = f"stage {rank} made no progress for {idle:.0f} s (watchdog)"
                _write_fault(run_dir, rank, {"stage": rank, "peer": None, "kind": "stalled",
                                             "message": msg, "time": time.time()})
                print(msg, file=sys.stderr, flush=True)
                os._exit(WATCHDOG_EXIT)

    threading.Thread(target=watch, name="pipeline-watchdog", daemon=True).start()
    return heartbeat


def follow_waits(store: Any, peer: int, world: int) -> tuple[int, list[int]]:
    """The stage really at fault when a wait on ``peer`` timed out: follow the chain of stages
    each waiting on the next (from their published status) to one that waits on nobody, i.e.
    is stuck in its own code. Returns (that stage, the chain from ``peer``)."""
    chain = [peer]
    while len(chain) <= world:
        try:
            status = json.loads(store.get(_status_key(chain[-1])).decode())
        except Exception:
            break
        nxt = status.get("waiting_on")
        if nxt is None or nxt in chain:
            break
        chain.append(int(nxt))
    return chain[-1], chain


def run_worker(
    body: Callable[..., Any],
    body_args: tuple,
    *,
    rank: int,
    world: int,
    local_rank: int,
    run_dir: str,
    backend: str,
    timeout_s: float,
    fault: FaultSpec | None,
    store_addr: tuple[str, int] | None,
    redirect_logs: bool,
) -> Any:
    """One stage process: logs, process group (``store_addr``: our store; None: ``env://``),
    watchdog, then ``body(ctx, *body_args)``. A failure is written to ``logs/fault_stage<s>.json``
    and re-raised (the process then exits non-zero)."""
    import torch.distributed as dist

    from llm_validation.pipeline_comm import StageFailure

    if redirect_logs:
        fd = os.open(_logs(run_dir) / f"stage{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)
    stale = _logs(run_dir) / f"fault_stage{rank}.json"
    if stale.exists():
        stale.unlink()
    timeout = datetime.timedelta(seconds=timeout_s)
    try:
        if store_addr is not None:
            store = dist.TCPStore(store_addr[0], store_addr[1], is_master=False, timeout=timeout)
            dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
        else:
            dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world, timeout=timeout)
        side = dist.new_group(backend=backend, timeout=timeout)
        control = dist.new_group(backend="gloo", timeout=timeout)
        store = dist.distributed_c10d._get_default_store()
        status: dict = {"waiting_on": None}
        heartbeat = _start_watchdog(run_dir, rank, timeout_s + WATCHDOG_SLACK_S, store, status)
        ctx = WorkerContext(rank=rank, world=world, local_rank=local_rank, run_dir=run_dir,
                            backend=backend, timeout_s=timeout_s, fault=fault,
                            heartbeat=heartbeat, side_group=side, control_group=control,
                            store=store, status=status)
        print(f"stage {rank}/{world} up (pid {os.getpid()}, backend {backend})", flush=True)
        result = body(ctx, *body_args)
    except StageFailure as exc:
        _write_fault(run_dir, rank, {"stage": rank, "peer": exc.peer, "kind": exc.kind,
                                     "message": str(exc), "time": time.time()})
        print(f"FAILED: {exc}", file=sys.stderr, flush=True)
        traceback.print_exc()
        raise
    except BaseException as exc:
        _write_fault(run_dir, rank, {"stage": rank, "peer": None, "kind": "error",
                                     "message": f"stage {rank}: {type(exc).__name__}: {exc}",
                                     "time": time.time()})
        traceback.print_exc()
        raise
    try:
        dist.destroy_process_group()
    except Exception:  # pragma: no cover - teardown only
        pass
    return result


def _spawned(body, body_args, rank, world, run_dir, backend, timeout_s, fault, store_addr,
             env) -> None:
    """Entry of a forkserver child: take the launcher's ``DELAYBOUND_*`` environment (the
    forkserver's is from when it started), run the worker, exit 1 on any failure (reported)."""
    for k in [k for k in os.environ if k.startswith("DELAYBOUND_")]:
        del os.environ[k]
    os.environ.update(env)
    try:
        run_worker(body, body_args, rank=rank, world=world, local_rank=rank, run_dir=run_dir,
                   backend=backend, timeout_s=timeout_s, fault=fault, store_addr=store_addr,
                   redirect_logs=True)
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
                                     "torch.distributed.pipelining", "llm_validation.pipeline_run",
                                     "llm_validation.pipeline_2bw", "llm_validation.pipeline_sync"])
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


def _read_faults(run_dir: str, world: int) -> dict[int, dict]:
    out = {}
    for r in range(world):
        path = _logs(run_dir) / f"fault_stage{r}.json"
        if path.exists():
            try:
                out[r] = json.loads(path.read_text())
            except (OSError, ValueError):  # pragma: no cover - a report torn by a kill
                out[r] = {"stage": r, "peer": None, "kind": "error", "message": "unreadable report",
                          "time": path.stat().st_mtime}
    return out


def _blame(exitcodes: dict[int, int | None], killed: set[int], faults: dict[int, dict]) -> tuple[int | None, str]:
    """(failed stage, reason) from exit codes and fault reports; see the module docstring."""
    for r, code in sorted(exitcodes.items()):
        if r in killed or code in (0, None) or r in faults:
            continue
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return r, f"stage {r} died (killed by signal {name})"
        return r, f"stage {r} exited with code {code} without a report"
    own = [f for f in faults.values() if f.get("kind") in ("error", "stalled")]
    if own:
        f = min(own, key=lambda f: f["time"])
        return f["stage"], f"stage {f['stage']} failed: {f['message']}"
    for kind, why in (("timeout", "hung"), ("lost", "lost its connection")):
        rep = sorted((f for f in faults.values() if f.get("kind") == kind), key=lambda f: f["time"])
        named = [f for f in rep if f.get("peer") is not None]
        if named:
            peer = named[0]["peer"]
            return peer, f"stage {peer} {why}: {named[0]['message']}"
        if rep:  # the peer is unknown (torch's schedules): the stage that was silent to the end
            silent = sorted(r for r in killed if r not in faults)
            if len(silent) == 1:
                return silent[0], f"stage {silent[0]} {why}: {rep[0]['message']}"
            return None, f"a stage {why} (stages {silent} never reported): {rep[0]['message']}"
    return None, "a stage failed for an unknown reason"


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
    timeout_s: float,
    fault: FaultSpec | None = None,
    progress: bool = False,
) -> float:
    """Run ``body(ctx, *body_args)`` in ``world`` fresh processes (ranks 0..world-1) on this
    machine and wait for them. Returns the wall time in seconds; raises :class:`PipelineFailure`
    naming the failed stage when any worker fails (all workers are gone when it is raised).
    ``progress``: copy stage 0's ``[train]`` lines to stderr while waiting."""
    import torch.distributed as dist

    run_dir = str(run_dir)
    _logs(run_dir)
    store = dist.TCPStore("127.0.0.1", 0, world + 1, is_master=True,
                          timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=False)
    ctx = _context()
    env = {k: v for k, v in os.environ.items() if k.startswith("DELAYBOUND_")}
    t0 = time.monotonic()
    procs = [ctx.Process(target=_spawned, name=f"stage{r}", daemon=False,
                         args=(body, body_args, r, world, run_dir, backend, timeout_s, fault,
                               ("127.0.0.1", store.port), env))
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
    stage, why = _blame(exitcodes, killed, _read_faults(run_dir, world))
    logs = Path(run_dir) / "logs"
    raise PipelineFailure(
        f"pipeline failed: {why}; all {world} stage processes stopped "
        f"{stopped_in:.1f} s after the first exit (logs: {logs})", stage)
