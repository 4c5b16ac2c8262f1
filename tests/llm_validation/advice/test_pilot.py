"""Pilot runs from a ledger's per-run table and from run directories; pairs and their lag."""

from __future__ import annotations

import json
import math

import pytest

from llm_validation.advice.pilot import (load_pilot, pairs, runs_from_claims, stat_means,
                                         sync_curve)
from tests.llm_validation.advice.synthetic_ledger import (DROP, V_T, pair_records, sync_record,
                                                          write_ledger)
from tests.llm_validation.validation.synthetic_runs import fake_run

EXACT = 1e-12


def test_ledger_table_pairs_and_lag(tmp_path):
    recs = [pair_records(opt="muon", T=200, seed=s, g=0.1 * (s + 1)) for s in range(2)]
    recs.append(pair_records(opt="muon", T=200, seed=0, g=0.05, mode="ef"))
    sr = dict(pair_records(opt="muon", T=200, seed=5, g=0.3))
    for name, rec in sr.items():                  # a synchronous-start run: not a plain pair
        if rec["mode"] == "delay":
            rec["sync_start"] = 40
    recs.append(sr)
    runs = runs_from_claims(write_ledger(tmp_path, recs) / "claims.json")
    assert math.isnan(runs[0].stats["grad_noise_var"])     # "nan" strings read back
    ps = sorted(pairs(runs), key=lambda p: (p.mode, p.gap_fraction))
    assert [(p.mode, round(p.gap_fraction, 9)) for p in ps] == [
        ("delay", 0.1), ("delay", 0.2), ("ef", 0.05)]
    for p in ps:   # linear synchronous curve: the lag fraction equals the gap fraction
        assert p.lag.fraction == pytest.approx(p.gap_fraction, abs=EXACT)
        assert p.gap == pytest.approx(p.gap_fraction * DROP, abs=EXACT)
        assert p.loss_drop == pytest.approx(DROP) and p.horizon == 200
    ref = sync_curve(runs, "muon")
    assert ref.horizon == 200 and ref.vals[-1] == pytest.approx(V_T) and len(ref.runs) == 3
    assert load_pilot(ledger=tmp_path)[0].name == runs[0].name


def test_reference_curve_is_the_largest_size(tmp_path):
    # a size ladder's longest horizon is at its smallest model (the 8x horizon runs are cheap
    # there); the reference is the largest size's curve, whatever the horizons
    recs = [pair_records(opt="muon", T=800, seed=s, g=0.1, n_params=1000) for s in range(2)]
    recs += [pair_records(opt="muon", T=300, seed=s, g=0.1, n_params=8000) for s in range(2)]
    recs += [pair_records(opt="muon", T=200, seed=s, g=0.1, n_params=8000) for s in range(2)]
    ref = sync_curve(runs_from_claims(write_ledger(tmp_path, recs) / "claims.json"), "muon")
    assert ref.horizon == 300 and {r.n_params for r in ref.runs} == {8000}
    assert len(ref.runs) == 2


def test_ledger_without_table_or_with_bad_record(tmp_path):
    (tmp_path / "claims.json").write_text(json.dumps({"claims": []}))
    with pytest.raises(ValueError, match="per-run table"):
        load_pilot(ledger=tmp_path)
    rec = sync_record(opt="muon", T=200, seed=0)
    del rec["val_curve"]
    write_ledger(tmp_path, [{"x": rec}])
    with pytest.raises(ValueError, match="run 'x'"):
        load_pilot(ledger=tmp_path)
    with pytest.raises(FileNotFoundError, match="--ledger"):
        load_pilot(ledger=tmp_path / "nowhere")
    with pytest.raises(ValueError, match="no finished synchronous run"):
        sync_curve([], "muon")


def test_run_directories(tmp_path):
    for seed in (0, 1):
        fake_run(tmp_path, opt="muon", val=2.0, seed=seed)
        fake_run(tmp_path, opt="muon", val=2.2, seed=seed, tau=1)
    fake_run(tmp_path, opt="muon", val=2.4, seed=2, tau=1, status="running")
    runs = load_pilot(pilot=tmp_path)
    assert len(runs) == 4                                   # the unfinished run is left out
    ps = pairs(runs)
    assert len(ps) == 2 and all(p.gap == pytest.approx(0.2) for p in ps)
    assert ps[0].sync.stats["update_primal_norm"] > 0 and ps[0].sync.momentum is not None


def test_stat_means_skip_the_first_tenth_and_non_numbers():
    rows = [{"kind": "train", "step": s, "a": float(s), "lr": 1.0, "b": None} for s in range(10)]
    rows.append({"kind": "eval", "step": 10, "val_loss": 1.0})
    assert stat_means(rows, 10) == {"a": pytest.approx(5.0)}           # steps 1..9
