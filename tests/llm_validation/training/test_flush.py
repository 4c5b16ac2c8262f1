"""The metrics flush (``RunConfig.log_interval``): rows read every K steps in one copy are the
rows read every step, bitwise, and a diverged run ends the same way."""

from __future__ import annotations

import math

import pytest
import torch

from llm_validation.config import DataConfig, DelayConfig, OptimConfig, RunConfig, TrainConfig
from llm_validation.rundir import RunPaths, latest_checkpoint, read_metrics
from llm_validation.training import host_syncs, stats
from llm_validation.training.flush import RowBuffer, first_nonfinite, flush_due
from llm_validation.training.loop import train
from tests.llm_validation.helpers import MICRO

#: The SGD learning rate that makes the MICRO run's loss non-finite within a few steps.
DIVERGING_LR = 1e30


def _cfg(out, *, log_interval=1, steps=7, optim=None, **run) -> TrainConfig:
    return TrainConfig(
        model=MICRO, data=DataConfig(seq_len=16),
        optim=optim or OptimConfig(name="muon", lr=0.02, schedule="cosine", warmup_steps=2),
        delay=DelayConfig(tau=1, ef_lambda=1.0),
        run=RunConfig(**{"steps": steps, "batch_size": 4, "microbatches": 2, "eval_interval": 3,
                         "eval_batches": 1, "stats_interval": 2, "momentum_error_interval": 4,
                         "log_interval": log_interval, "out_dir": str(out), **run}))


def test_flush_steps():
    assert [t for t in range(10) if flush_due(t, 4, 10, False)] == [3, 7, 9]
    assert [t for t in range(10) if flush_due(t, 4, 10, t == 4)] == [3, 4, 7, 9]
    assert all(flush_due(t, 1, 10, False) for t in range(10))
    with pytest.raises(ValueError, match="log_interval"):
        flush_due(0, 0, 10, False)
    with pytest.raises(ValueError, match="log_interval"):
        RunConfig(log_interval=0)


def test_row_buffer_reads_every_record_in_one_copy_with_to_host_bits():
    gen = torch.Generator().manual_seed(0)
    records = [({"grad_sq": torch.rand((), generator=gen, dtype=torch.float64),
                 "max_x": torch.rand((), generator=gen)},
                {"loss": torch.rand((), generator=gen, dtype=torch.float64), "f_x": None})
               for _ in range(3)]
    buf = RowBuffer()
    for t, (part, scalars) in enumerate(records):
        buf.add(t, part, **scalars)
    counter = host_syncs.HostSyncCounter()
    with counter:
        rows = buf.flush()
    counter.mark("flush")
    assert counter.windows[0][1] == 1 and len(buf) == 0
    for t, (row, (part, scalars)) in enumerate(zip(rows, records)):
        assert row == {"step": t, **stats.to_host(part, **scalars)}   # f_x=None: absent
    rows[1]["loss"] = float("nan")
    assert first_nonfinite(rows) == 1 and first_nonfinite(rows[2:]) is None
    with pytest.raises(ValueError, match="unknown scalars"):
        buf.add(0, {}, lr=1.0)
    with pytest.raises(ValueError, match="partial sums named"):
        buf.add(0, {"loss": 1.0})


def test_rows_read_every_k_steps_are_bitwise_the_rows_of_every_step(tmp_path):
    every = train(_cfg(tmp_path / "k1"), progress=False)
    seen: list[int] = []
    buffered = train(_cfg(tmp_path / "k3", log_interval=3, checkpoint_interval=5),
                     progress=False, callback=lambda step, row: seen.append(step))
    assert seen == list(range(7))          # the callback still gets every row, in order
    assert every.status == buffered.status == "completed"
    assert every.final_val_loss == buffered.final_val_loss
    a, b = read_metrics(every.run_dir), read_metrics(buffered.run_dir)
    assert len(a) == 8 and a == b          # 7 train rows + the closing eval row, same bits


def test_a_diverged_run_ends_the_same_with_a_flush_every_k_steps(tmp_path):
    sgd = OptimConfig(name="sgd", lr=DIVERGING_LR, momentum=0.0, nesterov=False,
                      weight_decay=0.0, schedule="constant")
    ref = train(_cfg(tmp_path / "k1", optim=sgd, steps=12), progress=False)
    got = train(_cfg(tmp_path / "k5", optim=sgd, steps=12, log_interval=5), progress=False)
    assert ref.status == got.status == "diverged"
    d = ref.steps
    assert d < 4, "the run must diverge before the first flush of k5 for this test to bite"
    assert got.steps == d and got.message == ref.message
    a, b = read_metrics(ref.run_dir), read_metrics(got.run_dir)
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(d + 1))
    assert b[-1]["diverged"] is True and math.isnan(b[-1]["loss"])
    assert a[:-1] == b[:-1]
    assert latest_checkpoint(RunPaths(got.run_dir)) is None   # no post-divergence weights


def test_resume_after_a_crash_between_flushes_rewrites_the_lost_rows(tmp_path, monkeypatch):
    """Killed after step 4 with a flush every 3 steps and a checkpoint after step 3: the row
    of step 4 was never written (unflushed, after the checkpoint); the resume rewrites it."""
    class _Kill(Exception):
        pass

    straight = train(_cfg(tmp_path / "straight", log_interval=3, checkpoint_interval=4),
                     progress=False)
    mark = host_syncs.mark

    def crash_after_step_4(step):
        mark(step)
        if step == 4:
            raise _Kill

    out = tmp_path / "crash"
    monkeypatch.setattr(host_syncs, "mark", crash_after_step_4)
    with pytest.raises(_Kill):
        train(_cfg(out, log_interval=3, checkpoint_interval=4), progress=False)
    monkeypatch.setattr(host_syncs, "mark", mark)
    assert [r["step"] for r in read_metrics(out)] == [0, 1, 2, 3]
    again = train(_cfg(out, log_interval=3, checkpoint_interval=4, resume=True), progress=False)
    assert again.status == "completed"
    assert read_metrics(out) == read_metrics(straight.run_dir)
