"""advise across sizes: the chosen law, the model-uncertainty range, and "extrapolation"."""

from __future__ import annotations

import pytest

from llm_validation.advice.advise import AdviseSpec, advise
from llm_validation.advice.transfer import ASSUMPTION, Target
from llm_validation.advice.model_uncertainty import extrapolation
from tests.llm_validation.advice.synthetic_pairs import make_pairs

TPS = 1024


def _table() -> dict:
    rows = {"1f1b": 0.1, "gpipe": 0.1, "interleaved-1f1b": 0.095, "zb-h1": 0.09,
            "2bw": 0.08, "2bw+ef": 0.08}
    return {k: {"steady_step_time_s": v, "tokens_per_step": TPS, "tokens_per_s": TPS / v,
                "peak_memory_gib": 1.0, "speedup_vs_1f1b": 0.1 / v} for k, v in rows.items()}


def _ladder_runs():
    """Three sizes x three tokens-per-parameter values; g = 0.1 / (tpp / 10) (the Chinchilla
    clock), so the steps law and the theory law disagree with the truth off the pilot."""
    pts = []
    for N in (10_000, 100_000, 1_000_000):
        for tpp in (5, 10, 20):
            pts.append((round(tpp * N / TPS), N, 0.1 * (tpp / 10) ** -1))
    return make_pairs(pts)[0]


def _spec(params: float, tpp: float = 20) -> AdviseSpec:
    return AdviseSpec(optimizer="muon", stages=8, microbatches=32, tokens=tpp * params,
                      params=params)


def test_chosen_law_and_model_uncertainty_range():
    r = advise(_spec(2e6), _ladder_runs(), _table())
    assert r["transfer"]["choice"]["law"] == "tokens_per_param"
    d = r["delay_cost"]["2bw"]
    assert d["used"] == "tokens_per_param"
    assert d["gap_fraction"]["estimate"] == pytest.approx(0.05, rel=1e-2)   # tpp 20: 0.1 / 2
    m = d["model_uncertainty"]
    assert "theory" not in m["laws"] and "theory" in m["ruled_out"]          # ruled out
    # chosen on the held-out cells (batch and horizon): steps misses most of them
    assert r["transfer"]["choice"]["deciding_hold_out"] == "cells"
    assert set(m["laws"]) >= {"tokens_per_param", "joint"} and "steps" in m["ruled_out"]
    g, f, t = m["gap_fraction"], m["lag_fraction"], m["time_ratio"]
    assert g["lo"] <= g["estimate"] <= g["hi"] and g["lo"] < g["hi"]
    assert f["lo"] <= f["estimate"] <= f["hi"]
    assert t["lo"] <= r["time_to_target"]["2bw"]["ratio"] <= t["hi"]
    assert r["extrapolation"] is None                       # 2x the size, 2x the horizon
    assert "Extrapolation" not in r["recommendation"]["why"]


def test_a_model_far_beyond_the_pilot_is_called_an_extrapolation():
    r = advise(_spec(1e9), _ladder_runs(), _table())
    e = r["extrapolation"]
    assert e["size_factor"] == pytest.approx(1000) and e["law"] == "tokens_per_param"
    why = r["recommendation"]["why"]
    assert "Extrapolation: the model is 1,000x the largest pilot size" in why
    assert ASSUMPTION["tokens_per_param"] in why


def test_a_horizon_far_beyond_the_pilot_is_called_an_extrapolation():
    t = Target(steps=20_000, tokens_per_step=TPS, n_params=1000)
    e = extrapolation(pilot_params=1000, pilot_steps=1000, target=t, law="steps")
    assert e["horizon_factor"] == 20 and "the horizon is 20.0x" in e["text"]
    assert extrapolation(pilot_params=1000, pilot_steps=1000, target=Target(
        steps=9000, tokens_per_step=TPS, n_params=9000), law="steps") is None


def test_a_law_predicting_the_whole_loss_decrease_is_left_out_of_the_range():
    """A power law in N carried far past the pilot can predict a gap share above 1 (the delayed
    run ending above where training began): it is named under ``outside`` and kept out of the
    range, which stays within the domain."""
    from llm_validation.advice.model_uncertainty import MAX_GAP_SHARE
    pts = [(round(tpp * N / TPS), N, 0.01 * (N / 1e4) ** 0.5 * (tpp / 10) ** -1)
           for N in (10_000, 100_000, 1_000_000) for tpp in (5, 10, 20)]
    spec = AdviseSpec(optimizer="muon", stages=8, microbatches=32, tokens=20 * 1e9,
                      params=1e9, batch_tokens=2 ** 20, law="steps")
    r = advise(spec, make_pairs(pts)[0], _table())
    d = r["delay_cost"]["2bw"]
    assert d["predictions"]["size"]["estimate"] >= MAX_GAP_SHARE
    m = d["model_uncertainty"]
    assert "size" in m["outside"] and "size" not in m["laws"]
    assert all(v < MAX_GAP_SHARE for v in m["laws"].values()) and len(m["laws"]) >= 2
    assert m["gap_fraction"]["hi"] < MAX_GAP_SHARE
