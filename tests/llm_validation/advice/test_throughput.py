"""The schedule table is the simulator's answer at the user's shape."""

from __future__ import annotations

import argparse

import pytest

from delaybound.cost_flags import cost_setup
from llm_validation.advice.throughput import schedule_table
from llm_validation.simulation.summary import summarize


def _args(**kw):
    base = dict(unit_costs=False, from_dir=None, model="smollm-135m", data_parallel=(1,),
                gpu_tflops=400.0, link_gbps=400.0, link_latency_us=5.0, dp_gbps=None,
                hbm_gbps=2000.0, seq_len=512, microbatch_size=1, dtype="bfloat16",
                optimizer="muon", balance="layers", no_overlap_p2p=False,
                overlap_allreduce=False, separate_master=False)
    return argparse.Namespace(**{**base, **kw})


def test_table_matches_summarize_and_ef_costs_more_memory():
    setup, ef = cost_setup(_args()), cost_setup(_args(), ef=True)
    t = schedule_table(4, 8, setup=setup, setup_ef=ef)
    s, _ = summarize("2bw", 4, 8, 4, make_costs=setup["make_costs"],
                     memory_for=setup["memory_for"])
    assert t["2bw"]["steady_step_time_s"] == s["steady_step_time"]
    assert t["1f1b"]["speedup_vs_1f1b"] == 1.0 and t["2bw"]["tokens_per_step"] == 8 * 512
    assert t["2bw+ef"]["peak_memory_gib"] > t["2bw"]["peak_memory_gib"]
    assert t["gpipe"]["peak_memory_gib"] > t["1f1b"]["peak_memory_gib"]
    # interleaved needs M a multiple of P: skipped with the simulator's reason, not an error
    t2 = schedule_table(4, 6, setup=setup, setup_ef=ef)
    assert "skipped" in t2["interleaved-1f1b"] and "speedup_vs_1f1b" in t2["2bw"]
    with pytest.raises(ValueError, match="does not apply"):
        schedule_table(4, 2, setup=setup, setup_ef=ef)          # 2BW needs M >= P
