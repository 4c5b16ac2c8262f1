"""Peak memory: weight copies from the replay (sync 1; 2BW 2 as the runtime holds them, 3 with a
separate master; PipeDream P - d), activations in flight, gradient buffers, and bytes by hand."""

from __future__ import annotations

import dataclasses

from llm_validation.simulation.costs import unit_costs
from llm_validation.simulation.engine import simulate
from llm_validation.simulation.memory import MemoryModel, peak_memory, weight_copies
from llm_validation.simulation.schedules import build_plan


def _mem(schedule, P, M, T=3, model=None, **costs):
    plan = build_plan(schedule, P, M, T)
    return peak_memory(simulate(plan, dataclasses.replace(unit_costs(plan), **costs)), model)


def test_weight_copies():
    P, M = 4, 5
    for s in ("gpipe", "1f1b", "zb-h1", "interleaved-1f1b"):
        plan = build_plan(s, P, 2 * P if s.startswith("inter") else M, 3)
        assert [weight_copies(plan, d) for d in range(P)] == [1] * P
    plan = build_plan("2bw", P, M, 3)
    # two slots and the master on stages that hold microbatches of two batches at a step; the
    # last stage never does (nothing in flight at its step): one stash and the master
    assert [weight_copies(plan, d, separate_master=True) for d in range(P)] == [3, 3, 3, 2]
    assert [weight_copies(plan, d) for d in range(P)] == [2] * P
    plan = build_plan("pipedream", P, M, 3)
    assert [weight_copies(plan, d) for d in range(P)] == [4, 3, 2, 1]
    assert [weight_copies(plan, d, separate_master=True) for d in range(P)] == [5, 4, 3, 1]


def test_counts_and_buffers():
    rows = _mem("1f1b", 4, 6)
    assert [r["activations_in_flight"] for r in rows] == [4, 3, 2, 1]
    assert [r["grad_buffers"] for r in rows] == [1] * 4
    assert "total_bytes" not in rows[0]
    assert [r["activations_in_flight"] for r in _mem("gpipe", 3, 5)] == [5] * 3


def test_bytes_by_hand():
    model = MemoryModel(params=[100, 200], matrix_params=[60, 150], activation_bytes=[10, 30],
                        optimizer="muon", ef=True, separate_master=True)
    r0, r1 = _mem("2bw", 2, 2, model=model)
    assert (r0["weight_copies"], r1["weight_copies"]) == (3, 2)
    assert r0["weights_bytes"] == 3 * 100 * 4 and r1["weights_bytes"] == 2 * 200 * 4
    assert r0["grads_bytes"] == 100 * 4
    # muon: 1 state on hidden matrices, 2 elsewhere; EF adds one buffer everywhere
    assert r0["optimizer_bytes"] == ((1 + 1) * 60 + (2 + 1) * 40) * 4
    assert r0["activation_bytes"] == 2 * 10 and r1["activation_bytes"] == 30
    assert r0["total_bytes"] == sum(r0[k] for k in ("weights_bytes", "grads_bytes",
                                                   "optimizer_bytes", "activation_bytes"))


def test_one_device_memory_is_the_unsplit_model_by_hand():
    """One weight copy, one gradient buffer, the optimizer's state of every parameter and one
    microbatch's activations through every stage, in float32 bytes."""
    from llm_validation.simulation.costs import optimizer_states
    from llm_validation.simulation.memory import MemoryModel, one_device_memory
    model = MemoryModel(params=(10, 20), matrix_params=(4, 8), activation_bytes=(100, 200),
                        optimizer="muon")
    on_matrix, other = optimizer_states("muon")
    mem = one_device_memory(model)
    assert mem["weights_bytes"] == 30 * 4 and mem["grads_bytes"] == 30 * 4
    assert mem["optimizer_bytes"] == (on_matrix * 12 + other * 18) * 4
    assert mem["activation_bytes"] == 300 and mem["params"] == 30
    assert mem["total_bytes"] == 240 + (on_matrix * 12 + other * 18) * 4 + 300
