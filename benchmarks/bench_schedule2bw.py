"""Throughput of ``Schedule2BW`` against torch's ``Schedule1F1B`` on the same user model.

The model is the example's (examples/schedule2bw_encoder.py: an embedding, a stack of
``torch.nn.TransformerEncoderLayer`` blocks and a head, split by the user's code), enlarged
here (``--width``, ``--layers``, ``--seq-len``) so that compute dominates. P gloo processes
(one thread each) train it with each schedule in turn, from the same seed on the same batches,
``--repeats`` times interleaved inside one launch (load drifts hit both); AdamW, the user's
loop of docs/schedule2bw.md (2BW: the schedule steps; 1F1B: ``optimizer.step()`` after
``schedule.step()``). Throughput is steady state on stage 0: the mean time per ``step()`` call
between the start of call ``warmup`` and the start of the last call (the first fill and the
2BW drain excluded), as tokens/s; the best repetition of each schedule is reported, all listed.

A flushing 1F1B idles (P - 1)(t_F + t_B) per step of M (t_F + t_B) of work, so a bubble-free
schedule can be at most ``limit = (M + P - 1) / M`` times faster; the report gives
``ratio_2bw_over_1f1b`` and ``fraction_of_limit = ratio / limit``.

Usage: ``python benchmarks/bench_schedule2bw.py --json [--stages 2] [--steps 12]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "schedule2bw_encoder.py"
KINDS = ("2bw", "1f1b")

__all__ = ["main", "KINDS"]


def _example(args: argparse.Namespace):
    spec = importlib.util.spec_from_file_location("schedule2bw_encoder", EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    ex.WIDTH, ex.FFN, ex.LAYERS, ex.SEQ = args.width, 4 * args.width, args.layers, args.seq_len
    ex.HEADS = max(1, args.width // 32)
    return ex


def _one_run(ex, kind: str, rank: int, world: int, M: int, args) -> dict:
    """One training run: this rank's wall clock and CPU time (``time.process_time``) at the
    start of every step() call."""
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    from llm_validation import Schedule2BW

    module = ex.split(ex.build_model(0), rank, world)
    stage = PipelineStage(module, rank, world, torch.device("cpu"))
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3)
    if kind == "2bw":
        sched = Schedule2BW(stage, M, loss_fn=ex.loss_fn, optimizer=opt)
    else:
        sched = Schedule1F1B(stage, M, loss_fn=ex.loss_fn)
    clock, cpu = [], []
    dist.barrier()
    for x, y in ex.batches(args.steps, M * args.micro_batch):
        clock.append(time.perf_counter())
        cpu.append(time.process_time())
        if stage.is_first:
            sched.step(x)
        elif stage.is_last:
            sched.step(target=y)
        else:
            sched.step()
        if kind == "1f1b":
            opt.step()
            opt.zero_grad()
    if kind == "2bw":
        sched.finish()
    dist.barrier()
    return {"clock": clock, "cpu": cpu}


def _worker(rank: int, world: int, port: int, M: int, args: argparse.Namespace,
            out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    ex = _example(args)
    runs: dict[str, list[dict]] = {k: [] for k in KINDS}
    for _ in range(args.repeats):
        for kind in KINDS:
            runs[kind].append(_one_run(ex, kind, rank, world, M, args))
    Path(f"{out}.{rank}").write_text(json.dumps(runs))
    dist.destroy_process_group()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(P: int, M: int, args: argparse.Namespace) -> dict:
    """One launch of P processes; the row of (P, M)."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "clock.json"
        mp.spawn(_worker, args=(P, _port(), M, args, str(out)), nprocs=P)
        ranks = [json.loads(Path(f"{out}.{r}").read_text()) for r in range(P)]
    tokens = M * args.micro_batch * args.seq_len
    n = args.steps - 1 - args.warmup
    row: dict = {"stages": P, "microbatches": M, "limit": (M + P - 1) / M}
    for kind in KINDS:
        rates = [tokens * n / (r["clock"][-1] - r["clock"][args.warmup]) for r in ranks[0][kind]]
        row[f"{kind}_tokens_per_s"] = max(rates)
        row[f"{kind}_all"] = rates
        # CPU seconds per step on each stage (least of the repetitions): the work itself,
        # which the load of other processes on the machine does not stretch
        row[f"{kind}_cpu_s_per_step"] = [
            min((r["cpu"][-1] - r["cpu"][args.warmup]) / n for r in rk[kind]) for rk in ranks]
    row["ratio_2bw_over_1f1b"] = row["2bw_tokens_per_s"] / row["1f1b_tokens_per_s"]
    row["fraction_of_limit"] = row["ratio_2bw_over_1f1b"] / row["limit"]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--stages", type=int, nargs="*", default=[2], help="stage counts (default 2)")
    ap.add_argument("--microbatches", type=str, default="P,2P",
                    help="comma list of M values; 'P' and '2P' are relative (default P,2P)")
    ap.add_argument("--micro-batch", type=int, default=4, help="sequences per microbatch")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--width", type=int, default=128, help="model width (FFN 4x, heads w/32)")
    ap.add_argument("--layers", type=int, default=4, help="encoder blocks")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2, help="step() calls excluded from timing")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repetitions")
    ap.add_argument("--nice", type=int, default=0,
                    help="add this to the scheduling priority of the benchmark and its stage "
                         "processes (negative: ahead of background load; needs privileges)")
    args = ap.parse_args(argv)
    if args.nice:
        os.nice(args.nice)
    if args.steps < args.warmup + 2:
        print("error: --steps must exceed --warmup by at least 2", file=sys.stderr)
        return 2
    rows = []
    for P in args.stages:
        for m in sorted({eval_m(m, P) for m in args.microbatches.split(",")}):
            rows.append(measure(P, m, args))
    report = {"benchmark": "schedule2bw", "cores": os.cpu_count(),
              "load_average": os.getloadavg(), "settings": vars(args), "rows": rows}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for r in rows:
            print(f"P={r['stages']} M={r['microbatches']}: 2BW {r['2bw_tokens_per_s']:.0f} tok/s, "
                  f"1F1B {r['1f1b_tokens_per_s']:.0f} tok/s, ratio {r['ratio_2bw_over_1f1b']:.2f}"
                  f" (limit {r['limit']:.2f})")
    return 0


def eval_m(spec: str, P: int) -> int:
    """``'P'``, ``'2P'`` or an integer."""
    spec = spec.strip()
    if spec.endswith("P"):
        return P * int(spec[:-1] or 1)
    return int(spec)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
