"""`delaybound train` can always continue: time-based and interrupt checkpoints, the exact
command that continues an interrupted run, and one answer per state of the --out folder (empty,
finished, unfinished with and without a checkpoint, another run's), none contradicting another:
the flag an error names is the one that works."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from delaybound.cli import build_parser, main
from delaybound.cmd_train import config_from_args
from llm_validation.rundir import RunPaths, latest_checkpoint, read_metrics
from llm_validation.run import run

FLAGS = ["--preset", "tiny", "--seq-len", "16", "--batch-size", "2", "--eval-batches", "1",
         "--stats-interval", "0", "--eval-interval", "0", "--steps", "4", "--quiet"]
#: Seconds the interrupted command may take to exit (one tiny step plus a checkpoint).
EXIT_WITHIN_S = 20.0


def _cfg(out: Path, *extra: str):
    return config_from_args(build_parser().parse_args(["train", *FLAGS, "--out", str(out),
                                                       *extra]))


class _Stop(KeyboardInterrupt):
    pass


def _stopped(out: Path, at: int, *extra: str) -> None:
    """The run of FLAGS stopped after step ``at`` (a crash: no interrupt handling of its own)."""
    def stop(step, row):
        if step == at:
            raise _Stop()
    with pytest.raises(_Stop):
        run(_cfg(out, *extra), progress=False, callback=stop)


def _train(capsys, out: Path, *extra: str) -> tuple[int, str]:
    code = main(["train", *FLAGS, "--out", str(out), *extra])
    return code, capsys.readouterr().err


def test_empty_folder_starts_and_resume_there_names_the_flag_to_drop(tmp_path, capsys):
    code, err = _train(capsys, tmp_path / "new", "--resume")
    assert code == 2 and "drop --resume" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "new").exists()
    code, err = _train(capsys, tmp_path / "new")            # dropping it works
    assert code == 0 and err == ""


def test_a_finished_run_names_the_flags_that_extend_it(tmp_path, capsys):
    out = tmp_path / "fin"
    assert _train(capsys, out)[0] == 0
    code, err = _train(capsys, out)
    assert code == 2 and "holds a finished run (4 steps" in err
    assert "--resume --steps M with M > 4" in err
    code, err = _train(capsys, out, "--resume")               # the same length: same answer
    assert code == 2 and "--resume --steps M with M > 4" in err
    code, err = main(["train", "--resume", "--steps", "6", "--out", str(out), "--quiet"]), \
        capsys.readouterr().err
    assert code == 0 and "extending the finished run" in err and "to 6" in err
    assert sum(r["kind"] == "train" for r in read_metrics(out)) == 6


def test_an_unfinished_run_with_a_checkpoint_continues_with_or_without_resume(tmp_path, capsys):
    whole = tmp_path / "whole"
    assert _train(capsys, whole)[0] == 0
    for i, extra in enumerate(([], ["--resume"])):
        out = tmp_path / f"cut{i}"
        _stopped(out, 1, "--checkpoint-interval", "1")
        assert latest_checkpoint(RunPaths(out)).name == "step_00000002.pt"
        code, err = _train(capsys, out, *extra)
        assert code == 0 and len(err.strip().splitlines()) == 1
        assert f"continuing the unfinished run in {out} from its checkpoint at step 2 of 4" in err
        # the continued run is the uninterrupted one, row for row (bitwise on CPU)
        assert (out / "metrics.jsonl").read_text() == (whole / "metrics.jsonl").read_text()


def test_an_unfinished_run_without_a_checkpoint_starts_over_with_or_without_resume(tmp_path,
                                                                                   capsys):
    for i, extra in enumerate(([], ["--resume"])):
        out = tmp_path / f"early{i}"
        _stopped(out, 1, "--checkpoint-minutes", "0")
        assert latest_checkpoint(RunPaths(out)) is None
        code, err = _train(capsys, out, *extra)
        assert code == 0 and "over from step 0" in err
        assert sum(r["kind"] == "train" for r in read_metrics(out)) == 4


def test_another_runs_folder_names_resume_which_continues_that_run(tmp_path, capsys):
    out = tmp_path / "theirs"
    _stopped(out, 1, "--checkpoint-interval", "1")
    code, err = _train(capsys, out, "--lr", "0.05")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "holds another run (optim.lr differs" in err and "continue that run with --resume" in err
    code = main(["train", "--resume", "--out", str(out), "--quiet"])
    assert code == 0 and "continuing the unfinished run" in capsys.readouterr().err


def test_time_based_checkpoints_need_no_step_interval(tmp_path):
    """checkpoint_interval 0 (end only) but a wall-clock period shorter than a step: every step
    is checkpointed; with the period off there is none before the end."""
    _stopped(tmp_path / "timed", 2, "--checkpoint-minutes", "1e-9")
    assert latest_checkpoint(RunPaths(tmp_path / "timed")).name == "step_00000003.pt"
    _stopped(tmp_path / "untimed", 2, "--checkpoint-minutes", "0")
    assert latest_checkpoint(RunPaths(tmp_path / "untimed")) is None


def test_default_config_checkpoints_every_ten_minutes():
    from llm_validation.config import RunConfig
    assert RunConfig().checkpoint_minutes == 10.0 and RunConfig().checkpoint_interval == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_saves_a_checkpoint_and_prints_the_command_that_continues(tmp_path, sig):
    out = tmp_path / "long run"                   # a space: the command must quote it
    cmd = [sys.executable, "-m", "delaybound", "train", *FLAGS[:-3], "--steps", "300",
           "--checkpoint-minutes", "0", "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:           # the loop has written rows: mid-run
        m = out / "metrics.jsonl"
        if m.is_file() and m.read_text().count("\n") >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=EXIT_WITHIN_S)
    assert proc.returncode == 128 + sig
    line = err.strip().splitlines()[-1]
    name = signal.Signals(sig).name
    assert line.startswith(f"delaybound train: interrupted by {name} at step ")
    assert "checkpoint saved" in line
    command = line.split("continue with: ")[1]
    assert command == f"delaybound train --resume --out {shlex.quote(str(out))}"
    step = int(line.split(" at step ")[1].split()[0])
    assert latest_checkpoint(RunPaths(out)).name == f"step_{step:08d}.pt"
    # the printed command continues it (here to a shorter end, to keep the test fast)
    args = shlex.split(command)[1:] + ["--steps", str(step + 2), "--quiet"]
    assert main(args) == 0
    assert sum(r["kind"] == "train" for r in read_metrics(out)) == step + 2
