"""``delaybound validate`` and ``delaybound sweep``.

- ``validate RUN_DIR... [--json] [--gap tail] [--figures DIR] [--report FILE] [--quick]``:
  every verdict of :func:`llm_validation.validation.validate.validate` (assumptions, trends, bounds) for
  the runs found under the given folders. Exit code 0 whatever the verdicts (a verdict is a
  result, not an error); 2 on bad input (no run directories).
- ``sweep --out DIR [grid flags] [--grid FILE.json] [--jobs N] [--dry-run] [--json]``: train a
  grid (:class:`llm_validation.sweep.grid.SweepGrid`) resumably, one run directory per point,
  plus ``DIR/index.json``; a progress bar on stderr. Exit code 1 if any run raised an error.

Grid flags take comma-separated lists; ``--lr`` and ``--momentum`` also take per-optimizer
lists (``--lr adamw=1e-3,3e-3 --lr muon=0.01``). ``--set [OPT:]section.field=value`` changes the
base config (e.g. ``--set optim.beta2=0.99 --set muon:optim.aux_lr=3e-3``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from delaybound.output import check_at_least, check_out_dir, check_out_file, print_json

__all__ = ["register", "cmd_validate", "cmd_sweep", "grid_from_args"]


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid list of numbers {text!r} (e.g. 1e-3,3e-3)")


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid list of integers {text!r} (e.g. 0,1,2)")


def _words(text: str) -> tuple[str, ...]:
    return tuple(x for x in text.split(",") if x)


def _per_opt(values: list[str] | None, what: str) -> Any:
    """``["1e-3,3e-3"]`` -> (1e-3, 3e-3); ``["adamw=1e-3", "muon=0.01,0.02"]`` -> mapping."""
    if not values:
        return None
    plain, mapping = [], {}
    for v in values:
        try:
            if "=" in v:
                opt, nums = v.split("=", 1)
                mapping.setdefault(opt, ())
                mapping[opt] += _floats(nums)
            else:
                plain += list(_floats(v))
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"--{what}: {exc}") from None
    if plain and mapping:
        raise ValueError(f"--{what}: give either plain values or OPT=values, not both")
    return mapping or tuple(plain)


def grid_from_args(args: argparse.Namespace):
    """The SweepGrid of ``--grid FILE`` with the command-line flags on top."""
    from llm_validation.sweep.grid import SweepGrid
    d: dict[str, Any] = {}
    if args.grid:
        path = Path(args.grid)
        if not path.is_file():
            raise FileNotFoundError(f"--grid: no such file {path}")
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"--grid {path}: not valid JSON ({exc})") from None
        except UnicodeDecodeError:
            raise ValueError(f"--grid {path}: not a JSON text file (not UTF-8)") from None
        if not isinstance(d, dict):
            raise ValueError(f"--grid {path}: must hold a JSON object")
    flags = {"optimizers": args.optimizer, "modes": args.mode, "taus": args.tau,
             "lams": args.lam, "batch_sizes": args.batch_size, "steps": args.steps,
             "model": args.preset, "pipeline": args.pipeline, "stages": args.stages,
             "lrs": _per_opt(args.lr, "lr"), "momenta": _per_opt(args.momentum, "momentum")}
    if args.seeds is not None:
        flags["seeds"] = args.seeds
    elif args.n_seeds is not None:
        flags["seeds"] = tuple(range(args.n_seeds))
    d.update({k: v for k, v in flags.items() if v is not None})
    if args.set:
        d["overrides"] = tuple(d.get("overrides", ())) + tuple(args.set)
    return SweepGrid.from_dict(d)


def cmd_sweep(args: argparse.Namespace) -> int:
    from llm_validation.sweep.runner import plan, run_sweep
    check_out_dir("--out", args.out)
    check_at_least("--jobs", args.jobs, 0)
    check_at_least("--threads", args.threads, 1)
    grid = grid_from_args(args)
    points = grid.expand()
    if args.dry_run:
        planned = plan(points, args.out)
        rows = [{"name": p.name, "action": a} for p, a in planned]
        if args.json:
            print_json({"out": args.out, "grid": grid.to_dict(), "runs": rows})
        else:
            for r in rows:
                print(f"{r['action']:6s} {r['name']}")
            print(f"{len(rows)} runs ({sum(r['action'] == 'skip' for r in rows)} finished)")
        return 0
    outcomes = run_sweep(points, args.out, jobs=args.jobs, threads=args.threads,
                         progress=not args.quiet, grid=grid.to_dict())
    rows = [o.__dict__ for o in outcomes]
    if args.json:
        print_json({"out": args.out, "index": str(Path(args.out) / "index.json"), "runs": rows})
    else:
        for o in outcomes:
            val = f"{o.final_val_loss:.4f}" if o.final_val_loss is not None else "-"
            print(f"{o.status:9s} {val:>8s}  {o.name}")
    return 1 if any(o.status == "error" for o in outcomes) else 0


def cmd_validate(args: argparse.Namespace) -> int:
    from llm_validation.validation.runs import load_runs
    from llm_validation.validation.validate import validate_runs
    import warnings
    check_out_dir("--figures", args.figures)
    check_out_file("--report", args.report)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = load_runs(args.run_dirs)
        rep = validate_runs(runs, gap_metric=args.gap, quick=args.quick)
    for r in runs:    # every damaged run, one warning each (what its metrics miss)
        if r.damage:
            print(f"delaybound validate: warning: {r.path / 'metrics.jsonl'}: {r.damage}; the "
                  "run is dropped by every verdict", file=sys.stderr)
    figures = {}
    if args.figures:
        from llm_validation.validation.figures import plot_validation
        figures = plot_validation(runs, args.figures, args.gap)
        if not figures:
            print(f"delaybound validate: note: no figure written to {args.figures}: every figure "
                  "compares runs (sync / 2BW / 2BW+EF pairs of one optimizer and seed, or a "
                  "sweep's lr, tau, momentum or batch axis), and these runs have none to "
                  "compare", file=sys.stderr)
    if args.report:
        from llm_validation.validation.report import write_report
        write_report(args.report, title="delaybound validation report", validation=rep,
                     validation_figures=figures)
    if args.json:
        print_json(rep.to_dict())
        return 0
    c = rep.counts()
    w = max(len(v.id) for v in rep.verdicts)
    for v in rep.verdicts:
        print(f"{v.status.upper():12s} {v.id:{w}s}  {v.claim}")
        for k, x in v.measured.items():
            print(f"{'':12s} {'':{w}s}    {k}: {x.fmt() if hasattr(x, 'fmt') else x}")
        print(f"{'':12s} {'':{w}s}    -> {v.reason}")
        for d in v.dropped:
            print(f"{'':12s} {'':{w}s}    dropped: {d}")
    if rep.comparisons:
        print("\noptimizers compared (the delay's cost, pairwise):")
        for cmp in rep.comparisons:
            nums = "; ".join(f"{k}: {x.fmt() if hasattr(x, 'fmt') else x}"
                             for k, x in cmp.items() if k not in ("a", "b", "reading", "n_seeds"))
            print(f"  {cmp['reading']} ({cmp['n_seeds']} seeds; {nums})")
    for n in rep.notes:
        print(f"note: {n}")
    print(f"\n{c['pass']} pass, {c['fail']} fail, {c['inconclusive']} inconclusive "
          f"({len(rep.runs)} runs; {rep.gap_definition})")
    return 0


def register(subparsers: Any) -> None:
    from llm_validation.config import OPTIMIZERS
    v = subparsers.add_parser(
        "validate", help="check the theory's assumptions and gap trends against training runs",
        description="Read run directories (or folders of them, e.g. a sweep's --out) and print "
                    "one verdict per claim: pass / fail / inconclusive, with the measured "
                    "numbers, their 95% intervals over seeds, and the theory's prediction.")
    v.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories or folders")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.add_argument("--gap", choices=["final", "tail"], default="final",
                   help="gap from the final validation loss (default) or the tail mean")
    v.add_argument("--figures", metavar="DIR", help="also write the validation figures to DIR")
    v.add_argument("--plots", dest="figures", metavar="DIR", help=argparse.SUPPRESS)  # old name
    v.add_argument("--report", metavar="FILE", help="also write a markdown report")
    v.add_argument("--quick", action="store_true",
                   help="mark every verdict quick/inconclusive (for smoke runs)")
    v.set_defaults(func=cmd_validate)

    s = subparsers.add_parser(
        "sweep", help="train a grid of runs (optimizer x mode x lr/tau/momentum/lam/batch/seed)",
        description="Train every point of a grid into OUT/<name>/ (resumable: finished runs "
                    "are skipped, interrupted ones resumed) and write OUT/index.json. Modes: "
                    "sync (tau=0), 2bw (tau from --tau), 2bw+ef (tau=1, lam from --lam).")
    a = s.add_argument
    a("--out", required=True, help="output folder")
    a("--grid", metavar="FILE", help="JSON object with SweepGrid fields (flags override it)")
    a("--optimizer", type=_words, help=f"comma list of {','.join(OPTIMIZERS)} (default "
                                       "adamw,muon)")
    a("--mode", type=_words, help="comma list of sync,2bw,2bw+ef (default all three)")
    a("--lr", action="append", metavar="[OPT=]LRS", help="peak lrs (default: the demo's)")
    a("--momentum", action="append", metavar="[OPT=]MOMS",
      help="Muon/SGD momentum or AdamW beta1 values (default: each optimizer's base value)")
    a("--tau", type=_ints, help="delays of the 2bw mode (default 1)")
    a("--lam", type=_floats, help="EF coefficients of the 2bw+ef mode (default 1)")
    a("--batch-size", type=_ints, help="batch sizes (default 16)")
    a("--seeds", type=_ints, help="explicit seeds, e.g. 0,1,2 (default: --n-seeds)")
    a("--n-seeds", type=int, help="seeds 0..N-1 (default 3)")
    a("--steps", type=int, help="steps per run (default 250)")
    a("--preset", help="model preset (default tiny)")
    a("--set", action="append", metavar="[OPT:]SEC.FIELD=VALUE", help="base-config override")
    a("--pipeline", choices=["none", "2bw"], help="run tau=1 2bw points on the real pipeline")
    a("--stages", type=int, help="pipeline stages (default 2)")
    a("--jobs", type=int, default=2, help="parallel training processes (default 2; 0: inline)")
    a("--threads", type=int, help="torch threads per process (default cores / jobs)")
    a("--dry-run", action="store_true", help="list the runs and whether they are finished")
    a("--quiet", action="store_true", help="no progress bar")
    a("--json", action="store_true", help="print the outcomes as JSON")
    s.set_defaults(func=cmd_sweep)
