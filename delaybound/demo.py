"""``delaybound demo [--quick] [--out DIR] [--json]``: the main job (what ``make demo`` runs).

On the default corpus (this Python's stdlib sources) and the CPU, in five stages, each writing
its outputs under ``--out`` as soon as it finishes (so a crash loses at most the stage running,
and re-running the demo skips finished training runs):

1. the theorem table (``theorems.json``; printed);
2. numeric verification (``verify.json``) and the rate figures (``rates/*.png``);
3. the tiny model trained with AdamW and Muon under sync, 2BW (emulated, tau = 1) and 2BW+EF
   (lam = 1) for each seed, plus one real 2-stage PipeDream-2BW pipeline run
   (``runs/<name>/``, ``runs/index.json``);
4. validation of the runs (``validation.json``) and its figures (``figures/*.png``);
5. ``report.md`` with every figure and verdict (rewritten after every stage).

``--quick`` (<= 3 minutes): fewer steps, one seed, small numeric checks; its verdicts are all
marked quick / inconclusive. ``--json`` prints the verdict list on stdout (everything else,
including the theorem table, goes to stderr). Exit code 0 when every stage ran (whatever the
verdicts say), 1 when a stage failed (its error is in ``demo_status.json`` and the report).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from delaybound.output import check_at_least, check_out_dir, print_json

__all__ = ["register", "run_demo", "DemoSettings", "FULL", "QUICK"]


@dataclass(frozen=True, kw_only=True)
class DemoSettings:
    """Sizes of one demo flavour."""

    steps: int
    """Optimizer steps per training run."""
    seeds: tuple[int, ...]
    """Seeds of every (optimizer, mode)."""
    verify_examples: int
    """Instances per theorem in the numeric verification."""
    verify_steps: int
    """Steps per simulated run in the numeric verification."""
    rate_steps: int
    """Steps per simulated run of the rate figures."""
    rate_quick: bool
    """Small grids in the rate figures."""
    pipeline: bool = True
    """Also train one real 2-stage 2BW pipeline run (AdamW, the cheaper optimizer on CPU,
    first seed)."""
    quick: bool = False
    """Mark verdicts quick (inconclusive)."""
    overrides: tuple[str, ...] = ()
    """Base-config overrides of the training runs (``SweepGrid.overrides``; tests shrink the
    model with them)."""

    def __post_init__(self) -> None:
        for name in ("steps", "verify_examples", "verify_steps", "rate_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"DemoSettings.{name}={v!r} must be an int >= 1")
        if not self.seeds:
            raise ValueError("DemoSettings.seeds must not be empty")


FULL = DemoSettings(steps=250, seeds=(0, 1, 2), verify_examples=12, verify_steps=200,
                    rate_steps=1500, rate_quick=False)
QUICK = DemoSettings(steps=60, seeds=(0,), verify_examples=2, verify_steps=60, rate_steps=200,
                     rate_quick=True, quick=True)


def cpu_seconds() -> float:
    """User + system CPU time of this process and its finished children (training workers,
    pipeline stages): the demo's cost independent of other load on the machine."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _log(msg: str) -> None:
    print(f"[demo] {msg}", file=sys.stderr, flush=True)


def theorem_rows() -> list[dict[str, Any]]:
    """name, title, bound of every theorem in ``theory.THEOREMS``."""
    import sympy

    from theory import THEOREMS
    return [{"name": n, "title": getattr(t, "title", ""), "bound": sympy.sstr(t.bound)}
            for n, t in THEOREMS.items()]


def _print_theorems(rows: list[dict[str, Any]], stream: Any) -> None:
    w = max(len(r["name"]) for r in rows)
    print(f"{'theorem':{w}s}  bound", file=stream)
    for r in rows:
        print(f"{r['name']:{w}s}  {r['bound']}", file=stream)
        if r["title"]:
            print(f"{'':{w}s}  ({r['title']})", file=stream)
    stream.flush()


def demo_points(settings: DemoSettings):
    """The training runs: both optimizers x {sync, 2bw, 2bw+ef} x seeds, plus the pipeline run."""
    from llm_validation.sweep.grid import SweepGrid
    grid = SweepGrid(optimizers=("adamw", "muon"), seeds=settings.seeds, steps=settings.steps,
                     overrides=settings.overrides)
    points = grid.expand()
    if settings.pipeline:
        pipe = SweepGrid(optimizers=("adamw",), modes=("2bw",), seeds=settings.seeds[:1],
                         steps=settings.steps, pipeline="2bw", overrides=settings.overrides)
        points += pipe.expand()
    return grid, points


def run_demo(out: str | Path, settings: DemoSettings = FULL, *, jobs: int = 2,
             json_stream: Any = None) -> tuple[int, Any]:
    """Run the five stages into ``out``; returns (exit code, ValidationReport or None). Holds
    ``out``'s lock throughout (:mod:`llm_validation.records.folder_lock`: one demo per folder)."""
    from llm_validation.records.folder_lock import folder_lock
    with folder_lock(out, "demo"):
        return _run_demo(Path(out), settings, jobs, json_stream)


def _run_demo(out: Path, settings: DemoSettings, jobs: int,
              json_stream: Any) -> tuple[int, Any]:
    from llm_validation.records.atomic_io import write_json
    from llm_validation.validation.report import write_report

    table_stream = sys.stderr if json_stream is not None else sys.stdout
    stages: list[dict[str, Any]] = []
    parts: dict[str, Any] = {}
    t_all, cpu_all = time.perf_counter(), cpu_seconds()

    def report() -> None:
        intro = [
            f"{'QUICK ' if settings.quick else ''}demo: {settings.steps} steps per run, seeds "
            f"{list(settings.seeds)}, tiny model on the Python stdlib corpus (CPU). Generated by "
            "`delaybound demo`; how to read it: docs/validation.md.",
            "", f"Total time so far: {time.perf_counter() - t_all:.0f} s wall, "
            f"{cpu_seconds() - cpu_all:.0f} s CPU (all processes)."]
        write_report(out / "report.md", intro=intro, stages=stages,
                     theorems=parts.get("theorems"), verification=parts.get("verification"),
                     rate_figures=parts.get("rate_figures", ()), validation=parts.get("validation"),
                     validation_figures=parts.get("figures"), notes=parts.get("notes", ()),
                     advice=parts.get("advice", ()))
        write_json(out / "demo_status.json", {"settings": dict(settings.__dict__),
                                              "stages": stages,
                                              "seconds": time.perf_counter() - t_all,
                                              "cpu_seconds": cpu_seconds() - cpu_all})

    def stage(name: str, fn: Callable[[], str]) -> bool:
        _log(f"stage {len(stages) + 1}/5: {name}")
        t0, c0 = time.perf_counter(), cpu_seconds()
        row = {"stage": name, "status": "running", "seconds": 0.0, "cpu_seconds": 0.0,
               "output": ""}
        stages.append(row)
        try:
            row["output"] = fn()
            row["status"] = "ok"
        except OSError as exc:   # full disk, read-only folder: the demo cannot go on; one line
            row["status"] = f"FAILED: {exc}"
            raise
        except Exception as exc:  # noqa: BLE001 - the demo goes on; the report says what broke
            row["status"] = f"FAILED: {type(exc).__name__}: {exc}"
            parts.setdefault("notes", []).append(f"stage '{name}' failed:\n\n```\n"
                                                 f"{traceback.format_exc()}```")
            _log(f"stage {name} FAILED: {type(exc).__name__}: {exc}")
        row["seconds"] = round(time.perf_counter() - t0, 1)
        row["cpu_seconds"] = round(cpu_seconds() - c0, 1)
        _log(f"stage {name}: {row['status']} ({row['seconds']} s wall, "
             f"{row['cpu_seconds']} s CPU)")
        report()
        return row["status"] == "ok"

    def theorems() -> str:
        rows = theorem_rows()
        write_json(out / "theorems.json", rows)
        _print_theorems(rows, table_stream)
        parts["theorems"] = rows
        return f"theorems.json ({len(rows)} theorems)"

    def numerics() -> str:
        from numerics.figures import plot_rates
        from numerics.suite import verify_suite
        rep = verify_suite(None, examples=settings.verify_examples, seed=0,
                           steps=settings.verify_steps, seeds=4, predicates=True,
                           progress=lambda m: _log(f"verify: {m}"))
        write_json(out / "verify.json", rep)
        rows = [{"theorem": r["theorem"], "instances": r["instances"],
                 "violations": r["violations"], "worst_ratio": r["worst"]["ratio"]}
                for r in rep.get("theorems", [])]
        parts["verification"] = {"summary": f"{rep['violations']} violation(s) over "
                                            f"{sum(r['instances'] for r in rows)} instances",
                                 "rows": rows}
        report()
        paths = plot_rates(out / "rates", steps=settings.rate_steps, quick=settings.rate_quick,
                           progress=lambda m: _log(f"rates: {m}"))
        parts["rate_figures"] = [Path(p) for p in paths]
        return f"verify.json ({rep['violations']} violations), rates/ ({len(paths)} figures)"

    def training() -> str:
        from llm_validation.sweep.runner import run_sweep
        grid, points = demo_points(settings)
        outcomes = run_sweep(points, out / "runs", jobs=jobs, progress=True,
                             grid=grid.to_dict())
        bad = [o for o in outcomes if o.status == "error"]
        if bad:
            raise RuntimeError(f"{len(bad)} run(s) failed, e.g. {bad[0].name}: {bad[0].message}")
        done = sum(o.status != "skipped" for o in outcomes)
        return f"runs/ ({len(outcomes)} runs, {done} trained, {len(outcomes) - done} reused)"

    def validation() -> str:
        from llm_validation.validation.runs import load_runs
        from llm_validation.validation.validate import validate_runs
        from llm_validation.validation.figures import plot_validation
        runs = load_runs([out / "runs"])
        rep = validate_runs(runs, quick=settings.quick)
        write_json(out / "validation.json", rep.to_dict())
        parts["validation"] = rep
        parts["figures"] = plot_validation(runs, out / "figures")
        from delaybound.cmd_advise import demo_advice     # the report ends with the advice
        parts["advice"] = demo_advice(out / "runs", out / "advice", out)
        c = rep.counts()
        return (f"validation.json ({c['pass']} pass, {c['fail']} fail, {c['inconclusive']} "
                f"inconclusive), figures/ ({len(parts['figures'])} figures)")

    ok = [stage("theorem table", theorems), stage("numeric verification and rate figures",
                                                  numerics),
          stage("training (tiny model, AdamW/Muon x sync/2BW/2BW+EF, real pipeline)", training),
          stage("validation and figures", validation)]
    stage("report", lambda: "report.md")
    _log(f"done in {time.perf_counter() - t_all:.0f} s wall ({cpu_seconds() - cpu_all:.0f} s "
         f"CPU): {out / 'report.md'}")
    rep = parts.get("validation")
    if json_stream is not None:
        print_json({"quick": settings.quick, "report": str(out / "report.md"),
                    "seconds": round(time.perf_counter() - t_all, 1),
                    "cpu_seconds": round(cpu_seconds() - cpu_all, 1),
                    "stages": stages,
                    "counts": rep.counts() if rep else None,
                    "verdicts": [v.to_dict() for v in rep.verdicts] if rep else []})
    return (0 if all(ok) else 1), rep


def _cmd(args: argparse.Namespace) -> int:
    settings = QUICK if args.quick else FULL
    check_at_least("--steps", args.steps, 1)
    check_at_least("--seeds", args.seeds, 1)
    check_at_least("--jobs", args.jobs, 0)
    out = args.out or ("runs/demo-quick" if args.quick else "runs/demo")
    check_out_dir("--out", out)
    if args.steps is not None or args.seeds is not None or args.no_pipeline:
        import dataclasses
        settings = dataclasses.replace(
            settings, steps=args.steps if args.steps is not None else settings.steps,
            seeds=tuple(range(args.seeds)) if args.seeds is not None else settings.seeds,
            pipeline=settings.pipeline and not args.no_pipeline)
    code, _ = run_demo(out, settings, jobs=args.jobs,
                       json_stream=sys.stdout if args.json else None)
    return code


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo", help="the main job: theorems, numeric checks, tiny-LLM sync vs 2BW runs, report",
        description="Print the theorem table, run the numeric verification and rate figures, "
                    "train the tiny model with AdamW and Muon under sync, 2BW and 2BW+EF "
                    "(3 seeds) plus one real 2-stage 2BW pipeline run, validate the theory "
                    "against the runs, and write OUT/report.md. Re-running resumes (finished "
                    "runs are reused).")
    p.add_argument("--out", help="output folder (default runs/demo, or runs/demo-quick)")
    p.add_argument("--quick", action="store_true",
                   help="<= 3 minutes: fewer steps, one seed; verdicts marked quick")
    p.add_argument("--json", action="store_true", help="print the verdict list as JSON")
    p.add_argument("--jobs", type=int, default=2, help="parallel training processes (default 2)")
    p.add_argument("--steps", type=int, help="override the steps per run (default: the demo's "
                   "own, fewer with --quick)")
    p.add_argument("--seeds", type=int, help="override the number of seeds 0..N-1 (default: the "
                   "demo's own, one with --quick)")
    p.add_argument("--no-pipeline", action="store_true", help="skip the real pipeline run")
    p.set_defaults(func=_cmd)
