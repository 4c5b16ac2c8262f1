"""The watchdog's rules as one poll at a time (no processes, no threads): hang diagnosis after
the hang deadline naming the end of the chain of waits, waits extended while that stage is in
a long phase, stalls outside phases, deadlines from the environment; and the grouped-mode
reaping of sends with the transport faked."""

from __future__ import annotations

import json
import time

import pytest
import torch

from llm_validation.pipeline import comm
from llm_validation.pipeline.faults import WATCHDOG_EXIT, read_reports, status_key
from llm_validation.pipeline.watchdog import STALE_S, Deadlines, Watchdog

HANG_S = 1.0


class Store:
    """The rendezvous store's get/set, in memory."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def set(self, key: str, value: str) -> None:
        self.data[key] = value.encode() if isinstance(value, str) else value

    def get(self, key: str) -> bytes:
        return self.data[key]

    def publish(self, rank: int, **status) -> None:
        self.set(status_key(rank), json.dumps({"waiting_on": None, "phase": None, "until": None,
                                               "time": time.time(), **status}))


def _dog(tmp_path, store, status, rank=0):
    exits: list[int] = []
    dog = Watchdog(str(tmp_path), rank, Deadlines(hang_s=HANG_S, collective_s=60, io_s=60),
                   store, status, world=4, exit_fn=exits.append)
    return dog, exits


def _waiting(peer, for_s: float) -> dict:
    return {"waiting_on": peer, "what": "the gradient of microbatch 3 from stage 1",
            "since": time.time() - for_s}


def test_a_hung_peer_is_named_after_the_hang_deadline_through_the_chain(tmp_path):
    """Guards issue 31, point 2: a hang is still reported within the configured deadline,
    naming the hung stage at the end of the chain of waits (stage 0 -> 1 -> 2)."""
    store = Store()
    store.publish(1, waiting_on=2)
    store.publish(2)
    dog, exits = _dog(tmp_path, store, _waiting(1, 0.5 * HANG_S))
    assert dog.check() is None and exits == []                 # within the deadline
    dog.status["since"] = time.time() - 1.5 * HANG_S
    assert dog.check() == "timeout" and exits == [WATCHDOG_EXIT]
    report = read_reports(str(tmp_path), 4)[0]
    assert report["kind"] == "timeout" and report["peer"] == 2
    assert "chain of waits 1 -> 2" in report["message"]


def test_a_peer_inside_a_long_phase_is_waited_for_until_its_deadline(tmp_path):
    """Guards issue 31, point 2: a neighbour saving a checkpoint (a phase with its own
    deadline) is not a hang, however long past the hang deadline; once its phase's deadline
    has passed, or its status is stale (its node gone), it is."""
    store = Store()
    store.publish(1, phase="save", until=time.time() + 30)
    dog, exits = _dog(tmp_path, store, _waiting(1, 10 * HANG_S))
    assert dog.check() is None and exits == []
    store.publish(1, phase="save", until=time.time() - 1)      # past its own deadline
    assert dog.check() == "timeout"
    store.publish(1, phase="save", until=time.time() + 30, time=time.time() - 2 * STALE_S)
    assert dog.check() == "timeout" and len(exits) == 2


def test_several_peers_and_own_stalls(tmp_path):
    """A wait on a whole row (torch's schedules) is extended while any of its ranks is in a
    phase, else reported with no named peer; the stage's own loop stalls after 2 x hang_s
    outside phases, and inside a phase only after the phase's deadline."""
    store = Store()
    store.publish(1)
    store.publish(2, phase="build", until=time.time() + 30)
    dog, exits = _dog(tmp_path, store, _waiting([0, 1, 2], 3 * HANG_S))
    assert dog.check() is None
    store.publish(2)
    assert dog.check() == "timeout" and read_reports(str(tmp_path), 4)[0]["peer"] is None
    dog.status.update(waiting_on=None)
    dog.last -= 1.5 * HANG_S
    assert dog.check() is None                                 # under 2 x hang_s
    dog.last -= 1.0 * HANG_S
    assert dog.check() == "stalled"
    with dog.phase("save", limit_s=10 * HANG_S):
        dog.last -= 5 * HANG_S
        assert dog.check() is None
        assert json.loads(store.get(status_key(0)))["phase"] == "save"
    assert dog.limit == 2 * HANG_S and dog.status["phase"] is None


def test_deadlines_from_the_environment():
    d = Deadlines.from_env({})
    assert (d.hang_s, d.collective_s, d.io_s, d.stall_s) == (30.0, 600.0, 1800.0, 60.0)
    d = Deadlines.from_env({"DELAYBOUND_PIPE_TIMEOUT_S": "900"})
    assert d.collective_s == 900.0                       # the backstop is never the shorter
    with pytest.raises(ValueError, match="DELAYBOUND_PIPE_IO_TIMEOUT_S"):
        Deadlines.from_env({"DELAYBOUND_PIPE_IO_TIMEOUT_S": "-1"})
    with pytest.raises(ValueError, match="number of seconds"):
        Deadlines.from_env({"DELAYBOUND_PIPE_TIMEOUT_S": "soon"})


class _Work:
    """A gloo send: never reports completion until waited."""

    def __init__(self) -> None:
        self.waited = False

    def is_completed(self) -> bool:
        return False

    def wait(self, timeout=None) -> None:
        self.waited = True


@pytest.mark.parametrize("grouped", [True, False])
def test_sends_are_reaped_after_the_lag(monkeypatch, grouped):
    """Guards issue 31, point 1 (unit): the sends posted before flush n are waited for and
    dropped at flush n + REAP_LAG_FLUSHES (the executor flushes twice per STEP: two steps
    later), so 50 steps leave at most that many flushes' sends pending (before: every send of
    the run kept until its end; grouped mode is the NCCL path, the other one gloo's, where a
    send never reports completion unwaited). A step here: 3 sends, two flushes."""
    works: list[_Work] = []

    def fake_post(ops):
        works.append(_Work())
        return comm._AllWorks([works[-1]])

    monkeypatch.setattr(comm, "post_batch", fake_post)
    monkeypatch.setattr(comm.dist, "P2POp", lambda *a, **k: None)
    link = comm.StageLink(stage=1, stages=2, device=torch.device("cpu"), act_shape=(2, 3),
                          act_dtype=torch.float32, timeout_s=5.0, grouped=grouped)
    per_flush = 3 if grouped else 1         # grouped: one posted batch per flush
    for _ in range(50):
        for _ in range(3):
            link.send_gradient(torch.zeros(2, 3), 0)
        link.flush()
        link.flush()
    lag_steps = comm.REAP_LAG_FLUSHES // 2
    assert link.pending_sends <= link.sends_peak <= 3 * (lag_steps + 1)
    assert link.pending_sends >= 3 * (lag_steps - 1)        # the lag, not an early wait
    waited = sum(w.waited for w in works)
    assert waited == len(works) - link.pending_sends // per_flush
    assert not any(w.waited for w in works[len(works) - link.pending_sends // per_flush:])


def test_data_parallel_collectives_publish_a_wait_on_the_other_replicas(monkeypatch):
    """Guards issue 31, point 2 (D > 1 detects hangs as D = 1 does): during a collective of
    the data-parallel group the rank publishes a wait on the other replicas (before: nothing,
    so a rank waiting on a hung replica was reported as stalled itself), restored after."""
    from types import SimpleNamespace

    from llm_validation.pipeline.replicas import Replicas

    mesh = SimpleNamespace(replicas=3, replica=1, rank=5, dp_ranks=(1, 5, 9), dp_group=None,
                           dp_control=None)
    reps = Replicas(mesh)
    reps.status = {"waiting_on": None}
    seen = []

    def fake_all_gather(out, mine, group=None):
        seen.append(dict(reps.status))
        for o in out:
            o.copy_(mine)

    monkeypatch.setattr("llm_validation.pipeline.replicas.dist.all_gather", fake_all_gather)
    reps.check_identical([torch.ones(3)], "weights")
    assert seen[0]["waiting_on"] == [1, 9] and "replicas" in seen[0]["what"]
    assert reps.status["waiting_on"] is None
