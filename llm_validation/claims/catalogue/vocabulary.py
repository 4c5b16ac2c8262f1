"""The catalogue's vocabulary: the optimizers, phases and horizons the claims' arms use, the arm
builders, and the statement builders with the wording their rules share.

A claim of the paper often says two or three things in one sentence ("AdamW degrades ...;
Muon's best async loss is within about 0.01"). Each is a
:class:`~llm_validation.claims.record.claim.Statement` with its own status, so a reader sees
which one failed. ``section="paper"`` statements quote the paper's sentence they test: the
wording of the claim list the project was built from (figure numbers of the paper), since the
paper itself is not in the repository. ``section="theory"`` statements (:func:`prediction`)
are the project's own predictions (docs/theory.md) tested on the same runs; they never count
towards the paper's claims. Where a rule changed from the first ledger, ``change`` says how
and why.
"""

from __future__ import annotations

from llm_validation.claims.record.arms import Arm, OfSteps, Times, delayed
from llm_validation.claims.record.claim import PAPER, THEORY, Statement
from llm_validation.config import optimizer_label

__all__ = ["ALL4", "SYNC_PHASE", "LADDER", "LONG", "LADDER_OPTIMIZERS", "HALF", "ef_arm",
           "start_arm", "arm_at", "ladder_key", "rung", "PAIRED", "MARGIN_CHANGE", "statement",
           "central", "prediction"]

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


# ------------------------------------------------------------------------------- statements
#: How a contrast is decided, as the statements' rules say it.
PAIRED = "paired by seed (per-seed contrast, t interval over seeds)"
#: How an equivalence margin changed from the first ledger (the statements' ``change``).
MARGIN_CHANGE = ("was max(floor, 25% of the measured reference gap): a margin estimated from "
                 "the runs it judged")


def statement(id: str, quote: str, source: str, decision: str, change: str = "",
              section: str = PAPER, central: bool = False, reading: str = "paper") -> Statement:
    """A statement (a side reading of the paper's sentence unless told otherwise)."""
    return Statement(id=id, quote=quote, source=source, decision=decision, change=change,
                     section=section, central=central, reading=reading)


def central(*args: str, **kw) -> Statement:
    """The claim's central statement (the paper's sentence in its plainest reading)."""
    return statement(*args, central=True, **kw)


def prediction(id: str, decision: str, change: str = "") -> Statement:
    """One of the project's theory predictions on the claim's runs (its quote: the claim's
    ``theory``)."""
    return statement(id, "", "docs/theory.md", decision, change, THEORY)
