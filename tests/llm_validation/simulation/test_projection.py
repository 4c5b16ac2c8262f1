"""Projection: the grid's rows, 2BW's speed-up over 1F1B equal to the bubble-free limit
(M + P - 1) / M when stages are uniform and communication free, skipped points, the figure."""

from __future__ import annotations

import pytest

from llm_validation.config import preset
from llm_validation.simulation.costs import Hardware
from llm_validation.simulation.projection import (
    ProjectionSpec,
    plot_projection,
    project,
    resolve_microbatches,
    speedups,
)

#: Steady step times are differences of two makespans of sums of floats.
RTOL = 1e-9
#: Communication and optimizer steps made negligible: 1e15 Gb/s links and GB/s memory put them
#: ~1e-15 of a forward, far below RTOL.
FREE = dict(link_gbps=1e15, link_latency_us=0.0, hbm_gbps=1e15)


def test_resolve_microbatches():
    assert resolve_microbatches("4x", 8) == 32 and resolve_microbatches(6, 8) == 6
    for bad in ("x", "4y", "0", "-1x"):
        with pytest.raises(ValueError, match="microbatches"):
            resolve_microbatches(bad, 4)


def test_speedup_is_the_bubble_free_limit(tmp_path):
    spec = ProjectionSpec(model=preset("tiny"), hardware=Hardware(gpu_tflops=1.0, **FREE),
                          stages=(2, 4), microbatches=("2x", "5"), data_parallel=(1,),
                          schedules=("1f1b", "gpipe", "interleaved-1f1b", "2bw"),
                          seq_len=64, balance="uniform")
    calls = []
    rows = project(spec, progress=lambda i, n, label: calls.append((i, n)))
    assert len(rows) == 2 * 2 * 4 and calls[-1] == (16, 16)
    skipped = {(r["schedule"], r["stages"], r["microbatches"]) for r in rows if "skipped" in r}
    # interleaved needs M a multiple of P, and P x 2 chunks <= the 4 blocks of tiny
    assert skipped == {("interleaved-1f1b", P, 5) for P in (2, 4)} | {("interleaved-1f1b", 4, 8)}
    comp = speedups(rows)
    for c in comp:
        P, M = c["stages"], c["microbatches"]
        if c["baseline"] in ("1f1b", "gpipe"):
            assert c["speedup_2bw"] == pytest.approx((M + P - 1) / M, rel=RTOL)
        if c["baseline"] == "1f1b":   # same activations; one more float32 weight copy
            params = preset("tiny").n_params() / P
            assert c["extra_memory_gib"] == pytest.approx(4 * params / 2**30, rel=RTOL)
    one = [c for c in comp if c["baseline"] == "1f1b"]
    assert {(c["stages"], c["microbatches"]) for c in one} == {(2, 4), (2, 5), (4, 8), (4, 5)}
    two_bw = [r for r in rows if r["schedule"] == "2bw" and "skipped" not in r]
    assert all(r["weight_copies"] == 2 for r in two_bw)
    png = plot_projection(comp, tmp_path / "p.png", title="test")
    assert png.is_file() and png.stat().st_size > 10_000


def test_spec_is_validated():
    hw = Hardware(gpu_tflops=1.0, link_gbps=1.0)
    with pytest.raises(ValueError, match="2bw with the others"):
        ProjectionSpec(model=preset("tiny"), hardware=hw, stages=(2,), schedules=("1f1b",))
    with pytest.raises(ValueError, match="unknown schedule"):
        ProjectionSpec(model=preset("tiny"), hardware=hw, stages=(2,), schedules=("2bw", "x"))
    with pytest.raises(ValueError, match="stages"):
        ProjectionSpec(model=preset("tiny"), hardware=hw, stages=(1,))
