"""Cost of recording the statistics in your own loop: step time of a delayed + EF training step
(tau = 1, lam = 1) without a recorder vs with :class:`llm_validation.StatsRecorder` at several
statistics intervals.

Method: one model and optimizer per variant, all with the same initialisation; every
repetition runs one full step of each variant on the same batch (forward + backward of M
microbatches inside ``delayed_weights``, then ``optimizer.step()`` or ``recorder.step()``, which
also writes the metrics row), in a rotating order so that load drifts on a shared machine hit
all variants alike. Statistics steps are periodic, so the cost is a MEAN over a whole number
of intervals (``reps`` a multiple of every interval): ``overhead_<variant>`` =
``mean(t_variant) / mean(t_plain) - 1``. Variants: ``rows`` (``stats_interval = 0``: the
per-step gradient norm and the row only), ``stats10`` (the default interval 10), ``stats1``
(every step; the momentum error off everywhere). The expected cost of a statistics step is
one extra forward + backward of the batch and one dry-run optimizer step.

Usage: ``python benchmarks/bench_recorder.py --json [--preset tiny] [--reps 40]``.
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

import torch

from llm_validation import DelayedOptimizer, StatsRecorder
from llm_validation.config import DataConfig, OptimConfig, preset
from llm_validation.training.data import WindowSampler, load_corpus
from llm_validation.training.loop import forward_backward
from llm_validation.training.model import Transformer
from llm_validation.training.optim import build_optimizer

__all__ = ["main", "measure", "VARIANTS"]

#: (name, stats_interval) of the recorded variants; None: no recorder (the baseline).
VARIANTS = (("plain", None), ("rows", 0), ("stats10", 10), ("stats1", 1))


def measure(model_name: str = "tiny", batch_size: int = 16, seq_len: int = 64,
            microbatches: int = 2, reps: int = 40, warmup: int = 2) -> dict:
    """Interleaved timing of :data:`VARIANTS`; see the module docstring."""
    intervals = [k for _, k in VARIANTS if k]
    if reps % max(intervals):
        raise ValueError(f"--reps {reps} must be a multiple of every interval {intervals}")
    cfg = dataclasses.replace(preset(model_name), vocab_size=256)      # byte-level corpus
    corpus = load_corpus(DataConfig(seq_len=seq_len))
    sampler = WindowSampler(corpus.train, batch_size, seq_len, seed=0)
    tmp = Path(tempfile.mkdtemp(prefix="bench_recorder_"))
    built = {}
    for name, k in VARIANTS:
        model = Transformer(cfg, seed=0)
        opt = DelayedOptimizer(build_optimizer(model, OptimConfig(name="adamw", lr=1e-3)),
                               tau=1, ef_lambda=1.0)
        rec = None if k is None else StatsRecorder(
            model, opt, tmp / name, seed=0, batch_size=batch_size, seq_len=seq_len,
            microbatches=microbatches, stats_interval=k)
        built[name] = (model, opt, rec)
    times = {name: [] for name in built}
    names = list(built)
    for rep in range(warmup + reps):
        x, y = sampler.next()
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            model, opt, rec = built[name]

            def closure(model=model, rec=rec):
                return forward_backward(model, x, y, microbatches,
                                        observe=rec.observe_microbatch if rec else None)
            t0 = time.perf_counter()
            with opt.delayed_weights():
                loss = closure()
            if rec is None:
                opt.step()
                opt.zero_grad()
            else:
                rec.step(loss, closure)
            if rep >= warmup:
                times[name].append(time.perf_counter() - t0)
    mean = {n: statistics.fmean(v) for n, v in times.items()}
    return {**{f"overhead_{n}": mean[n] / mean["plain"] - 1.0 for n in names if n != "plain"},
            "step_s_mean": mean, "step_s_median": {n: statistics.median(v)
                                                   for n, v in times.items()},
            "preset": model_name, "n_params": built["plain"][0].num_params(),
            "optimizer": "adamw", "tau": 1, "ef_lambda": 1.0, "batch_size": batch_size,
            "seq_len": seq_len, "microbatches": microbatches, "reps": reps,
            "threads": torch.get_num_threads()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--microbatches", type=int, default=2)
    p.add_argument("--reps", type=int, default=40, help="a multiple of 10")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    result = measure(args.preset, args.batch_size, args.seq_len, args.microbatches, args.reps,
                     args.warmup)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for k, v in result.items():
            if k.startswith("overhead_"):
                print(f"{k}: {v:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
