"""The simulator against measured pipeline runs: predicted vs measured tokens/s.

For each stage count P (default 2 and 3) and each schedule (2BW and 1F1B), one real pipeline
run is launched with ``--profile`` (tiny preset, AdamW, evaluation, statistics and checkpoints
off, one thread per stage), its ``profile.json`` is handed to ``delaybound simulate --from
RUN_DIR`` for the same schedule, P, M and number of batches, and the simulator's steady-state
tokens/s is compared with the run's measured steady-state tokens/s (stage 0's step clock after
the warm-up steps). The goal is agreement within ``TOLERANCE`` (10%), with the metrics flush
on (``--log-intervals``: 1, a flush every step) and off (1000: none in the timed window).

What the simulator is given is measured: per stage, the mean forward, backward and optimizer
step times and the time spent sending; what it predicts is everything else (the waits, the
bubbles, the step time). Runs are sequential; when P exceeds the machine's cores the stages
time-share cores, which the simulator does not model (the JSON reports the core count, and the
rows with ``P > cores`` are flagged).

Usage: ``python benchmarks/bench_simulator.py --json [--stages 2 3] [--steps 16]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

from delaybound.cli import main as cli_main
from llm_validation.config import DataConfig, DelayConfig, OptimConfig, RunConfig, TrainConfig, preset
from llm_validation.records.atomic_io import read_json
from llm_validation.run import run

__all__ = ["main", "TOLERANCE", "compare"]

#: The issue's acceptance: predicted tokens/s within 10% of the measured.
TOLERANCE = 0.10
SCHEDULES = ("2bw", "1f1b")


def _cfg(kind: str, P: int, M: int, steps: int, out: Path, log_interval: int = 1) -> TrainConfig:
    model = preset("tiny")
    return TrainConfig(
        model=model, data=DataConfig(seq_len=128),
        optim=OptimConfig(name="adamw", lr=1e-3, schedule="constant"),
        delay=DelayConfig(tau=1 if kind == "2bw" else 0),
        run=RunConfig(steps=steps, batch_size=4 * M, microbatches=M, pipeline=kind, stages=P,
                      eval_interval=0, eval_batches=1, stats_interval=0, checkpoint_interval=0,
                      log_interval=log_interval, profile=True,
                      out_dir=str(out / f"{kind}_P{P}_M{M}_K{log_interval}")))


def compare(kind: str, P: int, M: int, steps: int, out: Path, log_interval: int = 1) -> dict:
    """One profiled run and its simulation; returns the row of the table."""
    cfg = _cfg(kind, P, M, steps, out, log_interval)
    run(cfg, progress=False)
    prof = read_json(Path(cfg.run.out_dir) / "profile.json")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli_main(["simulate", "--schedule", kind, "--stages", str(P), "--microbatches",
                         str(M), "--batches", str(steps), "--from", cfg.run.out_dir, "--json",
                         "--quiet"])
    if code != 0:
        raise RuntimeError(f"delaybound simulate failed with exit code {code}")
    sim = json.loads(buf.getvalue())
    measured, predicted = prof["tokens_per_s"], sim["steady_tokens_per_s"]
    rel = (predicted - measured) / measured
    return {"schedule": kind, "stages": P, "microbatches": M, "log_interval": log_interval,
            "flush_s": [p.get("flush_s") for p in prof["per_stage"]],
            "measured_tokens_per_s": measured, "simulated_tokens_per_s": predicted,
            "relative_error": rel, "within_tolerance": abs(rel) <= TOLERANCE,
            "measured_step_s": prof["step_time_s"], "simulated_step_s": sim["steady_step_time"],
            "steps_timed": prof["steps_timed"],
            "stages_exceed_cores": P > (os.cpu_count() or 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--stages", type=int, nargs="*", default=[2, 3])
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--log-intervals", type=int, nargs="+", default=[1, 1000],
                    help="metrics flush intervals: 1 (the default setting, a flush every step) "
                         "and 1000 (none in the timed window)")
    ap.add_argument("--out", default=None, help="run directories (default: a temp dir)")
    args = ap.parse_args(argv)
    os.environ.setdefault("DELAYBOUND_PIPE_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        rows = [compare(kind, P, 2 * P, args.steps, out, K) for P in args.stages
                for K in args.log_intervals for kind in SCHEDULES]
    report = {"benchmark": "simulator", "cores": os.cpu_count(), "tolerance": TOLERANCE,
              "load_average_1min": os.getloadavg()[0], "rows": rows,
              "all_within_tolerance": all(r["within_tolerance"] for r in rows)}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for r in rows:
            print(f"{r['schedule']:5s} P={r['stages']} M={r['microbatches']} "
                  f"K={r['log_interval']}: measured "
                  f"{r['measured_tokens_per_s']:.0f} tok/s, simulated {r['simulated_tokens_per_s']:.0f}"
                  f" ({100 * r['relative_error']:+.1f}%)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
