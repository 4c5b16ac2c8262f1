"""metrics.jsonl rows: every key of their shape, NaN/inf as strings a strict JSON reader accepts
and this project's reader maps back, a real run's rows inside the shape."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from llm_validation.config import DataConfig, RunConfig, TrainConfig
from llm_validation.records.metrics_rows import (EVAL_KEYS, NONFINITE_STRINGS, TRAIN_KEYS, complete_row,
                                         decode_row, encode_row)
from llm_validation.rundir import MetricsWriter, diverged_row, eval_row, read_metrics
from llm_validation.run import run
from tests.llm_validation.helpers import MICRO


def _strict(text: str):
    """json.loads that refuses the non-standard NaN / Infinity tokens, as strict readers do."""
    def refuse(token: str):
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def test_nonfinite_values_round_trip_as_strings(tmp_path):
    path = tmp_path / "metrics.jsonl"
    with MetricsWriter(path) as w:
        w.write({"step": 0, "kind": "train", "loss": math.nan, "grad_norm": math.inf,
                 "lr": -math.inf, "val_loss": None})
        w.write(eval_row(1, None))
    lines = path.read_text().splitlines()
    first = _strict(lines[0])                   # a strict reader accepts every line
    assert first["loss"] == "NaN" and first["grad_norm"] == "Infinity"
    assert first["lr"] == "-Infinity" and first["val_loss"] is None
    rows = read_metrics(path)
    assert math.isnan(rows[0]["loss"]) and rows[0]["grad_norm"] == math.inf
    assert rows[0]["lr"] == -math.inf
    assert rows[0]["val_loss"] is None and rows[0]["smoothness_est_l2"] is None
    assert set(NONFINITE_STRINGS) == {"NaN", "Infinity", "-Infinity"}


def test_every_row_has_every_key_of_its_shape():
    train = decode_row(encode_row({"step": 3, "loss": 1.0}))
    assert set(train) == set(TRAIN_KEYS) and train["kind"] == "train"
    assert set(decode_row(encode_row(eval_row(5, 2.0)))) == set(EVAL_KEYS)
    div = decode_row(encode_row(diverged_row(7, math.nan, None, 0.1)))
    assert set(div) == set(TRAIN_KEYS) | {"diverged"} and math.isnan(div["loss"])
    with pytest.raises(ValueError, match="unknown kind"):
        complete_row({"step": 0, "kind": "bogus"})


def test_a_damaged_middle_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(encode_row({"step": 0}) + "\n{oops\n" + encode_row({"step": 1}) + "\n")
    with pytest.raises(ValueError, match=r"metrics.jsonl: line 2"):
        read_metrics(path)


def test_a_real_runs_rows_stay_inside_the_shape(tmp_path):
    """Every statistic the probe records is a key of the train shape (all statistics on)."""
    cfg = TrainConfig(model=MICRO, data=DataConfig(seq_len=16),
                      run=RunConfig(steps=3, batch_size=4, microbatches=2, eval_interval=2,
                                    eval_batches=1, stats_interval=1,
                                    momentum_error_interval=1, large_batch_factor=2,
                                    out_dir=str(tmp_path / "r")))
    cfg = cfg.replace(delay=dataclasses.replace(cfg.delay, tau=1, ef_lambda=1.0))
    run(cfg, progress=False)
    rows = read_metrics(tmp_path / "r")
    raw = [_strict(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    for r, line in zip(rows, raw):
        shape = TRAIN_KEYS if r["kind"] == "train" else EVAL_KEYS
        assert set(line) == set(shape), set(line) ^ set(shape)
    measured = {k for r in rows for k, v in r.items() if v is not None}
    assert {"smoothness_est_l2", "momentum_error_rel", "grad_noise_var_micro"} <= measured
