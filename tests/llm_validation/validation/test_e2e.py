"""validate() end to end on real (very short) training runs of a micro model."""

from __future__ import annotations

import numpy as np
import pytest

from llm_validation.sweep.grid import SweepGrid
from llm_validation.sweep.runner import run_sweep
from llm_validation.validation.figures import plot_validation
from llm_validation.validation.runs import load_runs
from llm_validation.validation.validate import validate
from llm_validation.validation.verdict import INCONCLUSIVE

#: The micro model of the sweep tests, with every statistic measured at every step.
MICRO = ("model.n_layer=1", "model.d_model=16", "model.n_head=2", "model.n_kv_head=1",
         "model.d_ff=32", "data.seq_len=16", "run.batch_size=4", "run.eval_batches=1",
         "run.eval_interval=2", "run.stats_interval=1", "run.momentum_error_interval=2",
         "run.large_batch_factor=2")
STEPS = 6


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("e2e")
    grid = SweepGrid(optimizers=("muon",), seeds=(0,), steps=STEPS, overrides=MICRO)
    outcomes = run_sweep(grid.expand(), out, jobs=0, progress=False)
    assert [o.status for o in outcomes] == ["completed"] * 3
    return out


def test_validate_reads_real_runs(runs_dir):
    runs = load_runs([runs_dir])
    by_mode = {r.mode: r for r in runs}
    assert set(by_mode) == {"sync", "delay", "ef"}
    rep = validate([runs_dir])
    # one seed: nothing may pass or fail, but the numbers must be there
    assert all(v.status == INCONCLUSIVE for v in rep.verdicts)
    gain = rep.get("ef_gain[muon]")
    gap = gain.measured["gap without EF"].estimate
    assert gap == pytest.approx(by_mode["delay"].final_val - by_mode["sync"].final_val)
    assert "only 1 seed" in gain.reason
    smooth = rep.get("smoothness[muon]").measured
    assert np.isfinite(smooth["median L_est"].estimate) and smooth["median L_est"].estimate > 0
    assert rep.get("noise[muon]").measured["median sigma^2"].estimate > 0
    assert 0.0 <= rep.get("star_convexity[muon]").measured[
        "fraction of steps violating"].estimate <= 1.0
    assert rep.get("ef_criterion[muon]").measured["omega_bar"].estimate > 0
    # the report's markdown and JSON render
    assert "ef_gain[muon]" in rep.to_markdown()
    assert rep.to_dict()["counts"]["inconclusive"] == len(rep.verdicts)


def test_plots_from_real_runs(runs_dir, tmp_path):
    made = plot_validation(load_runs([runs_dir]), tmp_path)
    assert {"loss_curves.png", "cos_delayed_fresh.png", "smoothness.png"} <= set(made)
    for p in made.values():
        assert p.stat().st_size > 5000        # a real image, not an empty canvas
