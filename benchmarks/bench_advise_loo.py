"""Leave-one-out evaluation of advise's delay-cost predictors (empirical and theory).

Holds out, in turn, each horizon, each (optimizer, lr) and each optimizer of a ledger's
(delayed, synchronous) pairs, fits the predictors on the rest and predicts every held-out pair's
final gap (:mod:`llm_validation.advice.loo`). Prints per hold-out kind and predictor the pairs,
how many got a prediction, the factor-2 hit rate (over predicted pairs and over all pairs) and
the worst misses; ``overall`` pools the three kinds. ``transfer`` scores the
candidate transfer laws (:mod:`llm_validation.advice.transfer`) on the held-out largest size and
longest horizon (:mod:`llm_validation.advice.transfer_choice`): per law and hold-out the hits
within a factor 2 and the mean absolute log error, the law advise chooses, ``confirmation`` (the
chosen law on a size fold that did not choose it) and ``acceptance``: the chosen law's hit rate
on the held-out largest-size pairs against the 80% goal (or why it is not measurable).
``cells`` scores every law (:data:`~llm_validation.advice.transfer.ALL_LAWS`) on held-out cells
(:mod:`llm_validation.advice.cell_choice`): per cost (``share``: the gap share; ``lag``: the
compute-equivalent lag, where the pilot holds shorter synchronous runs) and per hold-out kind
(``batch``, ``size``, ``lr``, ``horizon``) each law's hits within a factor 2 and mean absolute
log error beside the seeds' own scatter (``seed_reference``), the law the cells choose
(``choice``, on the gap share; ``lag_choice`` on the lag) and, per kind, the chosen law's hit
rate against the goal set by the seed reference (``goal``).

Re-run on the 20:1 ledgers: ``python benchmarks/bench_advise_loo.py --json --ledger R/n46k
--ledger R/n113k --ledger R/n267k`` (``--runs``/``--ledger`` repeatable: their runs are pooled;
``benchmarks/advise_rerun.py`` prints the same scores as markdown with the projection table).

On the delay-law ledger's runs: ``python benchmarks/bench_advise_loo.py --json --runs
docs/delay_law/ledger/runs``.

Usage: ``python benchmarks/bench_advise_loo.py --json [--runs DIR | --ledger DIR] [--rows]
[--figure PNG]`` (``--figure``: the held-out cells' scores drawn, when the cells decide)
(default ``--ledger docs/claims_tiny``; ``--runs`` reads run directories, e.g. the ledger's
``runs/`` folder; ``--rows`` adds every held-out pair).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from llm_validation.advice.cell_choice import cell_summary
from llm_validation.advice.figures import plot_cell_scores
from llm_validation.advice.loo import HOLDOUTS, evaluate
from llm_validation.advice.pilot import load_pilot, pairs
from llm_validation.advice.transfer_choice import transfer_summary

__all__ = ["main", "DEFAULT_LEDGER"]

DEFAULT_LEDGER = Path(__file__).resolve().parents[1] / "docs" / "claims_tiny"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", action="append", help="folder of run directories (repeatable)")
    ap.add_argument("--ledger", action="append",
                    help="ledger folder (claims.json with the per-run table; repeatable)")
    ap.add_argument("--rows", action="store_true", help="print every held-out pair too")
    ap.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    ap.add_argument("--figure", help="also draw the held-out cells' scores to this PNG")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        runs = []
        for folder in args.runs or []:
            runs += load_pilot(pilot=folder)
        for folder in ([] if args.runs else args.ledger or [DEFAULT_LEDGER]):
            runs += load_pilot(ledger=folder)
    except (ValueError, FileNotFoundError) as exc:
        print(f"bench_advise_loo: error: {exc}", file=sys.stderr)
        return 2
    ps = pairs(runs)

    def show(i: int, n: int, label: str) -> None:
        print(f"[loo] {i}/{n} {label} | elapsed {time.perf_counter() - t0:.0f}s",
              file=sys.stderr, flush=True)
    res = evaluate(ps, HOLDOUTS, progress=show)
    overall = {}
    for pred in ("empirical", "theory"):
        blocks = [res["holdouts"][k][pred] for k in res["holdouts"]]
        n, done, hits = (sum(b[x] for b in blocks) for x in ("pairs", "predicted", "hits"))
        overall[pred] = {"pairs": n, "predicted": done, "hits": hits,
                         "hit_rate": hits / done if done else None,
                         "hit_rate_all": hits / n if n else None}
    if not args.rows:
        for block in res["holdouts"].values():
            block.pop("rows")
    transfer = transfer_summary(ps, rows=args.rows)
    cells = cell_summary(ps, rows=args.rows, progress=show)
    if args.figure and cells["choice"] is not None:
        plot_cell_scores(cells, args.figure, title="advise's laws on held-out cells")
    src = args.runs or [str(x) for x in (args.ledger or [DEFAULT_LEDGER])]
    out = {"benchmark": "advise_loo", "source": src[0] if len(src) == 1 else src,
           "runs": len(runs), "pairs": len(ps),
           "modes": {m: sum(p.mode == m for p in ps) for m in ("delay", "ef")},
           "overall": overall, **res, "transfer": transfer, "cells": cells,
           "seconds": time.perf_counter() - t0}
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
