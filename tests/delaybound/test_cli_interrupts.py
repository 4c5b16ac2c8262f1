"""SIGINT / SIGTERM to the commands that train runs on worker processes (`sweep`,
`reproduce --quick`): they stop within seconds, leave no process behind, exit 130 / 143 with
one line, and a re-run trains only what was unfinished.

Each case starts the command in its own session, waits (by polling the run directories, no
fixed sleep) until one run has finished and another is mid-run with a checkpoint, sends the
signal to the command's process only (as ``kill`` does), and then checks the session for
survivors: a worker re-parented to PID 1 keeps its session id, so it is found too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_validation.rundir import latest_checkpoint, RunPaths

#: The command must be gone this many seconds after the signal (the issue's promise).
EXIT_WITHIN_S = 10.0
#: Generous bound on reaching "one run finished, one mid-run" on a loaded 2-core machine.
SETUP_TIMEOUT_S = 240.0
_POLL_S = 0.1

#: Tiny runs: few steps, a checkpoint every step so a stopped run is always resumable, no
#: expensive statistics; each run takes a few seconds.
_CHEAP = ["--set", "run.checkpoint_interval=1", "--set", "run.stats_interval=0",
          "--set", "run.eval_batches=1", "--set", "run.eval_interval=0"]


def _sweep_cmd(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "delaybound", "sweep", "--out", str(out), "--optimizer",
            "adamw", "--mode", "sync,2bw", "--n-seeds", "2", "--steps", "12", "--batch-size",
            "4", "--jobs", "1", "--threads", "1", *_CHEAP, *extra]


def _reproduce_cmd(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "delaybound", "reproduce", "--quick", "--claims", "dcasgd",
            "--jobs", "1", "--threads", "1", "--out", str(out), "--set", "run.steps=24",
            "--set", "run.batch_size=4", *_CHEAP, *extra]


def _session_pids(sid: int) -> list[int]:
    """Live (non-zombie) processes whose session id is ``sid``."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(d.name))
    return pids


def _mid_run(runs: Path) -> bool:
    """One run finished (listed in index.json) and another started with a checkpoint."""
    index = runs / "index.json"
    if not index.is_file():
        return False
    try:
        done = {r["name"] for r in json.loads(index.read_text())["runs"]}
    except (ValueError, KeyError):
        return False
    return bool(done) and any(latest_checkpoint(RunPaths(d)) is not None
                              for d in runs.iterdir() if d.is_dir() and d.name not in done)


def _interrupt(cmd: list[str], runs: Path, sig: int, tmp_path: Path) -> tuple[int, str, float]:
    err = open(tmp_path / "stderr.txt", "w+")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        while not _mid_run(runs):
            assert proc.poll() is None, f"command ended before the signal: {proc.returncode}"
            assert time.monotonic() < deadline, "no run finished in time"
            time.sleep(_POLL_S)
        t0 = time.monotonic()
        proc.send_signal(sig)
        try:
            code = proc.wait(EXIT_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {EXIT_WITHIN_S} s after {signal.Signals(sig).name}")
        took = time.monotonic() - t0
        time.sleep(0.5)   # a straggler would still be alive now
        left = _session_pids(proc.pid)
        assert not left, f"processes left behind: {left}"
    finally:
        for pid in _session_pids(proc.pid):   # never leave anything running after a failure
            os.kill(pid, signal.SIGKILL)
        proc.wait()
    err.seek(0)
    return code, err.read(), took


def _dry_plan(runs: Path) -> dict[str, str]:
    from llm_validation.sweep.runner import plan
    from llm_validation.sweep.grid import SweepPoint
    from llm_validation.rundir import load_config
    points = [SweepPoint(d.name, load_config(d)) for d in runs.iterdir()
              if (d / "config.json").is_file()]
    return {p.name: a for p, a in plan(points, runs)}


def _check_message(stderr: str, command: str, sig: int) -> None:
    lines = [ln for ln in stderr.splitlines() if f"delaybound {command}: interrupted" in ln]
    assert len(lines) == 1, stderr
    assert signal.Signals(sig).name in lines[0] and "resume" in lines[0]
    assert "Traceback" not in stderr, stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sweep_stops_on_signal_and_resumes(tmp_path, sig):
    out = tmp_path / "sweep"
    code, stderr, _ = _interrupt(_sweep_cmd(out), out, sig, tmp_path)
    assert code == 128 + sig
    _check_message(stderr, "sweep", sig)
    finished = {r["name"] for r in json.loads((out / "index.json").read_text())["runs"]}
    actions = _dry_plan(out)
    assert all(actions[n] == "skip" for n in finished)
    assert "resume" in actions.values()           # the stopped run continues from its checkpoint
    if sig == signal.SIGTERM:                      # one real re-run: only the unfinished train
        stamps = {n: (out / n / "summary.json").stat().st_mtime_ns for n in finished}
        res = subprocess.run(_sweep_cmd(out, "--json"), capture_output=True, text=True,
                             timeout=SETUP_TIMEOUT_S)
        assert res.returncode == 0, res.stderr
        rows = json.loads(res.stdout)["runs"]
        assert {r["name"] for r in rows if r["status"] == "skipped"} == finished
        assert all(r["status"] == "completed" for r in rows if r["name"] not in finished)
        assert stamps == {n: (out / n / "summary.json").stat().st_mtime_ns for n in finished}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_reproduce_quick_stops_on_signal(tmp_path, sig):
    out = tmp_path / "ledger"
    code, stderr, _ = _interrupt(_reproduce_cmd(out), out / "runs", sig, tmp_path)
    assert code == 128 + sig
    _check_message(stderr, "reproduce", sig)
    assert not (out / "claims.json").exists()      # no ledger from a partial set of runs
    finished = {r["name"] for r in json.loads((out / "runs" / "index.json").read_text())["runs"]}
    actions = _dry_plan(out / "runs")
    assert all(actions[n] == "skip" for n in finished)
    assert "resume" in actions.values()
