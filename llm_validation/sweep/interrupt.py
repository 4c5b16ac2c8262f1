"""Interrupts of long commands: SIGINT / SIGTERM become one exception, workers are stopped.

A command that trains runs in worker processes (``sweep``, ``reproduce``, ``demo``) must, on
Ctrl-C (SIGINT) or ``kill`` (SIGTERM):

1. cancel the runs still queued,
2. stop the runs in progress within seconds (their checkpoints are written atomically, so the
   newest complete one stays resumable; a truncated last metrics line is dropped on resume),
3. leave no process behind (SIGTERM to every worker, SIGKILL after :data:`STOP_GRACE_S`),
4. exit with ``128 + signal`` (130 for SIGINT, 143 for SIGTERM) and one line saying what
   finished and how to resume.

:func:`raising_signals` turns both signals into :class:`Interrupted` in the main thread;
:func:`stop_processes` is step 3; the sweep runner composes them. Workers ignore SIGINT
(:func:`ignore_sigint`) so that a terminal's Ctrl-C, which reaches the whole process group,
is handled once, by the parent.

A parent killed with SIGKILL cannot stop anything: :func:`die_with_parent`, called first in
every worker, makes the worker die with it (Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``;
everywhere: a daemon thread polling the parent's PID every :data:`PARENT_POLL_S`), so
``kill -9`` of ``sweep`` leaves no worker training into its folders.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from typing import Any, Iterator, Sequence

__all__ = ["Interrupted", "raising_signals", "SignalLatch", "deferred_signals", "stop_processes",
           "ignore_sigint", "die_with_parent", "STOP_GRACE_S", "PARENT_POLL_S", "exit_code"]

#: Seconds a worker gets between SIGTERM and SIGKILL. A training worker has no cleanup to do
#: (checkpoints are atomic renames), so SIGTERM ends it at once; the grace only covers a worker
#: blocked in a system call, and keeps the whole stop well inside the 10 s the CLI promises.
STOP_GRACE_S = 3.0
_POLL_S = 0.05
#: Seconds between a worker's checks that its parent is alive (the fallback where
#: PR_SET_PDEATHSIG is missing; on Linux the kernel signals at once).
PARENT_POLL_S = 1.0
_PR_SET_PDEATHSIG = 1


def exit_code(signum: int) -> int:
    """The shell's convention for a process ended by signal ``signum``: 128 + signum."""
    return 128 + int(signum)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived. ``signum`` the signal, ``detail`` what finished (one line).

    A ``KeyboardInterrupt`` so that code which already cleans up on Ctrl-C (``except
    BaseException``, ``finally``) does the same on SIGTERM."""

    def __init__(self, signum: int, detail: str = "") -> None:
        super().__init__(signum, detail)
        self.signum = int(signum)
        self.detail = detail

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    def __str__(self) -> str:
        return f"interrupted by {self.signal_name}" + (f": {self.detail}" if self.detail else "")


def _raise(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def raising_signals() -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM raise :class:`Interrupted` (main thread only;
    elsewhere Python cannot install handlers and the block runs unchanged). The previous
    handlers are restored on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _raise) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class SignalLatch:
    """The first SIGINT / SIGTERM met inside :func:`deferred_signals` (``signum``; None until
    one arrives): the holder stops at its next safe point (a training step's end, after a
    checkpoint) and raises :class:`Interrupted` itself."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:            # a second signal: stop now, wherever we are
            raise Interrupted(signum)
        self.signum = int(signum)


@contextlib.contextmanager
def deferred_signals() -> Iterator[SignalLatch]:
    """Inside the block the first SIGINT or SIGTERM is recorded in the yielded
    :class:`SignalLatch` instead of raising, so the caller can finish its step and save its
    state; a second one raises :class:`Interrupted` at once. Only a signal that would raise
    anyway is deferred (Python's own Ctrl-C handler, or :func:`raising_signals`'): a process
    that keeps the system's handlers (a sweep worker: SIGINT ignored, SIGTERM ends it at once,
    its parent stopping it) keeps them. Main thread only (elsewhere the latch never fires); the
    previous handlers are restored on exit."""
    latch = SignalLatch()
    if threading.current_thread() is not threading.main_thread():
        yield latch
        return
    old = {}
    for s in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(s) in (_raise, signal.default_int_handler):
            old[s] = signal.signal(s, latch._handle)
    try:
        yield latch
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def ignore_sigint() -> None:
    """In a worker: a terminal's Ctrl-C is the parent's to handle (it stops the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def die_with_parent(parent: int) -> None:
    """In a worker: exit when process ``parent`` (the one that started this worker) dies, even
    by SIGKILL. Linux: the kernel sends SIGKILL at the parent's death (``PR_SET_PDEATHSIG``);
    every platform: a daemon thread polls ``os.getppid()``. A parent already gone by the time
    this runs ends the worker at once."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):   # no prctl: the polling thread below covers it
            pass
    if os.getppid() != parent:
        os._exit(1)

    def poll() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=poll, name="die-with-parent", daemon=True).start()


def stop_processes(procs: Sequence[Any], grace_s: float = STOP_GRACE_S) -> int:
    """SIGTERM every live process of ``procs`` (``multiprocessing.Process``), SIGKILL those still
    alive after ``grace_s`` seconds, reap them all; returns how many were alive."""
    live = [p for p in procs if p.is_alive()]
    for p in live:
        p.terminate()
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(p.is_alive() for p in live):
        time.sleep(_POLL_S)
    for p in live:
        if p.is_alive():
            p.kill()
    for p in live:
        p.join(grace_s)
    return len(live)
