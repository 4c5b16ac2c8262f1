"""The outcome of one claim: a verdict per statement, and the claim's status derived from them.

Each statement of a claim (:class:`~llm_validation.claims.record.claim.Statement`) is decided by one
:class:`~llm_validation.claims.decide.checks.Check` (an ``all`` / ``most`` aggregate where it has
several conditions); :func:`result` pairs them, fills the seeds every inconclusive check would
need (:mod:`llm_validation.claims.decide.seeds`) and derives the claim's status from its paper
statements by :data:`CLAIM_RULE` (``combine``: pass when all
pass, fail when any fails). The theory's statements are kept apart: they give the claim's
``agreement`` (agrees / disagrees / undetermined) and the theory section's counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from llm_validation.claims.decide.checks import Check, at_level
from llm_validation.claims.decide.familywise import LOOKS, decide_family
from llm_validation.claims.decide.gatekeeping import decide_gated
from llm_validation.claims.decide.pvalues import nominal_pvalue, signflip_floor, signflip_pvalue
from llm_validation.claims.record.claim import PAPER, THEORY, Claim, Statement
from llm_validation.claims.decide.seeds import with_seeds_needed
from llm_validation.validation.inference import Interval
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, PASS, Verdict, combine

__all__ = ["StatementResult", "ClaimResult", "result", "agreement", "old_status",
           "decide_ledger", "FAMILY_ALPHA", "CLAIM_RULE", "OLD_CLAIM_RULE"]

#: The family-wise error rate of the ledger's verdicts (gatekeeping), the protocol's.
FAMILY_ALPHA = 0.05
#: How a claim's status follows from its paper statements (shown in claims.md).
CLAIM_RULE = ("a claim's status is the verdict of its central statement (the paper's own "
              "sentence in its plainest reading), decided under family-wise error control by "
              "gatekeeping: the leaf checks of the ledger's central statements form the primary "
              "family (Holm among them), and the checks of a claim's side readings (the paper's "
              "wording) and the project's readings are tested only once its central statement "
              "is decided, with the level it passes on, so a central verdict does not depend "
              "on how many side checks the ledger carries; the side readings are reported "
              "beside it with their own verdicts; a claim with no paper statement (17) is the "
              "theory's and is counted in the theory section only")
#: The rule of the ledgers before issue 26, shown beside the new counts.
OLD_CLAIM_RULE = ("a claim passes when every one of its paper statements passes, fails when "
                  "any fails, and is inconclusive otherwise (each check at its own level)")


def agreement(statuses: list[str]) -> str | None:
    """``agrees`` (all pass) / ``disagrees`` (one fails) / ``undetermined``; None: no theory."""
    if not statuses:
        return None
    if FAIL in statuses:
        return "disagrees"
    return "agrees" if all(s == PASS for s in statuses) else "undetermined"


@dataclass(frozen=True, kw_only=True)
class StatementResult:
    """One statement and the check that decides it."""

    statement: Statement
    check: Check
    """Decided under the ledger's family-wise control once :func:`decide_ledger` ran (each
    check at its own level before)."""
    per_check: str = ""
    """The status with every check at its own level (the per-check rule); empty: the same as
    ``status`` (no family decision yet)."""
    fdr: str = ""
    """The status under Benjamini-Hochberg at the protocol's FDR; empty: not decided."""

    @property
    def status(self) -> str:
        return self.check.status

    @property
    def per_check_status(self) -> str:
        return self.per_check or self.status

    def to_dict(self) -> dict[str, Any]:
        return {**self.statement.to_dict(), "status": self.status, "reason": self.check.reason,
                "per_check_status": self.per_check_status, "fdr_status": self.fdr or None,
                "check": self.check.to_dict()}


@dataclass(frozen=True, kw_only=True)
class ClaimResult:
    """The measured outcome of one claim."""

    id: str
    status: str
    """Derived from the paper statements (the theory's, for a theory-only claim)."""
    reason: str
    statements: tuple[StatementResult, ...]
    """Paper statements first, then the theory's, in the claim's order."""
    measured: Mapping[str, Any] = field(default_factory=dict)
    """Named numbers: :class:`Interval` or plain values."""
    arms: Mapping[str, Any] = field(default_factory=dict)
    """Per arm: runs, per-seed values and their intervals (``claims.armtable``)."""
    theory_verdicts: tuple[Verdict, ...] = ()
    """``validate``'s trend checks (``validation.trends``) run on this claim's runs."""
    n_seeds: int = 0
    runs: tuple[str, ...] = ()
    plot: str | None = None
    quick: bool = False
    notes: tuple[str, ...] = ()

    def of(self, section: str) -> tuple[StatementResult, ...]:
        return tuple(s for s in self.statements if s.statement.section == section)

    @property
    def checks(self) -> tuple[Check, ...]:
        """The checks of the paper statements (the theory's for a theory-only claim)."""
        return tuple(s.check for s in (self.of(PAPER) or self.of(THEORY)))

    @property
    def agreement(self) -> str | None:
        return agreement([s.status for s in self.of(THEORY)])

    def with_plot(self, plot: str | None) -> "ClaimResult":
        return ClaimResult(**{**self.__dict__, "plot": plot})

    def with_arms(self, arms: Mapping[str, Any], runs: tuple[str, ...]) -> "ClaimResult":
        return ClaimResult(**{**self.__dict__, "arms": arms, "runs": runs})

    def with_statements(self, stmts: tuple[StatementResult, ...]) -> "ClaimResult":
        """The result with ``stmts`` in place of its statements, its status derived again."""
        return ClaimResult(**{**self.__dict__, **_derived(stmts), "statements": stmts})

    @property
    def central(self) -> StatementResult | None:
        return next((s for s in self.statements if s.statement.central), None)

    def statuses(self) -> dict[str, str]:
        """The claim's status under each rule: ``family`` (the central statement under Holm:
        the ledger's), ``per_check`` (the central statement, each check at its own level),
        ``fdr`` (the central statement under Benjamini-Hochberg) and ``old_rule`` (every paper
        statement per check, fail when any fails: the rule before issue 26)."""
        c = self.central
        return {"family": self.status,
                "per_check": c.per_check_status if c else self.status,
                "fdr": (c.fdr or c.status) if c else self.status,
                "old_rule": old_status(self)}

    def at_level(self, level: float) -> "ClaimResult":
        """Every statement decided again at interval level ``level``
        (:func:`~llm_validation.claims.decide.checks.at_level`), the claim's status derived again."""
        stmts = tuple(StatementResult(statement=s.statement,
                                      check=with_seeds_needed(at_level(s.check, level)))
                      for s in self.statements)
        return ClaimResult(**{**self.__dict__, **_derived(stmts), "statements": stmts})

    def as_quick(self) -> "ClaimResult":
        """Quick runs are not evidence: every status inconclusive, the would-be status kept in
        the reason."""
        def mark(c: Check) -> Check:
            if c.status == INCONCLUSIVE:
                return c
            return Check(**{**c.__dict__, "status": INCONCLUSIVE,
                            "reason": f"quick run (not evidence; would read {c.status}): "
                                      f"{c.reason}"})
        stmts = tuple(StatementResult(statement=s.statement, check=mark(s.check))
                      for s in self.statements)
        if self.quick or self.status == INCONCLUSIVE:
            return ClaimResult(**{**self.__dict__, "quick": True, "statements": stmts})
        return ClaimResult(**{**self.__dict__, "quick": True, "status": INCONCLUSIVE,
                              "statements": stmts,
                              "reason": f"quick run (not evidence; would read {self.status}): "
                                        f"{self.reason}"})

    def to_dict(self) -> dict[str, Any]:
        def val(v: Any) -> Any:
            return v.to_dict() if isinstance(v, Interval) else v
        return {"id": self.id, "status": self.status, "reason": self.reason,
                "statements": [s.to_dict() for s in self.statements],
                "measured": {k: val(v) for k, v in self.measured.items()},
                "agreement": self.agreement, "arms": dict(self.arms),
                "theory_verdicts": [v.to_dict() for v in self.theory_verdicts],
                "n_seeds": self.n_seeds, "runs": list(self.runs), "plot": self.plot,
                "quick": self.quick, "notes": list(self.notes)}


def result(claim: Claim, checks: Mapping[str, Check], **kw: Any) -> ClaimResult:
    """A :class:`ClaimResult` from one check per statement id of ``claim`` (every statement
    needs one); the status by the claim rule (see the module docstring)."""
    ids = [s.id for s in claim.statements]
    if set(checks) != set(ids):
        raise ValueError(f"claim {claim.id}: checks for {sorted(checks)}, statements {ids}")
    stmts = tuple(StatementResult(statement=s, check=with_seeds_needed(checks[s.id]))
                  for s in claim.statements)
    return ClaimResult(id=claim.id, statements=stmts, **_derived(stmts), **kw)


def _derived(stmts: tuple[StatementResult, ...]) -> dict[str, Any]:
    """The claim's status, reason and seed count from its statements (the claim rule: the
    central statement's verdict; a theory-only claim combines its statements)."""
    deciding = [s for s in stmts if s.statement.central] or \
        [s for s in stmts if s.statement.section == PAPER] or list(stmts)
    status, reason = combine([(s.status, f"{s.statement.id}: {s.check.reason}")
                              for s in deciding])
    seeds = [s.check.n_seeds for s in deciding if s.check.n_seeds > 0]
    return {"status": status, "reason": reason, "n_seeds": min(seeds) if seeds else 0}


def old_status(res: "ClaimResult") -> str:
    """The claim's status under the rule before issue 26 (:data:`OLD_CLAIM_RULE`: every
    paper statement decides, each check at its own level, fail when any fails)."""
    paper = res.of(PAPER) or res.statements
    return combine([(s.per_check_status, "") for s in paper])[0]


def decide_ledger(results: Sequence[ClaimResult], alpha: float = FAMILY_ALPHA,
                  looks: float = LOOKS) -> tuple[list[ClaimResult], dict[str, Any]]:
    """Every statement of the ledger decided under family-wise control at ``alpha``: the
    leaves of the paper's statements by gatekeeping (the central statements first, a side or
    project reading once its central statement is decided:
    :func:`~llm_validation.claims.decide.gatekeeping.decide_gated`), the theory's as one Holm
    family (:func:`~llm_validation.claims.decide.familywise.decide_family`); each statement
    keeps its per-check status and gets its Benjamini-Hochberg one beside
    (``StatementResult.per_check``, ``fdr``), each leaf its raw, adjusted and BH p-values
    (``params``: ``p_raw``, ``p_adj``, ``p_bh``) and, beside its t p-value (``p_t``), the
    exact sign-flip one and its floor (``p_signflip``, ``p_signflip_floor``;
    :func:`~llm_validation.claims.decide.pvalues.signflip_pvalue`). ``looks``: the seeds
    policy's Bonferroni factor (``family.looks_factor``). Returns the results and the two
    families' summaries."""
    out, summary = list(results), {}
    for section in (PAPER, THEORY):
        idx = [(i, j) for i, r in enumerate(results) for j, st in enumerate(r.statements)
               if st.statement.section == section]
        if not idx:
            continue
        checks = [results[i].statements[j].check for i, j in idx]
        if section == PAPER:
            fam, fs = decide_gated(checks, [results[i].id for i, _ in idx],
                                   [results[i].statements[j].statement.central
                                    for i, j in idx], alpha, looks=looks)
            bonferroni = fs["primary_size"]
        else:
            fam, fs = decide_family(checks, alpha, "holm", looks=looks)
            bonferroni = fs["family_size"]
        bh, bs = decide_family(checks, alpha, "bh", looks=looks)
        summary[section] = {fs["method"]: fs,
                            "bh": {k: bs[k] for k in ("family_size", "decided")}}
        for (i, j), h, b, per in zip(idx, fam, bh, checks):
            stmts = list(out[i].statements)
            need = 1.0 - alpha / (looks * max(bonferroni, 1))
            check = with_seeds_needed(_family_need(_with_signflip(_with_bh(h, b)), need))
            stmts[j] = StatementResult(statement=stmts[j].statement, check=check,
                                       per_check=per.status, fdr=b.status)
            out[i] = out[i].with_statements(tuple(stmts))
    return out, summary


def _family_need(c: Check, level: float) -> Check:
    """``c`` with ``params["need_level"] = level`` on every leaf of the family it left open
    (their seeds needed are counted at the family's Bonferroni level, ``claims.seeds``)."""
    parts = tuple(_family_need(p, level) for p in c.parts)
    params = dict(c.params)
    if not c.parts and "p_raw" in params and c.status == INCONCLUSIVE:
        params["need_level"] = level
    return Check(**{**c.__dict__, "params": params, "parts": parts})


def _with_signflip(c: Check) -> Check:
    """``c`` with every leaf that has a p-value carrying its t p-value (``p_t``) and the exact
    sign-flip one beside it (``p_signflip``, floor ``p_signflip_floor``), both in its reason."""
    parts = tuple(_with_signflip(p) for p in c.parts)
    flip = None if c.parts else signflip_pvalue(c)
    if flip is None:             # an aggregate of one part shows that part's reason
        reason = parts[0].reason if len(parts) == 1 else c.reason
        return Check(**{**c.__dict__, "parts": parts, "reason": reason})
    floor, t_p = signflip_floor(c), float(nominal_pvalue(c))
    at_floor = "; at its floor" if flip <= floor else ""
    text = (f"t p = {t_p:.2g}, sign-flip p = {flip:.2g} (exact; it cannot fall below "
            f"2/2^{c.n_seeds} = {floor:.2g} with {c.n_seeds} seeds{at_floor})")
    return Check(**{**c.__dict__, "parts": parts, "reason": f"{c.reason}; {text}",
                    "params": {**c.params, "p_t": t_p, "p_signflip": flip,
                               "p_signflip_floor": floor}})


def _with_bh(h: Check, b: Check) -> Check:
    """``h`` (Holm) with each leaf's BH-adjusted p-value from ``b`` (the same tree)."""
    parts = tuple(_with_bh(x, y) for x, y in zip(h.parts, b.parts))
    params = dict(h.params)
    if "p_adj" in b.params and not b.parts:
        params["p_bh"] = b.params["p_adj"]
    return Check(**{**h.__dict__, "params": params, "parts": parts})
