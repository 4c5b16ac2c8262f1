"""Resumable sweep runner: one run directory per grid point under ``out``, plus ``index.json``.

``run_sweep(points, out)`` trains every :class:`~llm_validation.sweep.grid.SweepPoint` whose run
directory is not finished yet:

- finished (``summary.json`` complete for the config's steps, :func:`validation.runs.is_complete`):
  skipped, after checking that the directory holds the same config (else ``ValueError``: two
  grids must not share a name with different settings);
- started but unfinished with a checkpoint: resumed (``RunConfig.resume``; bitwise on CPU);
- started without a checkpoint: its files are removed and the run starts over;
- absent: started.

One writer per folder (:mod:`llm_validation.records.folder_lock`): the sweep holds ``out``'s lock for its
whole duration (a second sweep on the same ``out`` is refused with the holder's PID, exit 2 from
the CLI), and each run holds its own folder's lock while it trains. A run folder whose lock is
held by a live process (a worker of a sweep killed with ``kill -9`` that has not died yet) is
never cleared or resumed: the sweep is refused, naming that process. Workers die with the sweep
(:func:`~llm_validation.sweep.interrupt.die_with_parent`). A run reported ``completed`` has a
training row for every step (else it is recorded as ``error``).

Emulated runs go to a pool of ``jobs`` worker processes (spawned; each sets torch to
``threads`` intra-op threads); real-pipeline runs (their own ``stages`` processes) run one at a
time afterwards. A run that raises is recorded as ``error`` and the sweep goes on.

SIGINT / SIGTERM (:mod:`llm_validation.sweep.interrupt`): queued runs are cancelled, running
ones stopped within seconds (SIGTERM, then SIGKILL), no worker is left behind, and
:class:`~llm_validation.sweep.interrupt.Interrupted` is raised saying how many runs finished,
were stopped (resumable from their newest checkpoint) or never started; running the same sweep
again trains only those.
``index.json`` (name, status, final validation loss, wall time, the swept values) is rewritten
atomically after every run, so nothing is lost on a crash; a progress bar goes to stderr.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import shutil
import signal
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable, Sequence

from llm_validation.records.atomic_io import DISK_ERRNOS, describe
from llm_validation.config import TrainConfig, neutral_dict
from llm_validation.records.folder_lock import LOCK_FILE, FolderBusy, folder_lock, lock_holder
from llm_validation.rundir import RunPaths, latest_checkpoint, read_metrics
from llm_validation.records.atomic_io import read_json, write_json
from llm_validation.run import run
from llm_validation.sweep.grid import SweepPoint
from llm_validation.sweep.interrupt import (Interrupted, die_with_parent, ignore_sigint,
                                            raising_signals, stop_processes)
from llm_validation.validation.runs import is_complete

__all__ = ["run_sweep", "SweepOutcome", "INDEX_FILE", "Progress", "plan"]

INDEX_FILE = "index.json"
_RUN_FILES = {"config.json", "metrics.jsonl", "summary.json", "checkpoints", "logs", LOCK_FILE}


@dataclasses.dataclass(frozen=True)
class SweepOutcome:
    """What happened to one point."""

    name: str
    status: str            # completed | diverged | skipped | error
    final_val_loss: float | None
    wall_time_s: float
    message: str = ""


class Progress:
    """A one-line progress bar on a stream (stderr): done/total, elapsed, ETA, last run."""

    WIDTH = 24

    def __init__(self, total: int, stream: Any = None, enabled: bool = True,
                 label: str = "sweep") -> None:
        self.total, self.done, self.label = total, 0, label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.t0 = time.perf_counter()

    def update(self, outcome: SweepOutcome, counted: bool = True) -> None:
        self.done += 1
        if not self.enabled:
            return
        el = time.perf_counter() - self.t0
        fill = int(self.WIDTH * self.done / max(self.total, 1))
        eta = el / self.done * (self.total - self.done) if counted and self.done else 0.0
        val = f" val {outcome.final_val_loss:.4f}" if outcome.final_val_loss is not None else ""
        print(f"[{self.label}] [{'#' * fill}{'.' * (self.WIDTH - fill)}] "
              f"{self.done}/{self.total} {outcome.name}: {outcome.status}{val} "
              f"({outcome.wall_time_s:.0f}s) | elapsed {el:.0f}s eta {eta:.0f}s",
              file=self.stream, flush=True)


def _same_config(run_dir: Path, cfg: TrainConfig) -> bool:
    """Whether ``run_dir`` holds ``cfg``'s run (the checkpoint and log intervals aside:
    :data:`~llm_validation.config.DIGEST_NEUTRAL`)."""
    saved = read_json(RunPaths(run_dir).config)
    try:  # through TrainConfig: fields added since the run was made take their defaults
        a = TrainConfig.from_dict({k: v for k, v in saved.items() if k != "meta"}).to_dict()
    except (TypeError, ValueError):
        return False
    a, b = neutral_dict(a), neutral_dict(cfg.to_dict())
    return json.loads(json.dumps(a)) == json.loads(json.dumps(b))


def plan(points: Sequence[SweepPoint], out: str | Path) -> list[tuple[SweepPoint, str]]:
    """(point with out_dir set, action) with action ``skip``, ``resume`` or ``start``."""
    out = Path(out)
    actions = []
    for p in points:
        run_dir = out / p.name
        cfg = p.cfg.replace(run=dataclasses.replace(p.cfg.run, out_dir=str(run_dir),
                                                    resume=False))
        action = "start"
        if (run_dir / "config.json").is_file() and not _same_config(run_dir, cfg):
            raise ValueError(f"{run_dir} holds a run with a different config than grid point "
                             f"{p.name}; use another --out (or remove that directory)")
        if is_complete(run_dir):
            action = "skip"
        elif latest_checkpoint(RunPaths(run_dir)) is not None:
            action = "resume"
            cfg = cfg.replace(run=dataclasses.replace(cfg.run, resume=True))
        actions.append((SweepPoint(p.name, cfg), action))
    return actions


def _clear(run_dir: Path) -> None:
    """Remove a started-but-unresumable run (only the files a run writes), holding its lock
    (a live writer's folder is refused, never removed; the lock file itself stays)."""
    if not run_dir.is_dir():
        return
    extra = {c.name for c in run_dir.iterdir()} - _RUN_FILES
    if extra:
        raise ValueError(f"{run_dir} holds files a run does not write ({sorted(extra)}); "
                         "not removing it")
    with folder_lock(run_dir, "run"):
        for c in run_dir.iterdir():
            if c.name == LOCK_FILE:
                continue
            shutil.rmtree(c) if c.is_dir() and not c.is_symlink() else c.unlink()


def _check_free(run_dir: Path) -> None:
    """Refuse a run folder another live process is writing (:class:`FolderBusy`)."""
    pid = lock_holder(run_dir)
    if pid is not None:
        raise FolderBusy(run_dir, None if pid < 0 else pid, "run")


def _init_worker(threads: int, parent: int) -> None:
    import torch
    die_with_parent(parent)
    ignore_sigint()
    torch.set_num_threads(threads)


def _missing_rows(cfg: TrainConfig) -> str:
    """Empty when a completed run's metrics hold one training row per step, else what is
    missing (a run must never be reported completed without its rows)."""
    try:
        rows = read_metrics(cfg.run.out_dir)
    except (OSError, ValueError) as exc:
        return f"metrics unreadable: {exc}"
    steps = sorted(int(r["step"]) for r in rows if r.get("kind", "train") == "train")
    if steps != list(range(cfg.run.steps)):
        return (f"metrics.jsonl holds {len(steps)} training rows for {cfg.run.steps} steps "
                f"(steps {steps[:3]}...); the run's rows are incomplete")
    return ""


def _train_one(cfg_dict: dict[str, Any]) -> dict[str, Any]:
    """Worker body: train one config (a dict, so it pickles across spawn)."""
    cfg = TrainConfig.from_dict(cfg_dict)
    t0 = time.perf_counter()
    try:
        r = run(cfg, progress=False)
    except OSError as exc:
        if exc.errno not in DISK_ERRNOS:     # e.g. a missing data file: this run's error
            return {"status": "error", "final_val_loss": None,
                    "wall_time_s": time.perf_counter() - t0,
                    "message": f"{type(exc).__name__}: {exc}"}
        # full disk, read-only folder: every later run would fail too
        return {"status": "error", "final_val_loss": None,
                "wall_time_s": time.perf_counter() - t0, "message": describe(exc),
                "os_error": [exc.errno, exc.strerror, exc.filename]}
    except Exception as exc:  # noqa: BLE001 - recorded in the index, the sweep goes on
        return {"status": "error", "final_val_loss": None,
                "wall_time_s": time.perf_counter() - t0,
                "message": f"{type(exc).__name__}: {exc}"}
    missing = _missing_rows(cfg) if r.status == "completed" else ""
    if missing:
        return {"status": "error", "final_val_loss": None, "wall_time_s": r.wall_time_s,
                "message": missing}
    return {"status": r.status, "final_val_loss": r.final_val_loss,
            "wall_time_s": r.wall_time_s, "message": r.message}


def _index_row(p: SweepPoint, o: SweepOutcome) -> dict[str, Any]:
    c = p.cfg
    return {"name": p.name, "status": o.status, "final_val_loss": o.final_val_loss,
            "wall_time_s": round(o.wall_time_s, 3), "message": o.message,
            "optimizer": c.optim.name, "lr": c.optim.lr,
            "momentum": c.optim.beta1 if c.optim.name == "adamw" else c.optim.momentum,
            "batch_size": c.run.batch_size, "tau": c.delay.tau, "lam": c.delay.ef_lambda,
            "seed": c.run.seed, "steps": c.run.steps, "pipeline": c.run.pipeline}


def _summary_outcome(name: str, run_dir: Path, status: str) -> SweepOutcome:
    s = read_json(RunPaths(run_dir).summary)
    return SweepOutcome(name, status, s.get("final_val_loss"), 0.0)


def run_sweep(points: Sequence[SweepPoint], out: str | Path, *, jobs: int = 1,
              threads: int | None = None, progress: bool = True,
              grid: dict[str, Any] | None = None,
              on_done: Callable[[SweepOutcome], None] | None = None) -> list[SweepOutcome]:
    """Train every unfinished point (see the module docstring); returns one outcome per point.

    ``jobs`` worker processes for emulated runs (0: run them in this process), ``threads``
    torch threads each (default: cpu_count // jobs, at least 1). ``grid`` is stored in
    index.json for the record.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0:
        raise ValueError(f"jobs={jobs!r} must be an int >= 0 (0: in this process)")
    threads = threads if threads is not None else max(1, (os.cpu_count() or 1) // max(jobs, 1))
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads={threads!r} must be an int >= 1 (torch threads per run)")
    out = Path(out)
    with folder_lock(out, "sweep"):      # one sweep per folder; index.json written under it
        return _run_locked(points, out, jobs, threads, progress, grid, on_done)


def _run_locked(points: Sequence[SweepPoint], out: Path, jobs: int, threads: int,
                progress: bool, grid: dict[str, Any] | None,
                on_done: Callable[[SweepOutcome], None] | None) -> list[SweepOutcome]:
    planned = plan(points, out)
    for p, action in planned:
        if action != "skip":
            _check_free(out / p.name)
    bar = Progress(len(planned), enabled=progress)
    rows: dict[str, dict[str, Any]] = {}
    outcomes: dict[str, SweepOutcome] = {}

    def record(p: SweepPoint, o: SweepOutcome, counted: bool = True) -> None:
        outcomes[p.name] = o
        rows[p.name] = _index_row(p, o)
        write_json(out / INDEX_FILE, {"grid": grid, "runs": [rows[q.name] for q, _ in planned
                                                             if q.name in rows]})
        bar.update(o, counted)
        if on_done is not None:
            on_done(o)

    todo: list[SweepPoint] = []
    for p, action in planned:
        if action == "skip":
            record(p, _summary_outcome(p.name, out / p.name, "skipped"), counted=False)
        else:
            if action == "start":
                _clear(out / p.name)
            todo.append(p)
    local = [p for p in todo if p.cfg.run.pipeline == "none"]
    piped = [p for p in todo if p.cfg.run.pipeline != "none"]
    try:
        with raising_signals():
            _train_all(local, piped, jobs, threads, record)
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        raise Interrupted(signum, _interrupt_detail(out, planned, set(outcomes))) from None
    return [outcomes[p.name] for p, _ in planned]


def _interrupt_detail(out: Path, planned: Sequence[tuple[SweepPoint, str]],
                      finished: set[str]) -> str:
    """What an interrupted sweep leaves: finished runs, stopped ones (resumable when they
    have a checkpoint), never started ones; read from the run directories."""
    left = [p.name for p, _ in planned if p.name not in finished]
    started = [n for n in left if (out / n / "config.json").is_file()]
    resumable = sum(latest_checkpoint(RunPaths(out / n)) is not None for n in started)
    return (f"{len(finished)} of {len(planned)} runs finished, {len(started)} stopped mid-run "
            f"({resumable} resume from a checkpoint, {len(started) - resumable} start over), "
            f"{len(left) - len(started)} not started")


def _outcome(p: SweepPoint, r: dict[str, Any]) -> SweepOutcome:
    return SweepOutcome(p.name, r["status"], r["final_val_loss"], r["wall_time_s"], r["message"])


def _fatal(r: dict[str, Any]) -> None:
    """An I/O error of a run (full disk, read-only folder) stops the sweep: raised again here,
    after the run is recorded, as the ``OSError`` naming the path (the CLI: one line, exit 2)."""
    if r.get("os_error"):
        raise OSError(*r["os_error"])


def _train_all(local: list[SweepPoint], piped: list[SweepPoint], jobs: int, threads: int,
               record: Callable[[SweepPoint, SweepOutcome], None]) -> None:
    """Emulated runs inline (jobs 0) or on a pool, then pipeline runs one at a time. On an
    interrupt the pool's queued runs are cancelled and its workers stopped before re-raising."""
    if local and jobs == 0:          # in this process, in order (tests, debugging)
        for p in local:
            r = _train_one(p.cfg.to_dict())
            record(p, _outcome(p, r))
            _fatal(r)
    elif local:
        ctx = multiprocessing.get_context("spawn")
        before = set(multiprocessing.active_children())
        pool = ProcessPoolExecutor(max_workers=min(jobs, len(local)), mp_context=ctx,
                                   initializer=_init_worker, initargs=(threads, os.getpid()))
        try:
            futures = {pool.submit(_train_one, p.cfg.to_dict()): p for p in local}
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    r = f.result()
                    record(futures[f], _outcome(futures[f], r))
                    _fatal(r)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            stop_processes([c for c in multiprocessing.active_children() if c not in before])
            raise
        pool.shutdown(wait=True)
    for p in piped:   # the pipeline spawns its own stage processes: one at a time
        r = _train_one(p.cfg.to_dict())
        record(p, _outcome(p, r))
        _fatal(r)
