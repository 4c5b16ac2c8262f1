"""The training loop: run directory, statistics in a real run, divergence, and kill/resume
continuing bitwise on CPU."""

from __future__ import annotations

import dataclasses
import math
import json
import warnings

import pytest
import torch

from llm_validation.config import (
    DataConfig,
    DelayConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
    pipedream_taus,
)
from llm_validation.rundir import (
    RunPaths,
    latest_checkpoint,
    load_checkpoint,
    read_metrics,
)
from llm_validation.rundir import load_config
from llm_validation.training.loop import train
from llm_validation.training.stats import KEYS
from tests.llm_validation.helpers import MICRO

#: Statistics that are exact identities in a real run (ratios of bitwise-equal quantities,
#: computed in float64): only the final division/sqrt rounds.
IDENTITY_RTOL = 1e-12


def _cfg(out, *, tau=1, lam=1.0, name="muon", steps=8, **run):
    return TrainConfig(
        model=MICRO, data=DataConfig(seq_len=16),
        optim=OptimConfig(name=name, lr=0.02 if name == "muon" else 3e-3, schedule="constant"),
        delay=DelayConfig(tau=tau, ef_lambda=lam),
        run=RunConfig(**{"steps": steps, "batch_size": 4, "microbatches": 2, "eval_interval": 4,
                         "eval_batches": 2, "stats_interval": 2, "out_dir": str(out), **run}))


def _final_params(out):
    return load_checkpoint(latest_checkpoint(RunPaths(out)))["model"]


def test_run_directory_and_metrics(tmp_path):
    out = tmp_path / "run"
    cfg = _cfg(out, momentum_error_interval=4)
    result = train(cfg, progress=False)
    assert result.status == "completed" and result.steps == 8
    assert result.tokens == 8 * 4 * 16
    assert (out / "config.json").exists() and (out / "summary.json").exists()
    assert load_config(out) == cfg
    meta = json.loads((out / "config.json").read_text())["meta"]
    assert meta["corpus"]["kind"] == "stdlib" and meta["n_params"] == MICRO.n_params()
    assert json.loads((out / "summary.json").read_text()) == result.to_dict()
    rows = read_metrics(out)
    assert [r["step"] for r in rows] == list(range(9))         # 8 steps + the final val row
    assert all(set(KEYS) <= set(r) and r["kind"] == "train" for r in rows[:-1])
    # the closing evaluation row has its own shape: no training keys, so no nulls to filter
    assert rows[-1] == {"step": 8, "val_loss": result.final_val_loss, "kind": "eval"}
    assert result.final_val_loss is not None
    assert rows[0]["val_loss"] is not None and rows[4]["val_loss"] is not None
    stats_row = rows[4]
    for key in KEYS:
        if key != "val_loss" or stats_row["step"] % 4 == 0:
            assert stats_row[key] is not None, key                  # everything measured
    assert rows[3]["grad_dual_norm"] is None and rows[3]["grad_norm"] is not None
    assert rows[4]["momentum_error"] is not None and rows[2]["momentum_error"] is None


def test_statistics_identities_in_a_real_run(tmp_path):
    """tau = 0: the fresh update is the step's own (cos 1, error 0). tau = 1 without EF: the
    read point is W(t - 1), so the drift is exactly one step."""
    sync = read_metrics(train(_cfg(tmp_path / "s", tau=0, lam=0.0), progress=False).run_dir)
    for r in sync[:-1]:
        if r["step"] % 2 == 0:
            assert r["cos_delayed_fresh"] == pytest.approx(1.0, rel=IDENTITY_RTOL)
            assert r["rel_err_delayed_fresh"] == 0.0
    delayed = read_metrics(train(_cfg(tmp_path / "d", lam=0.0), progress=False).run_dir)
    drifts = [r["ef_drift"] for r in delayed[:-1] if r["step"] % 2 == 0 and r["step"] > 0]
    assert drifts and all(d == pytest.approx(1.0, rel=IDENTITY_RTOL) for d in drifts)
    # a delayed step differs from the fresh one
    assert any(r["rel_err_delayed_fresh"] > 0 for r in delayed[1:-1] if r["step"] % 2 == 0)


class _Kill(Exception):
    pass


def _kill_at(step):
    def callback(s, row):
        if s == step:
            raise _Kill
    return callback


def test_kill_and_resume_is_bitwise(tmp_path):
    straight = tmp_path / "straight"
    train(_cfg(straight), progress=False)
    resumed = tmp_path / "resumed"
    with pytest.raises(_Kill):           # checkpoint after 4 steps, killed after 6
        train(_cfg(resumed, checkpoint_interval=4), progress=False, callback=_kill_at(5))
    result = train(_cfg(resumed, checkpoint_interval=4, resume=True), progress=False)
    assert result.steps == 8
    a, b = _final_params(straight), _final_params(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert read_metrics(straight) == read_metrics(resumed)


def test_a_continued_run_counts_every_invocations_process_time(tmp_path):
    """``process_s`` sums the invocations: the checkpoint carries the earlier ones' time up to
    it, the continuing invocation adds its own wall time; a run trained in one invocation has
    ``process_s == wall_time_s``; :func:`process_seconds` reads both as measured."""
    from llm_validation.rundir import process_seconds
    straight = train(_cfg(tmp_path / "straight"), progress=False)
    assert straight.process_s == straight.wall_time_s
    resumed = tmp_path / "resumed"
    with pytest.raises(_Kill):
        train(_cfg(resumed, checkpoint_interval=4), progress=False, callback=_kill_at(5))
    before = load_checkpoint(latest_checkpoint(RunPaths(resumed)))["process_s"]
    assert before > 0
    result = train(_cfg(resumed, checkpoint_interval=4, resume=True), progress=False)
    assert result.process_s == before + result.wall_time_s
    summary = json.loads(RunPaths(resumed).summary.read_text())
    assert process_seconds(summary) == (result.process_s, True)


def test_process_seconds_estimates_a_run_continued_from_an_older_checkpoint():
    """Summaries written before ``process_s``: one invocation's wall time is measured, a
    continued run's is its last invocation's rate over all its tokens (an estimate)."""
    from llm_validation.rundir import process_seconds
    whole = {"tokens": 1000, "tokens_per_s": 1000 / 7.0, "wall_time_s": 7.0}
    assert process_seconds(whole) == (pytest.approx(7.0), True)
    continued = {"tokens": 1000, "tokens_per_s": 400 / 7.0, "wall_time_s": 7.0}
    assert process_seconds(continued) == (pytest.approx(17.5), False)
    assert process_seconds({"wall_time_s": 3.0}) == (3.0, False)
    assert process_seconds({**continued, "process_s": None}) == (pytest.approx(17.5), False)


def test_finished_run_extends_with_more_steps(tmp_path):
    straight = tmp_path / "straight"
    train(_cfg(straight, name="adamw", lam=0.5), progress=False)
    short = tmp_path / "short"
    train(_cfg(short, name="adamw", lam=0.5, steps=4), progress=False)
    train(_cfg(short, name="adamw", lam=0.5, resume=True), progress=False)
    a, b = _final_params(straight), _final_params(short)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert read_metrics(straight) == read_metrics(short)


def test_resume_refuses_a_different_run(tmp_path):
    out = tmp_path / "run"
    train(_cfg(out, steps=2), progress=False)
    with pytest.raises(ValueError, match="already holds a run"):
        train(_cfg(out, steps=2), progress=False)
    with pytest.raises(ValueError, match="optim.name"):
        train(_cfg(out, name="adamw", resume=True), progress=False)


def test_resume_auto_starts_continues_and_refuses_another_run(tmp_path):
    """``resume="auto"``: no checkpoint -> a new run; killed -> continues bitwise from the
    latest checkpoint; before the first checkpoint -> starts over; another run -> refused."""
    straight = tmp_path / "straight"
    train(_cfg(straight), progress=False)
    auto = tmp_path / "auto"
    with pytest.raises(_Kill):           # killed before its first checkpoint: starts over
        train(_cfg(auto, checkpoint_interval=4, resume="auto"), progress=False,
              callback=_kill_at(1))
    with pytest.raises(_Kill):           # checkpoint after 4 steps, killed after 6
        train(_cfg(auto, checkpoint_interval=4, resume="auto"), progress=False,
              callback=_kill_at(5))
    result = train(_cfg(auto, checkpoint_interval=4, resume="auto"), progress=False)
    assert result.steps == 8
    assert json.loads((auto / "config.json").read_text())["meta"]["resumed_from_step"] == 4
    assert read_metrics(straight) == read_metrics(auto)
    with pytest.raises(ValueError, match="optim.name"):
        train(_cfg(auto, name="adamw", resume="auto"), progress=False)
    with pytest.raises(TypeError, match="resume"):
        _cfg(auto, resume="yes")


def test_divergence_stops_with_flushed_logs(tmp_path):
    cfg = _cfg(tmp_path / "boom", tau=0, lam=0.0).replace(
        optim=OptimConfig(name="sgd", lr=1e30, momentum=0.0, nesterov=False, weight_decay=0.0,
                          schedule="constant"))
    result = train(cfg, progress=False)
    assert result.status == "diverged" and "non-finite" in result.message
    rows = read_metrics(result.run_dir)
    # a measured non-finite loss is NaN (written "NaN"), not null ("not measured")
    assert rows[-1].get("diverged") is True and math.isnan(rows[-1]["loss"])
    assert result.steps == rows[-1]["step"] < 8


def test_pipedream_stage_taus_run(tmp_path):
    cfg = _cfg(tmp_path / "pd", lam=0.0).replace(
        delay=DelayConfig(tau=2, stage_taus=pipedream_taus(3)))
    assert train(cfg, progress=False).status == "completed"


def test_read_metrics_skips_a_truncated_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0}\n{"step": 1}\n{"step": 2, "lo')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = read_metrics(path)
    assert [r["step"] for r in rows] == [0, 1] and "truncated" in str(caught[0].message)
    assert all(r["kind"] == "train" and r["loss"] is None for r in rows)   # completed shape
    path.write_text('{"step": 0}\nnot json\n{"step": 2}\n')
    with pytest.raises(ValueError, match="line 2"):
        read_metrics(path)
    with pytest.raises(FileNotFoundError):
        read_metrics(tmp_path / "missing")


def test_statistics_do_not_change_the_trajectory(tmp_path):
    """The probe's extra gradients and dry-run optimizer step are undone exactly."""
    probed = tmp_path / "probed"
    train(_cfg(probed, stats_interval=1, momentum_error_interval=3), progress=False)
    bare = tmp_path / "bare"
    train(_cfg(bare, stats_interval=0), progress=False)
    a, b = _final_params(probed), _final_params(bare)
    assert all(torch.equal(a[k], b[k]) for k in a)
    losses = lambda out: [r["loss"] for r in read_metrics(out) if r["kind"] == "train"]  # noqa: E731
    assert losses(probed) == losses(bare)


def test_token_shards_with_ids_beyond_the_vocabulary_are_refused(tmp_path):
    import numpy as np

    from llm_validation.training.data import write_bin_shard

    write_bin_shard(tmp_path / "train.bin", np.arange(4000) % 300)
    cfg = _cfg(tmp_path / "run", tau=0, lam=0.0).replace(
        data=DataConfig(path=str(tmp_path / "train.bin"), seq_len=16))
    assert cfg.model.vocab_size == 256
    with pytest.raises(ValueError, match="vocab_size=256"):
        train(cfg, progress=False)


def test_final_evaluation_on_a_larger_set_changes_only_the_closing_loss(tmp_path):
    """final_eval_batches extends the closing evaluation's fixed set; the trajectory, the
    periodic evaluations and the curve's closing point (on the curve's own batches) are those
    of the default run, bitwise; the larger set's loss is the summary's and the eval row's
    ``final_val_loss``; the record's ``curve_final`` (what a lag reads) is the curve's."""
    from llm_validation.validation.runs import RunRecord

    runs = {n: tmp_path / f"final{n}" for n in (0, 2, 6)}
    for n, out in runs.items():
        train(_cfg(out, final_eval_batches=n), progress=False)
    rows = {n: read_metrics(out) for n, out in runs.items()}
    train_rows = {n: [r for r in rs if r["kind"] == "train"] for n, rs in rows.items()}
    closing = {n: [r for r in rs if r["kind"] == "eval"][0] for n, rs in rows.items()}
    summary = {n: json.loads((out / "summary.json").read_text()) for n, out in runs.items()}
    assert train_rows[0] == train_rows[2] == train_rows[6]
    assert closing[2] == closing[0]          # 2 = eval_batches: the same set, one value
    assert "final_val_loss" not in closing[0]
    assert closing[6]["val_loss"] == closing[0]["val_loss"]    # the curve's set, bitwise
    assert closing[6]["final_val_loss"] != closing[0]["val_loss"]   # six batches: larger set
    assert summary[6]["final_val_loss"] == closing[6]["final_val_loss"]
    assert summary[0]["final_val_loss"] == closing[0]["val_loss"]
    rec = RunRecord.load(runs[6])
    assert rec.final_val == closing[6]["final_val_loss"]
    assert rec.curve_final == closing[0]["val_loss"]
    assert RunRecord.load(runs[0]).curve_final == RunRecord.load(runs[0]).final_val


def test_final_eval_batches_is_refused_on_a_pipeline():
    with pytest.raises(ValueError, match="final_eval_batches"):
        TrainConfig(model=dataclasses.replace(MICRO, tied=False), data=DataConfig(seq_len=16),
                    run=RunConfig(pipeline="2bw", stages=2, microbatches=2,
                                  final_eval_batches=16), delay=DelayConfig(tau=1))
