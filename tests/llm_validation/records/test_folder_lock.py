"""One writer per folder (llm_validation.records.folder_lock): a live holder is named and refused, a
dead holder's lock is taken over, the lock is re-entrant within a process, and a folder the
lock alone created is removed again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from llm_validation.records.folder_lock import LOCK_FILE, FolderBusy, folder_lock, lock_holder

_HOLD = ("import sys, time; from llm_validation.records.folder_lock import folder_lock\n"
         "with folder_lock(sys.argv[1], 'run'):\n"
         "    print('held', flush=True); time.sleep(600)\n")


def _holder(folder: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(folder)], stdout=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_live_holder_is_named_and_dead_holder_is_taken_over(tmp_path):
    folder = tmp_path / "run"
    proc = _holder(folder)
    try:
        assert lock_holder(folder) == proc.pid
        with pytest.raises(FolderBusy, match=f"being written by process {proc.pid}"):
            with folder_lock(folder, "run"):
                pass
    finally:
        proc.send_signal(signal.SIGKILL)   # as kill -9: no clean-up, the lock file stays
        proc.wait()
    assert (folder / LOCK_FILE).is_file() and lock_holder(folder) is None
    with folder_lock(folder, "run"):       # stale lock: taken over, this PID recorded
        assert lock_holder(folder) == os.getpid()
        assert (folder / LOCK_FILE).read_text().strip() == str(os.getpid())


def test_reentrant_within_a_process_and_released_after(tmp_path):
    with folder_lock(tmp_path / "a", "reproduce"):
        with folder_lock(tmp_path / "a", "sweep"):     # nested take: counted, not refused
            (tmp_path / "a" / "x").write_text("1")
        proc_check = subprocess.run(
            [sys.executable, "-c", "import sys; from llm_validation.records.folder_lock import "
             "folder_lock\ntry:\n    with folder_lock(sys.argv[1]): pass\nexcept ValueError "
             "as e:\n    print(e)", str(tmp_path / "a")],
            capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        assert f"process {os.getpid()}" in proc_check.stdout   # still held after the inner exit
    with folder_lock(tmp_path / "a"):                           # released: free again
        pass


def test_folder_created_only_for_the_lock_is_removed(tmp_path):
    with folder_lock(tmp_path / "typo"):
        pass
    assert not (tmp_path / "typo").exists()
    with folder_lock(tmp_path / "kept"):
        (tmp_path / "kept" / "config.json").write_text("{}")
    assert (tmp_path / "kept" / "config.json").is_file()
