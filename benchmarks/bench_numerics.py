"""Batched vs naive (per-configuration Python loop) runs of the reference grid, plus Newton-Schulz
vs SVD at 1024 x 1024.

Reference grid: 5 problems x tau {0,1,2,4,8} x 4 eta x 3 alpha x (sigma = 0, plus
sigma > 0 with 16 seeds), K = 6000 steps: 5 x 5 x 4 x 3 x 17 = 5100 runs. The batched runner does
one call per problem (B = 1020), single-threaded, the problems spread over ``--workers``
processes (2 = the reference 2 cores); ``batched_s`` is that wall time. The naive loop is timed
single-threaded on a subset of runs per problem (the full naive grid would take hours) and
extrapolated per problem as measured-per-run-time x runs (``naive_extrapolated: true``);
``speedup`` compares process CPU seconds (naive extrapolated / batched, both single-threaded),
which other load on shared cores inflates far less than wall times; ``speedup_wall`` compares
per-core wall times. The machine's load average is reported.

Usage: ``python benchmarks/bench_numerics.py --json [--steps K] [--seeds S] [--naive-runs N]
[--workers W]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time

import torch

from numerics.methods import MethodConfig, run, run_naive
from numerics.problems import make_problem
from theory.geometry import newton_schulz, newton_schulz_inexactness

__all__ = ["reference_grid", "main", "GRID_PROBLEMS", "TAUS", "ETAS", "ALPHAS", "SIGMA"]

#: (family, size) of the five grid problems.
GRID_PROBLEMS = (("quadratic_l2", 16), ("quadratic_linf", 12), ("matrix_ls", 3), ("angular", 8), ("pl_sine", 16))
TAUS = (0, 1, 2, 4, 8)
ETAS = (0.005, 0.01, 0.02, 0.05)
ALPHAS = (0.05, 0.2, 1.0)
#: Noise level of the stochastic half of the grid.
SIGMA = 0.5
#: Series recorded by both runners: the gap f(x_k) - f* (what the rate plots and gap tables use).
RECORD = ("gap",)


def reference_grid(seeds: int = 16) -> list[MethodConfig]:
    """The per-problem configuration list: every (tau, eta, alpha) once with sigma = 0 and
    ``seeds`` times with sigma = SIGMA."""
    out = []
    for tau in TAUS:
        for eta in ETAS:
            for alpha in ALPHAS:
                out.append(MethodConfig(tau=tau, eta=eta, alpha=alpha))
                out.extend(MethodConfig(tau=tau, eta=eta, alpha=alpha, sigma=SIGMA, seed=s) for s in range(seeds))
    return out


def _ns_vs_svd(n: int, reps: int) -> dict:
    gen = torch.Generator().manual_seed(0)
    g = torch.randn(n, n, generator=gen, dtype=torch.float32)
    newton_schulz(g)  # warm-up
    t = time.perf_counter()
    for _ in range(reps):
        newton_schulz(g)
    ns_s = (time.perf_counter() - t) / reps
    t = time.perf_counter()
    for _ in range(reps):
        u, _, vh = torch.linalg.svd(g, full_matrices=False)
        _ = u @ vh
    svd_s = (time.perf_counter() - t) / reps
    inex = newton_schulz_inexactness(g)
    return {"size": n, "dtype": "float32", "newton_schulz_s": ns_s, "svd_s": svd_s,
            "svd_over_ns": svd_s / ns_s, "ns_inexactness": inex}


def _batched_problem(job: tuple) -> dict:
    """Worker: the batched run of one grid problem (single-threaded); returns its time and the
    gap series of the configurations the naive loop will re-run (for the bitwise check)."""
    family, size, steps, seeds, subset_idx, threads = job
    torch.set_num_threads(threads)
    p = make_problem(family, size, 0)
    grid = reference_grid(seeds)
    t, c = time.perf_counter(), time.process_time()
    traj = run(p, grid, steps, record=RECORD)
    return {"family": family, "size": size, "batched_s": time.perf_counter() - t,
            "batched_cpu_s": time.process_time() - c,
            "gaps": traj["gap"][:, subset_idx].clone(), "name": p.name}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--steps", type=int, default=6000, help="K per run (reference: 6000)")
    ap.add_argument("--seeds", type=int, default=16, help="seeds of the sigma > 0 half (reference: 16)")
    ap.add_argument("--naive-runs", type=int, default=2, help="naive runs timed per problem")
    ap.add_argument("--ns-size", type=int, default=1024, help="matrix size of the NS vs SVD timing")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads per process")
    ap.add_argument("--workers", type=int, default=2,
                    help="processes for the batched grid, one problem each (reference: 2 cores)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    grid = reference_grid(args.seeds)
    stride = max(1, len(grid) // max(args.naive_runs, 1))
    subset_idx = list(range(0, len(grid), stride))[: args.naive_runs]
    # Longest first (the spectral problem's SVDs dominate) so the workers stay balanced.
    order = sorted(GRID_PROBLEMS, key=lambda fp: fp[0] != "matrix_ls")
    jobs = [(f, s, args.steps, args.seeds, subset_idx, args.threads) for f, s in order]
    t0 = time.perf_counter()
    if args.workers > 1:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(args.workers) as pool:
            results = pool.map(_batched_problem, jobs, chunksize=1)
    else:
        results = [_batched_problem(j) for j in jobs]
    wall = time.perf_counter() - t0

    per_problem = []
    batched_cpu = naive_total = batched_cpu_time = naive_cpu_time = 0.0
    for res in results:
        p = make_problem(res["family"], res["size"], 0)
        subset = [grid[i] for i in subset_idx]
        t, c = time.perf_counter(), time.process_time()
        singles = run_naive(p, subset, args.steps, record=RECORD)
        n_s = (time.perf_counter() - t) / len(subset)
        n_cpu = (time.process_time() - c) / len(subset)
        agree = all(torch.equal(sg["gap"][:, 0], res["gaps"][:, j]) for j, sg in enumerate(singles))
        per_problem.append({"problem": res["name"], "batched_s": res["batched_s"],
                            "batched_cpu_s": res["batched_cpu_s"], "naive_per_run_s": n_s,
                            "naive_per_run_cpu_s": n_cpu, "naive_extrapolated_s": n_s * len(grid),
                            "naive_extrapolated_cpu_s": n_cpu * len(grid),
                            "runs": len(grid), "naive_matches_batched_bitwise": agree})
        batched_cpu += res["batched_s"]
        batched_cpu_time += res["batched_cpu_s"]
        naive_total += n_s * len(grid)
        naive_cpu_time += n_cpu * len(grid)
        print(f"[bench_numerics] {res['name']}: batched {res['batched_s']:.1f}s, naive {n_s:.3f}s/run",
              file=sys.stderr)

    out = {
        "speedup": naive_cpu_time / batched_cpu_time,
        "batched_s": wall,
        "grid_runs": len(grid) * len(GRID_PROBLEMS),
        "batched_cpu_s": batched_cpu,
        "naive_s": naive_total,
        "naive_extrapolated": True,
        "speedup_basis": ("process CPU seconds, naive (extrapolated) / batched, both "
                          "single-threaded: robust to other load on shared cores; "
                          "speedup_wall uses per-core wall times instead"),
        "speedup_wall": naive_total / batched_cpu,
        "cpu_seconds": {"batched": batched_cpu_time, "naive_extrapolated": naive_cpu_time},
        "batched_s_note": f"wall time of the whole grid with {args.workers} worker process(es), "
                          "one single-threaded batched call per problem",
        "naive_note": (f"naive loop timed on {len(subset_idx)} runs per problem at the full K and "
                       "extrapolated as per-run time x runs"),
        "steps": args.steps,
        "workers": args.workers,
        "threads_per_process": args.threads,
        "load_average": list(os.getloadavg()),
        "record": list(RECORD),
        "per_problem": per_problem,
        "newton_schulz_vs_svd": _ns_vs_svd(args.ns_size, reps=3),
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"speedup {out['speedup']:.1f}x (CPU), batched {wall:.1f}s wall for {out['grid_runs']} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
