"""A nanoGPT-style loop on a model this project did not write: its optimizer (AdamW, Adam or
Lion) wrapped in the exact one-step delay of PipeDream-2BW with Error Feedback, the statistics
recorded, the runs validated.

    python examples/nanogpt_delay.py --model encoder --out runs/example       # or hf-llama
    python examples/nanogpt_delay.py --optimizer lion --out runs/example-lion

Trains sync, 2BW and 2BW + EF runs per seed on bytes of this Python's ``os.py``, then prints
the verdicts of ``delaybound validate`` on them and the optimizer's answer (what the delay costs
it, EF's share of that); docs/api.md explains each call, docs/validation.md shows the output.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from foreign_models import MODELS  # noqa: E402
from llm_validation import DelayedOptimizer, StatsRecorder, validate_runs  # noqa: E402

MODES = {"sync": (0, 0.0), "2bw": (1, 0.0), "2bw+ef": (1, 1.0)}     # mode -> (tau, lam)


def make_optimizer(name, params, lr):
    """The base optimizer: AdamW / Adam (torch) or Lion (pytorch_optimizer), weight decay on
    (the star-convex bound reads its implicit radius); Lion at a tenth of the lr, ten times the
    decay, as its authors advise."""
    if name == "lion":
        from pytorch_optimizer import Lion
        return Lion(params, lr=lr / 10, betas=(0.9, 0.99), weight_decay=1.0)
    cls = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[name]
    return cls(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.1)


def train_run(model_name, out, *, tau, lam, seed, steps=40, batch=8, micro=2, block=32,
              lr=3e-3, stats_every=2, optimizer="adamw"):
    data = torch.tensor(list(Path(os.__file__).read_bytes()), dtype=torch.long)
    train, val = data[: int(0.9 * len(data))], data[int(0.9 * len(data)):]
    torch.manual_seed(seed)                                          # same init per seed
    model = MODELS[model_name]()
    base = make_optimizer(optimizer, model.parameters(), lr)
    opt = DelayedOptimizer(base, tau=tau, ef_lambda=lam)             # 2BW: tau = 1, EF: lam
    rec = StatsRecorder(model, opt, out, seed=seed, batch_size=batch, steps=steps,
                        seq_len=block, microbatches=micro, stats_interval=stats_every,
                        momentum_error_interval=2 * stats_every,
                        config={"model": {"name": model_name}, "data": {"path": "os.py"}})
    gen, gen_large = (torch.Generator().manual_seed(seed + k) for k in (0, 10_000))

    def get_batch(src, n, g):
        ix = torch.randint(len(src) - block - 1, (n,), generator=g)
        return (torch.stack([src[i:i + block] for i in ix]),
                torch.stack([src[i + 1:i + block + 1] for i in ix]))

    def closure_of(x, y, m=micro, observe=True):   # forward + backward of one batch
        def closure():
            losses = []
            for xm, ym in zip(x.chunk(m), y.chunk(m)):
                loss = F.cross_entropy(model(xm).flatten(0, 1), ym.flatten())
                (loss / m).backward()
                losses.append(loss.detach())
                if observe:
                    rec.observe_microbatch()               # microbatch gradients: noise
            return torch.stack(losses).mean()
        return closure

    val_batches = [get_batch(val, batch, torch.Generator().manual_seed(i)) for i in range(2)]

    @torch.no_grad()
    def evaluate():
        return sum(F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
                   for x, y in val_batches) / len(val_batches)

    for step in range(steps):
        for g in opt.param_groups:                                   # cosine to 0.1 lr
            g["lr"] = lr * (0.1 + 0.45 * (1 + math.cos(math.pi * step / steps)))
        x, y = get_batch(train, batch, gen)
        closure = closure_of(x, y)
        with opt.delayed_weights():                                  # W(t - tau)
            loss = closure()
        large = closure_of(*get_batch(train, 4 * batch, gen_large), m=4 * micro,
                           observe=False) if rec.momentum_due() else None
        rec.step(loss, closure, large_closure=large,                 # opt.step() + stats
                 val_loss=evaluate() if step % 10 == 0 else None)
    return rec.finish(val_loss=evaluate())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=list(MODELS), default="encoder")
    p.add_argument("--out", default="runs/example")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--optimizer", choices=["adamw", "adam", "lion"], default="adamw")
    args = p.parse_args(argv)
    for seed in range(args.seeds):
        for mode, (tau, lam) in MODES.items():
            r = train_run(args.model, Path(args.out) / f"{args.model}-{mode}-s{seed}",
                          tau=tau, lam=lam, seed=seed, steps=args.steps,
                          optimizer=args.optimizer)
            print(f"{mode:7s} seed {seed}: val_loss {r.final_val_loss:.4f}")
    report = validate_runs(args.out)                                 # delaybound validate
    for v in report.verdicts:
        print(f"{v.status.upper():12s} {v.id}: {v.reason}")
        if v.id.startswith("delay_cost["):                           # the optimizer's answer
            print(f"{'':12s} {v.measured['answer']}")
    return report


if __name__ == "__main__":
    main()
