"""``report.md``: the demo's (or a validation's) single readable output.

:func:`write_report` renders, in order: what was run and how long it took, the theorem table,
the numeric verification summary with the rate figures, the headline verdicts (each optimizer's
delay cost and EF's share of it, AdamW vs Muon, EF gains) with their numbers, every figure of the validation, the full verdict list
(``ValidationReport.to_markdown``), the run table, notes, and last the advice for the runs
(``delaybound advise``: markdown lines made by the caller). Image links are relative to the
report's folder, so the folder can be moved or published as is. The file is written atomically
(temporary file, then rename) and can be rewritten after every stage of the demo.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from llm_validation.records.atomic_io import write_text
from llm_validation.validation.verdict import ValidationReport, Verdict

__all__ = ["write_report", "HEADLINE_IDS", "PLOT_CAPTIONS"]

#: The verdicts the demo is about (shown first, with their numbers).
HEADLINE_IDS = ("gap_adamw_gt_muon", "ef_gain[muon]", "ef_gain[adamw]",
                "pipeline_matches_emulation")
PLOT_CAPTIONS = {
    "loss_curves.png": "Validation loss, sync vs 2BW vs 2BW+EF (mean over seeds, 95% band).",
    "cos_delayed_fresh.png": "Cosine between the applied (delayed) update and the update a fresh "
                             "gradient would give: how much the one-step delay bends each step.",
    "gap_vs_lr.png": "Gap vs learning rate with the fitted power law (theory: exponent 2).",
    "gap_vs_tau.png": "Gap vs delay tau with the fitted PL law.",
    "gap_vs_momentum.png": "Gap vs momentum.",
    "gap_vs_batch.png": "Gap vs batch size (theory: larger batches expose the delay).",
    "ef_vs_lam.png": "Share of the gap EF removes vs lam, with the alignment of consecutive "
                     "updates.",
    "smoothness.png": "Local smoothness estimates along the delayed runs (optimizer's norm).",
}
_BADGE = {"pass": "PASS", "fail": "FAIL", "inconclusive": "inconclusive"}


def _rel(path: str | Path, root: Path) -> str:
    return os.path.relpath(Path(path), root).replace(os.sep, "/")


def _fmt(v: Any) -> str:
    if hasattr(v, "fmt"):
        return v.fmt()
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _headline(v: Verdict) -> list[str]:
    nums = "; ".join(f"{k}: {_fmt(x)}" for k, x in v.measured.items())
    return [f"- **{_BADGE[v.status]}** — {v.claim}. {nums}. _Decision: {v.reason}._"]


def _table(rows: Sequence[Mapping[str, Any]], cols: Sequence[str]) -> list[str]:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(_fmt(r.get(c, "")) if r.get(c) is not None else ""
                                     for c in cols) + " |")
    return out


def write_report(path: str | Path, *, title: str = "delaybound demo report",
                 intro: Sequence[str] = (), stages: Sequence[Mapping[str, Any]] = (),
                 theorems: Sequence[Mapping[str, Any]] | None = None,
                 verification: Mapping[str, Any] | None = None,
                 rate_figures: Sequence[str | Path] = (),
                 validation: ValidationReport | None = None,
                 validation_figures: Mapping[str, str | Path] | None = None,
                 notes: Sequence[str] = (), advice: Sequence[str] = ()) -> Path:
    """Write ``path`` (markdown) from whatever parts exist so far; returns the path."""
    path = Path(path)
    root = path.parent
    root.mkdir(parents=True, exist_ok=True)
    L: list[str] = [f"# {title}", ""]
    L += list(intro) + ([""] if intro else [])
    if stages:
        cols = ("stage", "status", "seconds", "cpu_seconds", "output")
        L += ["## Stages", ""] + _table(stages, cols) + [""]
    if theorems is not None:
        L += ["## 1. Theorems", "",
              "Each bound is a sympy expression checked by `delaybound theory check`; "
              "`delaybound theory show NAME` prints the statement, assumptions and proof.", ""]
        L += _table(theorems, ("name", "title", "bound")) + [""]
    if verification is not None or rate_figures:
        L += ["## 2. Numeric verification", ""]
        if verification is not None:
            L += [f"`delaybound verify`: {verification.get('summary', '')}", ""]
            rows = verification.get("rows")
            if rows:
                L += _table(rows, ("theorem", "instances", "violations", "worst_ratio")) + [""]
        for p in rate_figures:
            L += [f"![{Path(p).stem}]({_rel(p, root)})", ""]
    if validation is not None:
        L += ["## 3. Headline: sync vs PipeDream-2BW on the tiny model", ""]
        if validation.quick:
            L += ["**QUICK run: few steps and one seed. Not evidence: every verdict is "
                  "inconclusive by construction; run the full demo for verdicts.**", ""]
        ids = [v.id for v in validation.verdicts]
        for v in validation.verdicts:          # every optimizer's answer first
            if v.id.startswith("delay_cost["):
                L += _headline(v)
        for vid in HEADLINE_IDS:
            if vid in ids:
                L += _headline(validation.get(vid))
        L += [""]
    if validation_figures:
        L += ["## 4. Plots", ""]
        for name, p in validation_figures.items():
            L += [f"**{PLOT_CAPTIONS.get(name, name)}**", "", f"![{name}]({_rel(p, root)})", ""]
    if validation is not None:
        links = {n: _rel(p, root) for n, p in (validation_figures or {}).items()}
        L += ["## 5. All verdicts", "", validation.to_markdown(links), ""]
        if validation.runs:
            L += ["## 6. Runs", ""] + _table(
                validation.runs, ("name", "optimizer", "mode", "lr", "seed", "steps", "status",
                                  "final_val_loss")) + [""]
    if notes:
        L += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    if advice:
        L += ["## Should I use 2BW? (`delaybound advise` on these runs)", ""] + list(advice)
    return write_text(path, "\n".join(L) + "\n")   # atomic; nothing left on a full disk
