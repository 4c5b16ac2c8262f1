"""The registry's grid vocabulary: the optimizers, phases and horizons the claims' arms use,
and the arm builders shared by the claims (:mod:`llm_validation.claims.catalogue.registry`).
"""

from __future__ import annotations

from llm_validation.claims.record.arms import Arm, OfSteps, Times, delayed
from llm_validation.config import optimizer_label

__all__ = ["ALL4", "SYNC_PHASE", "LADDER", "LONG", "LADDER_OPTIMIZERS", "DCASGD_COEFS", "HALF",
           "ef_arm", "start_arm", "arm_at", "ladder_key", "rung"]

#: The paper's main optimizers.
ALL4 = ("adamw", "muon", "normuon", "soap")
#: Length of a synchronous start or cooldown phase (and of the warmup arm): a few percent of
#: the run, as in the paper.
SYNC_PHASE = OfSteps(0.05)
#: Horizons of the ladder as multiples of the base run (H, 2H, 4H, 8H: 200 to 1600 steps at
#: tiny); rungs above 2H are long arms (left out of --quick).
LADDER = (1, 2, 4, 8)
#: The long horizon of the weight-decay and gradient-level-EF claims: the ladder's 4H rung
#: (800 steps at tiny). The top rung (8H) would add ~110 process-minutes (~55 minutes of
#: wall time with --jobs 2) and push the tiny ledger past its 4-hour budget.
LONG = Times(4.0)
#: The ladder's optimizers (NorMuon and SOAP would add ~80 process-minutes each at tiny).
LADDER_OPTIMIZERS = ("adamw", "muon")
#: DC-ASGD coefficients (reason in the claim ``dcasgd``).
DCASGD_COEFS = (1e3, 1e5)

#: Half the run (its own full lr schedule).
HALF = {"run.steps": Times(0.5)}


def ef_arm(o: str, lam: float = 1.0, **kw) -> Arm:
    """Update-level EF with coefficient ``lam`` (mode ``2bw+ef``, or ``2bw+ef(lam=..)``)."""
    mode = "2bw+ef" if lam == 1.0 else f"2bw+ef(lam={lam:g})"
    return delayed(o, mode, ef_lambda=lam, **kw)


def start_arm(o: str) -> Arm:
    """2BW after a synchronous start of :data:`SYNC_PHASE`."""
    return delayed(o, "2bw+sync-start", sync_start=SYNC_PHASE)


def arm_at(o: str, field: str, value, tag: str, series: bool = True, cond=None,
           long=False) -> Arm:
    """A 2BW arm with ``field = value`` (its partner the synchronous run at the same value)."""
    return delayed(o, cond={**(cond or {}), field: value}, tag=tag, long=long,
                   series=optimizer_label(o) if series else None)


def ladder_key(o: str, mode: str, factor: int) -> str:
    """The arm key of a ladder rung (``muon/2bw+ef/steps=4x``; the base rung has no tag)."""
    return "/".join(p for p in (o, mode, f"steps={factor}x" if factor != 1 else "") if p)


def rung(o: str, mode: str, factor: int) -> Arm:
    """The horizon ladder's rung ``factor`` x the base run of ``o`` in ``mode``."""
    cond = {"run.steps": Times(float(factor))} if factor != 1 else None
    tag = f"steps={factor}x" if factor != 1 else ""
    kw = dict(cond=cond, tag=tag, series=f"{optimizer_label(o)} {mode}", long=factor > 2)
    return ef_arm(o, **kw) if mode == "2bw+ef" else delayed(o, **kw)
