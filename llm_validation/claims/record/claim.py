"""The :class:`Claim` record: one empirical claim of the paper, its grid and how it is decided.

A claim carries the paper's wording and figure, the arms it trains (:mod:`llm_validation.claims.record.arms`;
synchronous partners are added by the plan), the reason for that grid (what the paper did, what
was scaled down and what the CPU budget forced), its statements with their rules in words, the
theory's prediction where the theory has one, the figure to draw (:class:`FigureSpec`), its
analysis (``analyse``: one check per statement) and the thresholds its rules use, as a
:class:`theory.theorem.Theorem` carries its proof. The claims themselves live in the catalogue's
family modules (:mod:`llm_validation.claims.catalogue`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from llm_validation.claims.record.arms import Arm

__all__ = ["Claim", "Statement", "FigureSpec", "FIGURE_KINDS", "ID_PATTERN", "SECTIONS",
           "READINGS", "PAPER", "THEORY"]

#: ``curves``: a metric over training per arm; ``bars``: the gap per arm, grouped by
#: optimizer, annotated with its value; ``lines``: the gap against a swept value.
FIGURE_KINDS = ("curves", "bars", "lines", "ladder")
#: Claim ids: lower-case words joined by hyphens (stable; used on the command line).
ID_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
#: ``paper``: a sentence of the paper; ``theory``: the project's own prediction (docs/theory.md).
PAPER, THEORY = "paper", "theory"
SECTIONS = (PAPER, THEORY)
#: Whose reading of the paper's sentence a paper-section statement is.
READINGS = ("paper", "project")


@dataclass(frozen=True, kw_only=True)
class Statement:
    """One statement a claim is decided by (built with :mod:`llm_validation.claims.catalogue.vocabulary`)."""

    id: str
    """Short id, unique within the ledger (``1a``; theory statements ``T1``)."""
    quote: str
    """The paper's sentence it tests (theory: the prediction; empty: the claim's ``theory``)."""
    source: str
    """Where the sentence is (``Fig. 3``, ``appendix (batch x lr grid)``, ``docs/theory.md``)."""
    decision: str
    """The rule that decides it, in words."""
    change: str = ""
    """How the rule differs from the first ledger's, and why (empty: unchanged)."""
    section: str = "paper"
    """One of :data:`SECTIONS`."""
    central: bool = False
    """The claim's central statement: the paper's own sentence in its plainest reading; the
    claim's status is its verdict (exactly one per claim with paper statements)."""
    reading: str = "paper"
    """``paper``: a reading the paper's wording makes; ``project``: a reading the project
    adds (a comparison or threshold the paper's sentence does not state), reported beside
    the paper's and labelled as the project's (:data:`READINGS`)."""

    def __post_init__(self) -> None:
        if self.section not in SECTIONS:
            raise ValueError(f"Statement.section={self.section!r} is not one of {SECTIONS}")
        if self.reading not in READINGS:
            raise ValueError(f"Statement.reading={self.reading!r} is not one of {READINGS}")
        if self.central and (self.section != "paper" or self.reading != "paper"):
            raise ValueError(f"Statement {self.id!r}: a central statement is the paper's own "
                             "reading of the paper's sentence")
        if not self.id or not self.decision or (self.section == "paper" and not self.quote):
            raise ValueError(f"Statement {self.id!r}: needs an id, a decision and (paper) a "
                             "quote")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "section": self.section, "quote": self.quote,
                "source": self.source, "decision": self.decision, "change": self.change,
                "central": self.central, "reading": self.reading}

    @property
    def role(self) -> str:
        """``central``, ``side`` (another reading of the paper's wording), ``project`` (the
        project's reading) or ``theory``."""
        if self.section == "theory":
            return "theory"
        return "central" if self.central else ("project" if self.reading == "project"
                                               else "side")


@dataclass(frozen=True, kw_only=True)
class FigureSpec:
    """What the claim's figure shows."""

    kind: str
    """One of :data:`FIGURE_KINDS`."""
    title: str
    """Figure title."""
    metrics: tuple[str, ...] = ("val_loss",)
    """``curves``: the logged metric keys, one panel each (per optimizer when ``by_optimizer``)."""
    ylabels: tuple[str, ...] = ("validation loss (nats/byte)",)
    """``curves``: the y label of each metric."""
    by_optimizer: bool = False
    """``curves``: one row of panels per optimizer."""
    x: str | None = None
    """``lines``: the swept value: a config field ``section.field``, ``momentum`` (AdamW beta1,
    else momentum), ``stages`` (PipeDream's P)."""
    xlabel: str = ""
    """``lines``: the x label (with units)."""
    logx: bool = False
    """``lines``: logarithmic x axis."""
    reference: str | None = None
    """``lines``: an arm drawn as a horizontal band (PipeDream-2BW's constant delay)."""

    def __post_init__(self) -> None:
        if self.kind not in FIGURE_KINDS:
            raise ValueError(f"FigureSpec.kind={self.kind!r} is not one of {list(FIGURE_KINDS)}")
        if self.kind == "curves" and len(self.metrics) != len(self.ylabels):
            raise ValueError("FigureSpec: one y label per metric")
        if self.kind == "lines" and not self.x:
            raise ValueError("FigureSpec: a 'lines' figure needs x")


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One claim of the paper."""

    id: str
    """Stable id (:data:`ID_PATTERN`), e.g. ``adamw-vs-muon``."""
    number: int
    """Position in the paper's list (1-17)."""
    figure: str
    """The paper's figure (``Fig. 3``)."""
    wording: str
    """The claim as the paper states it."""
    statements: tuple[Statement, ...]
    """What decides it: the paper's sentences, then the theory's predictions."""
    arms: tuple[Arm, ...]
    """The arms it trains (synchronous partners are added by the plan)."""
    grid: str
    """The grid in words (values per axis)."""
    reason: str
    """Why this grid: the paper's setting, how it was scaled down, what the budget forced."""
    theory: str | None
    """The theory's prediction (theorem and direction), or None where it predicts nothing."""
    plot: FigureSpec
    """The figure drawn in the paper's style."""
    analyse: Callable[[Any, Any], Any] = field(compare=False, repr=False)
    """Its analysis: ``analyse(claim, data)`` -> :class:`~llm_validation.claims.decide.decisions.ClaimResult`
    with one check per statement, on the finished runs of
    :class:`~llm_validation.claims.decide.data.ClaimData` (missing runs: inconclusive, named)."""
    thresholds: Mapping[str, float] = field(default_factory=dict)
    """The decision constants its rules use beyond the lag margin, by their protocol name
    (``growth_tolerance``); the analysis reads them here (:meth:`threshold`) and the protocol
    records them, so neither restates them."""
    min_seeds: int = 0
    """Seeds its arms run over at least (the size ladder's 5); 0: the ledger's ``--seeds``."""

    def __post_init__(self) -> None:
        if not ID_PATTERN.match(self.id):
            raise ValueError(f"Claim.id={self.id!r} must match {ID_PATTERN.pattern}")
        keys = [a.key for a in self.arms]
        if len(set(keys)) != len(keys):
            raise ValueError(f"Claim {self.id}: arm keys must be unique, got {keys}")
        if not self.arms:
            raise ValueError(f"Claim {self.id}: needs arms")
        object.__setattr__(self, "arms", tuple(self.arms))
        filled = tuple(Statement(**{**st.__dict__, "quote": st.quote or (self.theory or "")})
                       for st in self.statements)
        if not filled:
            raise ValueError(f"Claim {self.id}: needs statements")
        object.__setattr__(self, "statements", filled)
        central = [s.id for s in filled if s.central]
        if any(s.section == "paper" for s in filled) and len(central) != 1:
            raise ValueError(f"Claim {self.id}: needs exactly one central statement among its "
                             f"paper statements, has {central}")
        if not callable(self.analyse):
            raise ValueError(f"Claim {self.id}: analyse must be a function (claim, data) -> result")
        object.__setattr__(self, "thresholds", dict(self.thresholds))
        if isinstance(self.min_seeds, bool) or not isinstance(self.min_seeds, int) or \
                self.min_seeds < 0:
            raise ValueError(f"Claim {self.id}: min_seeds={self.min_seeds!r} must be an int >= 0")

    def threshold(self, name: str) -> float:
        """The decision constant ``name`` of its rules (:attr:`thresholds`)."""
        if name not in self.thresholds:
            raise KeyError(f"claim {self.id}: no threshold {name!r}; has {sorted(self.thresholds)}")
        return float(self.thresholds[name])

    @property
    def decision(self) -> str:
        """Every statement's rule, in words."""
        return "; ".join(f"{s.id}: {s.decision}" for s in self.statements)

    @property
    def section(self) -> str:
        """``paper`` when the paper states something this claim tests, else ``theory``."""
        return "paper" if any(s.section == "paper" for s in self.statements) else "theory"

    @property
    def central(self) -> Statement | None:
        """The central statement (None for a theory-only claim)."""
        return next((s for s in self.statements if s.central), None)

    def arm(self, key: str) -> Arm:
        for a in self.all_arms():
            if a.key == key:
                return a
        raise KeyError(f"claim {self.id}: no arm {key!r}; have {[a.key for a in self.arms]}")

    def all_arms(self) -> tuple[Arm, ...]:
        """The arms plus their synchronous partners, each once, in order."""
        out: dict[str, Arm] = {}
        for a in self.arms:
            out.setdefault(a.key, a)
            p = a.partner()
            out.setdefault(p.key, p)
        return tuple(out.values())

    def optimizers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.optimizer for a in self.arms))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "number": self.number, "figure": self.figure,
                "wording": self.wording, "decision": self.decision, "grid": self.grid,
                "reason": self.reason, "theory": self.theory, "section": self.section,
                "statements": [st.to_dict() for st in self.statements],
                "arms": [{"key": a.key, "changes": a.describe() or "base run"}
                         for a in self.all_arms()]}
