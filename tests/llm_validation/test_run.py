"""`run(cfg)`: an emulated run enters the pipeline's checkpoint conversion only when resuming."""

from __future__ import annotations

import dataclasses

import pytest

from llm_validation import run as run_module
from llm_validation.config import TrainConfig


def _micro(out) -> TrainConfig:
    cfg = TrainConfig()
    cfg = cfg.with_fields({"run.steps": 1, "run.batch_size": 2, "run.eval_batches": 1,
                           "run.stats_interval": 0, "data.seq_len": 16,
                           "run.out_dir": str(out)})
    return cfg


@pytest.mark.parametrize("resume", [False, True])
def test_the_emulator_checkpoint_detour_is_taken_only_when_resuming(tmp_path, monkeypatch,
                                                                     resume):
    calls = []
    monkeypatch.setattr(run_module, "emulator_checkpoint", lambda cfg: calls.append(cfg))
    cfg = _micro(tmp_path / "r")
    if resume:
        run_module.run(cfg, progress=False)                       # a finished run to resume
        calls.clear()
        cfg = cfg.replace(run=dataclasses.replace(cfg.run, resume=True, steps=2))
    run_module.run(cfg, progress=False)
    assert len(calls) == (1 if resume else 0)
