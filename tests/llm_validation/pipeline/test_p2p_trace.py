"""Every point-to-point message is posted with the same kind (batched) by its sender and its
receiver: the NCCL rule that gloo cannot enforce, checked on gloo by recording the kinds
(:mod:`llm_validation.pipeline.p2p_trace`)."""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from llm_validation.pipeline import p2p_trace
from llm_validation.run import run as launch
from tests.llm_validation.pipeline.support import dp_cfgs, pipe_cfg, small_corpus


pytestmark = pytest.mark.usefixtures("pipeline_env")


def _kinds_by_group(traces: dict) -> dict[str, dict[str, int]]:
    """``{group: {kind: count}}`` over every rank's records (the failure message's summary)."""
    out: dict[str, Counter] = {}
    for recs in traces.values():
        for r in recs:
            out.setdefault(r["group"], Counter())[r["kind"]] += 1
    return {g: dict(k) for g, k in out.items()}


def _rec(op: str, kind: str, peer: int, group: str = "g") -> dict:
    return {"op": op, "kind": kind, "peer": peer, "group": group, "backend": "gloo", "numel": 4}


def test_mismatches_pair_the_nth_send_with_the_nth_receive():
    ok = {0: [_rec("send", "batched", 1), _rec("send", "batched", 1)],
          1: [_rec("recv", "batched", 0), _rec("recv", "batched", 0)]}
    assert p2p_trace.mismatches(ok) == []
    bad = copy.deepcopy(ok)
    bad[0][1]["kind"] = "plain"
    assert p2p_trace.mismatches(bad) == [
        "message 1 rank 0 -> rank 1 on group g (gloo): sent plain, received batched"]
    other_group = copy.deepcopy(ok)
    other_group[1][1]["group"] = "h"          # the same pair on another group is another stream
    assert len(p2p_trace.mismatches(other_group)) == 2
    assert _kinds_by_group(ok) == {"g": {"batched": 4}}


def _check_run(cfg, tmp_path, monkeypatch) -> dict:
    trace = tmp_path / "trace"
    monkeypatch.setenv(p2p_trace.TRACE_ENV, str(trace))
    assert launch(cfg).status == "completed"
    traces = p2p_trace.read_traces(trace)
    world = cfg.run.stages * cfg.run.data_parallel
    assert sorted(traces) == list(range(world))
    assert p2p_trace.mismatches(traces) == []
    # one discipline: every op of our runtime goes through batch_isend_irecv (torch's
    # schedules post plain ops for one-sided batches: paired kind with kind, as checked above)
    ours = {r["kind"] for recs in traces.values() for r in recs if r["origin"] == "delaybound"}
    assert ours == {p2p_trace.BATCHED}, _kinds_by_group(traces)
    # the check would catch a single op of ours switched back to a plain isend
    flipped = copy.deepcopy(traces)
    first_send = next(r for r in flipped[0] if r["op"] == "send" and r["origin"] == "delaybound")
    first_send["kind"] = p2p_trace.PLAIN
    assert len(p2p_trace.mismatches(flipped)) == 1
    return traces


@pytest.mark.parametrize("grouped", ["0", "1"])
def test_2bw_posts_every_message_with_one_kind(tmp_path, monkeypatch, grouped):
    """2BW with its side passes and statistics messages, in the NCCL (grouped) mode and not."""
    monkeypatch.setenv("DELAYBOUND_PIPE_GROUPED", grouped)
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, M=2, steps=4)
    traces = _check_run(cfg, tmp_path, monkeypatch)
    assert sum(len(r) for r in traces.values()) > 40


def test_1f1b_x_data_parallel_posts_every_message_with_one_kind(tmp_path, monkeypatch):
    """1F1B (torch's schedule) on a P2 x D2 mesh: torch's own p2p, our side passes, the
    statistics messages."""
    monkeypatch.setenv("DELAYBOUND_PIPE_GROUPED", "1")
    corpus = small_corpus(tmp_path)
    cfg, _ = dp_cfgs(tmp_path, corpus, pipeline="1f1b", P=2, D=2, steps=4)
    _check_run(cfg, tmp_path, monkeypatch)
