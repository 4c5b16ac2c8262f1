"""The ledger: every selected claim's result and figure, written as ``claims.md`` and ``claims.json``.

:func:`assemble` analyses each claim of a plan on the finished runs under ``<out>/runs`` and
draws its figure into ``<out>/figures``; :func:`write_ledger` writes

- ``claims.json``: the settings (scale, seeds, quick, overrides), the run budget (distinct runs,
  estimated cost, what this invocation trained and reused), the claim rule and the counts
  (claims and statements, the paper's section and the theory's), per claim its registry entry
  (wording, figure, grid, reason, statements) with its result (status, per-statement checks
  with their kind, per-seed samples, inputs and weights, intervals and the seeds an undecided
  check would need; measured numbers; the arm table with per-seed losses, gaps and lags), and
  the per-run table ``runs`` (:mod:`llm_validation.claims.runtable`);
- ``claims.md``: :mod:`llm_validation.claims.markdown`.

Both are rewritten whole on every invocation (atomic JSON via ``rundir.write_json``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from llm_validation.claims.analysis import analyse
from llm_validation.claims.data import ClaimData
from llm_validation.claims.decisions import ClaimResult
from llm_validation.claims.figures import draw
from llm_validation.claims.markdown import counts, render_markdown, statement_counts
from llm_validation.claims.plan import ExecutionSummary, Plan
from llm_validation.claims.scales import LR_REASON
from llm_validation.claims.runtable import run_table
from llm_validation.claims.statements import CLAIM_RULE, PAPER, THEORY
from llm_validation.rundir import write_json

__all__ = ["RUNS_DIR", "FIGURES_DIR", "assemble", "write_ledger", "GAP_DEFINITION"]

RUNS_DIR = "runs"
FIGURES_DIR = "figures"
GAP_DEFINITION = ("gap = final validation loss (at the final weights, same fixed validation "
                  "batches) of a delayed run minus that of its synchronous partner with the same "
                  "condition and seed; intervals are 95% over seeds")


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


def write_ledger(plan: Plan, results: Sequence[ClaimResult], out: str | Path,
                 summary: ExecutionSummary | None = None) -> dict[str, Any]:
    """Write ``claims.json`` and ``claims.md`` under ``out``; returns the JSON object."""
    out = Path(out)
    claims = []
    for claim, res in zip(plan.claims, results):
        claims.append({**claim.to_dict(), "runs_needed": len(plan.claim_runs(claim.id)),
                       "estimated_process_s": round(plan.cost(claim.id), 1),
                       "result": res.to_dict()})
    datas = [ClaimData(c, plan, out / RUNS_DIR) for c in plan.claims]
    doc = {"settings": _settings(plan), "budget": _budget(plan, summary),
           "gap_definition": GAP_DEFINITION, "claim_rule": CLAIM_RULE,
           "counts": counts(results, plan.claims),
           "statement_counts": {sec: statement_counts(results, sec) for sec in (PAPER, THEORY)},
           "theory_claims": [c.id for c in plan.claims if c.section == THEORY],
           "claims": claims, "runs": run_table(datas)}
    write_json(out / "claims.json", doc)
    (out / "claims.md").write_text(render_markdown(plan, results, summary))
    return doc
