"""Deadlines of a pipeline run and the watchdog that applies them: hang diagnosis apart from
the transport's timeouts, long phases with their own deadline.

Three deadlines (:class:`Deadlines`, from the environment by :meth:`Deadlines.from_env`):

- ``hang_s`` (``DELAYBOUND_PIPE_TIMEOUT_S``, default 30 s): a stage waiting this long on a
  peer that is not inside a declared long phase names that peer as hung; a stage whose own
  loop makes no progress for ``stall_s = 2 * hang_s`` outside any wait and any phase reports
  itself stalled.
- ``collective_s`` (``DELAYBOUND_PIPE_COLLECTIVE_TIMEOUT_S``, default 600 s): the timeout of
  every process group (NCCL's own watchdog, gloo, the rendezvous store) and the backstop of
  every host wait: a transport deadline, never the hang diagnosis.
- ``io_s`` (``DELAYBOUND_PIPE_IO_TIMEOUT_S``, default 1800 s): each long phase (model build
  and data load, checkpoint load, checkpoint save, the wait for every stage's checkpoint
  before ``COMPLETE``, the end of the run) may last this long.

Algorithm (one daemon thread per rank, every :data:`STATUS_EVERY_S`)::

    publish status = {waiting_on, what, since, phase, until, time} under status_key(rank)
    if waiting on peer(s) for longer than hang_s:
        end = the end of the chain of published waits (faults.follow_waits)
        if end is inside a phase with until > now and its status is fresh: keep waiting
        else: report {kind: timeout, peer: end} and exit (WATCHDOG_EXIT)
    elif no heartbeat for the current limit (stall_s; inside a phase: its deadline):
        report {kind: stalled} and exit

A wait on several peers at once (torch's schedules, a data-parallel collective) publishes
their list: it is extended while any of them is in a phase, and reported with no named peer
otherwise (``faults.blame`` then names the rank that stayed silent). Guarantee: a peer hung
outside any phase is named within ``hang_s + STATUS_EVERY_S`` of the start of the wait; a
peer in a phase is waited for until its phase's deadline (then its own watchdog stops it,
``stalled``); a stale status (the peer's watchdog silent for :data:`STALE_S`, e.g. its node
is gone) counts as not busy.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from llm_validation.pipeline.faults import WATCHDOG_EXIT, follow_waits, status_key, write_report

__all__ = ["Deadlines", "Watchdog", "published_wait", "STATUS_EVERY_S", "STALE_S",
           "STALL_FACTOR", "HANG_ENV", "COLLECTIVE_ENV", "IO_ENV"]

HANG_ENV = "DELAYBOUND_PIPE_TIMEOUT_S"
COLLECTIVE_ENV = "DELAYBOUND_PIPE_COLLECTIVE_TIMEOUT_S"
IO_ENV = "DELAYBOUND_PIPE_IO_TIMEOUT_S"
#: How often each stage publishes its status and checks its deadlines (seconds).
STATUS_EVERY_S = 0.5
#: A published status older than this means its rank's watchdog is gone (not busy).
STALE_S = 10 * STATUS_EVERY_S
#: A stage's own loop without a heartbeat for ``STALL_FACTOR * hang_s`` (outside waits and
#: phases) is stalled: longer than the hang deadline, so a wait inside the action is
#: diagnosed (naming the peer) before the stage would blame itself.
STALL_FACTOR = 2.0


@dataclass(frozen=True, kw_only=True)
class Deadlines:
    """The deadlines of a pipeline run (module docstring)."""

    hang_s: float = 30.0
    """A wait on a peer outside any phase this long names the peer as hung (seconds)."""
    collective_s: float = 600.0
    """Process groups' timeout and the backstop of every host wait (seconds)."""
    io_s: float = 1800.0
    """Deadline of each long phase: build, data load, checkpoint load and save (seconds)."""

    def __post_init__(self) -> None:
        for k in ("hang_s", "collective_s", "io_s"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"Deadlines.{k}={v!r} must be a number > 0")
        if self.collective_s < self.hang_s:
            raise ValueError(f"Deadlines.collective_s={self.collective_s} must be >= "
                             f"hang_s={self.hang_s} (the transport backstop comes last)")

    @property
    def stall_s(self) -> float:
        """No heartbeat this long outside waits and phases: the stage itself is stalled."""
        return STALL_FACTOR * self.hang_s

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Deadlines":
        """From ``DELAYBOUND_PIPE_TIMEOUT_S`` / ``..._COLLECTIVE_TIMEOUT_S`` /
        ``..._IO_TIMEOUT_S`` (unset: the defaults); a bad value raises a one-line error."""
        env = os.environ if env is None else env
        kw = {}
        for key, field in ((HANG_ENV, "hang_s"), (COLLECTIVE_ENV, "collective_s"),
                           (IO_ENV, "io_s")):
            if env.get(key):
                try:
                    kw[field] = float(env[key])
                except ValueError:
                    raise ValueError(f"{key}={env[key]!r} must be a number of seconds") from None
        if "hang_s" in kw and "collective_s" not in kw:   # a long hang deadline lifts the backstop
            kw["collective_s"] = max(cls.collective_s, kw["hang_s"])
        try:
            return cls(**kw)
        except ValueError as exc:
            raise ValueError(f"{exc} (from {HANG_ENV}, {COLLECTIVE_ENV}, {IO_ENV})") from None


@contextmanager
def published_wait(status: dict | None, peers: list[int], what: str) -> Iterator[None]:
    """Around a host wait on several ranks (a collective): the rank's ``status`` publishes a
    wait on ``peers`` (``what``: the message of a diagnosis), so its watchdog extends the wait
    while any of them is in a long phase and reports a hang otherwise, as for one p2p peer
    (re-entrant: a nested wait restores the outer one). No ``status`` or no peers: nothing."""
    if status is None or not peers:
        yield
        return
    saved = {k: status.get(k) for k in ("waiting_on", "what", "since")}
    status.update(what=what, since=time.time())
    status["waiting_on"] = list(peers)
    try:
        yield
    finally:
        status.update(saved)


class Watchdog:
    """One rank's watchdog (module docstring): :meth:`beat` once per action, :meth:`phase`
    around long phases, :meth:`start` the thread (:meth:`check` is one poll, for tests).
    ``status``: the dict the rank's waits update (``waiting_on``: a rank, a list of ranks or
    None; ``what``; ``since``: wall-clock start of the wait); ``label(rank)`` names ranks."""

    def __init__(self, run_dir: str, rank: int, deadlines: Deadlines, store: Any,
                 status: dict, world: int, label: Callable[[int], str] = lambda r: f"stage {r}",
                 exit_fn: Callable[[int], None] = os._exit) -> None:
        self.run_dir, self.rank, self.deadlines = run_dir, rank, deadlines
        self.store, self.status, self.world, self.label = store, status, world, label
        self.exit_fn = exit_fn
        self.limit = deadlines.stall_s
        self.last = time.monotonic()
        status.setdefault("waiting_on", None)
        status.setdefault("phase", None)
        status.setdefault("until", None)

    def beat(self) -> None:
        """Proof of progress of the rank's loop."""
        self.last = time.monotonic()

    @contextmanager
    def phase(self, name: str, limit_s: float | None = None) -> Iterator[None]:
        """A long phase (``limit_s``, default ``io_s``): the rank's own limit becomes the
        phase's deadline, and peers waiting on it keep waiting until then."""
        limit = self.deadlines.io_s if limit_s is None else float(limit_s)
        saved = (self.limit, self.status.get("phase"), self.status.get("until"))
        self.limit = limit
        self.status.update(phase=name, until=time.time() + limit)
        self.beat()
        self._publish()
        try:
            yield
        finally:
            self.limit = saved[0]
            self.status.update(phase=saved[1], until=saved[2])
            self.beat()

    def start(self) -> "Watchdog":
        """Start the daemon thread (returns self)."""
        def loop() -> None:
            while True:
                time.sleep(min(STATUS_EVERY_S, self.deadlines.hang_s / 4))
                self.check()

        threading.Thread(target=loop, name="pipeline-watchdog", daemon=True).start()
        return self

    def _publish(self) -> None:
        st = self.status
        try:
            self.store.set(status_key(self.rank), json.dumps(
                {"waiting_on": st.get("waiting_on"), "what": st.get("what"),
                 "since": st.get("since"), "phase": st.get("phase"), "until": st.get("until"),
                 "time": time.time()}))
        except Exception:  # pragma: no cover - the store is gone: the run is ending
            pass

    def busy(self, rank: int, now: float) -> bool:
        """Whether ``rank`` is inside a phase that has not reached its deadline (by its fresh
        published status)."""
        try:
            st = json.loads(self.store.get(status_key(rank)).decode())
        except Exception:
            return False
        return (st.get("phase") is not None and now - float(st.get("time", 0)) <= STALE_S
                and float(st.get("until") or 0) > now)

    def check(self) -> str | None:
        """One poll: publish, then apply the deadlines; returns what fired (``timeout`` or
        ``stalled``, after reporting and calling ``exit_fn``) or None."""
        self._publish()
        now, st = time.time(), self.status
        peer = st.get("waiting_on")
        if peer is not None:
            waited = now - float(st.get("since") or now)
            if waited <= self.deadlines.hang_s:
                return None
            peers = list(peer) if isinstance(peer, (list, tuple)) else [peer]
            if len(peers) == 1:
                end, chain = follow_waits(self.store, peers[0], self.world)
                if self.busy(end, now):
                    return None
                via = (f" (chain of waits {' -> '.join(map(str, chain))})"
                       if len(chain) > 1 else "")
                culprit, why = end, f"{self.label(end)} is silent outside any phase{via}"
            else:
                if any(self.busy(r, now) for r in peers):
                    return None
                culprit, why = None, f"none of ranks {peers} is in a long phase"
            msg = (f"{self.label(self.rank)} timed out after {waited:.1f} s (hang deadline "
                   f"{self.deadlines.hang_s:g} s) waiting for {st.get('what')}: {why}")
            return self._fire("timeout", culprit, msg)
        idle = time.monotonic() - self.last
        if idle > self.limit:
            where = f" in phase {st['phase']}" if st.get("phase") else ""
            msg = (f"{self.label(self.rank)} made no progress for {idle:.0f} s{where} "
                   f"(watchdog, limit {self.limit:g} s)")
            return self._fire("stalled", None, msg)
        return None

    def _fire(self, kind: str, peer: int | None, msg: str) -> str:
        write_report(self.run_dir, self.rank, {"stage": self.rank, "peer": peer, "kind": kind,
                                               "message": msg, "time": time.time()})
        print(msg, file=sys.stderr, flush=True)
        self.exit_fn(WATCHDOG_EXIT)
        return kind
