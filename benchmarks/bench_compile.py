"""Compiled vs eager training loop: tokens/s per core of the ledger's runs, paired in one call.

For each size (``--sizes``, default the size ladder's ends n46k and n267k) the ledger's base
run (``claims.scales.base_config``: 16 x 64 bytes a step, two microbatches, AdamW, statistics
and evaluation at the scale's intervals, 15 / 50 at n46k and 100 / 250 at n267k) is trained for
``--steps`` steps eager and with ``run.compile`` (``torch.compile`` of the forward/backward),
alternating which goes first over ``--reps`` repetitions, on one torch thread (one core, as a
ledger job). The rate is the loop's own ``steady_tokens_per_s`` (summary.json: the steps after
the warm-up, the statistics steps included, evaluations and checkpoints excluded); the
whole-invocation rate is reported beside it. ``speedup`` is the median over repetitions of
compiled / eager within a repetition (goal >= 1.5). The first compiled run of a process pays
the compilation; it is outside the steady window and is reported as ``first_compiled_wall_s``.

Usage: ``python benchmarks/bench_compile.py --json [--reps 3] [--sizes n46k,n267k]``.
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

from llm_validation.claims.plan.scales import base_config, get_scale
from llm_validation.training.loop import train

__all__ = ["main", "GOAL_SPEEDUP", "DEFAULT_STEPS"]

#: Compiled tokens/s per core over eager, at least this (the goal).
GOAL_SPEEDUP = 1.5
#: Steps per run and size: at least two statistics steps at the scale's interval.
DEFAULT_STEPS = {"n46k": 150, "n113k": 150, "n267k": 220}


def _run(size: str, steps: int, compile: bool, tmp: Path, tag: str) -> dict[str, Any]:
    cfg = base_config(get_scale(size), "adamw")
    run = dataclasses.replace(cfg.run, steps=steps, compile=compile, checkpoint_interval=0,
                              out_dir=str(tmp / tag))
    t0 = time.perf_counter()
    res = train(cfg.replace(run=run), progress=False)
    return {"steady_tokens_per_s": res.steady_tokens_per_s, "tokens_per_s": res.tokens_per_s,
            "wall_s": time.perf_counter() - t0, "final_val_loss": res.final_val_loss,
            "stats_interval": run.stats_interval, "eval_interval": run.eval_interval}


def measure(size: str, steps: int, reps: int) -> dict[str, Any]:
    """Paired repetitions of one size (module docstring)."""
    runs: dict[str, list[dict[str, Any]]] = {"eager": [], "compiled": []}
    with tempfile.TemporaryDirectory(prefix="delaybound-bench-compile-") as tmp:
        for rep in range(reps):
            order = ("eager", "compiled") if rep % 2 == 0 else ("compiled", "eager")
            for kind in order:
                runs[kind].append(_run(size, steps, kind == "compiled", Path(tmp),
                                       f"{size}-{kind}-{rep}"))
    ratios = [c["steady_tokens_per_s"] / e["steady_tokens_per_s"]
              for e, c in zip(runs["eager"], runs["compiled"])]
    med = {k: statistics.median(r["steady_tokens_per_s"] for r in v) for k, v in runs.items()}
    return {"steps": steps, "reps": reps, "runs": runs,
            "steady_tokens_per_s_median": med,
            "speedup": statistics.median(ratios), "speedups": ratios,
            "first_compiled_wall_s": runs["compiled"][0]["wall_s"],
            "final_val_loss_rel_diff": [abs(c["final_val_loss"] - e["final_val_loss"])
                                        / abs(e["final_val_loss"])
                                        for e, c in zip(runs["eager"], runs["compiled"])],
            "goal_met": statistics.median(ratios) >= GOAL_SPEEDUP}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    p.add_argument("--sizes", default="n46k,n267k", help="comma list of ladder sizes")
    p.add_argument("--steps", type=int, default=None,
                   help=f"steps per run (default per size: {DEFAULT_STEPS})")
    p.add_argument("--reps", type=int, default=3, help="paired repetitions (default 3)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: per core)")
    args = p.parse_args(argv)
    sizes = [s for s in args.sizes.split(",") if s]
    for s in sizes:
        get_scale(s)                                        # a clear error for an unknown size
    if args.reps < 1 or (args.steps is not None and args.steps < 4):
        p.error("--reps must be >= 1 and --steps >= 4")
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    result: dict[str, Any] = {"threads": args.threads, "torch": torch.__version__,
                              "goal_speedup": GOAL_SPEEDUP, "sizes": {}}
    for s in sizes:
        result["sizes"][s] = measure(s, args.steps or DEFAULT_STEPS.get(s, 150), args.reps)
    result["wall_s"] = time.perf_counter() - t0
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
