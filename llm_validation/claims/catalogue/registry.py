"""The catalogue: every claim of the ledger, listed once, in the paper's order.

The paper's 16 empirical claims, the project's synchronous-phases claim 17, the horizon ladder
(18) and the size ladder (19). Each claim lives in a family module with its statements, arms,
grid, analysis and thresholds (:mod:`llm_validation.claims.catalogue`); this list is the only
place that names them all.

Grids are the paper's settings scaled down to the tiny model and chosen once (never tuned until
a claim passes). Shared choices, each with its reason:

- **Optimizers.** The base block {sync, 2BW, 2BW+EF (lam = 1)} runs for AdamW, Muon, NorMuon and
  SOAP (the paper's main comparison); claims about "robust optimizers" use Muon alone where the
  budget allows one optimizer (said in the claim's reason).
- **Synchronous phases** (``sync_start``, ``sync_cooldown``): 5% of the run, "a few percent" as
  in the paper (the earlier 20% was far longer than the paper's phases).
- **Learning rates**: each optimizer's peak lr is the ledger's lr-sweep phase's choice at the
  scale (:mod:`llm_validation.claims.plan.lr_sweep`); ``Times`` on ``optim.lr`` multiplies it.
- **Horizons**: the ladder claim (``horizon-ladder``) runs AdamW and Muon at
  :data:`~llm_validation.claims.catalogue.vocabulary.LADDER` multiples of the base run, each with
  its own full lr schedule; the weight-decay and gradient-level-EF claims run at its long horizon
  :data:`~llm_validation.claims.catalogue.vocabulary.LONG` (their effects need more than 200
  steps: weights shrink < 1% at wd 0.1 in 200 steps).
- **Seeds**: 3 (``--seeds``), the fewest a verdict accepts (``validation.verdict.MIN_SEEDS``).

The gap of a delayed arm is its final validation loss minus its synchronous partner's, same
seed (``validation.runs.paired_gaps``). Run counts and costs: ``delaybound reproduce --list``.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from llm_validation.claims.catalogue.fixes import DCASGD, EF_COEFFICIENT, GRAD_LEVEL_EF, SYNC_PHASES
from llm_validation.claims.catalogue.headline import ADAMW_VS_MUON, ALIGNMENT, EF_HALVES_GAP
from llm_validation.claims.catalogue.horizon import HORIZON, HORIZON_LADDER, PIPEDREAM_DEPTH
from llm_validation.claims.catalogue.hparams import (BATCH_SIZE, LEARNING_RATE,
                                                     MOMENTUM_DIRECTION, WEIGHT_DECAY)
from llm_validation.claims.catalogue.recipe import BETA2, GRAD_CLIP, LR_SCHEDULE, WARMUP
from llm_validation.claims.catalogue.size import SIZE_LADDER
from llm_validation.claims.record.claim import Claim

__all__ = ["CLAIMS", "get_claims", "ON_REQUEST", "thresholds"]

#: Every claim, in the paper's order (a new claim: one line here).
_CLAIMS: tuple[Claim, ...] = (
    ADAMW_VS_MUON, EF_HALVES_GAP, MOMENTUM_DIRECTION, HORIZON, PIPEDREAM_DEPTH, LEARNING_RATE,
    WEIGHT_DECAY, WARMUP, GRAD_CLIP, LR_SCHEDULE, BETA2, BATCH_SIZE, DCASGD, EF_COEFFICIENT,
    ALIGNMENT, GRAD_LEVEL_EF, SYNC_PHASES, HORIZON_LADDER, SIZE_LADDER,
)
#: The claims by id, in the paper's order.
CLAIMS = {c.id: c for c in _CLAIMS}
#: Claims run only where asked for (``--claims``) or by a scale that lists them (the size
#: ladder's scales): the default selection of the other scales leaves them out.
ON_REQUEST = frozenset({"size-ladder"})


def get_claims(ids: Iterable[str] | None = None) -> list[Claim]:
    """The claims named (when None: all but :data:`ON_REQUEST`), in catalogue order;
    ``ValueError`` for unknown ids."""
    if ids is None:
        return [c for c in CLAIMS.values() if c.id not in ON_REQUEST]
    wanted: Sequence[str] = [i.strip() for i in ids if i.strip()]
    if list(wanted) == ["all"]:
        return list(CLAIMS.values())
    if not wanted:
        raise ValueError("--claims: give at least one claim id")
    unknown = [i for i in wanted if i not in CLAIMS]
    if unknown:
        raise ValueError(f"unknown claim id(s) {unknown}; known: {', '.join(CLAIMS)}")
    return [c for c in CLAIMS.values() if c.id in set(wanted)]


def thresholds() -> dict[str, float]:
    """Every decision constant of the catalogue's rules, by name (the protocol's
    ``constants``): the union of the claims' :attr:`~Claim.thresholds`, in catalogue order;
    ``ValueError`` when two claims give one name two values."""
    out: dict[str, float] = {}
    for c in CLAIMS.values():
        for name, value in c.thresholds.items():
            if out.setdefault(name, value) != value:
                raise ValueError(f"threshold {name!r}: claim {c.id} says {value}, another "
                                 f"{out[name]}")
    return out
