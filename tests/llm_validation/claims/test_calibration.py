"""The ledger's cost model: measured on this machine, cached per ledger folder, used by the
plan; the constants remain the fallback."""

from __future__ import annotations

import pytest

from llm_validation.claims.plan import calibration
from llm_validation.claims.plan.calibration import (
    CALIBRATION_FILE,
    CostModel,
    constant_model,
    load_or_calibrate,
)
from llm_validation.claims.plan.plan import build_plan
from llm_validation.claims.catalogue.registry import get_claims
from llm_validation.claims.plan.scales import OPT_COST, base_config, get_scale
from llm_validation.records.atomic_io import read_json

#: Shrunk base runs: the calibration's real timed runs take well under a second each.
SMALL = ("run.batch_size=2", "run.microbatches=1", "data.seq_len=16", "run.eval_batches=1")


def test_constant_model_is_the_old_formula():
    scale = get_scale("tiny")
    m = constant_model(scale, ["adamw", "muon"])
    assert m.source == "constants"
    assert m.step_s("muon") == pytest.approx(scale.sec_per_step * OPT_COST["muon"])
    assert m.step_s("lion") == m.step_s("adamw")          # not measured: AdamW's
    assert m.ratios()["muon"] == pytest.approx(OPT_COST["muon"], abs=1e-3)


def test_run_cost_scales_with_steps_and_batch():
    scale = get_scale("tiny")
    cfg = base_config(scale, "muon")
    m = CostModel(sec_per_step={"adamw": 0.1, "muon": 0.3}, source="calibrated")
    assert m.run_cost(cfg, cfg.run.batch_size) == pytest.approx(0.3 * cfg.run.steps)
    assert m.run_cost(cfg, cfg.run.batch_size // 2) == pytest.approx(0.6 * cfg.run.steps)


def test_calibration_is_measured_once_and_reused(tmp_path, monkeypatch):
    scale = get_scale("tiny")
    calls = []
    real = calibration.calibrate
    monkeypatch.setattr(calibration, "calibrate",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    first = load_or_calibrate(tmp_path, scale, ["adamw", "muon"], overrides=SMALL)
    assert first.source == "calibrated" and set(first.sec_per_step) == {"adamw", "muon"}
    assert all(v > 0 for v in first.sec_per_step.values())
    saved = read_json(tmp_path / CALIBRATION_FILE)
    assert saved["sec_per_step"] == pytest.approx(first.sec_per_step)
    again = load_or_calibrate(tmp_path, scale, ["muon", "adamw"], overrides=SMALL)
    assert len(calls) == 1 and again.sec_per_step == pytest.approx(first.sec_per_step)
    assert again.detail["cached"] is True
    # another base config (here: another batch) is another measurement
    assert load_or_calibrate(tmp_path, scale, ["adamw"], overrides=SMALL[1:],
                             measure=False) is None
    assert len(calls) == 1


def test_plan_costs_come_from_the_model():
    scale, claims = get_scale("tiny"), get_claims(["ef-halves-gap"])
    model = CostModel(sec_per_step={"adamw": 1.0, "muon": 10.0, "normuon": 10.0, "soap": 1.0},
                      source="calibrated")
    plan = build_plan(claims, scale, seeds=(0,), cost_model=model)
    assert plan.cost_model is model
    for r in plan.available():
        expect = model.step_s(r.cfg.optim.name) * r.cfg.run.steps
        assert r.cost_s == pytest.approx(expect * r.cfg.run.batch_size / 16)
    assert build_plan(claims, scale, seeds=(0,)).cost_model.source == "constants"
