"""From run folders to per-seed envelope lags and verdicts, on fake runs with known lags."""

from __future__ import annotations

import math

import pytest

from llm_validation.delay_law import design
from llm_validation.delay_law.design import Cell
from llm_validation.delay_law.measure import cell_costs
from llm_validation.delay_law.runs import LR_CENTRES, cell_runs
from llm_validation.delay_law.verdicts import decide, statement_values, statements
from llm_validation.validation.verdict import INCONCLUSIVE, PASS
from tests.llm_validation.delay_law.fake_runs import V0, frontier_loss, write_run

#: True compute-equivalent lags of the fake delayed arms (AdamW far behind, EF halving more).
TRUE = {"adamw/2bw": 0.5, "adamw/2bw+ef": 0.2, "muon/2bw": 0.1, "muon/2bw+ef": 0.03}
SHARED = [Cell(size=s, steps=40, role="shared") for s in ("n46k", "n113k")]


def _write_cell(root, cell, true=TRUE, truncate_seed=None):
    for r in cell_runs(cell, LR_CENTRES):
        arm = f"{r.optimizer}/{r.mode}"
        if r.mode == "sync":
            final = frontier_loss(r.cfg.run.steps, r.seed, r.optimizer)
        else:     # the loss the frontier reaches at (1 - lag) T, with a seed wobble
            wobble = 0.01 * (r.seed - 1.5)
            final = frontier_loss(cell.steps * (1 - true[arm] - wobble), r.seed, r.optimizer)
        write_run(root, r, final, truncate=(r.seed == truncate_seed and r.mode == "2bw"))


def test_envelope_lags_are_recovered_per_seed(tmp_path):
    _write_cell(tmp_path, SHARED[0])
    costs = cell_costs(SHARED[0], tmp_path, LR_CENTRES)
    assert costs.missing == ()
    for arm, lag in TRUE.items():
        for seed, v in costs.lag_fraction(arm).items():
            assert v == pytest.approx(lag + 0.01 * (seed - 1.5), abs=1e-9), (arm, seed)
    share = costs.gap_share["adamw/2bw"][0]
    sync = frontier_loss(40, 0, "adamw")
    assert share == pytest.approx(costs.gap["adamw/2bw"][0] / (V0 - sync))


def test_a_damaged_run_drops_its_seed_and_says_so(tmp_path):
    _write_cell(tmp_path, SHARED[0], truncate_seed=2)
    costs = cell_costs(SHARED[0], tmp_path, LR_CENTRES)
    assert 2 not in costs.lag_fraction("adamw/2bw")
    assert any("rows stop at step" in m for m in costs.missing)


def test_verdicts_on_known_lags(tmp_path):
    for c in SHARED:
        _write_cell(tmp_path, c)
    shared = {c.size: cell_costs(c, tmp_path, LR_CENTRES) for c in SHARED}
    values = statement_values(shared, {s: [c] for s, c in shared.items()})
    # P1: 0.5 - 2 x 0.1 = 0.3 per seed (the wobbles: +w - 2w = -w)
    assert all(v == pytest.approx(0.3 - 0.01 * (s - 1.5), abs=1e-9)
               for s, v in values["P1"].items())
    v = decide(statements(list(shared), list(shared)), values)
    assert v["P1"].status == PASS and v["P2a"].status == PASS and v["P2b"].status == PASS
    assert v["P1"].p_floor == pytest.approx(2 / 16)          # 4 seeds, two-sided
    assert v["S-adamw"].status == INCONCLUSIVE and "1 seed" not in v["S-adamw"].reason


def test_a_child_waits_for_its_parent(tmp_path):
    # Muon as bad as AdamW: P1 does not pass, so no P1@size can
    bad = {**TRUE, "muon/2bw": 0.5}
    for c in SHARED:
        _write_cell(tmp_path, c, true=bad)
    shared = {c.size: cell_costs(c, tmp_path, LR_CENTRES) for c in SHARED}
    v = decide(statements(list(shared), list(shared)),
               statement_values(shared, {s: [c] for s, c in shared.items()}))
    assert v["P1"].status != PASS
    assert all(v[f"P1@{s}"].status != PASS for s in shared)
    assert math.isfinite(v["P1@n46k"].p_adjusted)


def test_paper_statement_reading():
    from llm_validation.delay_law.paper import read_statement
    assert read_statement("above", [(0.1, 0.3), (0.06, 0.2)], 0.05) == "supported"
    assert read_statement("above", [(0.1, 0.3), (0.01, 0.2)], 0.05) == "cannot decide"
    assert read_statement("below", [(0.0, 0.01), (0.0, 0.02)], 0.05) == "supported"
    assert read_statement("below", [(0.1, 0.3), (0.2, 0.4)], 0.05) == "contradicted"
