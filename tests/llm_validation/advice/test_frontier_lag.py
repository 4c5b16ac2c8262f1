"""The lag of the time to target read on the compute frontier, on synthetic runs whose frontier
is known: linear in log steps, ``F(s) = V_T + C log(T/s)``, so a gap ``g DROP`` sits at
``s* = T exp(-g DROP / C)`` and the compute lag is ``1 - exp(-g DROP / C)``."""

from __future__ import annotations

import math

import pytest

from llm_validation.advice.advise import AdviseSpec, advise
from llm_validation.advice.pilot import frontier_points, runs_from_claims, sync_curve
from llm_validation.advice.time_to_target import frontier_unusable, lag_fraction_from_gap
from tests.llm_validation.advice.synthetic_ledger import (DROP, V_T, pair_records, sync_record,
                                                          write_ledger)
from tests.llm_validation.advice.test_advise import _table

#: A few float operations (log, exp, a division) between the fit and the truth.
EXACT = 1e-9
#: The frontier's slope in nats per e-fold of steps.
C = 0.5
T = 200


def _front(s: float) -> float:
    return V_T + C * math.log(T / s)


def test_a_gap_read_on_the_frontier_by_hand():
    steps = [T * i / 8 for i in range(9)]
    vals = [V_T + DROP * (1 - s / T) for s in steps]
    fs = [T / 4, T / 2, T]
    front = (fs, [_front(s) for s in fs])
    for g in (0.05, 0.1, 0.2):
        assert lag_fraction_from_gap(steps, vals, g) == pytest.approx(g, abs=EXACT)   # curve
        assert lag_fraction_from_gap(steps, vals, g, front) == pytest.approx(
            1 - math.exp(-g * DROP / C), abs=EXACT)
    assert frontier_unusable(*front) is None
    assert "no compute frontier" in frontier_unusable([T], [V_T])
    assert "no falling" in frontier_unusable([T / 2, T], [V_T, V_T])


def _shorter_sync(Ts: list[int], seed: int) -> dict[str, dict]:
    out = {}
    for t in Ts:
        rec = sync_record(opt="muon", T=t, seed=seed)
        up = _front(t) - V_T
        rec["final_val_loss"] += up
        rec["val_curve"] = [[s, v + up] for s, v in rec["val_curve"]]
        out[f"muon-sync-T{t}-short-s{seed}"] = rec
    return out


def test_advise_reads_the_lag_on_the_frontier_when_the_pilot_has_one(tmp_path):
    recs = [pair_records(opt="muon", T=T, seed=s, g=0.1) for s in range(3)]
    spec = AdviseSpec(optimizer="muon", stages=8, microbatches=32, tokens=1e6)
    curve = advise(spec, runs_from_claims(write_ledger(tmp_path / "a", recs) / "claims.json"),
                   _table())
    runs = runs_from_claims(write_ledger(
        tmp_path / "b", recs + [_shorter_sync([50, 100], s) for s in range(3)]) / "claims.json")
    assert frontier_points(runs, sync_curve(runs, "muon")) == (
        [50.0, 100.0, 200.0], [pytest.approx(_front(50)), pytest.approx(_front(100)), V_T])
    front = advise(spec, runs, _table())
    f = 1 - math.exp(-0.1 * DROP / C)                    # 0.451: the curve reads 0.1
    d = front["delay_cost"]["2bw"]
    assert d["lag_reading"] == "frontier" and front["frontier"]["used"]
    assert d["lag_fraction"]["estimate"] == pytest.approx(f, abs=EXACT)
    assert front["time_to_target"]["2bw"]["ratio"] == pytest.approx(1 / ((1 - f) * 1.25),
                                                                     abs=EXACT)
    assert any(n.startswith("lag read on the compute frontier: the pilot's synchronous runs "
                            "at 50, 100, 200 steps") for n in front["notes"])
    c = curve["delay_cost"]["2bw"]
    assert c["lag_reading"] == "curve" and c["lag_fraction"]["estimate"] == pytest.approx(0.1)
    assert sum(n.startswith("lag read on the synchronous run's own curve") and
               "no compute frontier" in n for n in curve["notes"]) == 1
