"""The ledger: every selected claim's result and figure, written as ``claims.md`` and ``claims.json``.

:func:`assemble` analyses each claim of a plan on the finished runs under ``<out>/runs`` and
draws its figure into ``<out>/figures``; :func:`write_ledger` writes

- ``claims.json``: the settings (scale, seeds, quick, overrides), the run budget (distinct runs,
  estimated cost, what this invocation trained and reused), the claim rule and the counts
  (claims and statements, the paper's section and the theory's), per claim its registry entry
  (wording, figure, grid, reason, statements) with its result (status, per-statement checks
  with their kind, per-seed samples, inputs and weights, intervals and the seeds an undecided
  check would need; measured numbers; the arm table with per-seed losses, gaps and lags), and
  the per-run table ``runs`` (:mod:`llm_validation.claims.report.runtable`);
- ``claims.md``: :mod:`llm_validation.claims.report.markdown`.

Both are rewritten whole on every invocation (atomic JSON via ``records.atomic_io.write_json``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from llm_validation.claims.decide.sequential import DEFAULT_POLICY, SeedPolicy
from llm_validation.claims.decide.analysis import analyse
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.decisions import ClaimResult, decide_ledger
from llm_validation.claims.decide.familywise import looks_factor
from llm_validation.claims.report.figures import plot_claim
from llm_validation.claims.plan.lr_sweep import read_sweep
from llm_validation.claims.report.markdown import (FIGURES_DIR, counts, counts_by_rule, family_info,
                                            render_markdown, statement_counts)
from llm_validation.claims.plan.plan import ExecutionSummary, Plan
from llm_validation.claims.plan.scales import LR_REASON
from llm_validation.claims.report.runtable import run_table
from llm_validation.claims.decide.decisions import CLAIM_RULE
from llm_validation.claims.record.claim import PAPER, THEORY
from llm_validation.rundir import RunPaths, process_seconds
from llm_validation.records.atomic_io import read_json, write_json
from llm_validation.validation.runs import is_complete

__all__ = ["RUNS_DIR", "analyse_ledger", "assemble", "write_ledger",
           "measured_cost", "GAP_DEFINITION"]

RUNS_DIR = "runs"
GAP_DEFINITION = ("gap = final validation loss (at the final weights, same fixed validation "
                  "batches) of a delayed run minus that of its synchronous partner with the same "
                  "condition and seed; intervals are 95% over seeds")


def analyse_ledger(plan: Plan, out: str | Path, policy: SeedPolicy | None = DEFAULT_POLICY
                   ) -> tuple[list[ClaimResult], list[ClaimData]]:
    """Every claim of ``plan`` analysed on ``<out>/runs``, each check decided at the seeds
    ``policy``'s level for the look its seed count is at
    (:meth:`~llm_validation.claims.decide.sequential.SeedPolicy.level_at`; None: 95%, one look): the
    per-check results (what the seeds policy reads) and the claims' data."""
    results, datas = [], []
    for claim in plan.claims:
        data = ClaimData(claim, plan, Path(out) / RUNS_DIR)
        level = policy.level_at(len(data.seeds)) if policy is not None else None
        results.append(analyse(claim, data, level))
        datas.append(data)
    return results, datas


def assemble(plan: Plan, out: str | Path, figures: bool = True,
             policy: SeedPolicy | None = DEFAULT_POLICY, family: bool = True,
             analysed: tuple[list[ClaimResult], list[ClaimData]] | None = None
             ) -> list[ClaimResult]:
    """The ledger's results: :func:`analyse_ledger` (or ``analysed``, its output, so that a
    caller that read the per-check results does not analyse twice), then the whole ledger
    under family-wise control (:func:`~llm_validation.claims.decide.decisions.decide_ledger`: Holm at
    5% over the paper's leaves, the per-check and BH statuses kept beside; ``family=False``:
    each check at its own level only), then each claim's figure."""
    out = Path(out)
    results, datas = analysed or analyse_ledger(plan, out, policy)
    if family and not plan.quick:         # quick ledgers are all inconclusive: no family
        looks = looks_factor(policy) if policy is not None else 1.0
        results, _ = decide_ledger(results, looks=looks)
    if figures:
        results = [res.with_plot(f"{FIGURES_DIR}/{path.name}" if (path := plot_claim(
            claim, data, res, out / FIGURES_DIR)) else None)
            for claim, data, res in zip(plan.claims, datas, results)]
    return results


def _settings(plan: Plan) -> dict[str, Any]:
    return {"scale": plan.scale.name, "model": plan.scale.model, "quick": plan.quick,
            "seeds": list(plan.seeds), "device": plan.device,
            "overrides": list(plan.overrides), "scale_notes": list(plan.scale.notes),
            "learning_rates": dict(plan.scale.lrs), "learning_rate_reason": LR_REASON}


def measured_cost(runs_dir: str | Path) -> dict[str, Any]:
    """What the ledger's finished runs cost, measured: ``runs`` (the run directories under
    ``runs_dir`` that :func:`~llm_validation.validation.runs.is_complete` counts as finished: lr
    sweep, claims and extra seeds alike) and ``process_s``, the sum of their process times
    (:func:`~llm_validation.rundir.process_seconds`; ``estimated``: the runs continued from a
    checkpoint that did not record it, counted at their last invocation's rate); runs of a loaded
    machine count as they ran."""
    done = [d for d in sorted(Path(runs_dir).glob("*/")) if is_complete(d)]
    times = [process_seconds(read_json(RunPaths(d).summary)) for d in done]
    total = sum(s for s, _ in times)
    estimated = sum(not measured for _, measured in times)
    return {"runs": len(done), "process_s": round(total, 1), "estimated": estimated,
            "note": "sum of the finished runs' process times over every invocation (lr sweep "
                    f"included); {estimated} run(s) whose summary did not record it (e.g. one "
                    "continued from an older checkpoint) count from their last invocation, at "
                    "its rate over all their tokens"}


def _budget(plan: Plan, summary: ExecutionSummary | None, out: Path) -> dict[str, Any]:
    b = {"distinct_runs": len(plan.runs), "available_runs": len(plan.available()),
         "estimated_process_s": round(plan.cost(), 1), "measured": measured_cost(out / RUNS_DIR)}
    if summary is not None:
        b.update(summary.to_dict())
    return b


def _phases(out: Path, seeds_policy: Mapping[str, Any] | None) -> dict[str, Any]:
    """The lr sweep's table (``lr_sweep.json``) and the seeds policy with its outcome."""
    return {"lr_sweep": read_sweep(out), "seeds_policy": dict(seeds_policy or {})}


def write_ledger(plan: Plan, results: Sequence[ClaimResult], out: str | Path,
                 summary: ExecutionSummary | None = None,
                 seeds_policy: Mapping[str, Any] | None = None,
                 protocol: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write ``claims.json`` and ``claims.md`` under ``out``; returns the JSON object.
    ``protocol``: the protocol record (:func:`~llm_validation.claims.report.protocol.check_protocol`:
    digest, commit, re-analysis) stored under ``settings.protocol``."""
    out = Path(out)
    phases = _phases(out, seeds_policy)
    claims = []
    for claim, res in zip(plan.claims, results):
        claims.append({**claim.to_dict(), "runs_needed": len(plan.claim_runs(claim.id)),
                       "estimated_process_s": round(plan.cost(claim.id), 1),
                       "result": res.to_dict()})
    datas = [ClaimData(c, plan, out / RUNS_DIR) for c in plan.claims]
    doc = {"settings": {**_settings(plan), "protocol": dict(protocol or {})},
           "budget": _budget(plan, summary, out),
           "gap_definition": GAP_DEFINITION, "claim_rule": CLAIM_RULE,
           "counts": counts(results, plan.claims),
           "counts_by_rule": counts_by_rule(results, plan.claims),
           "family": family_info(results),
           "statement_counts": {sec: statement_counts(results, sec) for sec in (PAPER, THEORY)},
           "theory_claims": [c.id for c in plan.claims if c.section == THEORY],
           "claims": claims, "runs": run_table(datas), "phases": phases}
    write_json(out / "claims.json", doc)
    (out / "claims.md").write_text(render_markdown(
        plan, results, summary, measured=doc["budget"]["measured"], protocol=protocol,
        phases=phases))
    return doc
