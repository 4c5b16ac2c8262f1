"""``delaybound reproduce``: the claims of the catalogue as a ledger (the paper's 16 empirical
claims, the project's claim 17, the horizon ladder and the size ladder). This module parses the
flags and prints; the ledger itself is :func:`llm_validation.claims.reproduce.reproduce`.

- ``reproduce --size-ladder ROOT``: the size ladder fitted across the 20:1 ledgers under ROOT
  (:mod:`llm_validation.claims.report.size_ladder`), training nothing.
- ``reproduce --protocol --out DIR [--scale S] [--claims ...]``: the rules that will decide the
  ledger (:mod:`llm_validation.claims.report.protocol`), written before its runs.
- ``reproduce --list [--json] [--scale S] [--seeds N] [--quick] [--jobs J]``: every claim with
  its id, the paper's wording and figure, its grid and the reason for it, the runs it needs and
  their estimated cost, and the totals over all claims (runs are shared).
- ``reproduce --out DIR [--claims ID,...] [--scale tiny|small|smollm-135m] [--seeds N]
  [--jobs J] [--threads T] [--device cpu|cuda] [--quick] [--set [OPT:]SEC.FIELD=VALUE]
  [--max-seeds N] [--extra-budget MIN] [--keep-checkpoints] [--quiet] [--json]
  [--reanalyse] [--stop-after sweep] [--reuse-sweep]``: records the protocol (``OUT/protocol.json``, refused
  when OUT holds another unless ``--reanalyse``), runs the phases
  (:mod:`llm_validation.claims.phases`: lr sweep -> the claims' runs -> extra seeds), training
  what is missing into ``DIR/runs`` (resumable: one run directory per distinct config, shared
  across claims and phases, through the sweep runner), then writes ``DIR/claims.md``,
  ``DIR/claims.json``, ``DIR/lr_sweep.json`` and ``DIR/figures/<id>.png``. A progress line per
  finished run on stderr with an ETA weighted by the estimated cost left. ``--reuse-sweep``:
  phase 1 reads the lrs of ``DIR/lr_sweep.json`` and trains nothing (a ledger swept under
  older rules keeps its sweep when a run the current rules name is added).

``--quick``: one seed (unless ``--seeds``) and half-length runs: a first look, every status
inconclusive. Exit code 0 whatever the verdicts, 1 when a run raised (the ledger is written
anyway), 2 on bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from delaybound.output import check_at_least, check_out_dir, check_overrides, print_json

__all__ = ["register", "cmd_reproduce"]


def _ids(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _options(args: argparse.Namespace):
    """The flags as the library's :class:`~llm_validation.claims.reproduce.Options`."""
    from llm_validation.claims.reproduce import Options
    check_at_least("--jobs", args.jobs, 0)
    check_at_least("--threads", args.threads, 1)
    check_overrides("--set", args.set)
    return Options(scale=args.scale, claims=args.claims, seeds=args.seeds, quick=args.quick,
                   device=args.device, overrides=tuple(args.set or ()), jobs=args.jobs,
                   threads=args.threads, max_seeds=args.max_seeds,
                   extra_budget_min=args.extra_budget, keep_checkpoints=args.keep_checkpoints,
                   reanalyse=args.reanalyse, assemble_only=args.assemble_only,
                   stop_after=args.stop_after, reuse_sweep=args.reuse_sweep,
                   progress=not args.quiet)


def _scales_table() -> dict:
    """Every scale with its model, parameters, base run and default claims (``--list --json``;
    the 20:1 scales' costs: ``--list --scale S``)."""
    from llm_validation.claims.plan.scales import SCALES
    from llm_validation.config import preset
    return {name: {"model": sc.model, "n_params": preset(sc.model).n_params(),
                   "steps": sc.steps, "tokens_per_param": sc.tokens_per_param,
                   "warmup_fraction": sc.warmup_fraction,
                   "aux_lr_from_adamw": sc.aux_lr_from_adamw, "device": sc.device,
                   "claims": list(sc.claims) if sc.claims else "all but the size ladder"}
            for name, sc in SCALES.items()}


def _list(args: argparse.Namespace) -> int:
    import dataclasses

    from llm_validation.claims.reproduce import plan_for, policy_of
    options = _options(args)
    if args.markdown:
        from llm_validation.claims.catalogue.registry import ON_REQUEST
        from llm_validation.claims.report.catalogue_page import catalogue_markdown
        plan = plan_for(dataclasses.replace(options, claims=("all",)))
        print(catalogue_markdown(plan, ON_REQUEST), end="")
        return 0
    from llm_validation.claims.phases import phase_costs
    policy = policy_of(options)
    plan = plan_for(options, args.out)
    jobs = max(args.jobs, 1)
    phases = phase_costs(plan.claims, plan.scale, plan, quick=plan.quick,
                         overrides=plan.overrides, policy=policy)
    rows = [{**c.to_dict(), "runs_needed": len(plan.claim_runs(c.id)),
             "estimated_process_s": round(plan.cost(c.id), 1)} for c in plan.claims]
    total = sum(s["estimated_process_s"] for s in phases)
    totals = {"distinct_runs": len(plan.runs), "estimated_process_s": round(total, 1),
              "estimated_wall_s": round(total / jobs, 1), "jobs": jobs,
              "unavailable_runs": len(plan.unavailable()),
              "cost_model": plan.cost_model.to_dict()}
    if args.json:
        sections = {sec: [c.id for c in plan.claims if c.section == sec]
                    for sec in ("paper", "theory")}
        print_json({"scale": plan.scale.name, "seeds": list(plan.seeds), "quick": plan.quick,
                    "phases": phases, "sections": sections, "claims": rows, **totals,
                    "scales": _scales_table()})
        return 0
    for r in rows:
        print(f"{r['number']:2d}. {r['id']} ({r['figure']}): {r['runs_needed']} runs, "
              f"~{r['estimated_process_s'] / 60:.0f} process-min alone")
        print(f"    claim: {r['wording']}" + ("  [the project's theory, not the paper's]"
                                                   if r["section"] == "theory" else ""))
        for st in r["statements"]:
            print(f"    {st['id']:>5} ({st['source']}): {st['quote']}")
        print(f"    grid:  {r['grid']}")
        print(f"    why:   {r['reason']}")
    print()
    for s in phases:
        bound = (f" (at most ~{s['estimated_process_s_max'] / 60:.0f})"
                 if "estimated_process_s_max" in s else "")
        print(f"phase {s['phase']}: ~{s['estimated_process_s'] / 60:.0f} process-min{bound}")
    print(f"\n{totals['distinct_runs']} distinct runs (claims) at scale {plan.scale.name}, "
          f"{len(plan.seeds)} seed(s): ~{totals['estimated_process_s'] / 60:.0f} "
          f"process-minutes with the lr sweep, ~{totals['estimated_wall_s'] / 60:.0f} minutes "
          f"with --jobs {jobs} (cost model: {plan.cost_model.source})"
          + (f"; {totals['unavailable_runs']} runs not run (unavailable here, or long arms "
             "under --quick)"
             if totals["unavailable_runs"] else ""))
    return 0


def _write_protocol(args: argparse.Namespace) -> int:
    from llm_validation.claims.report.protocol import write_protocol
    from llm_validation.claims.reproduce import protocol_doc
    check_out_dir("--out", args.out)
    doc = write_protocol(args.out, protocol_doc(_options(args)))
    print(f"protocol {doc['digest'][:12]} (commit {str(doc['commit'])[:12]}) written to "
          f"{os.path.join(args.out, 'protocol.json')} and protocol.md")
    return 0


def _size_ladder(args: argparse.Namespace) -> int:
    from llm_validation.claims.report.size_ladder import assemble_size_ladder
    root = args.size_ladder
    if not os.path.isdir(root):
        raise ValueError(f"--size-ladder {root}: not a folder (it holds one ledger folder per "
                         "size: n46k, n113k, n267k)")
    doc = assemble_size_ladder(root, tiny=args.tiny)
    if args.json:
        print_json(doc)
    else:
        for c in doc["checks"]:
            print(f"{c['status'].upper():12s} {c['label']}")
        print(f"size ladder: {os.path.join(root, 'size_ladder.md')}")
        if args.tiny:
            print("\n".join(doc["regime"]))
            print(f"regime table: {os.path.join(root, 'regime.md')}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args)
    if args.size_ladder:
        return _size_ladder(args)
    if not args.out:
        raise ValueError("--out DIR is required (or --list)")
    if args.protocol:
        return _write_protocol(args)
    check_out_dir("--out", args.out)
    from llm_validation.records.folder_lock import folder_lock
    with folder_lock(args.out, "reproduce"):   # one writer per --out (its sweeps lock runs/)
        return _reproduce(args)


def _check_device(device: str) -> None:
    if device == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise ValueError("--device cuda: no CUDA device is available here")


def _reproduce(args: argparse.Namespace) -> int:
    from llm_validation.claims.reproduce import reproduce
    o = reproduce(_options(args), args.out, check_device=_check_device)
    ledger = os.path.join(args.out, "claims.md")
    if o.doc is None:                       # stopped after the lr sweep
        pass
    elif args.assemble_only:
        c = o.doc["counts"]
        print(f"re-assembled (trained nothing): the paper's claims {c['pass']} pass, "
              f"{c['fail']} fail, {c['inconclusive']} inconclusive; {ledger}")
    elif args.json:
        print_json(o.doc)
    else:
        for claim, r in zip(o.plan.claims, o.results):
            print(f"{r.status.upper():12s} {claim.number:2d}. {claim.id}: {r.reason[:160]}")
        c, t = o.doc["counts"], o.doc["statement_counts"]["theory"]
        print(f"\nthe paper's claims: {c['pass']} pass, {c['fail']} fail, {c['inconclusive']} "
              f"inconclusive; the theory's statements: {t['pass']} pass, {t['fail']} fail, "
              f"{t['inconclusive']} inconclusive; trained {o.trained} runs (all phases), "
              f"reused {o.summary.reused} of the claims' runs; ledger: {ledger}")
    for e in o.errors:
        print(f"delaybound reproduce: run failed: {e}", file=sys.stderr)
    return 1 if o.errors else 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "reproduce", help="the paper's empirical claims as a ledger (runs what is missing)",
        description="Train the runs the catalogue's claims need (the paper's 16, the project's "
                    "claim 17, the horizon and the size ladder; resumable, shared between claims) in phases (lr "
                    "sweep, claims, extra seeds), then write OUT/claims.md and OUT/claims.json: "
                    "per statement the measured numbers with intervals over seeds, pass / fail / "
                    "inconclusive, the theory's prediction apart, and a figure per claim.")
    a = p.add_argument
    a("--list", action="store_true", help="list the claims, their grids and cost; run nothing")
    a("--markdown", action="store_true",
      help="with --list: every claim of the catalogue as a markdown page (docs/catalogue.md)")
    a("--protocol", action="store_true",
      help="write OUT/protocol.json and protocol.md (every rule that decides the verdicts, "
           "with its digest); run nothing")
    a("--reanalyse", action="store_true",
      help="assemble under this checkout's rules although OUT records another protocol (the "
           "ledger is labelled a re-analysis)")
    a("--size-ladder", metavar="ROOT",
      help="fit the size ladder across the 20:1 ledgers ROOT/n46k, ROOT/n113k, ROOT/n267k "
           "(trained by --scale S --out ROOT/S): per arm the step-and-size exponent (every "
           "size trains at one batch, so the step count grows with N) and N's exponent at "
           "matched steps; no extrapolation to SmolLM-135M/360M (docs/delay_law.md measures "
           "N at fixed steps); writes ROOT/size_ladder.md")
    a("--tiny", metavar="DIR",
      help="with --size-ladder: the tiny ledger's folder (e.g. docs/claims_tiny); also writes "
           "ROOT/regime.md, per claim the verdict at 0.2 tokens per parameter, at each 20:1 "
           "size and the size trend")
    a("--assemble-only", action="store_true",
      help="re-assemble the ledger in OUT from its finished runs, training nothing (its "
           "lr_sweep.json's lrs, the seeds its recorded extra-seeds phase chose)")
    a("--stop-after", choices=["sweep"],
      help="stop after a phase (sweep: the lr sweep only, e.g. to tune before the protocol "
           "of the claims' runs is committed)")
    a("--reuse-sweep", action="store_true",
      help="phase 1 reads the lrs of OUT/lr_sweep.json and trains nothing; the claims' missing "
           "runs train at them (a ledger swept under older rules, e.g. on seeds a claim now "
           "uses, keeps its sweep when a run the current rules name is added)")
    a("--claims", type=_ids, metavar="ID,...", help="claim ids (default: all; see --list)")
    a("--scale", default="tiny", help="tiny (CPU, default), small (CPU) or smollm-135m (GPU)")
    a("--seeds", type=int, help="seeds per setting (default 3; 1 with --quick)")
    a("--jobs", type=int, default=2, help="parallel training processes (default 2; 0: inline)")
    a("--threads", type=int, help="torch threads per process (default cores / jobs)")
    a("--device", choices=["cpu", "cuda"], help="device of every run (default: the scale's)")
    a("--quick", action="store_true", help="half-length runs, one seed: a first look")
    a("--set", action="append", metavar="[OPT:]SEC.FIELD=VALUE",
      help="override the base run of every claim (e.g. --set data.path=shards/)")
    a("--max-seeds", type=int, default=8,
      help="seeds policy: most seeds an undecided check's arms are run to (default 8)")
    a("--extra-budget", type=float, default=60.0, metavar="MIN",
      help="seeds policy: process-minutes the extra seeds may add, cheapest claims first "
           "(default 60: the tiny ledger then fits 4 hours on 2 cores)")
    a("--keep-checkpoints", action="store_true",
      help="keep the final checkpoint of every run (default: removed once the run finished)")
    a("--out", help="output folder (runs/, figures/, claims.md, claims.json)")
    a("--quiet", action="store_true", help="no progress lines")
    a("--json", action="store_true", help="print the ledger (or the list) as JSON")
    p.set_defaults(func=cmd_reproduce)
