"""The fixed closing evaluation set (``run.final_eval_tokens``): one set of tokens for every
seed, batch size and model, the loss the summary reports, the trajectory untouched."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from llm_validation.config import DataConfig, DelayConfig, RunConfig, TrainConfig
from llm_validation.rundir import RunPaths, latest_checkpoint, load_checkpoint, read_metrics
from llm_validation.training.data import load_corpus, tiled_windows
from llm_validation.training.loop import tiled_loss, train
from llm_validation.training.model import Transformer, lm_loss
from tests.llm_validation.training.test_loop import MICRO, _cfg

TOKENS = 1000            # 63 windows of 17 tokens at seq_len 16 (the last one partly used)


def test_tiled_windows_tile_the_split_in_order():
    split = load_corpus(DataConfig(seq_len=16)).val
    w = tiled_windows(split, 16, TOKENS)
    assert w.shape == (-(-TOKENS // 16), 17)
    flat = torch.from_numpy(split.arrays[0][:w.numel()].astype("int64"))
    assert torch.equal(w.reshape(-1), flat)              # contiguous, no overlap
    with pytest.raises(ValueError, match="fewer than"):
        tiled_windows(split, 16, 10 ** 12)


def test_tiled_loss_is_the_mean_over_every_window():
    torch.manual_seed(0)
    model = Transformer(MICRO, seed=0)
    w = tiled_windows(load_corpus(DataConfig(seq_len=16)).val, 16, TOKENS)
    with torch.no_grad():
        direct = float(lm_loss(model(w[:, :-1]), w[:, 1:]).double())
    assert tiled_loss(model, w, torch.device("cpu")) == pytest.approx(direct, rel=1e-6)


def test_closing_loss_is_read_on_the_fixed_set(tmp_path):
    base, fixed = tmp_path / "base", tmp_path / "fixed"
    train(_cfg(base), progress=False)
    cfg = _cfg(fixed, final_eval_tokens=TOKENS)
    train(cfg, progress=False)
    rows = {k: read_metrics(p) for k, p in (("base", base), ("fixed", fixed))}
    assert [r for r in rows["base"] if r["kind"] == "train"] == \
        [r for r in rows["fixed"] if r["kind"] == "train"]
    closing = [r for r in rows["fixed"] if r["kind"] == "eval"][0]
    assert closing["val_loss"] == [r for r in rows["base"] if r["kind"] == "eval"][0]["val_loss"]
    model = Transformer(cfg.model, seed=0)
    model.load_state_dict(load_checkpoint(latest_checkpoint(RunPaths(fixed)))["model"])
    expected = tiled_loss(model, tiled_windows(load_corpus(cfg.data).val, 16, TOKENS),
                          torch.device("cpu"))
    assert closing["final_val_loss"] == expected
    assert json.loads((fixed / "summary.json").read_text())["final_val_loss"] == expected


def test_refused_on_a_pipeline():
    with pytest.raises(ValueError, match="final_eval_tokens"):
        TrainConfig(model=dataclasses.replace(MICRO, tied=False), data=DataConfig(seq_len=16),
                    run=RunConfig(pipeline="2bw", stages=2, microbatches=2,
                                  final_eval_tokens=1000), delay=DelayConfig(tau=1))
