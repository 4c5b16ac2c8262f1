"""The exploratory noise-scale reading: the textbook ratio from logged statistics, and the
regressor comparison on synthetic cells whose true law is known."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from llm_validation.delay_law import design, runs
from llm_validation.delay_law.measure import CellCosts
from llm_validation.delay_law.noise_scale import compare_regressors, run_snr
from tests.llm_validation.delay_law.fake_runs import write_run

#: Exact synthetic data: only float rounding separates a fit from the truth.
EXACT = 1e-9
LRS = {s: {"adamw": 1e-3, "muon": 1e-2} for s in design.SIZES}


def _sync_run(cell):
    return next(r for r in runs.cell_runs(cell, LRS) if r.mode == "sync" and r.kind == "arm")


def test_run_snr_is_the_batch_over_the_simple_noise_scale(tmp_path):
    r = _sync_run(design.cells()[0])
    d = write_run(tmp_path, r, 1.5, rho=0.37)
    assert run_snr(d) == pytest.approx(0.37, rel=EXACT)   # the first half (100x) left out
    plain = write_run(tmp_path / "plain", r, 1.5)          # no statistics logged
    assert run_snr(plain) is None
    assert run_snr(write_run(tmp_path / "cut", r, 1.5, truncate=True, rho=0.37)) is None


def _costs(lag_of):
    """Training cells with four seeds each; ``lag_of(cell, rho)`` the true lag, ``rho`` drawn
    per seed independently of N and S."""
    rng = np.random.default_rng(0)
    costs, snr = {}, {}
    for c in design.cells():
        if c.lr_multiple != 1.0:
            continue
        rhos = {s: float(np.exp(rng.uniform(-3, 0))) for s in range(4)}
        lag = {s: SimpleNamespace(fraction=lag_of(c, rho)) for s, rho in rhos.items()}
        costs[c.name] = CellCosts(cell=c, lag={"muon/2bw": lag}, gap_share={}, gap={})
        snr[c.name] = {"muon": rhos}
    return costs, snr


def test_the_true_regressor_explains_the_lag_and_the_others_do_not():
    costs, snr = _costs(lambda c, rho: 0.3 * rho ** 0.25)
    held = [c.name for c in design.cells() if c.held_out]
    out = compare_regressors(costs, snr, "muon/2bw", held=held)
    rho = out["sets"]["rho"]
    assert rho["coefficients"]["log_rho"] == pytest.approx(0.25, rel=1e-6)
    assert rho["r2"] == pytest.approx(1.0, abs=EXACT) and rho["loco"] < EXACT
    assert rho["held_out"] < EXACT
    assert out["sets"]["N+S"]["r2"] < 0.5 and out["sets"]["N+S"]["loco"] > 0.05
    assert set(out["cells"]).isdisjoint(held)


def test_mutation_a_lag_set_by_the_batch_is_read_as_the_batch():
    costs, snr = _costs(lambda c, rho: 0.01 * (c.n_params / c.steps) ** 0.3)
    out = compare_regressors(costs, snr, "muon/2bw")
    assert out["sets"]["B"]["coefficients"]["log_batch"] == pytest.approx(0.3, rel=1e-6)
    assert out["sets"]["B"]["loco"] < EXACT and out["sets"]["N+S"]["loco"] < EXACT
    assert out["sets"]["rho"]["r2"] < 0.5
