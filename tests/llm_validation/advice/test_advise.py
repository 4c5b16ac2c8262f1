"""The advice composed from a synthetic ledger and a hand-made throughput table."""

from __future__ import annotations

import pytest

from llm_validation.advice.advise import AdviseSpec, advise
from llm_validation.advice.pilot import runs_from_claims
from tests.llm_validation.advice.synthetic_ledger import pair_records, write_ledger

EXACT = 1e-9


def _table(t2bw: float = 0.08) -> dict:
    rows = {"1f1b": 0.1, "gpipe": 0.1, "interleaved-1f1b": 0.095, "zb-h1": 0.09,
            "2bw": t2bw, "2bw+ef": t2bw}
    return {k: {"steady_step_time_s": v, "tokens_per_step": 1000, "tokens_per_s": 1000 / v,
                "peak_memory_gib": 1.0, "speedup_vs_1f1b": 0.1 / v} for k, v in rows.items()}


def _runs(tmp_path, g=0.1, g_ef=0.04):
    recs = [pair_records(opt="muon", T=200, seed=s, g=g) for s in range(3)]
    recs += [pair_records(opt="muon", T=200, seed=s, g=g_ef, mode="ef") for s in range(3)]
    return runs_from_claims(write_ledger(tmp_path, recs) / "claims.json")


def test_ratios_and_recommendation_by_hand(tmp_path):
    spec = AdviseSpec(optimizer="muon", stages=8, microbatches=32, tokens=1e6)
    r = advise(spec, _runs(tmp_path), _table())
    assert r["target_steps"] == 1000
    # lag 10% of the run (linear curve), 2BW 1.25x faster: 1 / (0.9 * 1.25) = 0.8889
    d = r["delay_cost"]["2bw"]
    assert d["used"] == "steps" and d["lag_fraction"]["estimate"] == pytest.approx(0.1)
    assert d["lag_steps"]["estimate"] == pytest.approx(100)
    assert r["time_to_target"]["2bw"]["ratio"] == pytest.approx(1 / (0.9 * 1.25), abs=EXACT)
    assert r["time_to_target"]["2bw+ef"]["ratio"] == pytest.approx(1 / (0.96 * 1.25), abs=EXACT)
    assert r["time_to_target"]["zb-h1"]["ratio"] == pytest.approx(0.9, abs=EXACT)
    assert r["recommendation"]["schedule"] == "2bw+ef"
    assert r["recommendation"]["why"].count(". ") == 1          # two sentences
    assert "theory" in d["predictions"]                          # both predictors reported


def test_a_slow_2bw_is_not_recommended(tmp_path):
    r = advise(AdviseSpec(optimizer="muon", stages=8, microbatches=32, tokens=1e6),
               _runs(tmp_path, g=0.3, g_ef=0.3), _table(t2bw=0.099))
    assert r["recommendation"]["schedule"] == "zb-h1"


def test_bad_input(tmp_path):
    runs = _runs(tmp_path)
    with pytest.raises(ValueError, match="--optimizer"):
        AdviseSpec(optimizer="rmsprop", stages=8, microbatches=8, tokens=1e6)
    with pytest.raises(ValueError, match="--stages"):
        AdviseSpec(optimizer="muon", stages=1, microbatches=8, tokens=1e6)
    with pytest.raises(ValueError, match="shorter than the pilot's shortest horizon"):
        advise(AdviseSpec(optimizer="muon", stages=8, microbatches=8, tokens=1e5), runs, _table())
    with pytest.raises(ValueError, match="no finished synchronous run of 'adamw'"):
        advise(AdviseSpec(optimizer="adamw", stages=8, microbatches=8, tokens=1e6), runs,
               _table())
    sync_only = [r for r in runs if r.mode == "sync"]
    with pytest.raises(ValueError, match="no 2BW/sync pair"):
        advise(AdviseSpec(optimizer="muon", stages=8, microbatches=8, tokens=1e6), sync_only,
               _table())


def test_a_horizon_inside_the_pilots_range_is_interpolated(tmp_path):
    # pairs at 200 and 800 steps: a 500-step target lies inside the fitted range (advised, the
    # gap fraction between the two measured ones), a 100-step one below it (refused)
    recs = [pair_records(opt="muon", T=T, seed=s, g=g) for T, g in ((200, 0.2), (800, 0.05))
            for s in range(3)]
    runs = runs_from_claims(write_ledger(tmp_path, recs) / "claims.json")
    r = advise(AdviseSpec(optimizer="muon", stages=8, microbatches=8, tokens=5e5), runs, _table())
    assert r["target_steps"] == 500
    assert 0.05 < r["delay_cost"]["2bw"]["gap_fraction"]["estimate"] < 0.2
    with pytest.raises(ValueError, match=r"shortest horizon \(200 steps\)"):
        advise(AdviseSpec(optimizer="muon", stages=8, microbatches=8, tokens=1e5), runs, _table())
