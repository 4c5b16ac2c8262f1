"""The overlapped data-parallel all-reduce (``pipeline/grad_buckets.py``): bucket plans, the
capacity knob, and two real gloo replicas showing that the buckets are launched inside the
backward of the LAST microbatch (never earlier), in order, and average bitwise as the flat
all-reduce after the backward did; and a P2 x D2 2BW run that is bitwise the same with tiny
buckets as with the overlap off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from llm_validation.pipeline.grad_buckets import (BUCKET_BYTES, BUCKET_ENV, GradBuckets,
                                                  bucket_bytes, plan_buckets)
from llm_validation.pipeline.replicas import backward_order
from llm_validation.rundir import read_metrics
from llm_validation.run import run as launch
from llm_validation.training.model import Transformer, lm_loss
from tests.llm_validation.helpers import MICRO
from tests.llm_validation.pipeline.support import dp_cfgs, pipeline_weights, small_corpus

#: A capacity far below one MICRO block's weights (a 32 x 32 matrix is 4 KiB), so the stage's
#: leaves fall into many buckets.
TINY_BUCKET = 2048
#: Microbatches per step in the two-replica test (several, so "only on the last" can fail).
MICROBATCHES = 3


@pytest.fixture(autouse=True)
def _env(pipeline_env, monkeypatch):
    monkeypatch.delenv(BUCKET_ENV, raising=False)


def test_plan_cuts_the_backward_order_into_runs_within_the_capacity():
    sizes = [100, 40, 40, 300, 10]
    assert plan_buckets(sizes, [4, 3, 2, 1, 0], 100) == [[4], [3], [2, 1], [0]]
    assert plan_buckets(sizes, [0, 1, 2, 3, 4], 1000) == [[0, 1, 2, 3, 4]]
    assert plan_buckets(sizes, [1, 2, 0, 4, 3], 90) == [[1, 2], [0], [4], [3]]   # 300 alone
    with pytest.raises(ValueError, match="permutation"):
        plan_buckets(sizes, [0, 1, 2, 3], 100)
    with pytest.raises(ValueError, match="capacity"):
        plan_buckets(sizes, [0, 1, 2, 3, 4], 0)
    assert backward_order(["b", "a", "c"], ["a", "b", "c"]) == [2, 0, 1]   # c, b, a


def test_capacity_from_the_environment(monkeypatch):
    assert bucket_bytes() == BUCKET_BYTES == 25 * 2**20
    monkeypatch.setenv(BUCKET_ENV, "0")
    assert bucket_bytes() == 0
    monkeypatch.setenv(BUCKET_ENV, "4096")
    assert bucket_bytes() == 4096
    for bad in ("-1", "25MiB"):
        monkeypatch.setenv(BUCKET_ENV, bad)
        with pytest.raises(ValueError, match=BUCKET_ENV):
            bucket_bytes()


def _replica(rank: int, world: int, init: str, out: str, arm_style: str) -> None:
    """One replica: MICRO model, its own microbatches, buckets armed ``last`` (arm(1) before
    the last backward, as 2BW) or ``count`` (arm(M) before the first, as torch's schedules);
    records every leaf accumulation, launch and backward end, and compares the average with
    the flat all-reduce of the same local gradients."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    model = Transformer(MICRO, seed=0)
    names = [n for n, _ in model.named_parameters()]
    leaves = [p for _, p in model.named_parameters()]
    events: list[list] = []
    mb_now = [0]
    for i, p in enumerate(leaves):           # registered first: fires before the buckets' hook
        p.register_post_accumulate_grad_hook(lambda _p, i=i: events.append(["acc", i, mb_now[0]]))
    buckets = GradBuckets(leaves, backward_order(names, names), None, world, TINY_BUCKET,
                          on_launch=lambda b: events.append(["launch", b, mb_now[0]]))
    gen = torch.Generator().manual_seed(100 + rank)           # each replica its own data
    data = torch.randint(0, MICRO.vocab_size, (MICROBATCHES, 2, 9), generator=gen)
    if arm_style == "count":
        buckets.arm(MICROBATCHES)
    for j in range(MICROBATCHES):
        mb_now[0] = j
        if arm_style == "last" and j == MICROBATCHES - 1:
            buckets.arm(1)
        x, y = data[j, :, :-1], data[j, :, 1:]
        (lm_loss(model(x), y) / MICROBATCHES).backward()
        events.append(["end", None, j])
    local = [p.grad.clone() for p in leaves]
    averaged = buckets.finish()
    flat = torch.cat([g.reshape(-1) for g in local])          # the reduction before buckets
    dist.all_reduce(flat)
    flat.div_(world)
    offset, same, untouched = 0, [], []
    for p, a, g in zip(leaves, averaged, local):
        same.append(torch.equal(a, flat[offset:offset + g.numel()].view_as(g)))
        untouched.append(torch.equal(p.grad, g))               # the local S_d stays in .grad
        offset += g.numel()
    differs = not torch.equal(averaged[0], local[0])           # the replicas' data differ
    Path(out, f"rank{rank}.json").write_text(json.dumps(
        {"events": events, "buckets": buckets.buckets, "same": same, "untouched": untouched,
         "differs": differs}))
    dist.destroy_process_group()


@pytest.mark.parametrize("arm_style", ["last", "count"])
def test_buckets_launch_inside_the_last_backward_and_average_bitwise(tmp_path, arm_style):
    init = f"file://{tmp_path / 'rendezvous'}"
    mp.spawn(_replica, args=(2, init, str(tmp_path), arm_style), nprocs=2, join=True)
    for rank in (0, 1):
        rec = json.loads((tmp_path / f"rank{rank}.json").read_text())
        events, nb = rec["events"], len(rec["buckets"])
        assert nb >= 4, rec["buckets"]                          # a tiny capacity: many buckets
        assert all(rec["same"]) and all(rec["untouched"]) and rec["differs"]
        launches = [e for e in events if e[0] == "launch"]
        # never before the last microbatch, each bucket once, in bucket order
        assert [e[2] for e in launches] == [MICROBATCHES - 1] * nb
        assert [e[1] for e in launches] == list(range(nb))
        kinds = [(e[0], e[2]) for e in events]
        end_last = kinds.index(("end", MICROBATCHES - 1))
        first_launch = kinds.index(("launch", MICROBATCHES - 1))
        last_acc = max(k for k, e in enumerate(events) if e[0] == "acc")
        # launched while the backward still computes gradients, all before it returns
        assert first_launch < last_acc < end_last
        assert max(k for k, e in enumerate(events) if e[0] == "launch") < end_last


def test_2bw_p2_x_d2_with_tiny_buckets_equals_the_flat_all_reduce(tmp_path, monkeypatch):
    """The default ``allreduce`` mode: the overlapped all-reduce (many buckets) and the flat
    all-reduce after the backward (``DELAYBOUND_DP_BUCKET_BYTES=0``) give the same run."""
    corpus = small_corpus(tmp_path)
    runs = {}
    for label, cap in (("flat", "0"), ("buckets", str(TINY_BUCKET))):
        monkeypatch.setenv(BUCKET_ENV, cap)
        cfg, _ = dp_cfgs(tmp_path / label, corpus, pipeline="2bw", P=2, D=2)
        assert launch(cfg).status == "completed"
        runs[label] = cfg
    rows = {k: read_metrics(c.run.out_dir) for k, c in runs.items()}
    assert rows["flat"] == rows["buckets"] and len(rows["flat"]) > 6
    a, b = (pipeline_weights(runs[k], runs[k].run.out_dir) for k in ("flat", "buckets"))
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
