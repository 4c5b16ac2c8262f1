"""``delaybound verify`` and ``delaybound plot``: the numerics package from the command line.

- ``verify [--theorem NAME] [--examples N] [--seed S] [--steps K] [--seeds S] [--no-predicates]
  [--pepit] [--json]``: the property checks of :mod:`numerics.suite` (no pytest needed); per
  theorem: instances, violations, worst ratio with its parameters; exit code 1 on any violation
  (bound, pathwise statement, proof predicate or PEPit comparison); progress on stderr.
- ``plot rates --out DIR [--steps K] [--quick]``: the rate/gap/EF/PL-law figures of
  :mod:`numerics.figures` as PNGs.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from delaybound.output import check_out_dir, print_json

__all__ = ["register", "cmd_verify", "cmd_plot"]


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}")
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def register(subparsers: Any) -> None:
    v = subparsers.add_parser(
        "verify", help="check every theorem's bound on simulated delayed runs (property checks)",
        description="Draw random problems and parameters (tau 0..8, eta, alpha, beta, sigma, lam), "
                    "simulate the delayed method each theorem is about, and check the bound at "
                    "every step (expectations: seed mean with a 4-standard-error margin), the "
                    "pathwise proof statements, and every proof predicate on real trajectories. "
                    "Exit code 1 on any violation.")
    v.add_argument("--theorem", action="append", metavar="NAME",
                   help="theorem to check (repeatable; default: all with a simulation spec)")
    v.add_argument("--examples", type=_positive_int, default=100, help="instances per theorem (default 100)")
    v.add_argument("--seed", type=int, default=0, help="seed of the instance sampler (default 0)")
    v.add_argument("--steps", type=_positive_int, default=200, help="steps per run (default 200)")
    v.add_argument("--seeds", type=_positive_int, default=6,
                   help="noise seeds averaged per stochastic instance (default 6)")
    v.add_argument("--no-predicates", action="store_true", help="skip the proof predicates")
    v.add_argument("--pepit", action="store_true",
                   help="also run the PEPit table (delayed GD / EF-GD worst cases vs theory)")
    v.add_argument("--json", action="store_true", help="print one JSON object")
    v.set_defaults(func=cmd_verify)

    p = subparsers.add_parser("plot", help="rate, gap, EF and PL-law figures (PNG)",
                              description="Write PNG figures of the numerics package.")
    p.add_argument("what", choices=["rates"], help="figure set")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--steps", type=_positive_int, default=3000, help="steps per run (default 3000)")
    p.add_argument("--quick", action="store_true", help="small grids and few steps (smoke test)")
    p.set_defaults(func=cmd_plot)


def _progress(msg: str) -> None:
    print(f"[verify] {msg}", file=sys.stderr, flush=True)


def cmd_verify(args: argparse.Namespace) -> int:
    from numerics.suite import verify_suite

    t0 = time.perf_counter()
    report = verify_suite(args.theorem, examples=args.examples, seed=args.seed, steps=args.steps,
                          seeds=args.seeds, predicates=not args.no_predicates, progress=_progress)
    if args.pepit:
        from numerics.pep import no_guarantee_regions, pep_table

        _progress("PEPit table")
        table = pep_table()
        rows = [r.as_dict() for r in table]
        report["pepit"] = {"rows": rows, "violations": sum(r["ok"] is False for r in rows),
                           "no_guarantee_regions": no_guarantee_regions(table)}
        report["violations"] += report["pepit"]["violations"]
    report["seconds"] = time.perf_counter() - t0
    if args.json:
        print_json(report)
    else:
        _print_table(report)
    return 1 if report["violations"] else 0


def _print_table(report: dict) -> None:
    print(f"{'theorem':26s} {'inst':>5s} {'viol':>5s} {'worst ratio':>11s} {'(lower)':>8s} "
          f"{'tail':>6s}  worst instance")
    for r in report["theorems"]:
        w = r["worst"]
        c = w["config"]
        print(f"{r['theorem']:26s} {r['instances']:5d} {r['violations']:5d} {w['ratio']:11.4f} "
              f"{w['ratio_lower']:8.4f} {r['worst_tail']['ratio_tail_lower']:6.3f}  {w['problem']} "
              f"tau={c['tau']} eta={c['eta']:.3g} alpha={c['alpha']:.3g} beta={c['beta']:.3g} "
              f"lam={c['lam']:.3g} sigma={c['sigma']:.3g} step={w['step']}")
        for f in r["failures"]:
            print(f"    VIOLATION {f['problem']} {f['config']}: {f['reason']}")
        if r["evaluate_errors"]:
            print(f"    note: Theorem.evaluate raised on {r['evaluate_errors']} instance(s) inside its "
                  f"domain (checked with sympy's exact value instead): {r['evaluate_error_example']}")
    for name in report["skipped"]:
        print(f"{name:26s}  (no simulation spec: not checked here)")
    if report["predicates"]:
        print(f"\n{'predicate':30s} {'inst':>5s} {'viol':>5s} {'min slack':>11s}")
        for name, row in sorted(report["predicates"].items()):
            print(f"{name:30s} {row['instances']:5d} {row['violations']:5d} {row['min_slack']:11.3g}")
    if "pepit" in report:
        pe = report["pepit"]
        print(f"\nPEPit (L = 1, Delta0 = 1): {len(pe['rows'])} cells, {pe['violations']} where "
              "theory < PEPit worst case")
        print(f"{'method':11s} {'tau':>3s} {'lam':>4s} {'gamma':>5s} {'K':>2s} {'PEPit':>9s} {'theory':>9s}")
        for r in pe["rows"]:
            th = "none" if r["theory"] is None else f"{r['theory']:.5f}"
            print(f"{r['method']:11s} {r['tau']:3d} {r['lam']:4.2g} {r['gamma']:5.3g} {r['K']:2d} "
                  f"{r['pep']:9.5f} {th:>9s}")
        print("no guarantee from theory (step-size condition fails), PEPit worst case finite:")
        for c in pe["no_guarantee_regions"]:
            vals = ", ".join(f"K={k}: {v:.4g}" for k, v in c["pep_by_K"].items())
            print(f"  {c['method']} tau={c['tau']} lam={c['lam']:g} gamma={c['gamma']:g}: {vals}"
                  f"{'  (decreasing in K)' if c['decreasing_in_K'] else ''}")
    print(f"\ntotal violations: {report['violations']} ({report['seconds']:.1f}s)")


def cmd_plot(args: argparse.Namespace) -> int:
    from numerics.figures import plot_rates

    check_out_dir("--out", args.out)
    paths = plot_rates(args.out, steps=args.steps, quick=args.quick,
                       progress=lambda m: print(f"[plot] {m}", file=sys.stderr, flush=True))
    for path in paths:
        print(path)
    return 0
