"""``delaybound advise``: should this run use 2BW?

``advise --optimizer NAME --stages P --microbatches M [--data-parallel D] (--from RUN_DIR |
--model PRESET [hardware flags as simulate]) --tokens N [--pilot DIR] [--ledger DIR]
[--params N] [--batch-tokens B] [--lr LR | --lr-ratio R] [--law LAW] [--out DIR] [--json]
[--plan-pilot]``:
the simulator's throughput and memory of 2BW, 2BW + EF and the synchronous schedules at the
user's shape, the predicted delay cost (lag and gap fraction, with intervals) at the user's
horizon from the pilot, the time to reach the synchronous final loss per schedule as a ratio
to 1F1B, and a recommendation; with ``--out`` also ``DIR/advice.json`` and
``DIR/advice.png`` (predicted loss against wall-clock time). The delay cost's transfer law is
chosen on the pilot's held-out sizes, printed with the spread of the laws not ruled out
("model uncertainty"), or the law ``--law`` requests (the laws in the explicit step count
``--tokens / --batch-tokens``, the lr ratio ``--lr-ratio`` (or ``--lr`` / the pilot's lr) and
size need those flags);
``--plan-pilot`` prints instead the cheapest pilot that would let advise
choose that law without extrapolating, and the pilot at the user's own step count and batch
(a smaller model trained for the target's steps), each with its cost. Exit 0; 2 on bad input
(one line).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from delaybound.output import check_out_dir, print_json

__all__ = ["register", "cmd_advise", "compute", "demo_advice", "format_advice", "format_plan",
           "DEMO_ARGS",
           "DEFAULT_GPU_TFLOPS", "DEFAULT_LINK_GBPS", "DEFAULT_DEVICE_GIB", "no_pipeline_text"]

#: ``--model`` hardware when no flag is given: the projection of docs/simulation.md (an H100 at
#: about 40% of its bf16 peak, 400 Gb/s links).
DEFAULT_GPU_TFLOPS = 400.0
DEFAULT_LINK_GBPS = 400.0
#: Memory of one device when ``--device-memory-gib`` is not given: an H100's 80 GB.
DEFAULT_DEVICE_GIB = 80.0


#: What a law's prediction was read at, as printed: (key, format).
_READ_AT = (("steps", "{:,.0f} steps"), ("lr_ratio", "lr ratio {:.3g}"), ("n_params", "N={:.3g}"))

def _positive(flag: str, what: str):
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {what} {text!r} (e.g. 1e9)") from None
        if not v > 0 or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{flag} must be a positive number, got {text!r}")
        return v
    return parse


_tokens = _positive("--tokens", "token count")


def _say(enabled: bool):
    t0 = time.perf_counter()

    def show(msg: str) -> None:
        if enabled:
            print(f"[advise] {msg} | elapsed {time.perf_counter() - t0:.0f}s", file=sys.stderr,
                  flush=True)
    return show


#: The mark of an interval end clipped at the edge of its meaningful range (explained in a note).
CLIPPED = "*"


def _fmt_iv(d: dict[str, float], pct: bool = False, floor: float | None = None) -> str:
    """``estimate [lo, hi]``; an end at ``floor`` (where the value was clipped) or infinite is
    marked :data:`CLIPPED` (the data do not bound it there)."""
    def f(x: float) -> str:
        if x in (float("inf"), float("-inf")):
            return f"{'-' if x < 0 else ''}unbounded{CLIPPED}"
        return (f"{x:.1%}" if pct else f"{x:.3g}") + (
            CLIPPED if floor is not None and x <= floor else "")
    return f"{f(d['estimate'])} [{f(d['lo'])}, {f(d['hi'])}]"


def _clip_note() -> str:
    from llm_validation.advice.time_to_target import MIN_LAG_FRACTION
    return (f"note: {CLIPPED} clipped: the interval reaches past the lag's meaningful range "
            f"({MIN_LAG_FRACTION:.0%} of the run: a delayed run taken to need half the "
            "synchronous steps; below that the lag's extrapolation means nothing, above 100% "
            "the target is never reached), so the data do not bound it there; the ratio to "
            "1F1B computed from a clipped lag is clipped too")


def no_pipeline_text(one: dict[str, Any], optimizer: str) -> str:
    """The answer for a model that fits one device: no pipeline, and why (its memory)."""
    return (f"pipelining is not needed: the whole model ({one['params']:,.0f} parameters) needs "
            f"{one['total_gib']:.3g} GiB on one device (weights, gradients, {optimizer} state "
            f"and one microbatch's activations), within one device's {one['device_gib']:g} GiB "
            "(--device-memory-gib). Train it on one device, with data-parallel replicas for "
            "more throughput; --rank-schedules ranks the pipeline schedules anyway")


def _lr_words(lr: dict[str, Any] | None) -> str:
    """The header's lr clause: the run's lr against the pilot's, or the stated ratio."""
    if not lr:
        return ""
    if lr.get("run") is None:
        return f", peak lr {lr['ratio']:.3g}x the lr tuned for its size (--lr-ratio)"
    return f", peak lr {lr['run']:.3g} = {lr['ratio']:.3g}x the pilot's {lr['pilot']:.3g}"


def format_advice(r: dict[str, Any], warnings: bool = True) -> list[str]:
    """The human-readable advice (also the demo report's closing section; ``warnings=False``:
    without the WARNING notes, which the report prints in bold above the block)."""
    from llm_validation.advice.time_to_target import ratio_text
    if "throughput" not in r:                # the no-pipeline answer: nothing ranked
        return [f"advise: {r['optimizer']}, P={r['stages']} M={r['microbatches']} "
                f"D={r['data_parallel']}", f"recommendation: {r['recommendation']['schedule']}. "
                f"{r['recommendation']['why']}."]
    out = [f"advise: {r['optimizer']}, P={r['stages']} M={r['microbatches']} "
           f"D={r['data_parallel']}, {r['tokens']:.3g} tokens = {r['target_steps']:.0f} steps of "
           f"{r['tokens_per_step']:.0f} tokens" + _lr_words(r.get("lr")),
           f"{'schedule':>17} {'step ms':>9} {'tokens/s':>10} {'x 1F1B':>7} {'peak GiB':>9}"]
    for name, t in r["throughput"].items():
        if "skipped" in t:
            out.append(f"{name:>17}  skipped: {t['skipped']}")
            continue
        mem = t["peak_memory_gib"]
        out.append(f"{name:>17} {t['steady_step_time_s'] * 1e3:>9.4g} {t['tokens_per_s']:>10.4g} "
                   f"{t['speedup_vs_1f1b']:>7.3f} {mem if mem is None else f'{mem:.3g}':>9}")
    from llm_validation.advice.time_to_target import MIN_LAG_FRACTION
    from llm_validation.advice.transfer import LAWS
    out.append("delay cost at this horizon (95% intervals):")
    clipped = set()
    for name, d in r["delay_cost"].items():
        lf = d["lag_fraction"]
        if lf["lo"] <= MIN_LAG_FRACTION or lf["hi"] == float("inf"):
            clipped.add(name)
        out.append(f"  {name}: lag {_fmt_iv(lf, pct=True, floor=MIN_LAG_FRACTION)} of the run "
                   f"({d['lag_steps']['estimate']:.0f} steps); gap {_fmt_iv(d['gap_fraction'], True)}"
                   f" of the loss decrease ({d['used']} predictor, {d['pairs']} pilot pairs)")
        for k, p in d["predictions"].items():
            at = {k: v for k, v in (p.get("read_at") or {}).items() if v is not None}
            read = ", ".join(fmt.format(at[key]) for key, fmt in _READ_AT if key in at)
            out.append(f"    {k}: gap fraction {p['estimate']:.3g} [{p['lo']:.3g}, {p['hi']:.3g}]"
                       f" (n={p['n']}, {p.get('formula', p['trend'])}"
                       + (f"; read at {read}" if read else "") + ")")
        forms = []
        for k, why in d.get("not_fitted", {}).items():
            if k in LAWS or k == d["used"]:
                out.append(f"    {k}: not fitted ({why})")
            else:
                forms.append(k)
        if forms:
            out.append(f"    not fitted (--json says why): {', '.join(forms)}")
        m = d.get("model_uncertainty")
        if m:
            t = m.get("time_ratio")
            out.append(f"    model uncertainty ({', '.join(m['laws'])}): gap "
                       f"{m['gap_fraction']['lo']:.2%} to {m['gap_fraction']['hi']:.2%}, lag "
                       f"{m['lag_fraction']['lo']:.1%} to {m['lag_fraction']['hi']:.1%}"
                       + (f", time to target {ratio_text(t['lo'])} to {ratio_text(t['hi'])} 1F1B"
                          if t else "")
                       + ("; left out: " + ", ".join(f"{k} (gap share {v:.3g} >= 1 at the "
                                                     "target: outside its domain)"
                                                     for k, v in m["outside"].items())
                          if m.get("outside") else ""))
    if "transfer" in r:
        chosen = r["transfer"]["choice"]["law"]
        out.append(f"transfer law: {chosen} ({r['transfer']['choice']['reason']})")
        for name, d in r["delay_cost"].items():
            if d["used"] != chosen:
                out.append(f"  {name} uses {d['used']}: {d['law_reason']}")
    out.append("time to the synchronous final loss, ratio to 1F1B:")
    for name, t in sorted(r["time_to_target"].items(), key=lambda kv: kv[1]["ratio"]):
        iv = ""
        if "ratio_lo" in t:
            lf = r["delay_cost"].get(name, {}).get("lag_fraction", {})
            lo = f"{t['ratio_lo']:.3g}" + (CLIPPED if lf.get("lo", 0) <= MIN_LAG_FRACTION else "")
            hi = ("unbounded" + CLIPPED if t["ratio_hi"] == float("inf")
                  else f"{t['ratio_hi']:.3g}")
            iv = f" [{lo}, {hi}]"
        out.append(f"  {name:>17} {t['ratio']:.3g}{iv}  ({t['time_s'] / 3600:.3g} h)")
    out.append(f"recommendation: {r['recommendation']['schedule']}. {r['recommendation']['why']}")
    if clipped:
        out.append(_clip_note())
    out += [n if n.startswith("WARNING") else f"note: {n}" for n in r["notes"]
            if warnings or not n.startswith("WARNING")]
    return out


def format_plan(r: dict[str, Any]) -> list[str]:
    """The human-readable pilot plan (``--plan-pilot``)."""
    t = r["target"]
    out = [f"pilot plan for {t['params']:.3g} parameters, {t['tokens']:.3g} tokens "
           f"({t['tokens_per_param']:.3g} per parameter, {t['steps']:.0f} steps; "
           f"{t['device_hours']:.3g} device-hours simulated)",
           f"{'parameters':>12} {'tokens/param':>13} {'steps':>8} {'seeds':>6} {'runs':>5} "
           f"{'device-h':>9}  role"]
    for x in r["runs"]:
        out.append(f"{x['params']:>12,} {x['tokens_per_param']:>13.3g} {x['steps']:>8,} "
                   f"{x['seeds']:>6} {x['runs']:>5} {x['device_hours']:>9.3g}  {x['held_out']}")
    out.append(f"total: {r['total_runs']} runs (sync, 2BW, 2BW + EF per seed), "
               f"{r['device_hours']:.3g} device-hours = {r['share_of_target']:.1%} of the target "
               f"run; largest pilot size 1/{r['largest_factor']:g} of the target")
    out.append(f"assumption: {r['assumption']}")
    p = r["step_pilot"]
    iv = p["interval"]
    buys = (f"g x/ {iv['factor']:.3g} (the pilot's seed scatter of log g, {iv['scatter']:.3g})"
            if iv["factor"] is not None else
            f"g x/ exp({iv['log_half_width_per_scatter']:.3g} s), s the seeds' scatter of log g "
            "(give --pilot or --ledger to read it)")
    out.append(f"at your step count: {p['params']:,} parameters for your {p['steps']:,} steps "
               f"of {p['tokens_per_step']:.0f} tokens, {p['seeds']} seeds, {p['runs']} runs, "
               f"{p['device_hours']:.3g} device-hours = {p['share_of_target']:.1%} of the "
               f"target run; it measures the delay cost at your steps and batch to a "
               f"{iv['level']:.0%} interval of {buys}; the size step to yours is still a law's")
    return out


def _params(args: argparse.Namespace) -> float | None:
    if args.params is not None:
        return args.params
    if args.model is not None:
        from llm_validation.config import preset
        return float(preset(args.model).n_params())
    return None


def compute(args: argparse.Namespace) -> dict[str, Any]:
    """The advice of parsed ``advise`` arguments (with ``--out``: advice.json + advice.png)."""
    from delaybound.cost_flags import check_stage_blocks, cost_setup
    from llm_validation.advice.advise import AdviseSpec, advise
    from llm_validation.advice.pilot import load_pilot
    from llm_validation.advice.throughput import schedule_table
    from llm_validation.records.atomic_io import write_json
    spec = AdviseSpec(optimizer=args.optimizer, stages=args.stages,
                      microbatches=args.microbatches, data_parallel=args.data_parallel,
                      tokens=args.tokens, params=_params(args), batch_tokens=args.batch_tokens,
                      lr=args.lr, lr_ratio=args.lr_ratio, law=args.law)
    if (args.model is None) == (args.from_dir is None):
        raise ValueError("give exactly one cost source: --model PRESET or --from RUN_DIR")
    check_out_dir("--out", args.out)
    if args.model is not None:
        check_stage_blocks(args.model, (spec.stages,))
    if args.plan_pilot and spec.params is None:
        raise ValueError("--plan-pilot needs the model size: --model PRESET or --params N")
    if args.pilot is None and args.ledger is None and not args.plan_pilot:
        raise ValueError("give --pilot DIR (run directories) and/or --ledger DIR (claims.json)")
    say = _say(not args.quiet)
    ns = argparse.Namespace(**vars(args))
    ns.unit_costs, ns.data_parallel = False, (args.data_parallel,)
    if args.model is not None:
        ns.gpu_tflops = args.gpu_tflops if args.gpu_tflops is not None else DEFAULT_GPU_TFLOPS
        ns.link_gbps = args.link_gbps if args.link_gbps is not None else DEFAULT_LINK_GBPS
    setup, setup_ef = cost_setup(ns), cost_setup(ns, ef=True)
    from llm_validation.advice.throughput import one_device
    one = one_device(setup, args.device_memory_gib)
    if one is not None and one["fits"] and not args.rank_schedules and not args.plan_pilot:
        result = {"optimizer": spec.optimizer, "stages": spec.stages,
                  "microbatches": spec.microbatches, "data_parallel": spec.data_parallel,
                  "tokens": spec.tokens, "pipeline_needed": False, "one_device": one,
                  "recommendation": {"schedule": "no pipeline",
                                     "why": no_pipeline_text(one, spec.optimizer)},
                  "cost_source": setup["source"], "notes": []}
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            result["files"] = {"json": str(Path(args.out) / "advice.json")}
            write_json(result["files"]["json"], result)
        return result
    table = schedule_table(spec.stages, spec.microbatches, setup=setup, setup_ef=setup_ef,
                           batches=args.batches, chunks=args.chunks,
                           progress=lambda i, n, name: say(f"simulated {name} ({i}/{n})"))
    if args.plan_pilot:
        from llm_validation.advice.pilot import load_pilot, pairs
        from llm_validation.advice.pilot_plan import plan_pilot, seed_scatter, step_count_pilot
        ref = table["1f1b"]
        devices = spec.stages * spec.data_parallel
        batch = spec.batch_tokens or ref["tokens_per_step"]   # the simulated step, scaled to it
        dev_step = ref["steady_step_time_s"] * devices * batch / ref["tokens_per_step"]
        pilot_runs = (load_pilot(pilot=args.pilot) if args.pilot else []) + [
            r for led in args.ledger or [] for r in load_pilot(ledger=led)]
        own = [q for q in pairs(pilot_runs) if q.optimizer == spec.optimizer]
        cost = dict(params=spec.params, tokens=spec.tokens, tokens_per_step=batch,
                    device_seconds_per_step=dev_step, largest_factor=args.plan_factor)
        return {"plan_pilot": {**plan_pilot(**cost), "step_pilot": step_count_pilot(
            **cost, scatter=seed_scatter(own))}, "cost_source": setup["source"]}
    say("reading the pilot")
    runs = load_pilot(pilot=args.pilot)
    for ledger in args.ledger or []:          # one ledger per model size: their runs are pooled
        runs += load_pilot(ledger=ledger)
    if not runs:
        raise ValueError("the pilot holds no finished run")
    result = advise(spec, runs, table, progress=say)
    result["cost_source"] = setup["source"]
    result["pipeline_needed"] = not (one is not None and one["fits"])
    result["one_device"] = one
    if not result["pipeline_needed"]:
        result["notes"].insert(0, no_pipeline_text(one, spec.optimizer).replace(
            "; --rank-schedules ranks the pipeline schedules anyway",
            " (ranked below because --rank-schedules was given)"))
    if args.out:
        from llm_validation.advice.figures import plot_advice
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        src = args.model or args.from_dir
        png = plot_advice(result, out / "advice.png", title=(
            f"projection: {spec.optimizer}, {src}, P={spec.stages} M={spec.microbatches} "
            f"D={spec.data_parallel}, {spec.tokens:.3g} tokens; loss shape from the pilot's "
            f"{result['pilot']['reference_horizon']}-step synchronous runs"))
        result["files"] = {"json": str(out / "advice.json"), "figure": str(png)}
        write_json(out / "advice.json", result)
    return result


#: The demo's question: SmolLM-360M on 8 stages, 32 microbatches, 1e9 tokens (default hardware).
DEMO_ARGS = ("--stages", "8", "--microbatches", "32", "--model", "smollm-360m", "--tokens", "1e9",
             "--rank-schedules")


def demo_advice(runs_dir: str | Path, out: str | Path, root: str | Path,
                optimizers: tuple[str, ...] = ("muon", "adamw")) -> list[str]:
    """Markdown lines of the advice for the demo's own runs (one block per optimizer, with its
    figure linked relative to the report's folder ``root``); an optimizer advise cannot serve
    gets its one-line reason instead."""
    import os
    parser = argparse.ArgumentParser(prog="delaybound")
    register(parser.add_subparsers())
    lines = [f"`delaybound advise --optimizer NAME {' '.join(DEMO_ARGS)} --pilot {runs_dir}` "
             "(a projection: the delay cost is this demo's, the throughput the simulator's; "
             "docs/advise.md).", ""]
    for opt in optimizers:
        args = parser.parse_args(["advise", "--optimizer", opt, *DEMO_ARGS, "--pilot",
                                          str(runs_dir), "--out", str(Path(out) / opt),
                                          "--quiet"])
        try:
            r = compute(args)
        except (ValueError, FileNotFoundError) as exc:
            lines += [f"- {opt}: advise could not run: {exc}", ""]
            continue
        warn = [n for n in r["notes"] if n.startswith("WARNING")]
        lines += [f"**{w}**" for w in warn] + ([""] if warn else [])
        lines += ["```", *format_advice(r, warnings=False), "```", "",
                  f"![advice {opt}]({os.path.relpath(r['files']['figure'], root)})", ""]
    return lines


def cmd_advise(args: argparse.Namespace) -> int:
    result = compute(args)
    if args.json:
        print_json(result)
        return 0
    if "plan_pilot" in result:
        print("\n".join(format_plan(result["plan_pilot"])))
        return 0
    print("\n".join(format_advice(result)))
    if "files" in result:
        print(f"wrote {' and '.join(result['files'].values())}")
    return 0


def register(subparsers: Any) -> None:
    from delaybound.cost_flags import add_cost_arguments
    from llm_validation.advice.transfer import ALL_LAWS
    p = subparsers.add_parser(
        "advise", help="should this run use 2BW? time to target of 2BW (+EF) vs the synchronous "
                       "schedules from the simulator and a pilot's delay cost",
        description="Join the schedule simulator's throughput with the delay cost predicted "
                    "from a pilot (sync + 2BW pairs, or a ledger's claims.json) at your horizon: "
                    "time to the synchronous final loss per schedule as a ratio to 1F1B, and a "
                    "recommendation. See docs/advise.md.")
    a = p.add_argument
    a("--optimizer", required=True, help="optimizer of the run (adamw, muon, ...)")
    a("--stages", type=int, required=True, help="pipeline stages P (>= 2)")
    a("--microbatches", type=int, required=True, help="microbatches per optimizer step M")
    a("--data-parallel", type=int, default=1, help="replicas D (1)")
    a("--tokens", type=_tokens, required=True, help="training horizon in tokens, e.g. 1e9")
    a("--params", type=_positive("--params", "parameter count"), metavar="N",
      help="the model's parameter count (default: "
      "the --model preset's); the size-aware transfer laws and the extrapolation check read it")
    a("--batch-tokens", type=_positive("--batch-tokens", "token count"), metavar="B",
      help="tokens per optimizer step of the run: its step count is --tokens / B (default: the "
           "simulated batch; the laws with an explicit step count need it)")
    a("--lr", type=_positive("--lr", "learning rate"), metavar="LR",
      help="the run's peak learning rate, read against the pilot's tuned lr (its synchronous "
           "reference runs': right when your model is the reference's size); the laws with an "
           "lr term need it or --lr-ratio")
    a("--lr-ratio", type=_positive("--lr-ratio", "lr ratio"), metavar="R",
      help="the run's peak lr over the lr tuned for its own size (1: tuned), the ratio the lr "
           "laws read from each pilot pair; instead of --lr for a model of another size")
    a("--law", choices=ALL_LAWS, metavar="LAW",
      help=f"use this transfer law ({', '.join(ALL_LAWS)}) instead of the one chosen on "
           "held-out sizes; refused in one line when the pilot or the flags cannot fit it")
    a("--plan-pilot", action="store_true", help="print the cheapest pilot (sizes, horizons, "
      "seeds) that lets advise choose its transfer law without extrapolating, and the pilot at "
      "your step count and batch (a smaller model for your steps), with their costs and the "
      "interval the latter buys (read from --pilot/--ledger's seeds when given)")
    a("--plan-factor", type=_positive("--plan-factor", "factor"), default=10.0, metavar="F",
      help="--plan-pilot's largest pilot size: 1/F of the model (10; above 10 advise will say "
           "extrapolation)")
    a("--pilot", metavar="DIR", help="folder of run directories: sync + 2BW (+EF) pairs")
    a("--ledger", metavar="DIR", action="append",
      help="ledger folder whose claims.json has the per-run table (repeatable: one per model "
           "size, pooled)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--from", dest="from_dir", metavar="RUN_DIR",
                     help="costs measured by a --profile pipeline run (RUN_DIR/profile.json)")
    src.add_argument("--model", metavar="PRESET", help="FLOP-based costs of a model preset "
                     f"(default hardware {DEFAULT_GPU_TFLOPS:g} TFLOP/s, "
                     f"{DEFAULT_LINK_GBPS:g} Gb/s links)")
    add_cost_arguments(p)
    a("--batches", type=int, default=4, help="batches simulated per schedule (4)")
    a("--chunks", type=int, default=2, help="model chunks per device of interleaved-1f1b (2)")
    a("--device-memory-gib", type=_positive("--device-memory-gib", "memory size"),
      default=DEFAULT_DEVICE_GIB, metavar="GIB",
      help="memory of one device: a model that fits it needs no pipeline, and advise says so "
           "instead of ranking schedules")
    a("--rank-schedules", action="store_true",
      help="rank the pipeline schedules even when the model fits one device")
    a("--out", metavar="DIR", help="write advice.json + advice.png")
    a("--json", action="store_true", help="print the advice as JSON")
    a("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_advise)
