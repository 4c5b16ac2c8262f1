"""Fast unit tests of the launcher's pure parts (fault parsing, blame, messages, stage names)."""

from __future__ import annotations

import math
import signal

import pytest

from tests.llm_validation.pipeline.support import pipe_cfg

from llm_validation.pipeline.comm import decode_message, encode_message
from llm_validation.pipeline.faults import FaultSpec, blame, follow_waits, parse_fault
from llm_validation.pipeline.stage import (
    stage_param_names,
)


def test_parse_fault():
    assert parse_fault(None) is None and parse_fault("") is None
    assert parse_fault("stage=1,step=3,kind=die") == FaultSpec(stage=1, step=3, kind="die")
    for bad in ("stage=1", "stage=x,step=1,kind=die", "stage=1,step=1,kind=explode"):
        with pytest.raises(ValueError):
            parse_fault(bad)


def test_blame_prefers_a_dead_stage_then_own_errors_then_the_silent_peer():
    t = 100.0
    died = blame({0: 1, 1: -signal.SIGKILL, 2: 1}, set(),
                  {0: {"stage": 0, "peer": 1, "kind": "lost", "message": "m", "time": t}})
    assert died == (1, "stage 1 died (killed by signal SIGKILL)")
    own = blame({0: 1, 1: 1}, {1}, {0: {"stage": 0, "peer": None, "kind": "error",
                                        "message": "boom", "time": t}})
    assert own[0] == 0 and "boom" in own[1]
    hung = blame({0: 1, 1: -signal.SIGTERM, 2: 1}, {1},
                  {0: {"stage": 0, "peer": 1, "kind": "timeout", "message": "a", "time": t + 1},
                   2: {"stage": 2, "peer": 1, "kind": "timeout", "message": "b", "time": t}})
    assert hung[0] == 1 and "hung" in hung[1] and hung[1].endswith("b")
    unnamed = blame({0: 1, 1: -signal.SIGTERM}, {1},
                     {0: {"stage": 0, "peer": None, "kind": "timeout", "message": "c", "time": t}})
    assert unnamed[0] == 1


def test_follow_waits_walks_to_the_stage_waiting_on_nobody():
    import json as _json

    class Store:
        def __init__(self, waits):
            self.data = {f"delaybound/status/{r}": _json.dumps({"waiting_on": w}).encode()
                         for r, w in waits.items()}

        def get(self, key):
            return self.data[key]

    assert follow_waits(Store({0: 1, 1: 2, 2: None}), 1, 3) == (2, [1, 2])
    assert follow_waits(Store({1: None}), 1, 3) == (1, [1])
    assert follow_waits(Store({1: 2, 2: 1}), 1, 3) == (2, [1, 2])      # a cycle stops
    assert follow_waits(Store({}), 1, 3) == (1, [1])                   # no status published


def test_messages_round_trip_floats_exactly():
    msg = {"step": 3, "partials": {"a": 0.1 + 0.2, "max_b": 1e-300}, "loss": math.nan,
           "val_loss": None}
    back = decode_message(encode_message(msg))
    assert back["partials"] == msg["partials"] and math.isnan(back["loss"])
    with pytest.raises(ValueError):
        encode_message({"x": "y" * 20000})


def test_stage_param_names_cover_the_model(tmp_path):
    from llm_validation.training.model import Transformer

    cfg = pipe_cfg(tmp_path, "unused", pipeline="2bw", P=3, M=3)
    model = Transformer(cfg.model)
    full = set(dict(model.named_parameters()))
    seen: list[str] = []
    for s, stage in enumerate(model.split(3)):
        names = [n for n, _ in stage.named_parameters()]
        seen.extend(stage_param_names(cfg, s, 3, names).values())
    assert sorted(seen) == sorted(full)
