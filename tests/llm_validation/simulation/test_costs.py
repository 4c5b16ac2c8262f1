"""Cost models: unit costs, FLOP-based costs (by hand on a small model), the ring all-reduce,
profile costs from a hand-written profile, and validation of bad numbers."""

from __future__ import annotations

import dataclasses

import pytest

from llm_validation.config import preset
from llm_validation.simulation.costs import (
    Costs,
    Hardware,
    VStageCost,
    model_costs,
    optimizer_states,
    profile_costs,
    ring_allreduce_time,
    step_bytes_per_param,
    unit_costs,
)
from llm_validation.simulation.profile import Profile
from llm_validation.simulation.schedules import build_plan
from llm_validation.simulation.shapes import stage_shapes
from tests.llm_validation.simulation.profiles import hand_profile

#: FLOP-based costs are products and quotients of a few numbers: relative float agreement.
RTOL = 1e-12


def test_unit_costs():
    c = unit_costs(build_plan("interleaved-1f1b", 2, 4, 1, chunks=4))
    assert len(c.vstages) == 8 and c.vstages[0] == VStageCost(
        forward=0.25, backward=0.25, backward_input=0.125, backward_weight=0.125)
    assert c.step == (0.0, 0.0) and c.boundary == (0.0,) * 7 and c.time_unit == "tick"


def test_ring_allreduce():
    assert ring_allreduce_time(1e9, 1, 1e9, 1e-5) == 0.0
    assert ring_allreduce_time(1e9, 4, 1e9, 1e-5) == pytest.approx(1.5 + 6e-5, rel=RTOL)


def test_model_costs_by_hand():
    m = preset("tiny")
    plan = build_plan("1f1b", 2, 2, 1)
    shapes = stage_shapes(m, 2, seq_len=64, activation_bytes=2)
    hw = Hardware(gpu_tflops=10, link_gbps=80, link_latency_us=2, hbm_gbps=100)
    c = model_costs(plan, shapes, hw, microbatch_tokens=256, data_parallel=4, optimizer="adamw")
    f0 = 256 * shapes[0].forward_flops_per_token / 10e12
    assert c.vstages[0].forward == pytest.approx(f0, rel=RTOL)
    assert c.vstages[0].backward == pytest.approx(2 * f0, rel=RTOL)
    assert c.vstages[0].backward_input == c.vstages[0].backward_weight == c.vstages[0].forward
    assert c.boundary == (pytest.approx(256 * 128 * 2 / 10e9, rel=RTOL),)   # 80 Gb/s = 10 GB/s
    assert c.latency == pytest.approx(2e-6, rel=RTOL)
    assert c.step[1] == pytest.approx(shapes[1].params * step_bytes_per_param(2) / 100e9, rel=RTOL)
    assert c.allreduce[0] == pytest.approx(
        ring_allreduce_time(4 * shapes[0].params, 4, 10e9, 2e-6), rel=RTOL)
    assert c.time_unit == "s" and c.data_parallel == 4 and c.microbatch_tokens == 256
    muon = model_costs(plan, shapes, hw, microbatch_tokens=256, optimizer="muon")
    assert muon.step[0] < c.step[0]   # one state tensor on hidden matrices instead of two


def test_profile_costs_use_the_measured_numbers():
    prof = Profile.from_dict(hand_profile())
    plan = build_plan("2bw", 3, 4, 2)
    c = profile_costs(plan, prof)
    assert [v.forward for v in c.vstages] == [0.010, 0.011, 0.014]
    assert [v.backward for v in c.vstages] == [0.020, 0.022, 0.030]
    assert c.vstages[0].backward_input == 0.010                      # half when not measured
    assert (c.vstages[2].backward_input, c.vstages[2].backward_weight) == (0.012, 0.018)
    assert c.step == (0.004, 0.004, 0.005) and c.boundary == (0.001, 0.002)
    assert c.microbatch_tokens == 512 and c.allreduce == (0.0,) * 3
    fast = profile_costs(plan, prof, link=Hardware(gpu_tflops=1, link_gbps=8, link_latency_us=0))
    assert fast.boundary == (pytest.approx(1e6 / 1e9, rel=RTOL), pytest.approx(2e6 / 1e9, rel=RTOL))
    with pytest.raises(ValueError, match="--stages 3"):
        profile_costs(build_plan("2bw", 2, 4, 1), prof)
    with pytest.raises(ValueError, match="need --link-gbps"):
        profile_costs(plan, prof, data_parallel=2)
    more = profile_costs(plan, prof, data_parallel=2, grad_bytes=[8e6] * 3,
                         link=Hardware(gpu_tflops=1, link_gbps=8, link_latency_us=0))
    assert more.allreduce == (pytest.approx(8e6 / 1e9, rel=RTOL),) * 3


@pytest.mark.parametrize("field,value", [("forward", 0.0), ("backward", -1.0),
                                         ("backward_input", float("nan"))])
def test_non_positive_compute_costs_are_refused(field, value):
    good = dict(forward=1.0, backward=1.0, backward_input=0.5, backward_weight=0.5)
    with pytest.raises(ValueError, match=field):
        VStageCost(**{**good, field: value})


def test_bad_costs_and_hardware_are_refused():
    c = unit_costs(build_plan("1f1b", 2, 2, 1))
    with pytest.raises(ValueError, match="step"):
        dataclasses.replace(c, step=(-1.0, 0.0))
    with pytest.raises(ValueError, match="K-1 boundaries"):
        dataclasses.replace(c, boundary=())
    with pytest.raises(ValueError, match="gpu_tflops"):
        Hardware(gpu_tflops=0, link_gbps=1)
    with pytest.raises(ValueError, match="link_gbps"):
        Hardware(gpu_tflops=1, link_gbps=-5)
    with pytest.raises(ValueError, match="no state model"):
        optimizer_states("adagrad")
    assert isinstance(c, Costs)
