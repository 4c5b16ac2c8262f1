"""``delaybound delay-law``: the designed experiment that separates model size, step count and
learning rate in the cost of a one-step delay (:mod:`llm_validation.delay_law`).

- ``delay-law plan [--json]``: the design's cells, their runs and estimated cost; nothing runs.
- ``delay-law protocol --out DIR``: writes the checkout's rules (``DIR/protocol.json`` and
  ``protocol.md``), to be committed before any run.
- ``delay-law status --out DIR [--json]``: per phase, its runs finished and started and the
  process-minutes they took (every invocation of a run continued from a checkpoint), and the
  next step.
- ``delay-law run --out DIR --phase lr|train|held-out [--jobs J]``: trains one phase
  (resumable: a re-run trains only what is missing); refused without the protocol, and for
  ``held-out`` without ``predictions.json``.
- ``delay-law predict --out DIR [--allow-missing]``: every candidate law's prediction for the
  held-out cells (``DIR/predictions.json``), fitted on the training cells; refused while a
  training run is missing or unfinished, unless ``--allow-missing`` (they are then recorded).
- ``delay-law pack --out DIR --phase lr|train|held-out``: the phase's finished runs, without
  checkpoints, into ``DIR/runs-<phase>.tar.xz`` (the small record to commit; unpack with
  ``tar -xJf DIR/runs-<phase>.tar.xz -C DIR``).
- ``delay-law assemble --out DIR [--reanalyse]``: verdicts, law scores, N's exponent at fixed
  steps, the paper's setting; ``DIR/ledger.md``, ``ledger.json`` and ``figures/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from delaybound.output import print_json

__all__ = ["register", "cmd_delay_law"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("delay-law", help="the delay-law experiment: size, steps and lr",
                       description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("action", choices=("plan", "protocol", "status", "run", "predict", "pack",
                                      "assemble"),
                   help="what to do")
    p.add_argument("--out", help="the ledger folder (every action but plan)")
    p.add_argument("--phase", choices=("lr", "train", "held-out"), help="run, pack: the phase")
    p.add_argument("--jobs", type=int, default=2, help="run: training processes")
    p.add_argument("--reanalyse", action="store_true",
                   help="assemble under this checkout's rules although the folder records "
                        "others (labelled a re-analysis)")
    p.add_argument("--allow-missing", action="store_true",
                   help="predict: write the predictions although training runs are missing "
                        "(recorded in predictions.json); refused without it")
    p.add_argument("--json", action="store_true", help="plan, status: print JSON")
    p.set_defaults(func=cmd_delay_law)


def _plan(as_json: bool) -> int:
    from llm_validation.delay_law import design
    from llm_validation.delay_law.runs import LR_CENTRES, phase_runs
    counts = {ph: len(phase_runs(ph, LR_CENTRES)) for ph in ("lr", "train", "held-out")}
    cost = design.cost()
    if as_json:
        print_json({"cells": [{"name": c.name, "role": c.role, "steps": c.steps,
                               "batch": c.batch, "held_out": c.held_out} for c in design.cells()],
                    "runs": counts, "process_hours": {k: v / 3600 for k, v in cost.items()}})
        return 0
    for c in design.cells():
        print(f"{c.name:20s} {c.role:7s} {c.steps:5d} steps x {c.batch:3d} seqs"
              f"{'  held out' if c.held_out else ''}")
    print(f"runs per phase: {counts}; estimated {cost['total'] / 3600:.1f} process-hours "
          f"({', '.join(f'{k} {v / 3600:.1f}' for k, v in cost.items() if k != 'total')})")
    return 0


def _write_protocol(out: str) -> int:
    """Write the protocol into ``out``. A folder that records other rules is refused (its runs
    were judged by them: a new protocol needs a new folder); one that records the same rules
    gets the checkout's decision-code digest and commit re-recorded, said in one line."""
    from llm_validation.delay_law import protocol
    from llm_validation.records.atomic_io import read_json
    path = Path(out) / protocol.PROTOCOL_FILE
    before = read_json(path) if path.exists() else None
    now = protocol.digest(protocol.protocol_doc())
    if before is not None and before.get("digest") != now:
        raise ValueError(f"{path} records protocol {str(before.get('digest'))[:12]}, this "
                         f"checkout's rules are {now[:12]}: a folder's protocol is never "
                         "replaced (write the new one into another folder)")
    doc = protocol.write(out)
    if before is None:
        print(f"protocol {doc['digest'][:12]} written to {path}: commit it before any run")
    elif before.get("code_digest") != doc["code_digest"]:
        print(f"protocol {doc['digest'][:12]}: rules unchanged, decision code re-recorded "
              f"({str(before.get('code_digest'))[:12]} -> {doc['code_digest'][:12]}): commit "
              "it, and say in the ledger's README what changed and which runs had started")
    else:
        print(f"protocol {doc['digest'][:12]}: already recorded in {path}")
    return 0


def _status(out: str, as_json: bool) -> int:
    from llm_validation.delay_law import ledger
    if not Path(out).is_dir():
        raise FileNotFoundError(f"--out {out}: no such ledger folder")
    st = ledger.status(out)
    if as_json:
        print_json(st)
        return 0
    for phase, p in st["phases"].items():
        if p["runs"] is None:
            print(f"{phase:9s} waits on {p['waits_on']}")
            continue
        est = (f" ({p['estimated']} without a recorded process time, e.g. continued from an "
               "older checkpoint: at their last invocation's rate)" if p["estimated"] else "")
        print(f"{phase:9s} {p['finished']:4d} / {p['runs']:4d} runs finished, {p['started']} "
              f"started, {p['process_minutes']:.1f} process-minutes{est}")
    print(f"next: delaybound delay-law {st['next']} (--out {out})")
    return 0


def cmd_delay_law(args: argparse.Namespace) -> int:
    from llm_validation.delay_law import ledger, protocol
    if args.action == "plan":
        return _plan(args.json)
    if not args.out:
        raise ValueError(f"delay-law {args.action} needs --out DIR")
    if args.action == "protocol":
        return _write_protocol(args.out)
    if args.action == "status":
        return _status(args.out, args.json)
    if args.action == "pack":
        if not args.phase:
            raise ValueError("delay-law pack needs --phase lr|train|held-out")
        path, n, total = ledger.pack_phase(args.out, args.phase)
        print(f"{n} of {total} {args.phase} runs (finished ones, no checkpoints) packed into "
              f"{path}")
        return 0
    rec = protocol.check(args.out, reanalyse=args.reanalyse)
    if rec.get("code_changed"):
        print("delaybound delay-law: the decision code differs from the one the protocol "
              "records (its code digest): re-record it with `delay-law protocol` and commit "
              "before the runs it judges", file=sys.stderr)
    if args.action == "run":
        if not args.phase:
            raise ValueError("delay-law run needs --phase lr|train|held-out")
        if args.jobs < 1:
            raise ValueError(f"--jobs {args.jobs}: must be >= 1")
        n = ledger.run_phase(args.phase, args.out, jobs=args.jobs)
        print(f"phase {args.phase}: {n} runs finished under {args.out}/runs")
    elif args.action == "predict":
        doc = ledger.write_predictions(args.out, allow_missing=args.allow_missing)
        print(f"{len(doc['laws'])} law predictions for {len(doc['held_out'])} held-out cells "
              f"written to {args.out}/{ledger.PREDICTIONS_FILE}: commit it before the "
              "held-out phase")
    else:
        doc = ledger.assemble(args.out)
        if rec["reanalysis"]:
            print("re-analysis: the folder records another protocol", file=sys.stderr)
        for sid, s in doc["statements"].items():
            print(f"{s['status']:>12s}  {sid}: {s['reason']}")
        print(f"ledger written to {args.out}/ledger.md")
    return 0
