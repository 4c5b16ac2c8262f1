"""Tokens/s of the tiny ledger run per optimizer, before and after the cheaper-run changes,
side by side in one run; and the Muon-family / AdamW step-time ratio (goal <= 1.5).

Variants of each optimizer's base run (the ledger's tiny base config: ``claims.scales``; the
optimizers the ledger does not train take it with their own name and
:data:`~llm_validation.sweep.grid.BASE_OPTIM` lr):

- ``before``: as the ledger runs today: Newton-Schulz in bfloat16 (the libraries'), statistics
  every 15 steps, evaluation every 25 steps on 8 batches;
- ``after_ns`` (Muon, NorMuon): only ``optim.ns_dtype=auto`` (float32 on a CPU without native
  bfloat16, else unchanged);
- ``after``: ``ns_dtype=auto`` and the cuts for a run whose claims read only its final loss:
  no statistics (``stats_interval=0``), no intermediate evaluation (``eval_interval=0``), and
  the closing evaluation on :data:`FINAL_EVAL_BATCHES` batches (a larger set: it costs more and
  lowers the seed spread).

Method: every repetition times a short real run of every (optimizer, variant) in a rotated
order (interleaved, so load drifts of a shared machine hit all alike), with
:func:`llm_validation.training.timing.time_run`: :data:`~llm_validation.claims.plan.calibration.CAL_STEPS`
steps with statistics every 3 steps (none for ``after``), no intermediate evaluation. Medians
of plain and statistics steps and the closing evaluation give the seconds per step of the full
200-step run at the variant's intervals (``StepTimes.sec_per_step``); tokens/s is tokens per
step over that. Ratios (``*_over_adamw``) are taken within a repetition, then the median over
repetitions: ``step_ratio`` compares plain training steps (forward, backward, optimizer), the
quantity the <= 1.5 goal is about; ``run_ratio`` whole runs at the variant's intervals.

Usage: ``python benchmarks/bench_optimizers.py --json [--reps 3] [--optimizers adamw,muon]
[--threads 1]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from typing import Any


from llm_validation.claims.plan.calibration import CAL_STATS_INTERVAL, CAL_STEPS
from llm_validation.claims.plan.scales import base_config, get_scale
from llm_validation.config import TrainConfig
from llm_validation.hardware import cpu_has_fast_bf16, resolve_ns_dtype
from llm_validation.sweep.grid import BASE_OPTIM
from llm_validation.training.timing import time_run

__all__ = ["main", "measure", "OPTIMIZERS", "VARIANTS", "FINAL_EVAL_BATCHES", "GOAL_RATIO"]

#: Every optimizer the project trains.
OPTIMIZERS = ("adamw", "muon", "normuon", "soap", "lion", "adan", "nadamw", "sgd")
#: Variants (module docstring); ``after_ns`` only for the Newton-Schulz optimizers.
VARIANTS = ("before", "after_ns", "after")
#: Optimizers whose step runs Newton-Schulz.
NS_OPTIMIZERS = ("muon", "normuon")
#: Closing-evaluation batches of the ``after`` variant (4x the ledger's 8).
FINAL_EVAL_BATCHES = 32
#: The issue's goal for a Muon-family training step over an AdamW one.
GOAL_RATIO = 1.5


def _base(optimizer: str, overrides: tuple[str, ...]) -> TrainConfig:
    scale = get_scale("tiny")
    if optimizer in scale.lrs:
        return base_config(scale, optimizer, overrides=overrides)
    cfg = base_config(scale, "adamw", overrides=overrides)
    return cfg.replace(optim=dataclasses.replace(cfg.optim, name=optimizer,
                                                 lr=BASE_OPTIM[optimizer]["lr"]))


def variant_config(optimizer: str, variant: str, overrides: tuple[str, ...] = (),
                   final_eval_batches: int = FINAL_EVAL_BATCHES) -> TrainConfig:
    """The run a (optimizer, variant) stands for (module docstring); ``overrides``
    (``section.field=value``) shrink it for tests."""
    cfg = _base(optimizer, overrides)
    if variant == "before":
        return cfg.replace(optim=dataclasses.replace(cfg.optim, ns_dtype="bfloat16"))
    auto = cfg.replace(optim=dataclasses.replace(cfg.optim, ns_dtype="auto"))
    if variant == "after_ns":
        return auto
    if variant == "after":
        return auto.replace(run=dataclasses.replace(auto.run, stats_interval=0, eval_interval=0,
                                                    final_eval_batches=final_eval_batches))
    raise ValueError(f"variant={variant!r} is not one of {VARIANTS}")


def _pairs(optimizers: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(o, v) for o in optimizers for v in VARIANTS if v != "after_ns" or o in NS_OPTIMIZERS]


def measure(optimizers: tuple[str, ...], *, reps: int, steps: int, threads: int,
            overrides: tuple[str, ...] = (), final_eval_batches: int = FINAL_EVAL_BATCHES
            ) -> dict[str, Any]:
    """Interleaved timings (module docstring)."""
    pairs = _pairs(optimizers)
    cfgs = {p: variant_config(*p, overrides, final_eval_batches) for p in pairs}
    full = {p: cfgs[p].run for p in pairs}
    rows: list[dict[tuple[str, str], tuple[float, float]]] = []
    t0 = time.perf_counter()
    for rep in range(reps):
        order = pairs[rep % len(pairs):] + pairs[:rep % len(pairs)]
        got = {}
        for p in order:
            run = full[p]
            stats_every = CAL_STATS_INTERVAL if run.stats_interval else 0
            t = time_run(cfgs[p], steps=steps, stats_interval=stats_every, eval_interval=0,
                         threads=threads)
            got[p] = (t.plain_s, t.sec_per_step(steps=run.steps, stats_interval=run.stats_interval,
                                                 eval_interval=run.eval_interval))
        rows.append(got)
        print(f"[bench_optimizers] repetition {rep + 1}/{reps} done "
              f"({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
    per: dict[str, Any] = {}
    for o in optimizers:
        per[o] = {}
        for v in VARIANTS:
            if (o, v) not in cfgs:
                continue
            run_s = statistics.median(r[(o, v)][1] for r in rows)
            entry = {"ns_dtype": cfgs[(o, v)].optim.ns_dtype,
                     "tokens_per_s": round(cfgs[(o, v)].tokens_per_step / run_s, 1),
                     "sec_per_step": round(run_s, 4),
                     "train_step_s": round(statistics.median(r[(o, v)][0] for r in rows), 4)}
            if "adamw" in optimizers:
                ref = "before" if v == "before" else "after"
                entry["step_ratio_over_adamw"] = round(statistics.median(
                    r[(o, v)][0] / r[("adamw", ref)][0] for r in rows), 3)
                entry["run_ratio_over_adamw"] = round(statistics.median(
                    r[(o, v)][1] / r[("adamw", ref)][1] for r in rows), 3)
            per[o][v] = entry
        if "before" in per[o] and "after" in per[o]:
            per[o]["speedup_after_over_before"] = round(statistics.median(
                r[(o, "before")][1] / r[(o, "after")][1] for r in rows), 3)
    out: dict[str, Any] = {
        "machine": {"fast_bf16": cpu_has_fast_bf16(), "threads": threads,
                    "auto_ns_dtype": resolve_ns_dtype("auto", "cpu")},
        "reps": reps, "steps_timed": steps, "final_eval_batches_after": final_eval_batches,
        "overrides": list(overrides),
        "goal_step_ratio": GOAL_RATIO, "optimizers": per,
        "wall_s": round(time.perf_counter() - t0, 1)}
    ns = [o for o in NS_OPTIMIZERS if o in per and "step_ratio_over_adamw" in per[o]["after"]]
    if ns:
        worst = max(per[o]["after"]["step_ratio_over_adamw"] for o in ns)
        out["worst_ns_step_ratio_after"] = worst
        out["goal_met"] = worst <= GOAL_RATIO
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    p.add_argument("--reps", type=int, default=3, help="interleaved repetitions (default 3)")
    p.add_argument("--steps", type=int, default=CAL_STEPS,
                   help=f"steps of each timed run (default {CAL_STEPS})")
    p.add_argument("--optimizers", default=",".join(OPTIMIZERS), help="comma list (default all)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1, one "
                   "process per core as the ledger's --jobs 2 on 2 cores)")
    p.add_argument("--set", action="append", default=[], metavar="SEC.FIELD=VALUE",
                   help="override the base runs (tests shrink them: run.batch_size=2 ...)")
    p.add_argument("--final-eval-batches", type=int, default=FINAL_EVAL_BATCHES,
                   help=f"closing-evaluation batches of 'after' (default {FINAL_EVAL_BATCHES})")
    args = p.parse_args(argv)
    opts = tuple(o.strip() for o in args.optimizers.split(",") if o.strip())
    bad = [o for o in opts if o not in OPTIMIZERS]
    if bad or not opts:
        print(f"bench_optimizers: --optimizers {args.optimizers!r}: not in {list(OPTIMIZERS)}",
              file=sys.stderr)
        return 2
    if args.reps < 1 or args.steps < 2:
        print("bench_optimizers: --reps must be >= 1 and --steps >= 2", file=sys.stderr)
        return 2
    try:
        out = measure(opts, reps=args.reps, steps=args.steps, threads=args.threads,
                      overrides=tuple(args.set), final_eval_batches=args.final_eval_batches)
    except ValueError as exc:   # a bad --set or --final-eval-batches
        print(f"bench_optimizers: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
