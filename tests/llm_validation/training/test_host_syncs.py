"""At most one host synchronisation per step: the emulated loop reads loss and statistics
with one copy; a pipeline stage reads its statistics with one copy (the last stage also reads
its batch loss, for the divergence flag every stage checks before its step). Counted on CPU by
:class:`llm_validation.training.host_syncs.HostSyncCounter`; the test fails on one added
``float(t)``."""

from __future__ import annotations

import pytest
import torch

from llm_validation.config import DataConfig, DelayConfig, OptimConfig, RunConfig, TrainConfig
from llm_validation.run import run as launch
from llm_validation.training import host_syncs, stats
from llm_validation.training.loop import train
from tests.llm_validation.helpers import MICRO
from tests.llm_validation.pipeline.support import pipe_cfg, small_corpus

#: Host reads per step allowed in the emulated loop (loss + statistics in one copy).
LOOP_READS = 1
#: ... on a pipeline stage: its statistics in one copy; the last stage also reads the batch
#: loss right after its last forward (the divergence flag must be set before any stage steps).
STAGE_READS, LAST_STAGE_READS = 1, 2


def _loop_cfg(out, stats_interval: int) -> TrainConfig:
    return TrainConfig(
        model=MICRO, data=DataConfig(seq_len=16),
        optim=OptimConfig(name="muon", lr=0.02, schedule="constant"),
        delay=DelayConfig(tau=1, ef_lambda=1.0),
        run=RunConfig(steps=5, batch_size=4, microbatches=2, eval_interval=0, eval_batches=1,
                      stats_interval=stats_interval, momentum_error_interval=2 * stats_interval,
                      out_dir=str(out)))


def _loop_reads(cfg: TrainConfig) -> list[tuple[int, int, list[str]]]:
    """Windows of host reads per step (step 0's window also holds the set-up: skipped)."""
    counter = host_syncs.HostSyncCounter()
    with counter:
        train(cfg, progress=False, callback=lambda step, row: counter.mark(step))
    return counter.windows[1:]


@pytest.mark.parametrize("interval", [0, 2])
def test_the_loop_reads_the_device_once_per_step(tmp_path, interval):
    windows = _loop_reads(_loop_cfg(tmp_path / "run", interval))
    assert len(windows) == 4
    # the momentum error (step 4 with interval 2) also reads each optimizer's step counter, a
    # host tensor on every device: counted here (the counter cannot tell on CPU), not a sync
    due = {4} if interval else set()
    assert all(n == LOOP_READS for s, n, _ in windows if s not in due), windows
    for s, n, where in windows:
        if s in due:
            rest = [w for w in where if not w.startswith("optim.py:")]
            assert len(rest) == 1 and rest[0].startswith("stats.py:"), where  # stats.to_host


def test_an_added_float_is_caught(tmp_path, monkeypatch):
    grad_partials = stats.grad_partials

    def with_a_read(grads, geoms=None):
        float(grads[0].norm())                   # the regression: one more host read
        return grad_partials(grads, geoms)

    monkeypatch.setattr(stats, "grad_partials", with_a_read)
    windows = _loop_reads(_loop_cfg(tmp_path / "run", 2))
    assert max(n for s, n, _ in windows if s != 4) == LOOP_READS + 1   # 4: momentum error
    assert any("test_host_syncs.py" in w for _, _, where in windows for w in where)


def test_the_counter_sees_every_kind_of_read():
    counter = host_syncs.HostSyncCounter()
    t = torch.ones(2)
    with counter:
        float(t.sum()), t.sum().item(), t.tolist(), bool(t.sum() > 0), t.cpu(), t.numpy()
        torch.arange(3).tolist()                 # integer data: not a device value
    counter.mark(0)
    assert counter.windows[0][1] == 6


@pytest.mark.parametrize("interval", [0, 2])
def test_a_pipeline_stage_reads_the_device_once_per_step(tmp_path, monkeypatch, interval):
    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    monkeypatch.delenv("DELAYBOUND_PIPE_FAULT", raising=False)
    monkeypatch.setenv(host_syncs.HOST_SYNCS_ENV, str(tmp_path / "counts"))
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, M=2, steps=5,
                   eval_interval=0, checkpoint_interval=0, stats_interval=interval,
                   momentum_error_interval=2 * interval)
    assert launch(cfg).status == "completed"
    counts = host_syncs.read_counts(tmp_path / "counts")
    assert sorted(counts) == [0, 1]
    for rank, bound in ((0, STAGE_READS), (1, LAST_STAGE_READS)):
        steps = [w for w in counts[rank] if 0 < w["step"] < cfg.run.steps - 1]   # no set-up,
        assert len(steps) == cfg.run.steps - 2                            # no final checkpoint
        assert all(w["reads"] <= bound for w in steps), (rank, steps)
