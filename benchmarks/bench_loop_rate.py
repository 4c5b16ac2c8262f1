"""The training loop's steady-state rate against ``bench_delay.py``'s step, same shape and batch.

``bench_delay.py`` times bare training steps (forward, backward, ``opt.step()``, no delay
wrapper, no metrics); the loop (:func:`llm_validation.training.loop.train`) records in
summary.json ``steady_tokens_per_s``: its steps after the warm-up, evaluations and checkpoints
excluded (the per-step gradient norm, metrics row and flush included). Both run here on CPU at
the same shape and batch (``--preset``, default small; 16 x 128 tokens; AdamW at a constant lr;
synchronous; the loop with statistics off, evaluation only at the end, a flush every step),
alternating over ``--reps`` repetitions; ``ratio`` = loop / bench tokens/s, median of the
per-repetition ratios (goal: within 10%, ``|ratio - 1| <= 0.1``). The loop's whole-invocation
``tokens_per_s`` (set-up, closing evaluation and checkpoint included) is reported beside it.

Usage: ``python benchmarks/bench_loop_rate.py --json [--reps 3] [--steps 20]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_delay import measure as bench_step  # noqa: E402

from llm_validation.config import (DataConfig, DelayConfig, OptimConfig, RunConfig,  # noqa: E402
                                   TrainConfig, preset)
from llm_validation.training.loop import train  # noqa: E402

__all__ = ["main", "GOAL_REL_DIFF"]

#: The loop's steady rate within this fraction of the benchmark's (the goal).
GOAL_REL_DIFF = 0.10


def _loop(model: str, batch: int, seq: int, steps: int, out: Path) -> dict[str, Any]:
    cfg = TrainConfig(model=dataclasses.replace(preset(model), vocab_size=256),
                      data=DataConfig(seq_len=seq),
                      optim=OptimConfig(name="adamw", lr=1e-3, schedule="constant"),
                      delay=DelayConfig(),
                      run=RunConfig(steps=steps, batch_size=batch, stats_interval=0,
                                    eval_interval=0, eval_batches=1, out_dir=str(out)))
    res = train(cfg, progress=False)
    return {"steady_tokens_per_s": res.steady_tokens_per_s, "tokens_per_s": res.tokens_per_s}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    p.add_argument("--preset", default="small")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--steps", type=int, default=20, help="loop steps (bench: steps - 2 timed)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    args = p.parse_args(argv)
    if args.steps < 4 or args.reps < 1:
        p.error("--steps must be >= 4 and --reps >= 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    bench, loop, ratios = [], [], []
    with tempfile.TemporaryDirectory(prefix="delaybound-bench-loop-") as tmp:
        for rep in range(args.reps):
            def b() -> None:
                r = bench_step(args.preset, "adamw", args.batch_size, args.seq_len,
                               reps=args.steps - 2, warmup=2)
                bench.append(r["tokens_per_s"]["plain"])

            def lp() -> None:
                loop.append(_loop(args.preset, args.batch_size, args.seq_len, args.steps,
                                  Path(tmp) / f"loop{rep}"))
            for fn in ((b, lp) if rep % 2 == 0 else (lp, b)):
                fn()
            ratios.append(loop[-1]["steady_tokens_per_s"] / bench[-1])
    ratio = statistics.median(ratios)
    json.dump({"preset": args.preset, "batch_size": args.batch_size, "seq_len": args.seq_len,
               "steps": args.steps, "reps": args.reps, "threads": torch.get_num_threads(),
               "bench_tokens_per_s": bench, "loop": loop, "ratios": ratios, "ratio": ratio,
               "goal_rel_diff": GOAL_REL_DIFF, "goal_met": abs(ratio - 1) <= GOAL_REL_DIFF,
               "wall_s": time.perf_counter() - t0}, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
