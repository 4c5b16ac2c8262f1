"""Schedule2BW (PipeDream-2BW on torch.distributed.pipelining) equals the emulator bitwise.

P gloo processes run the user's ``PipelineStage`` (a stack of TransformerEncoderLayer blocks,
examples/schedule2bw_encoder.py) under ``Schedule2BW``; the single process runs the whole model
under ``DelayedOptimizer(tau=1, ef_lambda)``. Every configuration of one P runs inside ONE
launch (a fresh stage and schedule per configuration) to keep the test short.
"""

from __future__ import annotations

import json

import pytest
import torch

from llm_validation.pipeline.watchdog import Deadlines
from llm_validation.pipeline import p2p_trace
from llm_validation.pipeline.processes import PipelineFailure, spawn_stages
from llm_validation.pipeline.schedule import check_schedule, schedule_2bw
from llm_validation.pipeline.segments import drain_2bw, segment_2bw
from tests.llm_validation.pipeline.schedule2bw_support import (
    configs,
    equal_runs,
    example_worker,
    gather,
    reference,
    stage_worker,
)

#: Batches per configuration: enough for batch t to read W(t-1) != W(t-2) on every stage.
STEPS = 4
#: CUDA float32 kernels (cuBLAS, attention) add in another order than the CPU's, ~1e-7
#: relative per op, which AdamW's normalised steps carry into the weights; over 4 steps the
#: losses are expected within ~1e-5 relative (not measured: no GPU here). 1e-3 is a "same
#: computation" check, not a bitwise one: skipping the version copy moves the mean loss of
#: batch 3 by 0.149 (about 4 %, measured on CPU).
GPU_FP32_RTOL = 1e-3
#: A 2BW stage holds exactly two copies of its weights (the master is one of the versions).
WEIGHT_COPIES = 2.0


def test_segments_concatenate_to_the_2bw_action_list():
    for P in range(2, 6):
        for M in range(P, 2 * P + 2):
            for s in range(P):
                for N in range(1, 5):
                    for start in range(N):
                        acts = [a for t in range(start, N)
                                for a in segment_2bw(s, P, M, t, start)]
                        acts += drain_2bw(s, P, M, N, start)
                        assert acts == schedule_2bw(s, P, M, N, start), (P, M, s, N, start)
                        check_schedule(s, P, M, N, start)
    # segment t takes every forward of batch t in, and no other batch's
    for t in range(3):
        fwd = [a.mb for a in segment_2bw(0, 3, 4, t) if a.kind == "F"]
        assert fwd == list(range(4 * t, 4 * t + 4))
    with pytest.raises(ValueError, match="microbatches must be an integer >= stages"):
        segment_2bw(0, 3, 2, 0)


def _launch(tmp_path, monkeypatch, P: int, cfgs: list[dict]) -> dict:
    """One launch of P gloo processes running every config; checks the p2p-kind trace (one
    kind per message, all of ours batched) and returns :func:`gather`'s results."""
    trace = tmp_path / "trace"
    monkeypatch.setenv(p2p_trace.TRACE_ENV, str(trace))
    spawn_stages(stage_worker, (cfgs, str(tmp_path)), world=P, run_dir=tmp_path,
                 backend="gloo", deadlines=Deadlines(hang_s=60.0))
    traces = p2p_trace.read_traces(trace)
    assert len(traces) == P
    assert p2p_trace.mismatches(traces) == []
    ours = [r for recs in traces.values() for r in recs if r["origin"] == p2p_trace.DELAYBOUND]
    assert ours and {r["kind"] for r in ours} == {p2p_trace.BATCHED}
    return gather(tmp_path, P)


def test_p2_equals_delayed_optimizer(tmp_path, monkeypatch):
    base = configs(2, STEPS)
    flush = {"name": "adamw-lam1-M2-flush2", "optim": "adamw", "lam": 1.0, "M": 2,
             "steps": STEPS, "flush_at": 2}
    knobs = {"name": "adamw-lam0-M2-lrdecay-unscaled", "optim": "adamw", "lam": 0.0, "M": 2,
             "steps": STEPS, "lr_decay": True, "scale_grads": False}
    got = _launch(tmp_path, monkeypatch, 2, base + [flush, knobs])
    for c in base + [flush, knobs]:
        ref = reference(c)
        assert len(ref["losses"]) == STEPS
        assert equal_runs(got[c["name"]], ref), c["name"]
        assert got[c["name"]]["copies"] == [WEIGHT_COPIES] * 2
    assert len(got[flush["name"]]["evals"]) == 1


@pytest.mark.parametrize("mutation", ["reads_newest", "skips_copy", "swaps_data"])
def test_mutations_fail(tmp_path, monkeypatch, mutation):
    """Each mutation breaks the equality: reading the master's slot (W(t) once step t-1 is
    taken) and swapping ``p.data`` make autograd find a saved weight modified in place by the
    step (the run fails); skipping the version copy steps from W(t-1) (other numbers)."""
    c = {"name": mutation, "optim": "adamw", "lam": 0.0, "M": 2, "steps": STEPS,
         "mutation": mutation}
    try:
        got = _launch(tmp_path, monkeypatch, 2, [c])[mutation]
    except PipelineFailure as exc:
        assert "modified by an inplace operation" in (tmp_path / "logs" / "stage0.log").read_text()
        assert mutation != "skips_copy", exc
        return
    assert mutation == "skips_copy"
    assert not equal_runs(got, reference({**c, "mutation": None}))


def test_p3_equals_delayed_optimizer(tmp_path, monkeypatch):
    cfgs = configs(3, STEPS)
    got = _launch(tmp_path, monkeypatch, 3, cfgs)
    for c in cfgs:
        assert equal_runs(got[c["name"]], reference(c)), c["name"]
        assert got[c["name"]]["copies"] == [WEIGHT_COPIES] * 3


def test_encoder_example_trains_with_2bw_and_1f1b_side_by_side(tmp_path):
    """The example's body (user-split TransformerEncoderLayer stack, torch's Schedule1F1B,
    then Schedule2BW) on 2 gloo processes; its CLI (``mp.spawn``) is the same body."""
    spawn_stages(example_worker, (["--microbatches", "2", "--steps", "12"], str(tmp_path)),
                 world=2, run_dir=tmp_path, backend="gloo", deadlines=Deadlines(hang_s=60.0))
    out = json.loads((tmp_path / "example.json").read_text())
    a, b = out["1f1b"]["loss"], out["2bw"]["loss"]
    assert len(a) == len(b) == 12
    assert a[0] == b[0]                    # batch 0 runs at W(0) under both schedules
    assert a[1] != b[1]                    # batch 1: W(1) under 1F1B, W(0) under 2BW
    assert a[-1] < 0.8 * a[0] and b[-1] < 0.8 * b[0]


def test_bad_construction_is_refused():
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage

    from llm_validation import Schedule2BW
    from tests.llm_validation.pipeline.schedule2bw_support import example

    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        ex = example()
        module = ex.split(ex.build_model(0), 0, 2)
        stage = PipelineStage(module, 0, 2, torch.device("cpu"))
        opt = torch.optim.AdamW(module.parameters())
        with pytest.raises(ValueError, match="microbatches must be an integer >= stages"):
            Schedule2BW(stage, 1, ex.loss_fn, optimizer=opt)
        with pytest.raises(ValueError, match="exactly the stage module's trainable"):
            Schedule2BW(stage, 2, ex.loss_fn,
                        optimizer=torch.optim.AdamW(list(module.parameters())[:1]))
        sched = Schedule2BW(stage, 2, ex.loss_fn, optimizer=opt)
        with pytest.raises(ValueError, match="already belongs"):
            Schedule2BW(stage, 2, ex.loss_fn, optimizer=opt)
        with pytest.raises(RuntimeError, match="no batch in flight"):
            sched.finish()
        with pytest.raises(ValueError, match="needs the batch's inputs"):
            sched.step()
        with pytest.raises(RuntimeError, match="call schedule.attach"):
            Schedule2BW(PipelineStage(ex.split(ex.build_model(0), 0, 2), 0, 2,
                                      torch.device("cpu")), 2, ex.loss_fn).step(
                torch.zeros(4, 16, dtype=torch.long))
        # sharded or wrapped parameters, anywhere in the stage, are refused at construction
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        sharded = ex.split(ex.build_model(0), 0, 2)
        fully_shard(sharded[1], mesh=init_device_mesh("cpu", (1,)))
        with pytest.raises(ValueError, match="data-parallel wrapper .*fully_shard|sharded"):
            Schedule2BW(PipelineStage(sharded, 0, 2, torch.device("cpu")), 2, ex.loss_fn)
        ddp = torch.nn.parallel.DistributedDataParallel(ex.split(ex.build_model(0), 0, 2))
        with pytest.raises(ValueError, match="data-parallel wrapper"):
            Schedule2BW(PipelineStage(ddp, 0, 2, torch.device("cpu")), 2, ex.loss_fn)
    finally:
        dist.destroy_process_group()


@pytest.mark.gpu
@pytest.mark.skipif((torch.cuda.device_count() if torch.cuda.is_available() else 0) < 2,
                    reason="needs 2 CUDA devices (NCCL, one per rank); NOT RUN YET")
def test_p2_on_two_gpus_with_nccl(tmp_path, monkeypatch):
    c = {"name": "gpu", "optim": "adamw", "lam": 1.0, "M": 2, "steps": STEPS, "cuda": True}
    monkeypatch.setenv(p2p_trace.TRACE_ENV, str(tmp_path / "trace"))
    spawn_stages(stage_worker, ([c], str(tmp_path)), world=2, run_dir=tmp_path,
                 backend="nccl", deadlines=Deadlines(hang_s=60.0))
    got, ref = gather(tmp_path, 2)["gpu"], reference(c)
    assert p2p_trace.mismatches(p2p_trace.read_traces(tmp_path / "trace")) == []
    for a, b in zip(got["losses"], ref["losses"], strict=True):
        assert torch.allclose(a, b, rtol=GPU_FP32_RTOL, atol=0.0), (a, b)
    assert got["copies"] == [WEIGHT_COPIES] * 2
