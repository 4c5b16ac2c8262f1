"""Cost of Muon's statistics: batched Gram-eigenvalue norms against one SVD per matrix.

The statistics take the nuclear (dual) and spectral (primal) norms of every Muon matrix
(``llm_validation.training.stats``). ``after`` computes them with
:func:`theory.matrix_norms.matrix_norms` (batched by shape, one ``eigvalsh`` of the smaller
Gram per matrix); ``before`` with :func:`theory.matrix_norms.svd_matrix_norms` (one float64
SVD per matrix, one at a time: what the statistics did before), substituted for the
measurement (``unittest.mock.patch`` of ``stats.matrix_norms``), everything else the same.

Three measurements, printed as one JSON object:

1. ``norms`` (``--preset``, default smollm-135m, byte vocabulary): the weight gradients of one
   real backward (batch ``--batch-size`` x ``--seq-len``); one nuclear pass and one spectral
   pass over the Muon matrices (210 at smollm-135m) by each method, interleaved over ``--reps``
   repetitions (medians), and the largest relative difference from the SVD.
2. ``evaluation`` (same preset and batch, Muon, emulated 2BW, ``ns_dtype=auto``): a short real
   run (:func:`llm_validation.training.timing.time_run`, statistics every 2 steps, no
   intermediate evaluation) per method; ``eval_s`` = median statistics step - median plain
   step, and ``eval_over_step`` = eval_s / plain step (goal <= 2: one statistics evaluation
   costs at most two training steps).
3. ``interval`` (``--small-preset``, default ``small``): the same short run per method; the
   tokens/s of a run with statistics every 10 steps over one without,
   ``plain / (plain + (active - plain) / 10)`` (goal >= 0.8).

Usage: ``python benchmarks/bench_stats_norms.py --json [--reps 2] [--threads 2]``; the tests
run it on a tiny shape (``--preset tiny --small-preset tiny``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from contextlib import nullcontext
from typing import Any, Callable
from unittest import mock

import torch

from llm_validation.config import (DataConfig, DelayConfig, OptimConfig, RunConfig, TrainConfig,
                                   preset)
from llm_validation.training import stats
from llm_validation.training.data import WindowSampler, load_corpus
from llm_validation.training.model import Transformer, lm_loss
from llm_validation.training.optim import build_optimizer, group_geometry
from llm_validation.training.timing import time_run
from theory.geometry import SPECTRAL
from theory.matrix_norms import matrix_norms, svd_matrix_norms

__all__ = ["main", "norm_passes", "evaluation_cost", "GOAL_EVAL_OVER_STEP",
           "GOAL_INTERVAL_RATIO", "METHODS"]

#: One statistics evaluation at most this many training steps (the goal).
GOAL_EVAL_OVER_STEP = 2.0
#: Tokens/s with statistics every 10 steps over tokens/s without, at least this (the goal).
GOAL_INTERVAL_RATIO = 0.8
#: The statistics interval of the interval goal.
INTERVAL = 10
#: method -> the function ``stats.matrix_norms`` is during its measurement.
METHODS: dict[str, Callable] = {"before": svd_matrix_norms, "after": matrix_norms}


def _cfg(model: str, batch: int, seq: int, steps: int) -> TrainConfig:
    m = preset(model)
    return TrainConfig(model=dataclasses.replace(m, vocab_size=256),
                       data=DataConfig(seq_len=seq),
                       optim=OptimConfig(name="muon", lr=0.01, ns_dtype="auto"),
                       delay=DelayConfig(tau=1),
                       run=RunConfig(steps=steps, batch_size=batch, stats_interval=2,
                                     eval_interval=0, eval_batches=1, out_dir="unused"))


def _muon_gradients(cfg: TrainConfig) -> list[torch.Tensor]:
    """The gradients of the Muon (spectral-geometry) matrices after one real backward."""
    model = Transformer(cfg.model, seed=0)
    opt = build_optimizer(model, cfg.optim)
    x, y = WindowSampler(load_corpus(cfg.data).train, cfg.run.batch_size, cfg.data.seq_len,
                         seed=0).next()
    lm_loss(model(x), y).backward()
    return [p.grad for g in opt.param_groups for p in g["params"]
            if group_geometry(g) is SPECTRAL]


def norm_passes(cfg: TrainConfig, reps: int) -> dict[str, Any]:
    """Measurement 1 (module docstring)."""
    mats = _muon_gradients(cfg)
    secs: dict[str, list[float]] = {f"{m}_{k}": [] for m in METHODS
                                    for k in ("nuclear", "spectral")}
    values: dict[str, torch.Tensor] = {}
    for rep in range(reps):
        order = list(METHODS) if rep % 2 == 0 else list(METHODS)[::-1]
        for method in order:
            for kind in ("nuclear", "spectral"):
                t = time.perf_counter()
                values[f"{method}_{kind}"] = METHODS[method](mats, kind)
                secs[f"{method}_{kind}"].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in secs.items()}
    err = {kind: float(((values[f"after_{kind}"] - values[f"before_{kind}"]).abs()
                        / values[f"before_{kind}"]).max()) for kind in ("nuclear", "spectral")}
    shapes: dict[str, int] = {}
    for m in mats:
        shapes[f"{m.shape[0]}x{m.shape[1]}"] = shapes.get(f"{m.shape[0]}x{m.shape[1]}", 0) + 1
    return {"matrices": len(mats), "shapes": shapes, "seconds_median": med,
            "speedup_nuclear": med["before_nuclear"] / med["after_nuclear"],
            "speedup_spectral": med["before_spectral"] / med["after_spectral"],
            "max_rel_err_vs_svd": err}


def evaluation_cost(cfg: TrainConfig, steps: int, threads: int | None) -> dict[str, Any]:
    """Measurements 2 and 3 (module docstring) for one config, per method."""
    out: dict[str, Any] = {}
    for method, fn in METHODS.items():
        with mock.patch.object(stats, "matrix_norms", fn) if fn is not matrix_norms \
                else nullcontext():
            st = time_run(cfg, steps=steps, stats_interval=2, eval_interval=0, threads=threads)
        plain, active = st.plain_s, st.active_s
        out[method] = {"plain_step_s": plain, "stats_step_s": active,
                       "eval_s": active - plain, "eval_over_step": (active - plain) / plain,
                       f"tokens_per_s_ratio_stats{INTERVAL}":
                           plain / (plain + (active - plain) / INTERVAL),
                       "steps_timed": len(st.seconds)}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    p.add_argument("--preset", default="smollm-135m", help="shape of measurements 1, 2")
    p.add_argument("--small-preset", default="small", help="shape of measurement 3")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per step (16)")
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (128)")
    p.add_argument("--steps", type=int, default=4,
                   help="steps of each timed run (>= 4: statistics at even steps; step 0 "
                        "is not timed)")
    p.add_argument("--small-steps", type=int, default=12, help="steps of measurement 3's runs")
    p.add_argument("--reps", type=int, default=2, help="repetitions of measurement 1")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    p.add_argument("--skip-evaluation", action="store_true",
                   help="measurement 1 and 3 only (2 takes minutes at smollm-135m on a CPU)")
    args = p.parse_args(argv)
    if args.steps < 4:
        p.error("--steps must be >= 4")
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    big = _cfg(args.preset, args.batch_size, args.seq_len, args.steps)
    small = _cfg(args.small_preset, args.batch_size, args.seq_len, args.small_steps)
    result: dict[str, Any] = {
        "preset": args.preset, "small_preset": args.small_preset,
        "batch_size": args.batch_size, "seq_len": args.seq_len,
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "norms": norm_passes(big, args.reps)}
    if not args.skip_evaluation:
        ev = evaluation_cost(big, args.steps, args.threads)
        result["evaluation"] = {**ev, "goal_eval_over_step": GOAL_EVAL_OVER_STEP,
                                "goal_met": ev["after"]["eval_over_step"] <= GOAL_EVAL_OVER_STEP}
    iv = evaluation_cost(small, args.small_steps, args.threads)
    key = f"tokens_per_s_ratio_stats{INTERVAL}"
    result["interval"] = {**iv, "goal_ratio": GOAL_INTERVAL_RATIO,
                          "goal_met": iv["after"][key] >= GOAL_INTERVAL_RATIO}
    result["wall_s"] = time.perf_counter() - t0
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
