"""The recommendation says what its numbers say (issue 33): the sentence about 2BW's lag and
its faster step follows the sign of 2BW's time ratio to 1F1B; a pilot with one horizon is
flagged; an interval clipped at the edge of the lag's meaningful range is marked."""

from __future__ import annotations

import pytest

from delaybound.cmd_advise import CLIPPED, format_advice
from llm_validation.advice.advise import AdviseSpec, advise, recommendation
from llm_validation.advice.pilot import runs_from_claims
from tests.llm_validation.advice.synthetic_ledger import pair_records, write_ledger

REPAID_NOT = "more than the faster step repays"      # the lag costs more than the step gains
REPAID = "the faster step more than repays"          # the step gains more than the lag costs


def _table(t2bw: float) -> dict:
    rows = {"1f1b": 0.1, "gpipe": 0.1, "interleaved-1f1b": 0.095, "zb-h1": 0.09,
            "2bw": t2bw, "2bw+ef": t2bw}
    return {k: {"steady_step_time_s": v, "tokens_per_step": 1000, "tokens_per_s": 1000 / v,
                "peak_memory_gib": 1.0, "speedup_vs_1f1b": 0.1 / v} for k, v in rows.items()}


def _runs(tmp_path, gs, g_ef=None, T=200):
    recs = [pair_records(opt="muon", T=T, seed=s, g=g) for s, g in enumerate(gs)]
    recs += [pair_records(opt="muon", T=T, seed=s, g=g_ef if g_ef is not None else g, mode="ef")
             for s, g in enumerate(gs)]
    return runs_from_claims(write_ledger(tmp_path, recs) / "claims.json")


def test_sentence_of_the_demo_case_2bw_faster_than_1f1b_but_not_best():
    """The demo report's contradiction: ZB-H1 best at 0.90x, 2BW 0.927x 1F1B's time, and the
    sentence said the lag "costs more than the faster step repays"."""
    ttt = {"1f1b": {"ratio": 1.0}, "zb-h1": {"ratio": 0.90},
           "2bw": {"ratio": 0.927, "ratio_lo": 0.92, "ratio_hi": 0.95},
           "2bw+ef": {"ratio": 0.91, "ratio_lo": 0.90, "ratio_hi": 0.93}}
    table = {"2bw": {"speedup_vs_1f1b": 1.121}}
    delay = {"2bw": {"used": "empirical", "lag_fraction": {"estimate": 0.038, "lo": 0.025,
                                                           "hi": 0.063}}}
    why = recommendation(ttt, table, delay)["why"]
    assert REPAID_NOT not in why and REPAID in why and "0.927x" in why


@pytest.mark.parametrize("t2bw", [0.0889, 0.0899, 0.099, 0.11])
def test_sentence_follows_the_ratio_it_sits_beside(tmp_path, t2bw):
    """Lag 10% of the run; 2BW's step from 1.125x to 0.91x 1F1B's speed: the sentence says the
    lag is repaid exactly when 2BW's time ratio to 1F1B is below 1."""
    r = advise(AdviseSpec(optimizer="muon", stages=8, microbatches=32, tokens=1e6),
               _runs(tmp_path, [0.1, 0.1, 0.1]), _table(t2bw))
    two = r["time_to_target"]["2bw"]["ratio"]
    why = r["recommendation"]["why"]
    if r["recommendation"]["schedule"] in ("2bw", "2bw+ef"):
        assert two < 1
        return
    assert (REPAID in why) == (two < 1) and (REPAID_NOT in why) == (two >= 1), (two, why)


def test_one_horizon_pilot_is_flagged_and_several_are_not(tmp_path):
    spec = AdviseSpec(optimizer="muon", stages=8, microbatches=32, tokens=1e6)
    r = advise(spec, _runs(tmp_path / "a", [0.09, 0.1, 0.11]), _table(0.08))
    warn = [n for n in r["notes"] if n.startswith("WARNING")]
    assert len(warn) == 1 and "(2bw, 2bw+ef)" in warn[0]
    assert "one horizon (200 steps)" in warn[0] and "1,000 steps" in warn[0]
    assert any(line.startswith("WARNING") for line in format_advice(r))
    recs = [pair_records(opt="muon", T=T, seed=s, g=0.1 * (200 / T) ** 0.5, mode=m)
            for T in (100, 200) for s in range(3) for m in ("delay", "ef")]
    r = advise(spec, runs_from_claims(write_ledger(tmp_path / "b", recs) / "claims.json"),
               _table(0.08))
    assert not [n for n in r["notes"] if n.startswith("WARNING")]


def test_clipped_lag_interval_is_marked(tmp_path):
    """Spread gaps of both signs: the lag interval's lower end is clipped at -100% of the run;
    the printed interval marks it and a note says what the mark means."""
    r = advise(AdviseSpec(optimizer="muon", stages=8, microbatches=32, tokens=1e6),
               _runs(tmp_path, [-0.5, 0.2, 0.8]), _table(0.08))
    lf = r["delay_cost"]["2bw"]["lag_fraction"]
    assert lf["lo"] == -1.0
    text = "\n".join(format_advice(r))
    assert f"[-100.0%{CLIPPED}," in text and f"note: {CLIPPED} clipped" in text
