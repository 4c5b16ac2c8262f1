"""``delaybound bench [NAME...] [--list] [--json] [--timeout S] [--args "..."]``: run benchmarks.

Each ``benchmarks/bench_<name>.py`` of the source tree is run as ``python bench_<name>.py
--json ARGS`` in a subprocess (the repository root as working directory and on PYTHONPATH);
each prints one JSON object. Without names every benchmark runs, in name order. ``--json``
prints ``{name: result}`` as one object; otherwise each result is printed as it arrives.
``--args "--reps 3"`` passes extra arguments to every selected benchmark. Exit code
1 when a benchmark fails (non-zero exit, timeout or output that is not one JSON object).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from delaybound.output import UsageError, print_json

__all__ = ["register", "cmd_bench", "benchmark_dir", "find_benchmarks", "run_benchmark"]


def benchmark_dir() -> Path:
    """``benchmarks/`` next to the package (a source checkout, as the Makefile uses)."""
    return Path(__file__).resolve().parent.parent / "benchmarks"


def find_benchmarks(root: Path | None = None) -> dict[str, Path]:
    """name -> path of every ``bench_<name>.py``."""
    root = root or benchmark_dir()
    if not root.is_dir():
        raise FileNotFoundError(f"no benchmarks folder at {root} (run from a source checkout)")
    return {p.stem[len("bench_"):]: p for p in sorted(root.glob("bench_*.py"))}


def run_benchmark(path: Path, args: list[str], timeout: float) -> dict[str, Any]:
    """Run one benchmark; returns its JSON object, or ``{"error": ...}``."""
    root = path.parent.parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(path), "--json", *args], cwd=root, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s"}
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        return {"error": f"exit code {proc.returncode}: {tail[0]}", "wall_s": wall}
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": "output is not one JSON object", "wall_s": wall}
    if not isinstance(result, dict):
        return {"error": "output is not a JSON object", "wall_s": wall}
    return result


def cmd_bench(args: argparse.Namespace) -> int:
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: must be > 0 seconds")
    found = find_benchmarks()
    if args.list:
        for name, path in found.items():
            print(f"{name:12s} {path}")
        return 0
    names = args.names or list(found)
    unknown = [n for n in names if n not in found]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; have {list(found)}")
    extra = shlex.split(args.args or "")
    results, failed = {}, False
    for name in names:
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        res = run_benchmark(found[name], extra, args.timeout)
        failed |= "error" in res
        results[name] = res
        if not args.json:
            print(f"== {name}")
            print(json.dumps(res, indent=2))
    if args.json:
        print_json(results)
    return 1 if failed else 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench", help="run the benchmarks (benchmarks/bench_*.py) and print their JSON",
        description="Run benchmarks/bench_<NAME>.py --json for each NAME (default: all) and "
                    "print the JSON results.")
    p.add_argument("names", nargs="*", metavar="NAME", help="benchmark names (e.g. delay)")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--json", action="store_true", help="print {name: result} as one object")
    p.add_argument("--timeout", type=float, default=1800.0,
                   help="seconds per benchmark (default 1800)")
    p.add_argument("--args", metavar="ARGS", help='extra arguments for every benchmark, e.g. '
                   '--args "--reps 3"')
    p.set_defaults(func=cmd_bench)
