"""Schedule2BW built and driven in torchtitan's order, with torchtitan's calls.

torchtitan (0.3.0) cannot be imported beside the CPU build of torch: its model package
imports a Triton kernel at import time. This test is a faithful copy of what its trainer
does with a pipeline schedule (torchtitan/distributed/pipeline_parallel.py and
torchtitan/trainer.py, 0.3.0):

1. the whole model on the meta device, cut into stage modules by module names;
2. ``PipelineStage(part, stage, stages, device, group=pp group)`` on the meta part;
3. the parallelisms applied to the part (here ``checkpoint_wrapper`` on every block) and
   ``stage.submod = part``;
4. ``get_schedule_class(name)`` and the builder's call ``schedule_class(stage,
   n_microbatches=, loss_fn=<loss returning (loss, count)>[0], scale_grads=False)``;
5. ``to_empty`` and the weights (here loaded, as a pretrained init or a checkpoint);
6. the optimizer and the lr scheduler built on the materialised part (attached here);
7. each step: ``step(arg_mbs=, kwarg_mbs=, target_mbs=, losses=, loss_kwargs=
   {"global_valid_tokens": ...}, return_outputs=False)`` and ``torch.sum(torch.stack(losses))``.

Then what the loop must no longer do is refused (optimizer / lr scheduler steps, the clip,
weights changed behind the schedule's back).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from llm_validation.pipeline.processes import spawn_stages
from llm_validation.pipeline.watchdog import Deadlines
from tests.llm_validation.pipeline.schedule2bw_support import (
    SEED,
    WRAPPED,
    apply_ac,
    example,
    lr_decay,
    make_optimizer,
    reference,
    replica_batches,
    tokens_loss,
)

CFG = {"name": "titan", "optim": "adamw", "lam": 0.0, "M": 2, "steps": 4, "loss": "tokens",
       "scale_grads": False, "lr_decay": True}


def _refused(fn: Any) -> str:
    try:
        fn()
    except RuntimeError as exc:
        return str(exc)
    return ""


def titan_worker(ctx: Any, out_dir: str) -> None:
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import get_schedule_class

    import llm_validation.pipeline.schedule2bw as s2bw

    torch.set_num_threads(1)
    ex, c, M = example(), CFG, CFG["M"]
    s, P = ctx.mesh.stage, ctx.mesh.stages
    with torch.device("meta"):                                              # 1
        part = ex.split(ex.build_model(SEED), s, P)
    stage = PipelineStage(part, s, P, torch.device("cpu"), group=ctx.mesh.pp_group)   # 2
    apply_ac(part, "wrapper")                                               # 3
    stage.submod = part
    schedule_class = get_schedule_class("2BW")                              # 4

    def loss_fn(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, int]:  # torchtitan's form
        return tokens_loss(*args, **kwargs), kwargs["global_valid_tokens"]

    def _scalar_loss_fn(*args: Any, **kwargs: Any) -> torch.Tensor:
        loss, _ = loss_fn(*args, **kwargs)
        return loss

    schedule = schedule_class(stage, n_microbatches=M, loss_fn=_scalar_loss_fn,
                              scale_grads=False)
    part.to_empty(device="cpu")                                             # 5
    init = ex.split(ex.build_model(SEED), s, P).state_dict()
    part.load_state_dict({k: init[k.replace(WRAPPED, "")] for k in part.state_dict()})
    optimizer = make_optimizer(part, c["optim"])                            # 6
    lr_scheduler = lr_decay(optimizer, c)
    schedule.attach(optimizer, lr_scheduler)

    def train_step(x: torch.Tensor, y: torch.Tensor, **kw: Any) -> Any:     # 7
        losses = [] if s == P - 1 else None
        out = schedule.step(arg_mbs=[(xj,) for xj in torch.tensor_split(x, M)] if s == 0
                            else None, kwarg_mbs=[{} for _ in range(M)],
                            target_mbs=list(torch.tensor_split(y, M)) if s == P - 1 else None,
                            losses=losses, loss_kwargs={"global_valid_tokens": x.numel()}, **kw)
        return out, losses

    curve = []
    batches = list(replica_batches(ex, c, 0, steps=c["steps"] + 1))
    for x, y in batches[:-1]:
        _, losses = train_step(x, y, return_outputs=False)
        if losses is not None:
            curve.append(torch.stack(losses))
    out = {"same_class": schedule_class is s2bw.Schedule2BW, "losses": curve}
    out["optimizer_step"] = _refused(optimizer.step)
    out["clip"] = _refused(lambda: torch.nn.utils.clip_grad_norm_(part.parameters(), 1.0))
    optimizer.zero_grad(set_to_none=False)                  # torchtitan's first line: allowed
    optimizer.zero_grad()
    schedule.finish()
    out["weights"] = {n.replace(WRAPPED, ""): p.detach().clone()
                      for n, p in part.named_parameters()}
    part.load_state_dict(part.state_dict())                 # weights written behind its back
    out["stale"] = _refused(lambda: train_step(*batches[-1]))
    schedule.sync_weights()
    got, _ = train_step(*batches[-1])                       # torch's default: the outputs
    out["outputs"] = None if got is None else list(got.shape)
    schedule.finish()
    lr_scheduler.step()
    out["lr_step"] = _refused(lambda: train_step(*batches[-1]))
    torch.save(out, Path(out_dir) / f"rank{ctx.rank}.pt")


def test_torchtitan_build_order_and_calls(tmp_path):
    spawn_stages(titan_worker, (str(tmp_path),), world=2, run_dir=tmp_path, backend="gloo",
                 deadlines=Deadlines(hang_s=60.0))
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    ref = reference(CFG)
    last = ranks[-1]
    # this batch's losses, with loss_kwargs reaching the loss; batch 0 read the loaded weights
    assert len(last["losses"]) == CFG["steps"]
    assert all(torch.equal(a, b) for a, b in zip(last["losses"], ref["losses"]))
    weights = {**ranks[0]["weights"], **ranks[1]["weights"]}
    assert set(weights) == set(ref["weights"])
    assert all(torch.equal(weights[n], ref["weights"][n]) for n in weights)
    for r in ranks:
        assert r["same_class"]
        assert "remove optimizer.step()" in r["optimizer_step"]
        assert "clips by the global norm itself" in r["clip"]
        assert "changed outside Schedule2BW" in r["stale"]
        assert "remove lr_scheduler.step()" in r["lr_step"]
    assert ranks[-1]["outputs"] == [CFG["M"] * 2, 16, 64]
    assert ranks[0]["outputs"] is None
