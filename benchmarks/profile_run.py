"""Where a tiny ledger run's time goes: model forward/backward, optimizer step, statistics,
evaluation, and the rest (data, metrics rows, checkpoint, Python between them).

Method: one real run (:func:`llm_validation.training.loop.train`) of the ledger's base config
per optimizer (``claims.scales.base_config``, scale ``tiny``; sync by default, ``--delay 1`` for
a 2BW arm), with the loop's phase functions wrapped by wall-clock timers for the duration of
the run. Each wrapper books its own time *exclusive* of the wrapped calls nested in it, except
the "absorbing" phases, which book everything under them:

- ``forward_backward`` (the training gradient, absorbing): model forward/backward;
- ``DelayedOptimizer.step`` (absorbing): the optimizer step, with the delay's weight
  bookkeeping and EF;
- ``gradient_at`` and ``DelayedOptimizer.dry_run_base_update`` (absorbing): the statistics'
  extra gradient and dry-run step; ``observed_step`` outside the optimizer step: the statistics'
  partial sums; together "statistics";
- ``evaluate`` (absorbing): the validation passes (every ``eval_interval`` steps and the end).

The rest of the run's wall time (setup excluded: timed from the first step) is "other". A
``torch.profiler`` pass over the same run (``--ops``) adds the share of wall time spent inside
torch operators (the remainder is Python and framework overhead).

Usage: ``python benchmarks/profile_run.py --json [--optimizers adamw,muon] [--steps 60]
[--ns-dtype bfloat16] [--delay 1] [--ops]``. Prints one JSON object: per optimizer the seconds
and shares of each phase.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

import torch

from llm_validation.claims.plan.scales import base_config, get_scale
from llm_validation.config import NS_DTYPES
from llm_validation.training import loop
from llm_validation.training.delay import DelayedOptimizer

__all__ = ["main", "profile", "PHASES"]

#: Phase names in the JSON, in order.
PHASES = ("forward_backward", "optimizer", "statistics", "evaluation", "other")


class _Books:
    """Exclusive wall-clock booking of nested phases."""

    def __init__(self) -> None:
        self.seconds = {p: 0.0 for p in PHASES}
        self.stack: list[list] = []     # [phase, start, nested seconds, absorbing]
        self.t0: float | None = None    # the first phase's start: setup is not counted

    def wrap(self, fn: Callable, phase: str, absorbing: bool) -> Callable:
        books = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            if any(frame[3] for frame in books.stack):   # inside an absorbing phase
                return fn(*args, **kwargs)
            frame = [phase, time.perf_counter(), 0.0, absorbing]
            if books.t0 is None:
                books.t0 = frame[1]
            books.stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                books.stack.pop()
                total = time.perf_counter() - frame[1]
                books.seconds[phase] += total - frame[2]
                if books.stack:
                    books.stack[-1][2] += total
        return timed


def _patch(stack: ExitStack, owner: Any, name: str, books: _Books, phase: str,
           absorbing: bool) -> None:
    original = getattr(owner, name)
    setattr(owner, name, books.wrap(original, phase, absorbing))
    stack.callback(setattr, owner, name, original)


def profile(optimizer: str, *, steps: int, ns_dtype: str | None, delay: int,
            ops: bool) -> dict[str, Any]:
    """Phase seconds and shares of one run (module docstring)."""
    cfg = base_config(get_scale("tiny"), optimizer)
    optim = cfg.optim if ns_dtype is None else dataclasses.replace(cfg.optim, ns_dtype=ns_dtype)
    books = _Books()
    with tempfile.TemporaryDirectory(prefix="delaybound-profile-") as tmp, ExitStack() as stack:
        run = dataclasses.replace(cfg.run, steps=steps, out_dir=str(Path(tmp) / "run"))
        cfg = cfg.replace(optim=optim, run=run,
                          delay=dataclasses.replace(cfg.delay, tau=delay))
        _patch(stack, loop, "forward_backward", books, "forward_backward", True)
        _patch(stack, loop, "gradient_at", books, "statistics", True)
        _patch(stack, loop, "evaluate", books, "evaluation", True)
        _patch(stack, loop, "observed_step", books, "statistics", False)
        _patch(stack, DelayedOptimizer, "step", books, "optimizer", True)
        _patch(stack, DelayedOptimizer, "dry_run_base_update", books, "statistics", True)
        prof = None
        if ops:
            prof = stack.enter_context(torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU]))
        loop.train(cfg, progress=False)
        end = time.perf_counter()
    wall = end - books.t0
    phases = dict(books.seconds)
    phases["other"] = max(0.0, wall - sum(v for k, v in phases.items() if k != "other"))
    out: dict[str, Any] = {
        "optimizer": optimizer, "ns_dtype": cfg.optim.ns_dtype, "delay": delay, "steps": steps,
        "stats_interval": cfg.run.stats_interval, "eval_interval": cfg.run.eval_interval,
        "wall_s": round(wall, 3), "sec_per_step": round(wall / steps, 4),
        "seconds": {k: round(v, 3) for k, v in phases.items()},
        "share": {k: round(v / wall, 3) for k, v in phases.items()}}
    if prof is not None:
        op_s = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e6
        out["share_in_torch_ops"] = round(min(1.0, op_s / wall), 3)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    p.add_argument("--optimizers", default="adamw,muon", help="comma list (default adamw,muon)")
    p.add_argument("--steps", type=int, default=60, help="steps per run (default 60)")
    p.add_argument("--ns-dtype", choices=list(NS_DTYPES), help="Muon/NorMuon NS dtype "
                   "(default: the ledger's)")
    p.add_argument("--delay", type=int, default=0, help="tau of the profiled run (default 0)")
    p.add_argument("--ops", action="store_true", help="add torch.profiler's operator share")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the "
                   "ledger's --jobs 2 on 2 cores)")
    args = p.parse_args(argv)
    if args.steps < 1:
        print(f"profile_run: --steps {args.steps} must be >= 1", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    results = [profile(o.strip(), steps=args.steps, ns_dtype=args.ns_dtype, delay=args.delay,
                       ops=args.ops) for o in args.optimizers.split(",") if o.strip()]
    print(json.dumps({"machine_threads": args.threads, "runs": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
