"""The ledger: every selected claim's result and figure, written as ``claims.md`` and ``claims.json``.

:func:`assemble` analyses each claim of a plan on the finished runs under ``<out>/runs`` and
draws its figure into ``<out>/figures``; :func:`write_ledger` writes

- ``claims.json``: the settings (scale, seeds, quick, overrides), the run budget (distinct runs,
  estimated cost, what this invocation trained and reused), and per claim its registry entry
  (wording, figure, grid, reason, decision rule, theory) with its result (status, reason,
  checks with intervals, measured numbers, the theory's check and agreement);
- ``claims.md``: a summary table, how to read it, then one section per claim with its figure.

Both are rewritten whole on every invocation (atomic JSON via ``rundir.write_json``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from llm_validation.claims.analysis import analyse
from llm_validation.claims.data import ClaimData
from llm_validation.claims.decisions import Check, ClaimResult
from llm_validation.claims.figures import draw
from llm_validation.claims.lr_sweep import read_sweep
from llm_validation.claims.plan import ExecutionSummary, Plan
from llm_validation.claims.scales import LR_REASON
from llm_validation.rundir import write_json
from llm_validation.validation.inference import Interval
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, PASS

__all__ = ["RUNS_DIR", "FIGURES_DIR", "assemble", "write_ledger", "render_markdown",
           "GAP_DEFINITION"]

RUNS_DIR = "runs"
FIGURES_DIR = "figures"
GAP_DEFINITION = ("gap = final validation loss (at the final weights, same fixed validation "
                  "batches) of a delayed run minus that of its synchronous partner with the same "
                  "condition and seed; intervals are 95% over seeds")
_BADGE = {PASS: "PASS", FAIL: "FAIL", INCONCLUSIVE: "inconclusive"}


def assemble(plan: Plan, out: str | Path, figures: bool = True) -> list[ClaimResult]:
    """Analyse every claim of ``plan`` on ``<out>/runs`` and draw its figure."""
    out = Path(out)
    results = []
    for claim in plan.claims:
        data = ClaimData(claim, plan, out / RUNS_DIR)
        res = analyse(claim, data)
        if figures:
            path = draw(claim, data, res, out / FIGURES_DIR)
            res = res.with_plot(f"{FIGURES_DIR}/{path.name}" if path else None)
        results.append(res)
    return results


def _counts(results: Sequence[ClaimResult]) -> dict[str, int]:
    return {s: sum(r.status == s for r in results) for s in (PASS, FAIL, INCONCLUSIVE)}


def _settings(plan: Plan) -> dict[str, Any]:
    return {"scale": plan.scale.name, "model": plan.scale.model, "quick": plan.quick,
            "seeds": list(plan.seeds), "device": plan.device,
            "overrides": list(plan.overrides), "scale_notes": list(plan.scale.notes),
            "learning_rates": dict(plan.scale.lrs), "learning_rate_reason": LR_REASON}


def _budget(plan: Plan, summary: ExecutionSummary | None) -> dict[str, Any]:
    b = {"distinct_runs": len(plan.runs), "available_runs": len(plan.available()),
         "estimated_process_s": round(plan.cost(), 1)}
    if summary is not None:
        b.update(summary.to_dict())
    return b


def _stages(out: Path, seeds_policy: Mapping[str, Any] | None) -> dict[str, Any]:
    """The lr sweep's table (``lr_sweep.json``) and the seeds policy with its outcome."""
    return {"lr_sweep": read_sweep(out), "seeds_policy": dict(seeds_policy or {})}


def _stages_md(stages: Mapping[str, Any]) -> list[str]:
    lines = ["## Stages", ""]
    sweep = stages.get("lr_sweep")
    if sweep:
        lines += ["Learning rates (stage 1, `lr_sweep.json`; synchronous runs, mean final "
                  "validation loss over seeds):", "",
                  "| optimizer | lr used | source | grid: lr = mean val |", "|---|---|---|---|"]
        for o, c in sweep["optimizers"].items():
            grid = ", ".join(f"{r['lr']:.3g} = {r['mean']}" if isinstance(r["mean"], str)
                             else f"{r['lr']:.3g} = {r['mean']:.4f}" for r in c["grid"])
            lines.append(f"| {o} | {c['lr']:.4g} | {c['source']} | {grid or '-'} |")
        lines += ["", f"![lr sweep]({FIGURES_DIR}/lr_sweep.png)", ""]
    pol = stages.get("seeds_policy") or {}
    if pol:
        lines += [f"Seeds policy (stage 3): two looks, first {pol['first']} seeds, then up to "
                  f"{pol['max_seeds']} for checks the measured spread says would be decided "
                  f"(power {pol['power']:.0%}), alpha {pol['alpha']:g} split "
                  f"{pol['level1']:.3f} / {pol['level2']:.3f}."
                  + ("" if pol.get("levels_wired") else
                     " **Not applied in this checkout**: the checks decide at 95% at both "
                     "looks, which would not keep the error rate; only the needs are shown."),
                  ""]
        for e in pol.get("extensions", []):
            needs = "; ".join(f"{k}: {'more than 1000 / on the boundary' if v is None else v}"
                              for k, v in e["needs"].items())
            lines.append(f"- `{e['claim']}`: " + (f"run to {e['seeds']} seeds; "
                                                 if e["seeds"] else "") + f"needs {needs or '-'}")
        lines.append("")
    return lines


def write_ledger(plan: Plan, results: Sequence[ClaimResult], out: str | Path,
                 summary: ExecutionSummary | None = None,
                 seeds_policy: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write ``claims.json`` and ``claims.md`` under ``out``; returns the JSON object."""
    out = Path(out)
    stages = _stages(out, seeds_policy)
    claims = []
    for claim, res in zip(plan.claims, results):
        claims.append({**claim.to_dict(), "runs_needed": len(plan.claim_runs(claim.id)),
                       "estimated_process_s": round(plan.cost(claim.id), 1),
                       "result": res.to_dict()})
    doc = {"settings": _settings(plan), "budget": _budget(plan, summary),
           "gap_definition": GAP_DEFINITION, "counts": _counts(results), "claims": claims,
           "stages": stages}
    write_json(out / "claims.json", doc)
    md = render_markdown(plan, results, summary)
    (out / "claims.md").write_text(md + "\n" + "\n".join(_stages_md(stages)))
    return doc


def _fmt(v: Any) -> str:
    if isinstance(v, Interval):
        return v.fmt()
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def _check_rows(checks: Sequence[Check]) -> list[str]:
    rows = ["| check | status | 95% interval | seeds | decision |", "|---|---|---|---|---|"]
    for c in checks:
        iv = c.interval.fmt() if c.interval is not None else "-"
        rows.append(f"| {c.label} | **{_BADGE[c.status]}** | {iv} | {c.n_seeds} | "
                    f"{c.reason.replace('|', '/')} |")
    return rows


def render_markdown(plan: Plan, results: Sequence[ClaimResult],
                    summary: ExecutionSummary | None = None) -> str:
    c = _counts(results)
    s = plan.scale
    quick = (" **QUICK ledger: shortened runs, not evidence; every status is inconclusive "
             "(the would-be status is in the reason).**" if plan.quick else "")
    lines = ["# Claims ledger", "",
             f"Scale `{s.name}` (model `{s.model}`), seeds {list(plan.seeds)}, device "
             f"`{plan.device}`" + (f", overrides `{' '.join(plan.overrides)}`"
                                  if plan.overrides else "") + "." + quick, "",
             f"**{c[PASS]} pass, {c[FAIL]} fail, {c[INCONCLUSIVE]} inconclusive** of "
             f"{len(results)} claims.", "",
             f"Runs: {len(plan.runs)} distinct (claims share runs), estimated "
             f"{plan.cost() / 60:.0f} process-minutes"
             + (f"; this invocation trained {summary.ran}, reused {summary.reused}, "
                f"{summary.unavailable} unavailable, {len(summary.errors)} errors"
                if summary else "") + ".", "",
             "How to read: each claim states the paper's wording, the rule that decides it, the "
             "measured numbers with 95% intervals over seeds, and a status: `pass` (every "
             "interval on the claimed side of its boundary, >= 3 seeds), `fail` (an interval on "
             "the other side), `inconclusive` (an interval overlapping its boundary, fewer than "
             "3 seeds, or runs missing: the reason says which). Where the theory predicts a "
             "direction, its check on the same runs is shown with `agrees` / `disagrees` / "
             "`undetermined`. " + GAP_DEFINITION + ".", "",
             "| # | id | figure | status | theory | seeds |", "|---|---|---|---|---|---|"]
    for claim, r in zip(plan.claims, results):
        lines.append(f"| {claim.number} | [`{claim.id}`](#{claim.number}-{claim.id}) | "
                     f"{claim.figure} | **{_BADGE[r.status]}** | {r.agreement or '-'} | "
                     f"{r.n_seeds} |")
    lines.append("")
    for claim, r in zip(plan.claims, results):
        lines += [f"## {claim.number}. {claim.id}", "",
                  f"> {claim.wording} ({claim.figure})", "",
                  f"**Status: {_BADGE[r.status]}.** {r.reason}", ""]
        if r.plot:
            lines += [f"![{claim.id}]({r.plot})", ""]
        lines += [f"- decision rule: {claim.decision}"]
        lines += [f"- {k}: {_fmt(v)}" for k, v in r.measured.items()]
        lines += [""] + _check_rows(r.checks) + [""]
        if r.details:
            lines += ["Per-optimizer checks:", ""] + _check_rows(r.details) + [""]
        if claim.theory:
            lines.append(f"- theory predicts: {claim.theory}")
            if r.theory_check is not None:
                lines.append(f"- theory vs measurement: **{r.agreement}** "
                             f"({r.theory_check.reason})")
        for v in r.theory_verdicts:
            lines.append(f"- `validate` trend check `{v.id}`: **{_BADGE[v.status]}** "
                         f"({v.prediction}; {v.reason})")
        lines += [f"- grid: {claim.grid}", f"- why this grid: {claim.reason}",
                  f"- runs: {len(plan.claim_runs(claim.id))} "
                  f"(~{plan.cost(claim.id) / 60:.0f} process-minutes alone)"]
        lines += [f"- note: {n}" for n in r.notes]
        lines.append("")
    return "\n".join(lines)

