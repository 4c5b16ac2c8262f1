"""At most one host synchronisation per step: the emulated loop and every pipeline stage
(the last one included: its batch loss travels with its statistics) read the step's scalars
with one copy at a flush (``RunConfig.log_interval``); with ``log_interval > 1`` the steps
between flushes read nothing, with statistics on or off. Counted on CPU by
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

#: Host reads allowed at a flush step of the emulated loop (every buffered step's loss and
#: statistics in one copy).
LOOP_READS = 1
#: ... at a flush step of a pipeline stage, the last stage included (its batch loss is read
#: with its statistics; the divergence verdict is settled at the flush).
STAGE_READS, LAST_STAGE_READS = 1, 1
#: Host reads allowed on a step that does not end with a flush (``log_interval > 1``).
OFF_FLUSH_READS = 0
#: The flush interval of the buffered cases (steps 2, 5 and the last flush; others read none).
LOG_INTERVAL = 3


def _loop_cfg(out, stats_interval: int, log_interval: int = 1) -> TrainConfig:
    return TrainConfig(
        model=MICRO, data=DataConfig(seq_len=16),
        optim=OptimConfig(name="muon", lr=0.02, schedule="constant"),
        delay=DelayConfig(tau=1, ef_lambda=1.0),
        run=RunConfig(steps=7, batch_size=4, microbatches=2, eval_interval=0, eval_batches=1,
                      stats_interval=stats_interval, momentum_error_interval=2 * stats_interval,
                      log_interval=log_interval, out_dir=str(out)))


def _loop_reads(cfg: TrainConfig) -> list[tuple[int, int, list[str]]]:
    """Windows of host reads per step (the loop marks each step; step 0's window also holds
    the set-up: skipped)."""
    counter = host_syncs.install()
    try:
        train(cfg, progress=False)
    finally:
        host_syncs.uninstall()
    return counter.windows[1:]


def _momentum_steps(cfg: TrainConfig) -> set[int]:
    """Steps with the momentum error: it also reads each optimizer's step counter, a host
    tensor on every device; counted here (the counter cannot tell on CPU), not a sync."""
    k = cfg.run.momentum_error_interval
    return {t for t in range(cfg.run.steps) if k and t % k == 0}


def _flushes(cfg: TrainConfig) -> set[int]:
    run = cfg.run
    return {t for t in range(run.steps) if (t + 1) % run.log_interval == 0 or t == run.steps - 1}


def _check_bounds(windows, steps, flushes, momentum, at_flush, where):
    """``windows``: (step, reads, sites); ``steps``: the steps the bound covers."""
    seen = {w[0] for w in windows}
    assert steps <= seen, (where, steps - seen)
    for s, n, sites in windows:
        if s not in steps:
            continue
        own = [x for x in sites if not x.startswith("optim.py:")] if s in momentum else sites
        bound = at_flush if s in flushes else OFF_FLUSH_READS
        assert len(own) <= bound, (where, s, n, sites)
        if s in flushes:
            assert len(own) == 1 and own[0].startswith(("stats.py:", "flush.py:")), (where, s, sites)


@pytest.mark.parametrize("interval,log_interval", [(0, 1), (2, 1), (0, LOG_INTERVAL),
                                                   (2, LOG_INTERVAL)])
def test_the_loop_reads_the_device_at_most_once_per_step(tmp_path, interval, log_interval):
    cfg = _loop_cfg(tmp_path / "run", interval, log_interval)
    windows = _loop_reads(cfg)
    assert len(windows) == cfg.run.steps - 1
    _check_bounds(windows, set(range(1, cfg.run.steps)), _flushes(cfg), _momentum_steps(cfg),
                  LOOP_READS, "loop")
    if log_interval > 1:       # the flushes are once per log_interval: the others read nothing
        reading = {s for s, n, _ in windows if n}
        assert reading <= _flushes(cfg) | _momentum_steps(cfg)
        assert len(_flushes(cfg)) <= -(-cfg.run.steps // log_interval)


@pytest.mark.parametrize("log_interval", [1, LOG_INTERVAL])
def test_an_added_float_is_caught(tmp_path, monkeypatch, log_interval):
    grad_partials = stats.grad_partials

    def with_a_read(grads, geoms=None):
        float(grads[0].norm())                   # the regression: one more host read
        return grad_partials(grads, geoms)

    monkeypatch.setattr(stats, "grad_partials", with_a_read)
    cfg = _loop_cfg(tmp_path / "run", 2, log_interval)
    windows = _loop_reads(cfg)
    with pytest.raises(AssertionError):
        _check_bounds(windows, set(range(1, cfg.run.steps)), _flushes(cfg),
                      _momentum_steps(cfg), LOOP_READS, "loop")
    assert all(n >= 1 for s, n, _ in windows)    # every step now reads, flush or not
    assert any("test_host_syncs.py" in w for _, _, where in windows for w in where)


def test_the_counter_sees_every_kind_of_read():
    counter = host_syncs.HostSyncCounter()
    t = torch.ones(2)
    with counter:
        float(t.sum()), t.sum().item(), t.tolist(), bool(t.sum() > 0), t.cpu(), t.numpy()
        torch.arange(3).tolist()                 # integer data: not a device value
    counter.mark(0)
    assert counter.windows[0][1] == 6


@pytest.mark.parametrize("interval,log_interval,D", [(2, 1, 1), (0, LOG_INTERVAL, 1),
                                                      (2, 1, 2)])
def test_a_pipeline_stage_reads_the_device_at_most_once_per_step(tmp_path, monkeypatch,
                                                                 interval, log_interval, D):
    """Every stage of a P = 2 2BW run (D = 2: every replica; the replicas' microbatch losses
    are gathered on the device) reads once per flush and nothing between."""
    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    monkeypatch.delenv("DELAYBOUND_PIPE_FAULT", raising=False)
    monkeypatch.setenv(host_syncs.HOST_SYNCS_ENV, str(tmp_path / "counts"))
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, M=2, steps=7,
                   eval_interval=0, checkpoint_interval=0, stats_interval=interval,
                   momentum_error_interval=2 * interval, log_interval=log_interval,
                   data_parallel=D)
    assert launch(cfg).status == "completed"
    counts = host_syncs.read_counts(tmp_path / "counts")
    assert sorted(counts) == list(range(2 * D))
    steps = set(range(1, cfg.run.steps - 1))     # no set-up, no final checkpoint
    for rank, bound in [(r, LAST_STAGE_READS if r % 2 else STAGE_READS) for r in counts]:
        windows = [(w["step"], w["reads"], w["where"]) for w in counts[rank]]
        _check_bounds(windows, steps, _flushes(cfg), _momentum_steps(cfg), bound,
                      f"rank {rank}")
