"""One measurement and verdict per claim: :func:`analyse` dispatches to the claim's analysis.

The analyses live in :mod:`llm_validation.claims.catalogue.analysis_delay` (the delay and its fixes) and
:mod:`llm_validation.claims.catalogue.analysis_hparams` (hyper-parameters and the gap). Every one of them
reads finished run directories only (:class:`~llm_validation.claims.decide.data.ClaimData`), so a
claim whose runs are missing or unavailable comes out ``inconclusive`` with the reason, and a
``--quick`` ledger is marked quick: every status inconclusive, the would-be status kept in the
reason (quick runs are shorter than the claim's runs: not evidence).
"""

from __future__ import annotations

from typing import Callable

from llm_validation.claims.catalogue import analysis_delay as ad
from llm_validation.claims.catalogue import analysis_hparams as ah
from llm_validation.claims.decide.armtable import arm_table
from llm_validation.claims.catalogue.analysis_ladder import horizon_ladder
from llm_validation.claims.catalogue.analysis_size import size_ladder_at_size
from llm_validation.claims.record.claim import Claim
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.decisions import ClaimResult

__all__ = ["ANALYSES", "analyse"]

#: Claim id -> its analysis.
ANALYSES: dict[str, Callable[[Claim, ClaimData], ClaimResult]] = {
    "adamw-vs-muon": ad.adamw_vs_muon,
    "ef-halves-gap": ad.ef_halves_gap,
    "momentum-direction": ah.momentum_direction,
    "horizon": ad.horizon,
    "pipedream-depth": ad.pipedream_depth,
    "learning-rate": ah.learning_rate,
    "weight-decay": ah.weight_decay,
    "warmup": ah.warmup,
    "grad-clip": ah.grad_clip,
    "lr-schedule": ah.lr_schedule,
    "beta2": ah.beta2,
    "batch-size": ah.batch_size,
    "dcasgd": ad.dcasgd,
    "ef-coefficient": ad.ef_coefficient,
    "alignment": ad.alignment,
    "grad-level-ef": ad.grad_level_ef,
    "sync-phases": ad.sync_phases,
    "horizon-ladder": horizon_ladder,
    "size-ladder": size_ladder_at_size,
}


def analyse(claim: Claim, data: ClaimData, level: float | None = None) -> ClaimResult:
    """The claim's result on its runs (quick-marked for a ``--quick`` plan), every check
    decided at interval ``level`` (None: each check's own, 95%)."""
    if claim.id not in ANALYSES:
        raise ValueError(f"no analysis for claim {claim.id!r}")
    res = ANALYSES[claim.id](claim, data)
    if level is not None:
        res = res.at_level(level)
    res = res.with_arms(arm_table(data), tuple(data.run_names()))
    return res.as_quick() if data.quick else res
