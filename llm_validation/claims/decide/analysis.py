"""One measurement and verdict per claim: :func:`analyse` runs the claim's own analysis.

The analyses live with their claims in the catalogue's family modules
(:attr:`~llm_validation.claims.record.claim.Claim.analyse`). Every one of them reads finished run directories only (:class:`~llm_validation.claims.decide.data.ClaimData`), so a
claim whose runs are missing or unavailable comes out ``inconclusive`` with the reason, and a
``--quick`` ledger is marked quick: every status inconclusive, the would-be status kept in the
reason (quick runs are shorter than the claim's runs: not evidence).
"""

from __future__ import annotations

from llm_validation.claims.decide.armtable import arm_table
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.decisions import ClaimResult
from llm_validation.claims.record.claim import Claim

__all__ = ["analyse"]


def analyse(claim: Claim, data: ClaimData, level: float | None = None) -> ClaimResult:
    """The claim's result on its runs (quick-marked for a ``--quick`` plan), every check
    decided at interval ``level`` (None: each check's own, 95%)."""
    res = claim.analyse(claim, data)
    if level is not None:
        res = res.at_level(level)
    res = res.with_arms(arm_table(data), tuple(data.run_names()))
    return res.as_quick() if data.quick else res
