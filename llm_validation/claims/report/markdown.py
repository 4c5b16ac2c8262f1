"""``claims.md``: the ledger for a reader, the paper's claims apart from the project's theory.

Layout: the settings and the counts (per claim and per statement, for the paper's section and
the theory's), how to read it, the paper's summary table (one row per claim with its
statements' verdicts), one section per paper claim (each statement with the paper's sentence,
its rule, the rule's change and reason, its checks with per-seed intervals and the seeds an
undecided check would need; the measured numbers; the arm table with the gap next to its lag),
then "the project's theory on the same runs" (every theory statement, claim 17 in full).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from llm_validation.claims.decide.armtable import SCALE_FREE
from llm_validation.claims.decide.checks import Check
from llm_validation.claims.record.claim import Claim
from llm_validation.claims.decide.decisions import ClaimResult, StatementResult
from llm_validation.claims.decide.familywise import leaves as family_leaves
from llm_validation.claims.plan.plan import ExecutionSummary, Plan
from llm_validation.claims.decide.decisions import CLAIM_RULE
from llm_validation.claims.record.claim import PAPER, THEORY
from llm_validation.validation.inference import Interval, level_text
from llm_validation.validation.power import MAX_SEEDS
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, PASS

#: The ledger's figures folder (under its ``--out``).
FIGURES_DIR = "figures"

__all__ = ["render_markdown", "counts", "counts_by_rule", "family_info", "statement_counts",
           "BADGE", "HOW_TO_READ", "FIGURES_DIR"]

BADGE = {PASS: "PASS", FAIL: "FAIL", INCONCLUSIVE: "inconclusive"}
#: How a statement's role shows in the summary table (central: its verdict is the claim's).
_ROLE_MARK = {"central": " (central)", "side": "", "project": " (project's reading)",
              "theory": ""}
HOW_TO_READ = (
    "How to read: a claim of the paper is split into its statements, each quoting the "
    "sentence it tests and decided by its own checks. Every check is a per-seed contrast of "
    "the arms (runs with the same seed share the initialisation and the data order), decided "
    "on the paired t interval over seeds at the level its row names: 97.5% per check under the "
    "seeds policy (each of its two looks spends half of the 5% error rate), higher for a check "
    "decided under the ledger's family-wise control (gatekeeping: the central statements' "
    "checks first, Holm among them; a side reading's or the project's reading's checks only "
    "once their claim's central statement is decided, at the level it passes on; an "
    "undecided check keeps its 97.5% interval and says what it reads per check): `pass` when "
    "it lies on the claimed side of its "
    "boundary (>= 3 seeds), `fail` when it lies on the other side, `inconclusive` when it "
    "overlaps it, with fewer than 3 seeds, or with runs missing (the reason says which). Ratios "
    "are decided as contrasts (share removed > 1/2 is gap - 2 gap_EF > 0) and shown with "
    "Fieller's interval. An inconclusive check shows the seeds it would need to be decided at "
    "its measured spread with 50% / 80% power. Next to every gap the arm table gives the lag: "
    "the synchronous steps the delayed run is behind at the end, as steps and as a fraction of "
    "the run, and the gap as a fraction of the synchronous run's loss decrease. Beside every t "
    "p-value a check gives the exact sign-flip permutation p-value of the same comparison "
    "(it assumes symmetric, not normal, per-seed values, and decides nothing): with n seeds "
    "it cannot fall below 2/2^n two-sided (1/2^n one-sided: 1/8, 1/16, 1/32 at 3, 4, 5 "
    "seeds), so at 5 seeds or fewer no sign-flip p reaches 5% whatever the data; the reason "
    "says where it sits at that floor. The project's "
    "own predictions are in a separate section and never count towards the paper's claims.")


def counts(results: Sequence[ClaimResult], claims: Sequence[Claim], section: str = PAPER
           ) -> dict[str, int]:
    """Claims of ``section`` per status."""
    sel = [r for c, r in zip(claims, results) if c.section == section]
    return {s: sum(r.status == s for r in sel) for s in (PASS, FAIL, INCONCLUSIVE)}


def counts_by_rule(results: Sequence[ClaimResult], claims: Sequence[Claim],
                   section: str = PAPER) -> dict[str, dict[str, int]]:
    """Claims of ``section`` per status under each rule of :meth:`ClaimResult.statuses`."""
    sel = [r.statuses() for c, r in zip(claims, results) if c.section == section]
    rules = ("family", "per_check", "fdr", "old_rule")
    return {rule: {s: sum(x[rule] == s for x in sel) for s in (PASS, FAIL, INCONCLUSIVE)}
            for rule in rules}


def family_info(results: Sequence[ClaimResult]) -> dict[str, Any]:
    """Per section: the family's size (leaves with a p-value), its method and level, and the
    leaves left outside it (read from the leaves' params)."""
    out = {}
    for section in (PAPER, THEORY):
        leaves = [x for r in results for s in r.of(section) for x in family_leaves(s.check)]
        inside = [x for x in leaves if "p_raw" in x.params]
        alpha = inside[0].params.get("alpha") if inside else None
        method = inside[0].params.get("method", "holm") if inside else "holm"
        out[section] = {"method": method, "alpha": alpha, "family_size": len(inside),
                        "primary_size": sum(x.params.get("role") == "primary" for x in inside)
                        if method == "gatekeeping" else len(inside),
                        "outside": len(leaves) - len(inside)}
    return out


def statement_counts(results: Sequence[ClaimResult], section: str) -> dict[str, int]:
    """Statements of ``section`` per status."""
    sts = [s.status for r in results for s in r.of(section)]
    return {s: sts.count(s) for s in (PASS, FAIL, INCONCLUSIVE)}


def _fmt(v: Any) -> str:
    if isinstance(v, Interval):
        return v.fmt()
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def _needed(c: Check) -> str:
    if not c.seeds_needed:
        return "-"
    # None: no count up to MAX_SEEDS decides it at the measured spread (the estimate sits
    # (almost) on the boundary), so the check stays open at any affordable seed count
    return " / ".join(f"more than {MAX_SEEDS}" if v is None else str(v)
                      for v in c.seeds_needed.values())


def _check_rows(check: Check, depth: int = 0) -> list[str]:
    iv = (f"{check.interval.fmt()} ({level_text(check.interval.level)})"
          if check.interval is not None else "-")
    lead = ("&nbsp;&nbsp;" * depth + "- ") if depth else ""
    rows = [f"| {lead}{check.label} | {check.kind} | **{BADGE[check.status]}** | {iv} | "
            f"{check.n_seeds} | {_needed(check)} | {check.reason.replace('|', '/')} |"]
    for p in check.parts if len(check.parts) > 1 else ():
        rows += _check_rows(p, depth + 1)
    return rows


def _statement(s: StatementResult) -> list[str]:
    st = s.statement
    role = {"central": "the claim's central statement: its verdict is the claim's",
            "side": "a side reading of the paper's wording",
            "project": "the project's reading, not the paper's wording",
            "theory": "the project's theory"}[st.role]
    per = (f" (each check at its own level: {BADGE[s.per_check_status]}; Benjamini-Hochberg: "
           f"{BADGE[s.fdr]})" if s.fdr else "")
    lines = [f"**Statement {st.id}** ({st.source}; {role}):", "", f"> {st.quote}", "",
             f"Status **{BADGE[s.status]}**{per}. Rule: {st.decision}."]
    if st.change:
        lines[-1] += f" Changed: {st.change}."
    lines += ["", "| check | kind | status | interval (its level) | seeds | seeds needed (50% / "
                  "80% power) | decision |", "|---|---|---|---|---|---|---|"]
    return lines + _check_rows(s.check) + [""]


def _arm_rows(r: ClaimResult) -> list[str]:
    rows = ["| arm | gap | lag (steps) | lag (fraction of run) | gap / sync loss decrease |",
            "|---|---|---|---|---|"]
    for key, a in r.arms.items():
        if a.get("sync"):
            continue
        ivs = a.get("intervals", {})

        def cell(name: str) -> str:
            iv = ivs.get(name)
            return Interval.from_dict(iv).fmt() if iv else "-"
        flag = " (censored: at least)" if a.get("censored") else ""
        rows.append(f"| {key} | {cell('gap')} | {cell(SCALE_FREE[0][0])}{flag} | "
                    f"{cell(SCALE_FREE[1][0])} | {cell(SCALE_FREE[2][0])} |")
    return rows if len(rows) > 2 else []


def _claim_section(claim: Claim, r: ClaimResult, plan: Plan, section: str) -> list[str]:
    lines = [f"## {claim.number}. {claim.id}", "", f"> {claim.wording} ({claim.figure})", "",
             f"**Status: {BADGE[r.status]}.**", ""]
    if r.plot:
        lines += [f"![{claim.id}]({r.plot})", ""]
    for s in r.of(section):
        lines += _statement(s)
    lines += [f"- {k}: {_fmt(v)}" for k, v in r.measured.items()]
    arms = _arm_rows(r)
    if arms:
        lines += ["", "Gaps with their scale-free lag (descriptive 95% intervals over seeds):", ""] + arms
    lines.append("")
    if section == PAPER and r.of(THEORY):
        lines.append("- the theory's prediction on these runs: "
                     + "; ".join(f"[{s.statement.id}](#the-projects-theory-on-the-same-runs) "
                                 f"**{BADGE[s.status]}**" for s in r.of(THEORY)))
    for v in r.theory_verdicts:
        lines.append(f"- `validate` trend check `{v.id}`: **{BADGE[v.status]}** "
                     f"({v.prediction}; {v.reason})")
    lines += [f"- grid: {claim.grid}", f"- why this grid: {claim.reason}",
              f"- runs: {len(plan.claim_runs(claim.id))} "
              f"(~{plan.cost(claim.id) / 60:.0f} process-minutes alone)"]
    lines += [f"- note: {n}" for n in r.notes]
    return lines + [""]


def _count_text(c: dict[str, int]) -> str:
    return f"{c[PASS]} pass, {c[FAIL]} fail, {c[INCONCLUSIVE]} inconclusive"


def _headline(results: Sequence[ClaimResult], claims: Sequence[Claim], n: int) -> list[str]:
    """The counts: family-wise first (the ledger's verdicts), the other rules beside."""
    by, fam = counts_by_rule(results, claims), family_info(results)[PAPER]
    if not fam["family_size"]:            # a quick ledger, or no decidable check
        return [f"**The paper's claims: {_count_text(counts(results, claims))}** of {n} "
                f"claims; their statements: {_count_text(statement_counts(results, PAPER))}.",
                ""]
    rule = (f"gatekeeping: the {fam['primary_size']} checks of the central statements "
            f"first, the other {fam['family_size'] - fam['primary_size']} checks of the paper's "
            "statements once their claim's central statement is decided"
            if fam["method"] == "gatekeeping" else
            f"Holm over the {fam['family_size']} checks of the paper's statements")
    return [f"**The paper's claims, family-wise error {fam['alpha']:.0%} ({rule}): "
            f"{_count_text(by['family'])}** of {n} claims, each decided by its central "
            f"statement; their statements: {_count_text(statement_counts(results, PAPER))}.",
            "",
            f"Beside it, the same central statements with each check at its own level "
            f"(97.5%, no multiplicity control): {_count_text(by['per_check'])}; under "
            f"Benjamini-Hochberg at 5% FDR: {_count_text(by['fdr'])}; under the first "
            f"ledgers' rule (every paper statement per check, fail when any fails): "
            f"{_count_text(by['old_rule'])}.", ""]


def _phases_md(phases: Mapping[str, Any]) -> list[str]:
    lines = ["## Phases", ""]
    sweep = phases.get("lr_sweep")
    if sweep:
        lines += ["Learning rates (phase 1, `lr_sweep.json`; synchronous runs, mean final "
                  "validation loss over seeds):", "",
                  "| optimizer | lr used | source | grid: lr = mean val |", "|---|---|---|---|"]
        for o, c in sweep["optimizers"].items():
            grid = ", ".join(f"{r['lr']:.3g} = {r['mean']}" if isinstance(r["mean"], str)
                             else f"{r['lr']:.3g} = {r['mean']:.4f}" for r in c["grid"])
            lines.append(f"| {o} | {c['lr']:.4g} | {c['source']} | {grid or '-'} |")
        lines += ["", f"![lr sweep]({FIGURES_DIR}/lr_sweep.png)", ""]
    pol = phases.get("seeds_policy") or {}
    if pol:
        lines += [f"Seeds policy (phase 3): two looks, first {pol['first']} seeds, then up to "
                  f"{pol['max_seeds']} for checks the measured spread says would be decided "
                  f"(power {pol['power']:.0%}), alpha {pol['alpha']:g} split "
                  f"{pol['level1']:.3f} / {pol['level2']:.3f}: every check of this ledger "
                  "decides at its look's level.", ""]
        if pol.get("pending"):
            lines += ["**This is the first look: the extra seeds below are still training.** "
                      "The same command finishes them and rewrites this ledger; verdicts of the "
                      "extended claims may change then (at the same error rate).", ""]
        beyond = f"more than {MAX_SEEDS} / on the boundary"    # power.seeds_needed's None
        for e in pol.get("extensions", []):
            needs = "; ".join(f"{k}: {beyond if v is None else v}" for k, v in e["needs"].items())
            cut = (f"not run to {e['over_budget']} seeds: over the extra-seeds budget "
                   f"(~{e.get('added_process_s', 0) / 60:.0f} process-min); "
                   if e.get("over_budget") else "")
            need = (f"needs {needs}" if needs else
                    "no check a seed count decides (its open checks count outcomes)")
            lines.append(f"- `{e['claim']}`: "
                         + (f"run to {e['seeds']} seeds; " if e["seeds"] else cut) + need)
        lines.append("")
    return lines


def _protocol_line(protocol: Mapping[str, Any] | None) -> list[str]:
    """The protocol the ledger was decided under, or the re-analysis label."""
    if not protocol:
        return []
    re = protocol.get("reanalysis")
    head = (f"Protocol `{str(protocol.get('digest'))[:12]}` (`protocol.json`, written at "
            f"commit `{str(protocol.get('commit'))[:12]}`).")
    if re:
        head = (f"**RE-ANALYSIS (exploratory)**: assembled under protocol "
                f"`{str(protocol.get('digest'))[:12]}`, not under rules fixed before its "
                f"runs trained ({re.get('note') or 'the runs were trained under protocol ' + str(re.get('recorded'))[:12]}); "
                "its verdicts are a re-reading of existing data.")
    return [head, ""]


def render_markdown(plan: Plan, results: Sequence[ClaimResult],
                    summary: ExecutionSummary | None = None,
                    measured: Mapping[str, Any] | None = None,
                    protocol: Mapping[str, Any] | None = None,
                    phases: Mapping[str, Any] | None = None) -> str:
    """All of ``claims.md``: the header (the ``protocol`` record's digest or its re-analysis
    label, scale, headline counts under each rule, the run budget with ``summary``'s
    trained/reused counts and the ``measured`` cost,
    :func:`~llm_validation.claims.report.ledger.measured_cost`), the claims table, one section
    per claim, the theory's section and the phases (``phases``: the lr sweep's table and the
    seeds policy's outcome, as in ``claims.json``)."""
    claims, s = plan.claims, plan.scale
    paper = [(c, r) for c, r in zip(claims, results) if c.section == PAPER]
    quick = (" **QUICK ledger: shortened runs, not evidence; every status is inconclusive "
             "(the would-be status is in the reason).**" if plan.quick else "")
    lines = ["# Claims ledger", "", *_protocol_line(protocol),
             f"Scale `{s.name}` (model `{s.model}`), seeds {list(plan.seeds)}, device "
             f"`{plan.device}`" + (f", overrides `{' '.join(plan.overrides)}`"
                                  if plan.overrides else "") + ". "
             + " ".join(f"{n[0].upper()}{n[1:]}." for n in s.notes) + quick, "",
             *_headline(results, claims, len(paper)),
             f"**The project's theory on the same runs:** statements "
             f"{_count_text(statement_counts(results, THEORY))}.", "",
             f"Claim rule: {CLAIM_RULE}.", "",
             f"Runs: {len(plan.runs)} distinct (claims share runs), estimated "
             f"{plan.cost() / 60:.0f} process-minutes"
             + (f", measured {measured['process_s'] / 60:.0f} over the {measured['runs']} "
                "finished runs with the lr sweep (the sum of their process times over every "
                "invocation" + (f"; {measured['estimated']} counted from their last "
                                "invocation's rate"
                                if measured.get("estimated") else "") + ")"
                if measured and measured["runs"]
                else "")
             + (f"; this invocation trained {summary.ran}, reused {summary.reused}, "
                f"{summary.unavailable} unavailable, {len(summary.errors)} errors"
                if summary else "") + ".", "", HOW_TO_READ, "",
             "| # | id | figure | status | statements | seeds |", "|---|---|---|---|---|---|"]
    for c, r in paper:
        sts = ", ".join(f"{x.statement.id}{_ROLE_MARK[x.statement.role]} {BADGE[x.status]}"
                        for x in r.of(PAPER))
        lines.append(f"| {c.number} | [`{c.id}`](#{c.number}-{c.id}) | {c.figure} | "
                     f"**{BADGE[r.status]}** | {sts} | {r.n_seeds} |")
    lines += ["", "# The paper's claims", ""]
    for c, r in paper:
        lines += _claim_section(c, r, plan, PAPER)
    lines += ["# The project's theory on the same runs", "",
              "The project's predictions (docs/theory.md), decided on the paper's runs with the same "
              "rules. They are not the paper's claims.", "",
              "| statement | claim | prediction | status | seeds | seeds needed (50% / 80% power) "
              "| decision |", "|---|---|---|---|---|---|---|"]
    for c, r in zip(claims, results):
        for x in r.of(THEORY):
            lines.append(f"| {x.statement.id} | {c.number}. {c.id} | {x.statement.quote} "
                         f"({x.statement.decision}) | **{BADGE[x.status]}** | "
                         f"{x.check.n_seeds} | {_needed(x.check)} | "
                         f"{x.check.reason.replace('|', '/')} |")
    lines.append("")
    for c, r in zip(claims, results):
        if c.section == THEORY:
            lines += _claim_section(c, r, plan, THEORY)
    return "\n".join(lines + _phases_md(phases or {}))
