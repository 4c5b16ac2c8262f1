"""The README's advise projection table, regenerated from a ledger: one ``advise`` per row.

For every pipeline depth P (microbatches M = 4P) and token budget, runs ``delaybound advise``
(Muon by default, SmolLM-360M shapes, the default hardware) with the ledger's per-run table as
the pilot, and prints one row per (P, tokens): 2BW's speed-up and extra memory over 1F1B, the
predicted 2BW lag as a share of the run, the time to the synchronous final loss of 2BW and of
2BW + EF as a ratio to 1F1B (95% intervals), 2BW's time over the model-uncertainty range (the
transfer laws not ruled out), ZB-H1's ratio and advise's recommendation. So the
table in README.md ("Should I use 2BW?") is a command's output, not hand-copied numbers.

Usage: ``python benchmarks/advise_projection.py [--ledger docs/claims_tiny ...] [--pilot DIR]
[--optimizer muon] [--stages 8,16,32] [--tokens 1e9,1e10] [--json]`` (markdown table by
default; ``--ledger`` is repeatable: one ledger per model size, their runs pooled, as
``advise --ledger``; ``--pilot`` a folder of run directories, as ``advise --pilot``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "row", "rows", "markdown", "DEFAULT_LEDGER", "MODEL", "MICRO_PER_STAGE"]

DEFAULT_LEDGER = Path(__file__).resolve().parents[1] / "docs" / "claims_tiny"
#: The projected model: SmolLM-360M has 32 blocks, so P <= 32 without tensor parallelism.
MODEL = "smollm-360m"
#: Microbatches per stage (M = 4P keeps 1F1B's bubble at about (P - 1) / (5P - 1)).
MICRO_PER_STAGE = 4


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def row(result: dict[str, Any]) -> dict[str, Any]:
    """The table's columns from one ``advise`` result."""
    thr, ttt = result["throughput"], result["time_to_target"]
    lag = result["delay_cost"]["2bw"]["lag_fraction"]

    def ratio(name: str) -> dict[str, float]:
        t = ttt[name]
        return {"ratio": t["ratio"], "lo": t.get("ratio_lo"), "hi": t.get("ratio_hi")}
    return {"stages": result["stages"], "microbatches": result["microbatches"],
            "tokens": result["tokens"], "steps": result["target_steps"],
            "speedup_2bw": thr["2bw"]["speedup_vs_1f1b"],
            "extra_gib_2bw": thr["2bw"]["peak_memory_gib"] - thr["1f1b"]["peak_memory_gib"],
            "lag_2bw": lag, "time_2bw": ratio("2bw"), "time_2bw_ef": ratio("2bw+ef"),
            "law": result["delay_cost"]["2bw"]["used"],
            "model_range_2bw": result["delay_cost"]["2bw"]["model_uncertainty"]["time_ratio"],
            "extrapolation": result["extrapolation"] is not None,
            "time_zb_h1": ttt["zb-h1"]["ratio"],
            "recommended": result["recommendation"]["schedule"]}


def _tokens_text(t: float) -> str:
    mantissa, exponent = f"{t:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _ratio_text(x: float) -> str:
    """A time ratio; ``never`` where a law puts the lag at the whole run or more (2BW does not
    reach the synchronous final loss on that law)."""
    return "never" if x == float("inf") else f"{x:.2f}"


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    def iv(d: dict[str, Any], pct: bool = False) -> str:
        f = (lambda x: f"{x:.0%}") if pct else (lambda x: f"{x:.2f}")
        lo, hi = d.get("lo"), d.get("hi")
        est = d["estimate"] if "estimate" in d else d["ratio"]
        return f(est) + (f" [{f(lo)}, {f(hi)}]" if lo is not None and hi is not None else "")
    out = ["| P | M | tokens | steps | 2BW speed-up | 2BW extra GiB | 2BW lag (share of run) | "
           "2BW time / 1F1B | 2BW time, laws' range | 2BW + EF time / 1F1B | ZB-H1 | recommended |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['stages']} | {r['microbatches']} | {_tokens_text(r['tokens'])} | "
                   f"{r['steps']:,.0f} | x{r['speedup_2bw']:.3f} | +{r['extra_gib_2bw']:.2f} | "
                   f"{iv(r['lag_2bw'], True)} | {iv(r['time_2bw'])} | "
                   f"{_ratio_text(r['model_range_2bw']['lo'])}-"
                   f"{_ratio_text(r['model_range_2bw']['hi'])} | "
                   f"{iv(r['time_2bw_ef'])} | {r['time_zb_h1']:.2f} | {r['recommended']}"
                   f"{' (extrapolation)' if r['extrapolation'] else ''} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ledger", action="append",
                    help="ledger folder (claims.json); repeatable (default docs/claims_tiny)")
    ap.add_argument("--pilot", help="folder of run directories (as advise --pilot), e.g. "
                    "docs/delay_law/ledger/runs; pooled with any --ledger")
    ap.add_argument("--optimizer", default="muon")
    ap.add_argument("--stages", type=_ints, default=[8, 16, 32], help="P values, e.g. 8,16,32")
    ap.add_argument("--tokens", type=_floats, default=[1e9, 1e10], help="e.g. 1e9,1e10")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    ledgers = args.ledger or ([] if args.pilot else [str(DEFAULT_LEDGER)])
    out = rows(ledgers, args.optimizer, args.stages, args.tokens, pilot=args.pilot)
    if args.json:
        print(json.dumps({"ledger": ledgers[0] if len(ledgers) == 1 else ledgers,
                          "pilot": args.pilot, "optimizer": args.optimizer, "model": MODEL,
                          "rows": out}, indent=1))
    else:
        print("\n".join(markdown(out)))
    return 0


def rows(ledgers: list[str], optimizer: str, stages: list[int],
         tokens_list: list[float], pilot: str | None = None) -> list[dict[str, Any]]:
    """One :func:`row` per (P, tokens): ``advise`` on the pooled ``ledgers`` and ``pilot``
    (a folder of run directories)."""
    from delaybound.cli import build_parser
    from delaybound.cmd_advise import compute
    t0 = time.perf_counter()
    out = []
    for p in stages:
        for tokens in tokens_list:
            ns = build_parser().parse_args(
                ["advise", "--optimizer", optimizer, "--stages", str(p), "--microbatches",
                 str(MICRO_PER_STAGE * p), "--model", MODEL, "--tokens", repr(tokens),
                 *[x for led in ledgers for x in ("--ledger", led)],
                 *(["--pilot", pilot] if pilot else []), "--quiet",
                 "--rank-schedules"])     # the model fits one device: ranked on request
            out.append(row(compute(ns)))
            print(f"[advise_projection] P={p} tokens={tokens:.0e} done "
                  f"({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
    return out


if __name__ == "__main__":
    sys.exit(main())
