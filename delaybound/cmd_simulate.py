"""``delaybound simulate``: the event-driven pipeline-schedule simulator.

- one configuration: ``simulate --schedule S --stages P --microbatches M [--batches T]
  [--data-parallel D] (--unit-costs | --from RUN_DIR | --model PRESET --gpu-tflops X
  --link-gbps Y) [--out DIR] [--json]``: makespan, step time, bubble, tokens/s, per-stage
  peak memory; with ``--out`` also ``DIR/simulation.json`` and ``DIR/timeline.png``;
- a projection, when any of ``--stages``, ``--microbatches`` (``4x`` = 4 P), ``--data-parallel``
  or ``--schedule`` lists several values (``--model`` costs only): 2BW against the synchronous
  schedules over the grid; with ``--out`` ``DIR/projection.json`` and ``DIR/projection.png``;
- ``--quality FILE`` (a ``validate --json`` output or a ``claims.json``): the measured loss gap of
  ``--optimizer`` printed next to 2BW's throughput gain.
Exit code 0; 2 on bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from delaybound.cost_flags import add_cost_arguments, check_stage_blocks, cost_setup, hardware
from delaybound.output import UsageError, check_at_least, check_out_dir, print_json

__all__ = ["register", "cmd_simulate"]

#: Longest unit-cost run whose ASCII timeline is printed (wider ones do not fit a terminal).
MAX_ASCII_TICKS = 60
SCHEDULE_CHOICES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "2bw", "pipedream")
#: Largest simulated configuration, in (stage, microbatch, batch, chunk) work items P x M x T x v.
#: The engine costs about 30 us and 1 KB per action with 2-3 actions per item: at this size
#: about 10-20 s and a few hundred MB on one core; beyond it a run looks hung (P = M = 100000
#: grew past 1.5 GB for minutes with no output).
MAX_WORK_ITEMS = 2 ** 17
#: Model chunks per device of interleaved 1F1B when --chunks is not given.
DEFAULT_CHUNKS = 2


def _list(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in _list(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid list of integers {text!r} (e.g. 8,16,32)")


def _schedules(text: str) -> tuple[str, ...]:
    names = _list(text)
    bad = [n for n in names if n not in SCHEDULE_CHOICES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown schedule {', '.join(bad) or text!r}; choose "
                                         f"from {', '.join(SCHEDULE_CHOICES)}")
    return names


def _progress(enabled: bool):
    t0 = time.perf_counter()

    def show(done: int, total: int, label: str) -> None:
        if not enabled:
            return
        el = time.perf_counter() - t0
        fill = int(24 * done / total)
        eta = el / done * (total - done)
        print(f"[simulate] [{'#' * fill}{'.' * (24 - fill)}] {done}/{total} {label} | "
              f"elapsed {el:.0f}s eta {eta:.0f}s", file=sys.stderr, flush=True)
    return show


def _one(v: tuple | None, name: str, default: Any = None) -> Any:
    if not v:
        if default is None:
            raise ValueError(f"--{name} is required")
        return default
    return v[0]


def _run_single(args: argparse.Namespace) -> int:
    from llm_validation.records.atomic_io import write_json
    from llm_validation.simulation.projection import resolve_microbatches
    from llm_validation.simulation.schedules import SYNC_SCHEDULES
    from llm_validation.simulation.summary import steady_step_time, summarize
    from llm_validation.simulation.timeline import ascii_timeline, plot_timeline
    setup = cost_setup(args)
    prof = setup.get("profile")
    schedule = _one(args.schedule, "schedule", prof.schedule if prof else None)
    P = _one(args.stages, "stages", prof.stages if prof else None)
    M = resolve_microbatches(_one(args.microbatches, "microbatches",
                                  prof.microbatches if prof else None), P)
    step_after = setup.get("step_after", "backward")
    summary, result = summarize(schedule, P, M, args.batches, chunks=args.chunks,
                                make_costs=setup["make_costs"], memory_for=setup["memory_for"],
                                step_after=step_after)
    summary = {"cost_source": setup["source"], **summary}
    if args.quality:
        from llm_validation.simulation.quality import read_gaps
        base = schedule if schedule in SYNC_SCHEDULES else "1f1b"
        two = summary["steady_step_time"] if schedule == "2bw" else steady_step_time(
            "2bw", P, M, args.batches, args.chunks, setup["make_costs"], step_after=step_after)
        ref = summary["steady_step_time"] if schedule == base else steady_step_time(
            base, P, M, args.batches, args.chunks, setup["make_costs"])
        summary["quality"] = {**read_gaps(args.quality, setup["optimizer"]),
                              "throughput_gain_2bw": {"baseline": base, "ratio": ref / two}}
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        png = plot_timeline(result, out / "timeline.png")
        summary["files"] = {"json": str(out / "simulation.json"), "timeline": str(png)}
        write_json(out / "simulation.json", summary)
    if args.json:
        print_json(summary)
        return 0
    _print_single(summary)
    if setup["source"] == "unit" and summary["makespan"] <= MAX_ASCII_TICKS:
        try:
            print("\n" + ascii_timeline(result))
        except ValueError:   # half-tick or chunked actions: only the PNG (--out) draws those
            pass
    return 0


def _fmt_time(x: float, unit: str) -> str:
    return f"{x:.4g} ticks" if unit == "tick" else f"{x * 1e3:.4g} ms"


def _print_single(s: dict[str, Any]) -> None:
    u = s["time_unit"]
    print(f"{s['schedule']}: P={s['stages']} M={s['microbatches']} T={s['batches']} "
          f"D={s['data_parallel']} ({s['cost_source']})")
    print(f"  makespan {_fmt_time(s['makespan'], u)}; step time {_fmt_time(s['step_time'], u)}; "
          f"steady step time {_fmt_time(s['steady_step_time'], u)}; bubble "
          f"{s['bubble_fraction']:.2%}")
    if s["tokens_per_s"] is not None:
        print(f"  tokens/s {s['tokens_per_s']:.4g} (steady {s['steady_tokens_per_s']:.4g})")
    print(f"  delay per stage (optimizer steps): {s['delay']}")
    for m in s["peak_memory"]:
        line = (f"  stage {m['stage']}: weight copies {m['weight_copies']}, gradient buffers "
                f"{m['grad_buffers']}, activations in flight {m['activations_in_flight']}")
        if "total_gib" in m:
            line += f", peak {m['total_gib']:.3g} GiB"
        print(line)
    q = s.get("quality")
    if q:
        from llm_validation.simulation.quality import format_gap
        g = q["throughput_gain_2bw"]
        print(f"  2BW throughput over {g['baseline']}: x{g['ratio']:.3f}; measured loss gap "
              f"({q['optimizer']}, {q['source']}):")
        for gap in q["gaps"]:
            print(f"    {format_gap(gap)}")
    if "files" in s:
        print(f"  wrote {s['files']['json']} and {s['files']['timeline']}")


def _run_projection(args: argparse.Namespace) -> int:
    from llm_validation.config import preset
    from llm_validation.records.atomic_io import write_json
    from llm_validation.simulation.projection import (ProjectionSpec, plot_projection, project,
                                                      speedups)
    if not args.model:
        raise ValueError("a projection (lists of stages, microbatches, replicas or schedules) "
                         "needs --model PRESET costs")
    model = preset(args.model)
    spec = ProjectionSpec(
        model=model, hardware=hardware(args, required=True), stages=args.stages,
        microbatches=args.microbatches or ("4x",), data_parallel=args.data_parallel or (1,),
        schedules=args.schedule or ProjectionSpec.__dataclass_fields__["schedules"].default,
        seq_len=args.seq_len or model.max_seq_len, microbatch_size=args.microbatch_size,
        chunks=args.chunks, optimizer=args.optimizer or "adamw",
        activation_bytes=2 if args.dtype == "bfloat16" else 4,
        overlap_p2p=not args.no_overlap_p2p, overlap_allreduce=args.overlap_allreduce,
        separate_master=args.separate_master, balance=args.balance)
    rows = project(spec, progress=_progress(not args.quiet))
    comp = speedups(rows)
    out: dict[str, Any] = {"model": args.model, "hardware": spec.hardware.__dict__,
                           "seq_len": spec.seq_len, "microbatch_size": spec.microbatch_size,
                           "optimizer": spec.optimizer, "balance": spec.balance,
                           "rows": rows, "comparison": comp}
    if args.quality:
        from llm_validation.simulation.quality import read_gaps
        out["quality"] = read_gaps(args.quality, spec.optimizer)
    if args.out:
        d = Path(args.out)
        d.mkdir(parents=True, exist_ok=True)
        png = plot_projection(comp, d / "projection.png", title=(
            f"{args.model}, {spec.hardware.gpu_tflops:g} TFLOP/s, {spec.hardware.link_gbps:g} "
            f"Gb/s links, seq {spec.seq_len} x {spec.microbatch_size}, {spec.balance} balance"))
        out["files"] = {"json": str(d / "projection.json"), "figure": str(png)}
        write_json(d / "projection.json", out)
    if args.json:
        print_json(out)
        return 0
    print(f"{'P':>4} {'M':>5} {'D':>4} {'schedule':>17} {'step ms':>9} {'tokens/s':>10} "
          f"{'bubble':>7} {'peak GiB':>9}")
    for r in rows:
        head = f"{r['stages']:>4} {r['microbatches']:>5} {r['data_parallel']:>4} {r['schedule']:>17}"
        if "skipped" in r:
            print(f"{head}  skipped: {r['skipped']}")
            continue
        print(f"{head} {r['steady_step_time_s'] * 1e3:>9.4g} {r['tokens_per_s']:>10.4g} "
              f"{r['bubble_fraction']:>7.1%} {r['peak_memory_gib']:>9.3g}")
    print("\n2BW vs baseline: speed-up, extra peak memory (GiB)")
    for c in comp:
        print(f"  P={c['stages']:<4} M={c['microbatches']:<5} D={c['data_parallel']:<4} vs "
              f"{c['baseline']:<17} x{c['speedup_2bw']:.3f}  {c['extra_memory_gib']:+.3g} GiB")
    if "quality" in out:
        from llm_validation.simulation.quality import format_gap
        print(f"\nmeasured loss gap ({out['quality']['optimizer']}, {out['quality']['source']}):")
        for gap in out["quality"]["gaps"]:
            print(f"  {format_gap(gap)}")
    if "files" in out:
        print(f"wrote {out['files']['json']} and {out['files']['figure']}")
    return 0


def _check(args: argparse.Namespace) -> None:
    """Refuse what would be silently replaced, ignored or run for minutes (one line each)."""
    check_out_dir("--out", args.out)
    check_at_least("--batches", args.batches, 1)
    check_at_least("--seq-len", args.seq_len, 1)
    check_at_least("--microbatch-size", args.microbatch_size, 1)
    check_at_least("--chunks", args.chunks, 2)
    for name, values in (("--stages", args.stages), ("--data-parallel", args.data_parallel)):
        for v in values or ():
            check_at_least(name, v, 2 if name == "--stages" else 1)
    if args.chunks is not None and args.schedule is not None \
            and "interleaved-1f1b" not in args.schedule:
        raise UsageError(f"--chunks {args.chunks}: only interleaved-1f1b has model chunks "
                         f"(schedule {','.join(args.schedule)})")
    if args.separate_master and args.unit_costs:
        raise UsageError("--separate-master: --unit-costs has no memory model; use --model or "
                         "--from RUN_DIR")
    if args.model:
        check_stage_blocks(args.model, args.stages or ())
    from llm_validation.simulation.projection import resolve_microbatches
    chunks = args.chunks or DEFAULT_CHUNKS
    for P in args.stages or ():
        for m in args.microbatches or ():
            try:
                M = resolve_microbatches(m, P)
            except ValueError as exc:
                raise UsageError(f"--microbatches: {exc}") from None
            if P * M * args.batches * chunks > MAX_WORK_ITEMS:
                raise UsageError(f"--stages {P} --microbatches {m} --batches {args.batches}: "
                                 f"{P * M * args.batches * chunks:,} work items (P x M x T x "
                                 f"chunks) exceed the simulator's {MAX_WORK_ITEMS:,}")


def cmd_simulate(args: argparse.Namespace) -> int:
    sources = sum(bool(x) for x in (args.unit_costs, args.from_dir, args.model))
    if sources != 1:
        raise ValueError("give exactly one cost source: --unit-costs, --from RUN_DIR or "
                         "--model PRESET")
    _check(args)
    args.chunks = args.chunks or DEFAULT_CHUNKS
    many = any(v is not None and len(v) > 1 for v in
               (args.stages, args.microbatches, args.data_parallel, args.schedule))
    if many:
        return _run_projection(args)
    return _run_single(args)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate", help="event-driven simulation of pipeline schedules (2BW vs GPipe, 1F1B, "
                         "interleaved 1F1B, ZB-H1, PipeDream): time, bubble, memory",
        description="Run the action lists of a pipeline schedule through an event-driven "
                    "simulator with unit, FLOP-based (--model) or measured (--from RUN_DIR) "
                    "costs. Lists in --stages/--microbatches/--data-parallel/--schedule make a "
                    "projection of 2BW against the synchronous schedules. See "
                    "docs/simulation.md.")
    a = p.add_argument
    a("--schedule", type=_schedules, metavar="{" + ",".join(SCHEDULE_CHOICES) + "}",
      help="schedule (a comma list makes a projection)")
    a("--stages", type=_ints, metavar="P[,P...]", help="pipeline stages")
    a("--microbatches", type=_list, metavar="M[,M...]",
      help="microbatches per batch; Nx means N times the stages")
    a("--batches", type=int, default=4, help="batches T to simulate (default 4)")
    a("--data-parallel", type=_ints, metavar="D[,D...]", help="replicas (default 1)")
    a("--chunks", type=int, help=f"model chunks per device of interleaved-1f1b, only with that "
                                 f"schedule (default: {DEFAULT_CHUNKS})")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--unit-costs", action="store_true",
                     help="every forward and backward takes 1, everything else 0")
    src.add_argument("--from", dest="from_dir", metavar="RUN_DIR",
                     help="costs measured by a --profile pipeline run (RUN_DIR/profile.json)")
    src.add_argument("--model", metavar="PRESET", help="FLOP-based costs of a model preset")
    add_cost_arguments(p)
    a("--optimizer", help="optimizer for state memory and the --quality gap (default adamw, "
                          "or the run's with --from)")
    a("--quality", metavar="FILE", help="validate --json output or claims.json: print the "
                                        "measured loss gap next to the throughput gain")
    a("--out", metavar="DIR", help="write simulation.json + timeline.png (or projection.*)")
    a("--json", action="store_true", help="print the results as JSON")
    a("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_simulate)
