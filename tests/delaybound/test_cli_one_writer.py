"""Nothing lost, nothing mixed (issue 33): one writer per run folder and per sweep folder,
``kill -9`` of a sweep then a re-run, a full disk and a read-only folder.

Two simultaneous writers are two real processes started together; exactly one must win and
the other must be refused with one line naming the winner's PID (exit 2), the winner's folder
holding only its own run. ``kill -9`` is sent to the sweep at several moments (workers just
started, a run finished and another mid-run); afterwards no process of its session may be
left, and the same command run again must finish every run with one training row per step
and an index that agrees with the run folders. Full disk: a small tmpfs (skipped with the
reason where it cannot be mounted). Runs are tiny (a few steps, batch 4) to keep this cheap.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from delaybound.cli import main
from llm_validation.rundir import latest_checkpoint, load_checkpoint, read_metrics, RunPaths
from tests.delaybound.test_cli_interrupts import _session_pids
from tests.llm_validation.disk_helpers import read_only, tmpfs

#: Every process of a killed sweep must be gone this many seconds after the kill (the kernel
#: delivers PR_SET_PDEATHSIG at once; the bound covers a loaded 2-core machine).
ORPHANS_GONE_S = 10.0
#: Generous bound on one tiny command on a loaded 2-core machine.
CMD_TIMEOUT_S = 240.0
_POLL_S = 0.05
_ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "MPLBACKEND": "Agg"}
#: Sweep runs: a micro model (a run is mostly process start-up), a checkpoint every 2 steps.
_CHEAP = ["--set", "run.stats_interval=0", "--set", "run.eval_batches=1", "--set",
          "run.eval_interval=0", "--set", "run.checkpoint_interval=2", "--set",
          "model.n_layer=1", "--set", "model.d_model=16", "--set", "model.n_head=2", "--set",
          "model.n_kv_head=1", "--set", "model.d_ff=32", "--set", "data.seq_len=16"]
#: train runs: the tiny preset (train has no model overrides) on short sequences.
_TRAIN = ["--preset", "tiny", "--seq-len", "16", "--batch-size", "2", "--eval-batches", "1",
          "--stats-interval", "0", "--eval-interval", "0", "--quiet"]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "delaybound", *args]


def _sweep(out: Path, steps: int = 6, jobs: int = 2,
           modes: str = "sync,2bw,2bw+ef") -> list[str]:
    return _cli("sweep", "--out", str(out), "--optimizer", "adamw", "--mode", modes,
                "--n-seeds", "1", "--steps", str(steps), "--batch-size", "2", "--jobs",
                str(jobs), "--threads", "1", "--quiet", *_CHEAP)


def _together(cmds: list[list[str]], tmp_path: Path) -> list[tuple[subprocess.Popen, str]]:
    """Start every command at once; wait; (process, stderr) each."""
    errs = [open(tmp_path / f"err{i}.txt", "w+") for i in range(len(cmds))]
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=e, env=_ENV)
             for c, e in zip(cmds, errs)]
    out = []
    for p, e in zip(procs, errs):
        p.wait(CMD_TIMEOUT_S)
        e.seek(0)
        out.append((p, e.read()))
    return out


def _one_winner(results: list[tuple[subprocess.Popen, str]]) -> tuple[int, int]:
    """(winner index, loser index); the loser's one line names the winner's PID."""
    codes = sorted(p.returncode for p, _ in results)
    assert codes == [0, 2], [(p.returncode, e[-800:]) for p, e in results]
    win = 0 if results[0][0].returncode == 0 else 1
    lose_err = results[1 - win][1].strip()
    assert len(lose_err.splitlines()) == 1, lose_err
    assert f"being written by process {results[win][0].pid}" in lose_err, lose_err
    return win, 1 - win


def _rows_complete(run_dir: Path, steps: int) -> None:
    rows = read_metrics(run_dir)
    assert [r["step"] for r in rows if r["kind"] == "train"] == list(range(steps)), run_dir
    assert [r["kind"] for r in rows].count("eval") == 1, run_dir
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == steps
    assert summary["final_loss"] is not None and summary["tokens_per_s"] is not None


def test_two_trains_on_one_folder(tmp_path):
    out = tmp_path / "run"
    cmds = [_cli("train", *_TRAIN, "--steps", "30", "--optimizer", "adamw", "--seed", "0",
                 "--out", str(out)),
            _cli("train", *_TRAIN, "--steps", "30", "--optimizer", "muon", "--seed", "1",
                 "--out", str(out))]
    win, _ = _one_winner(_together(cmds, tmp_path))
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["optim"]["name"], cfg["run"]["seed"]) == (("adamw", 0), ("muon", 1))[win]
    _rows_complete(out, 30)
    ckpt = load_checkpoint(latest_checkpoint(RunPaths(out)))
    assert ckpt["config"]["optim"]["name"] == cfg["optim"]["name"]


def test_two_sweeps_on_one_folder(tmp_path):
    out = tmp_path / "sweep"
    cmd = _sweep(out, steps=30, jobs=0, modes="sync,2bw")
    _one_winner(_together([cmd, cmd], tmp_path))
    index = json.loads((out / "index.json").read_text())
    assert len(index["runs"]) == 2 and {r["status"] for r in index["runs"]} == {"completed"}
    for r in index["runs"]:
        _rows_complete(out / r["name"], 30)


def _started(out: Path) -> bool:
    return any((d / "config.json").is_file() for d in out.glob("*/"))


def _mid_run(out: Path) -> bool:
    """One run finished (in index.json) and another has a checkpoint."""
    try:
        done = {r["name"] for r in json.loads((out / "index.json").read_text())["runs"]}
    except (OSError, ValueError, KeyError):
        return False
    return bool(done) and any(latest_checkpoint(RunPaths(d)) is not None
                              for d in out.glob("*/") if d.name not in done)


@pytest.mark.parametrize("moment", [_started, _mid_run], ids=["workers-started", "mid-run"])
def test_kill9_of_a_sweep_leaves_nothing_running_and_rerun_completes(tmp_path, moment):
    out, steps = tmp_path / "sweep", 40
    err = open(tmp_path / "err.txt", "w+")
    proc = subprocess.Popen(_sweep(out, steps=steps), stdout=subprocess.DEVNULL,
                            stderr=err, start_new_session=True, env=_ENV)
    deadline = time.monotonic() + CMD_TIMEOUT_S
    while not moment(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    assert proc.poll() is None, "the sweep finished before the moment of the kill"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + ORPHANS_GONE_S
    while _session_pids(proc.pid) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    left = _session_pids(proc.pid)
    for pid in left:     # clean up before failing (only our own session's processes)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left after kill -9 of the sweep: {left}"
    rerun = subprocess.run(_sweep(out, steps=steps, jobs=0), capture_output=True, text=True,
                           env=_ENV, timeout=CMD_TIMEOUT_S)      # inline: one process fewer
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    index = json.loads((out / "index.json").read_text())
    assert len(index["runs"]) == 3
    for r in index["runs"]:
        assert r["status"] in ("completed", "skipped"), r
        _rows_complete(out / r["name"], steps)
        assert r["final_val_loss"] == json.loads(
            (out / r["name"] / "summary.json").read_text())["final_val_loss"]


def test_full_disk_one_line_no_tmp_earlier_files_intact(tmp_path, capsys):
    with tmpfs(tmp_path / "small", "30m") as disk:     # two tiny checkpoints fit, a third not
        run = disk / "run"
        code = main(["train", *_TRAIN, "--steps", "9", "--checkpoint-interval", "3",
                     "--out", str(run)])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert "checkpoints/step_00000009.pt: no space left on device (ENOSPC)" in err
        assert not list(run.rglob("*.tmp"))                       # the failed write is gone
        assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
            "step_00000003.pt", "step_00000006.pt"]
        assert load_checkpoint(run / "checkpoints" / "step_00000006.pt")["step"] == 6
        assert [r["step"] for r in read_metrics(run)] == list(range(9))
        (run / "checkpoints" / "step_00000003.pt").unlink()   # room for one more checkpoint
        code = main(["train", "--resume", "--steps", "7", "--checkpoint-interval", "0",
                     "--quiet", "--out", str(run)])          # resumable from what was kept
        assert code == 0, capsys.readouterr().err


def test_read_only_folder_one_line_per_command(tmp_path, capsys):
    base = tmp_path / "area"
    ctx = tmpfs(base, "64m") if os.geteuid() == 0 else contextlib.nullcontext(base)
    with ctx:
        run = base / "run"
        assert main(["train", *_TRAIN, "--steps", "3", "--out", str(run)]) == 0
        before = (run / "metrics.jsonl").read_bytes()
        capsys.readouterr()
        with read_only(base):
            for argv in (["train", "--resume", "--steps", "5", "--out", str(run)],
                         ["train", *_TRAIN, "--steps", "3", "--out", str(base / "new")],
                         ["sweep", "--out", str(base / "sw"), "--steps", "3"],
                         ["demo", "--quick", "--out", str(base / "demo")],
                         ["reproduce", "--quick", "--claims", "dcasgd", "--out",
                          str(base / "rep")],
                         ["validate", str(run), "--figures", str(base / "figures")]):
                code = main(argv)
                err = capsys.readouterr().err.strip()
                assert code == 2 and len(err.splitlines()) == 1, (argv, err)
                assert str(base) in err and ("EROFS" in err or "EACCES" in err), (argv, err)
        assert (run / "metrics.jsonl").read_bytes() == before


def test_full_disk_stops_a_sweep_with_one_line(tmp_path, capsys):
    """A sweep whose disk fills up mid-run stops (every later run would fail too): one line
    naming the file and ENOSPC, exit 2, no temporary file, index.json (if written) readable."""
    with tmpfs(tmp_path / "small", "400k") as disk:
        out = disk / "sweep"
        argv = _sweep(out, steps=40, jobs=0)[3:]          # in this process: drop python -m
        code = main(argv)
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert str(out) in err and "(ENOSPC)" in err, err
        assert not list(out.rglob("*.tmp"))
        if (out / "index.json").is_file():
            json.loads((out / "index.json").read_text())
