"""Faults of a pipeline run: deadlines, watchdog, stage status, reports and blame.

Model: a stage either dies (its process is gone: its neighbours see a closed connection at
once), hangs in its own code (alive and silent: its neighbours' waits reach their deadline), or
fails in its own code (an exception). Everything a stage learns is written as a report
``logs/fault_stage<s>.json`` (``kind``: ``lost``, ``timeout``, ``error`` or ``stalled``; the
``peer`` held responsible), and the launcher (``launch.spawn_stages``) picks the culprit with
:func:`blame` once it has stopped every process.

- Deadlines and the watchdog: :mod:`llm_validation.pipeline.watchdog` (hang diagnosis after
  ``hang_s``, long phases with their own deadline, the transport's long timeout apart).
- Chains of waits: each stage publishes the peer it is waiting on to the rendezvous store
  (the watchdog, under :func:`status_key`); a diagnosis follows the chain
  (:func:`follow_waits`) to the stage that waits on nobody, so stage 0 waiting on stage 1 that
  waits on a hung stage 2 names stage 2, whichever deadline expires first.
- Blame order (:func:`blame`): a stage that died without a report (signal, crash); else one that
  reported an error or stall of its own; else the peer named by the earliest timeout (hung);
  else the peer of the earliest lost connection; with unnamed peers (torch's schedules), the one
  stage that stayed silent until it was stopped.

Fault injection (tests only): ``DELAYBOUND_PIPE_SLOW_SAVE="R:S,..."`` slows every
checkpoint save of rank R (:func:`slow_save`);
``DELAYBOUND_PIPE_FAULT="stage=S,step=T,kind=die|hang"`` makes
stage S kill itself (SIGKILL) or sleep forever right after its optimizer step T
(:func:`inject_fault`), after writing ``logs/fault_injected.json`` with the time; a fault fires
once per run directory (that file present: no fault), so a restarted rank runs on.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

__all__ = [
    "PipelineFailure",
    "FaultSpec",
    "parse_fault",
    "inject_fault",
    "SLOW_SAVE_ENV",
    "slow_save",
    "WATCHDOG_EXIT",
    "logs_dir",
    "write_report",
    "status_key",
    "follow_waits",
    "read_reports",
    "blame",
]

#: Exit code of a worker stopped by its own watchdog.
WATCHDOG_EXIT = 70


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


def inject_fault(run_dir: str, rank: int, fault: FaultSpec | None, step: int) -> None:
    """Tests: kill (SIGKILL) or hang this process after optimizer step ``step`` if told to;
    once per run directory (a process restarted by torchrun, or a resumed run, goes on)."""
    if fault is None or fault.stage != rank or fault.step != step:
        return
    if (logs_dir(run_dir) / "fault_injected.json").exists():
        return
    print(f"[fault injection] stage {rank}: {fault.kind} after step {step}", flush=True)
    write_report(run_dir, rank, {"stage": rank, "step": step, "kind": fault.kind,
                                 "time": time.time()}, name="fault_injected.json")
    if fault.kind == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    while True:  # hang: a silent, live process
        time.sleep(3600)


#: Tests: ``"R:S,R2:S2"`` makes rank R sleep S seconds inside every checkpoint save.
SLOW_SAVE_ENV = "DELAYBOUND_PIPE_SLOW_SAVE"


def slow_save(rank: int) -> None:
    """Tests: sleep inside a checkpoint save when ``DELAYBOUND_PIPE_SLOW_SAVE`` (``"R:S,..."``:
    rank R sleeps S seconds) names this rank (a slow file system, inside the save phase)."""
    text = os.environ.get(SLOW_SAVE_ENV)
    if not text:
        return
    try:
        delays = {int(r): float(v) for r, v in (part.split(":") for part in text.split(","))}
    except ValueError as exc:
        raise ValueError(f"{SLOW_SAVE_ENV}={text!r} must look like '0:4,1:2'") from exc
    if rank in delays:
        time.sleep(delays[rank])


def logs_dir(run_dir: str | Path) -> Path:
    """``<run_dir>/logs`` (created)."""
    path = Path(run_dir) / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_report(run_dir: str, rank: int, report: dict, name: str | None = None) -> None:
    """Write a fault report atomically (``logs/fault_stage<rank>.json`` or ``name``)."""
    path = logs_dir(run_dir) / (name or f"fault_stage{rank}.json")
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report))
    os.replace(tmp, path)


def status_key(rank: int) -> str:
    """Store key of a stage's published status."""
    return f"delaybound/status/{rank}"


def follow_waits(store: Any, peer: int, world: int) -> tuple[int, list[int]]:
    """The stage really at fault when a wait on ``peer`` timed out: follow the chain of stages
    each waiting on the next (from their published status) to one that waits on nobody, i.e.
    is stuck in its own code. Returns (that stage, the chain from ``peer``)."""
    chain = [peer]
    while len(chain) <= world:
        try:
            status = json.loads(store.get(status_key(chain[-1])).decode())
        except Exception:
            break
        nxt = status.get("waiting_on")
        if nxt is None or isinstance(nxt, list) or nxt in chain:   # a list: several peers
            break
        chain.append(int(nxt))
    return chain[-1], chain


def read_reports(run_dir: str, world: int) -> dict[int, dict]:
    """The fault reports present, by stage."""
    out = {}
    for r in range(world):
        path = logs_dir(run_dir) / f"fault_stage{r}.json"
        if path.exists():
            try:
                out[r] = json.loads(path.read_text())
            except (OSError, ValueError):  # pragma: no cover - a report torn by a kill
                out[r] = {"stage": r, "peer": None, "kind": "error", "message": "unreadable report",
                          "time": path.stat().st_mtime}
    return out


def blame(exitcodes: dict[int, int | None], killed: set[int], faults: dict[int, dict],
          label: Callable[[int], str] = lambda r: f"stage {r}") -> tuple[int | None, str]:
    """(failed rank, reason) from the exit codes, the ranks the launcher stopped (``killed``)
    and the fault reports; see the module docstring. ``label(rank)`` names a rank in the
    reason (``stage r`` by default; with data parallelism ``pipeline.mesh.rank_label``)."""
    for r, code in sorted(exitcodes.items()):
        if r in killed or code in (0, None) or r in faults:
            continue
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return r, f"{label(r)} died (killed by signal {name})"
        return r, f"{label(r)} exited with code {code} without a report"
    own = [f for f in faults.values() if f.get("kind") in ("error", "stalled")]
    if own:
        f = min(own, key=lambda f: f["time"])
        return f["stage"], f"{label(f['stage'])} failed: {f['message']}"
    for kind, why in (("timeout", "hung"), ("lost", "lost its connection")):
        rep = sorted((f for f in faults.values() if f.get("kind") == kind), key=lambda f: f["time"])
        named = [f for f in rep if f.get("peer") is not None]
        if named:
            peer = named[0]["peer"]
            return peer, f"{label(peer)} {why}: {named[0]['message']}"
        if rep:  # the peer is unknown (torch's schedules): the stage that was silent to the end
            silent = sorted(r for r in killed if r not in faults)
            if len(silent) == 1:
                return silent[0], f"{label(silent[0])} {why}: {rep[0]['message']}"
            return None, f"a rank {why} (ranks {silent} never reported): {rep[0]['message']}"
    return None, "a stage failed for an unknown reason"
