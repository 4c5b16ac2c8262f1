"""Schedule2BW next to torch's Schedule1F1B on a model this project did not write.

A stack of ``torch.nn.TransformerEncoderLayer`` blocks with an embedding and a head, split into
P contiguous stages by the user's own code (:func:`split`), trained on P gloo processes twice
from the same seed on the same batches: with torch's ``Schedule1F1B`` (a flush every step) and
with ``llm_validation.Schedule2BW`` (PipeDream-2BW: no flush, two weight versions). The two
training loops differ in seven lines (docs/schedule2bw.md shows them side by side).

    python examples/schedule2bw_encoder.py --stages 2 --microbatches 4 --steps 20
    torchrun --nproc-per-node 2 examples/schedule2bw_encoder.py --steps 20

The last stage prints, per schedule, the mean microbatch loss of every batch and the wall time
(``--json``: one JSON object). Batch 0 runs at W(0) under both schedules, so its loss is the
same; from batch 1 on 2BW reads weights one step older (W(t-1)).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
from collections import OrderedDict

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

from llm_validation import Schedule2BW

VOCAB, WIDTH, HEADS, FFN, LAYERS, SEQ = 64, 32, 2, 64, 4, 16


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Parameter(torch.randn(SEQ, WIDTH) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tok(x) + self.pos[: x.shape[1]]


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.out = nn.Linear(WIDTH, VOCAB)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(h))


def build_model(seed: int = 0) -> nn.Sequential:
    """The whole model, from the seed (every rank builds it, then keeps its stage)."""
    torch.manual_seed(seed)
    blocks = [nn.TransformerEncoderLayer(WIDTH, HEADS, FFN, dropout=0.0, batch_first=True)
              for _ in range(LAYERS)]
    return nn.Sequential(Embed(), *blocks, Head())


def split(model: nn.Sequential, stage: int, stages: int) -> nn.Sequential:
    """The user's split: contiguous pieces (parameter names stay the whole model's)."""
    bounds = [round(i * len(model) / stages) for i in range(stages + 1)]
    keep = range(bounds[stage], bounds[stage + 1])
    return nn.Sequential(OrderedDict((str(i), model[i]) for i in keep))


def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))


def batches(steps: int, batch_size: int, seed: int = 1):
    """Random tokens; the target of token x is (3x + 1) mod VOCAB."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randint(VOCAB, (batch_size, SEQ), generator=g)
        yield x, (3 * x + 1) % VOCAB


def train_1f1b(stage, module, steps, microbatches, batch_size, lr):
    optimizer = torch.optim.AdamW(module.parameters(), lr=lr)
    schedule = Schedule1F1B(stage, microbatches, loss_fn=loss_fn)
    curve = []
    for x, y in batches(steps, batch_size):
        losses = []
        if stage.is_first:
            schedule.step(x)
        elif stage.is_last:
            schedule.step(target=y, losses=losses)      # this batch's losses
        else:
            schedule.step()
        optimizer.step()
        optimizer.zero_grad()
        if losses:
            curve.append(torch.stack(losses).mean().item())
    return curve


def train_2bw(stage, module, steps, microbatches, batch_size, lr):
    optimizer = torch.optim.AdamW(module.parameters(), lr=lr)
    schedule = Schedule2BW(stage, microbatches, loss_fn=loss_fn, optimizer=optimizer)
    curve = []
    for x, y in batches(steps, batch_size):
        losses = []
        if stage.is_first:
            schedule.step(x)
        elif stage.is_last:
            schedule.step(target=y, losses=losses)      # this batch's losses
        else:
            schedule.step()
        # no optimizer.step(): the schedule took the steps that fall here
        if losses:
            curve.append(torch.stack(losses).mean().item())
    schedule.finish()                                   # drain: the last step
    return curve


def run_both(rank: int, world: int, args: argparse.Namespace) -> dict:
    """One rank of an initialised process group: both schedules in turn, each from the same
    seed; returns {schedule: {"loss": per-batch mean losses (last stage), "seconds": ...}}."""
    torch.set_num_threads(1)
    out = {}
    for name, train in (("1f1b", train_1f1b), ("2bw", train_2bw)):
        module = split(build_model(args.seed), rank, world)
        stage = PipelineStage(module, rank, world, torch.device("cpu"))
        dist.barrier()
        t0 = time.perf_counter()
        curve = train(stage, module, args.steps, args.microbatches,
                      args.microbatches * args.microbatch_size, args.lr)
        out[name] = {"loss": curve, "seconds": time.perf_counter() - t0}
    return out


def run(rank: int, world: int, args: argparse.Namespace, port: int | None = None) -> None:
    """One rank: the process group (torchrun's, or 127.0.0.1:port), both schedules, the report."""
    if port is None:                                    # under torchrun
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
    out = run_both(rank, world, args)
    if rank == world - 1:
        if args.json:
            print(json.dumps(out))
        else:
            for name, r in out.items():
                print(f"{name:5s} loss {r['loss'][0]:.4f} -> {r['loss'][-1]:.4f} "
                      f"in {r['seconds']:.2f} s")
    dist.destroy_process_group()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stages", type=int, default=2, help="processes (without torchrun)")
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--microbatch-size", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p.parse_args(argv)


def main() -> None:
    args = parse_args()
    if "RANK" in os.environ:
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(args.stages, args, port), nprocs=args.stages)


if __name__ == "__main__":
    main()
