"""One writer per folder: an exclusive ``fcntl.flock`` on ``FOLDER/.lock``.

Every command that writes a run folder (``train``, a sweep worker, the demo) or a sweep folder
(``sweep``, ``reproduce``, ``demo``) takes the folder's lock before it writes anything and holds
it until it is done. The lock is advisory and belongs to the open file: the operating system
releases it when the holder exits, however it exits (``kill -9`` included), so a stale lock
(holder dead) is simply taken over by the next writer, with no clean-up step and no PID file
to trust. The holder's PID is written into the lock file only to name it in the refusal:

    <folder> is being written by process 12345 (another run/sweep on the same --out); wait for
    it to finish or choose another --out

:class:`FolderBusy` is a ``ValueError``, so the CLI prints that one line and exits 2.

Within one process the lock is re-entrant (``reproduce`` holds its ``--out`` while the sweeps
it runs take their own folders; a nested take of the same folder only counts). Locks are not
inherited by spawned workers (the descriptor is close-on-exec); a worker takes the lock of the
run folder it writes.

Assumption: a local or NFSv4 filesystem (flock is emulated with POSIX locks on NFS since Linux
2.6.12; on filesystems without locking, e.g. some FUSE mounts, ``flock`` raises ``OSError``,
which is reported, never ignored).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator

__all__ = ["LOCK_FILE", "FolderBusy", "folder_lock", "lock_holder"]

#: The lock file's name inside the folder it guards (hidden: listings of runs ignore it).
LOCK_FILE = ".lock"
#: How long a refused writer waits for the holder to have written its PID (the holder writes
#: it right after taking the lock; the window is microseconds, this bounds a stalled disk).
_PID_WAIT_S = 0.5

# resolved folder -> [fd, depth, owner pid]: the locks this process holds
_HELD: dict[str, list[int]] = {}


class FolderBusy(ValueError):
    """The folder's lock is held by another live process (``pid``; None when unreadable)."""

    def __init__(self, folder: Path, pid: int | None, what: str) -> None:
        who = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"{folder} is being written by {who} (another {what} on the same "
                         "folder); wait for it to finish or choose another --out")
        self.folder, self.pid = folder, pid


def _read_pid(fd: int) -> int | None:
    deadline = time.monotonic() + _PID_WAIT_S
    while True:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return int(text)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)


def lock_holder(folder: str | Path) -> int | None:
    """The PID holding ``folder``'s lock; None when nobody holds it (or there is no lock file);
    -1 when it is held but the PID cannot be read. Read-only: takes a shared lock for an
    instant, never creates the file."""
    path = Path(folder) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(fd) or -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextlib.contextmanager
def folder_lock(folder: str | Path, what: str = "run") -> Iterator[Path]:
    """Hold ``folder``'s exclusive lock inside the block (creating the folder and its lock
    file); raise :class:`FolderBusy` at once when another live process holds it. ``what``
    names the kind of writer in the refusal (``run``, ``sweep``). Yields the lock file."""
    folder = Path(folder)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    key = str(folder.resolve())
    held = _HELD.get(key)
    if held is not None and held[2] == os.getpid():      # re-entrant within this process
        held[1] += 1
        try:
            yield folder / LOCK_FILE
        finally:
            held[1] -= 1
        return
    path = folder / LOCK_FILE
    fd = _take(path, folder, what)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    except OSError:        # a full disk cannot stop the lock; only the refusal's PID is lost
        pass
    _HELD[key] = [fd, 1, os.getpid()]
    try:
        yield path
    finally:
        _HELD.pop(key, None)
        try:   # a folder this lock created and nothing else wrote (a refused --resume typo)
            if created and [p.name for p in folder.iterdir()] == [LOCK_FILE]:
                path.unlink()          # unlinked while held: a taker re-checks the inode
                folder.rmdir()
        except OSError:
            pass
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _take(path: Path, folder: Path, what: str) -> int:
    """Open ``path`` and take its exclusive lock without waiting; retried when the file was
    unlinked or replaced between the open and the lock (the inode locked must be the one the
    path names, else two writers could each hold a different file)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            busy = exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
            pid = _read_pid(fd) if busy else None
            os.close(fd)
            if busy:
                raise FolderBusy(folder, pid, what) from None
            raise
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)
        path.parent.mkdir(parents=True, exist_ok=True)
