"""Re-run the transfer-law evidence on a set of ledgers: the transfer laws' held-out scores, advise's
choice, the acceptance reading and the README projection table, in one command.

For the 20:1 size ladder (docs/size_ladder.md), once its ledgers are assembled::

    python benchmarks/advise_rerun.py --ledger R/n46k --ledger R/n113k --ledger R/n267k

(``--ledger`` repeatable: every ledger's per-run table is pooled, one model size each; default
``docs/claims_tiny``, one size). For the delay-law ledger, a folder of run directories::

    python benchmarks/advise_rerun.py --pilot docs/delay_law/ledger/runs

Prints markdown (``--json`` for the numbers): per hold-out (largest size, longest horizon)
and law the factor-2 hits and the mean absolute log error, the law advise uses with its reason
and the laws ruled out, whether the chosen law meets the goal
(>= 80% of the held-out largest-size pairs within a factor 2), the held-out cells' scores
(batch, size at fixed steps, lr, horizon), the law they choose (the one advise uses when two
kinds or more are scored) and its goal per kind, and the projection table of
:mod:`advise_projection` computed on the same pooled ledgers. The numbers go into
docs/advise.md ("Transfer across sizes") and README.md ("Should I use 2BW?").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from advise_projection import markdown, rows  # noqa: E402
from bench_advise_loo import DEFAULT_LEDGER  # noqa: E402

from llm_validation.advice.transfer_choice import SEED_REFERENCE  # noqa: E402

__all__ = ["main", "scores_markdown", "cells_markdown"]


def _score_rows(label: str, block: dict[str, Any], laws: list[str]) -> list[str]:
    """One markdown row per law of a hold-out ``block`` and the seed reference after them:
    predicted / pairs, hits within a factor 2, mean absolute log error."""
    out = []
    for law in (*laws, SEED_REFERENCE):
        s = block[law]
        err = s["mean_abs_log_error"]
        name = f"{law} (not a law)" if law == SEED_REFERENCE else law
        out.append(f"| {label} | {name} | {s['predicted']} / {s['pairs']} | {s['hits']} | "
                   f"{'-' if err is None else f'{err:.2f}'} |")
    return out


def scores_markdown(t: dict[str, Any]) -> list[str]:
    """The held-out score table, the choice and the acceptance, as markdown lines."""
    h = t["held_out"]
    out = ["| hold out | law | predicted / pairs | within x2 | mean abs log error |",
           "|---|---|---|---|---|"]
    for kind in ("largest_size", "longest_horizon"):
        if "skipped" in h[kind]:
            out.append(f"| {kind} | - | skipped: {h[kind]['skipped']} | | |")
            continue
        out += _score_rows(f"{kind} ({h[kind]['held_out']})", h[kind], h["laws"])
    c, a = t["choice"], t["acceptance"]
    out += ["", f"advise uses **{c['law']}**: {c['reason']}. Not ruled out: "
            f"{', '.join(c['not_ruled_out'])}; ruled out: "
            + ("; ".join(f"{k} ({v})" for k, v in c["ruled_out"].items()) or "none") + "."]
    if a["measurable"]:
        r = a["seed_reference"]
        out.append(f"Acceptance: {a['law']} within a factor 2 on {a['hits']}/{a['pairs']} "
                   f"held-out largest-size pairs ({a['hit_rate_all']:.0%}; goal "
                   f"{a['goal']:.0%}: {'met' if a['met'] else 'not met'}). Seed scatter: each "
                   f"held-out pair predicted by its own arm's other seeds hits {r['hits']}/"
                   f"{r['pairs']}.")
    else:
        out.append(f"Acceptance not measurable: {a['reason']}.")
    f = t["confirmation"]
    if "skipped" in f:
        out.append(f"Confirmation fold: skipped ({f['skipped']}).")
    else:
        out.append(f"Confirmation fold (did not choose the law): {c['law']} predicts "
                   f"{f['held_out']} from N={', '.join(f'{n:,}' for n in f['fitted_on'])} "
                   f"within a factor 2 on {f['hits']}/{f['pairs']} pairs "
                   f"({f['hit_rate_all']:.0%}).")
    return out


def cells_markdown(c: dict[str, Any]) -> list[str]:
    """The held-out cell scores (gap share), the cells' choice and the goal per kind, as
    markdown lines (:func:`~llm_validation.advice.cell_choice.cell_summary`)."""
    from llm_validation.advice.cell_choice import KINDS
    share = c["share"]
    out = ["| held-out cells | law | predicted / pairs | within x2 | mean abs log error |",
           "|---|---|---|---|---|"]
    for kind in KINDS:
        if "skipped" in share[kind]:
            out.append(f"| {kind} | - | skipped: {share[kind]['skipped']} | | |")
            continue
        out += _score_rows(f"{kind} ({len(share[kind]['folds'])} folds)", share[kind],
                           share["laws"])
    ch = c["choice"]
    if ch is None:
        return out + ["", "The held-out cells do not decide (fewer than two kinds scored)."]
    out += ["", f"The held-out cells choose **{ch['law']}**: {ch['reason']}."]
    for kind, g in (c["goal"] or {}).items():
        out.append(f"- {kind}: {g['hit_rate']:.0%} of {g['pairs']} transferable pairs within "
                   f"x2, seed reference {g['seed_reference']:.0%}, goal {g['goal']:.0%}: "
                   f"{'met' if g['met'] else 'not met'}")
    return out


def main(argv: list[str] | None = None) -> int:
    from llm_validation.advice.cell_choice import cell_summary
    from llm_validation.advice.pilot import load_pilot, pairs
    from llm_validation.advice.transfer_choice import transfer_summary
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ledger", action="append", help="ledger folder (repeatable)")
    ap.add_argument("--pilot", help="folder of run directories (as advise --pilot), e.g. "
                    "docs/delay_law/ledger/runs; pooled with any --ledger")
    ap.add_argument("--optimizer", default="muon", help="the projection's optimizer")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    ledgers = args.ledger or ([] if args.pilot else [str(DEFAULT_LEDGER)])
    try:
        runs = [r for led in ledgers for r in load_pilot(ledger=led)]
        if args.pilot:
            runs += load_pilot(pilot=args.pilot)
    except (ValueError, FileNotFoundError) as exc:
        print(f"advise_rerun: error: {exc}", file=sys.stderr)
        return 2
    ps = pairs(runs)
    t = transfer_summary(ps)
    cells = cell_summary(ps)
    table = rows(ledgers, args.optimizer, [8, 16, 32], [1e9, 1e10], pilot=args.pilot)
    if args.json:
        print(json.dumps({"ledgers": ledgers, "pilot": args.pilot, "transfer": t, "cells": cells,
                          "projection": table}, indent=1, default=str))
    else:
        print("\n".join(scores_markdown(t) + [""] + cells_markdown(cells) + [""]
                        + markdown(table)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
