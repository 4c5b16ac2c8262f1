"""Fast unit tests of the launcher's pure parts (fault parsing, blame, messages, stage names)."""

from __future__ import annotations

import math
import signal

import pytest

from tests.llm_validation.pipeline.support import pipe_cfg

from llm_validation.pipeline.comm import (MESSAGE_BYTES, decode_message, encode_message,
                                          message_chunks)
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


def test_messages_of_any_size_go_as_chunks():
    """Guards issue 31, point 5 (unit): a message larger than one chunk (before: ValueError
    beyond 16 KB) is cut into MESSAGE_BYTES chunks whose first announces the rest."""
    big = {"rows": [{"step": i, "x": 0.1 * i, "s": "y" * 500} for i in range(200)]}
    chunks = encode_message(big)
    assert len(chunks) > 1 and all(c.numel() == MESSAGE_BYTES for c in chunks)
    assert message_chunks(chunks[0]) == len(chunks)
    assert decode_message(chunks) == big
    with pytest.raises(ValueError, match="received"):
        decode_message(chunks[:1])
    assert len(encode_message({})) == 1


def test_ranks_agree_on_the_start_step_or_all_refuse(tmp_path):
    """Guards issue 31, point 4 (the logic; under torchrun it runs after a broadcast and a
    gather on the control group): rank 0's step is taken when every rank can load it, else
    every rank refuses with one line naming those that cannot."""
    from llm_validation.pipeline.checkpoint import COMPLETE, ckpt_dir, loadable
    from llm_validation.pipeline.launch import settle_start
    from llm_validation.rundir import RunPaths

    paths = RunPaths(tmp_path / "run")
    assert loadable(paths, 0) is None
    why = loadable(paths, 4)
    assert why is not None and COMPLETE in why
    (ckpt_dir(paths, 4)).mkdir(parents=True)
    (ckpt_dir(paths, 4) / COMPLETE).write_text("2 1\n")
    assert "damaged" in loadable(paths, 4)          # marker but no stage metadata
    assert settle_start(4, [None, None, None]) == 4
    with pytest.raises(RuntimeError) as info:
        settle_start(4, [None, "no COMPLETE marker here", None, "damaged"])
    msg = str(info.value)
    assert "\n" not in msg and "2 of 4 ranks" in msg and "rank 1:" in msg and "rank 3:" in msg


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
