"""The size ladder at one model size (claim 19, ``size-ladder``; Figs. 2-3 at three sizes).

Each claim here is a :class:`~llm_validation.claims.record.claim.Claim` that carries
everything that decides it: the paper's wording and figure, its statements (the paper's
sentences it tests, the theory's predictions), its arms, grid and the reason for them, its
analysis (one check per statement, on finished runs only:
:class:`~llm_validation.claims.decide.data.ClaimData`) and the thresholds its rules use (read
by the protocol, :mod:`llm_validation.claims.report.protocol`). Every comparison is a per-seed
contrast of the arms, decided on its paired t interval (:mod:`llm_validation.claims.decide.checks`).

At every size of the ladder (the 20:1 scales, :data:`llm_validation.claims.plan.scales.SIZE_LADDER`)
the claim decides the paper's two headline contrasts on its own runs (AdamW and Muon x {sync,
2BW, 2BW + EF}, five seeds):

- **19a** (central, Fig. 3): ``gap(AdamW) - gap(Muon) > 0`` per seed, t interval over seeds;
- **19b** (Fig. 2): ``gap - 2 gap(EF) > 0`` for AdamW and for Muon (EF removes more than half
  the gap), all;
- **19c** (the project's reading): decided across sizes only, by the size-ladder assembly
  (``reproduce --size-ladder``: per-seed power laws in the parameter count, extrapolated to
  SmolLM-135M; :mod:`llm_validation.claims.sizes.fit`, its agreement factor
  :data:`~llm_validation.claims.sizes.fit.TOLERANCE`); at one size it is reported as such.

Each arm's gap share of the loss decrease and lag fraction are in the arm table (the inputs
of the cross-size fit).
"""

from __future__ import annotations

from llm_validation.claims.catalogue.headline import ef_removes_half
from llm_validation.claims.catalogue.vocabulary import (LADDER_OPTIMIZERS, PAIRED, central,
                                                        ef_arm, statement)
from llm_validation.claims.decide.checks import aggregate, diff, not_measured
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.decisions import ClaimResult, result
from llm_validation.claims.decide.measure import gap_interval, gap_ratio_interval, need
from llm_validation.claims.record.arms import delayed
from llm_validation.claims.record.claim import Claim, FigureSpec
from llm_validation.claims.sizes.fit import TOLERANCE
from llm_validation.config import optimizer_label
from llm_validation.config import optimizer_label as label

__all__ = ["SIZE_LADDER", "SIZE_LADDER_SEEDS", "ACROSS_SIZES"]

#: The size ladder's seeds: five, for per-seed fits across sizes.
SIZE_LADDER_SEEDS = 5
#: Why statement 19c has no verdict in one size's ledger.
ACROSS_SIZES = ("decided across the sizes' ledgers by `delaybound reproduce --size-ladder` "
                "(a fit over model sizes; one size cannot show a trend)")
# ---------------------------------------------------------------------- size-ladder
def _size_ladder_at_size(c: Claim, d: ClaimData) -> ClaimResult:
    """Statements 19a and 19b at this scale's size (module docstring)."""
    ga, gm = d.gaps("adamw/2bw"), d.gaps("muon/2bw")
    headline = need(diff("gap(AdamW) - gap(Muon) > 0", "side", ("gap AdamW", ga),
                        ("gap Muon", gm), boundary=0.0, predicted="above"),
                   d, "adamw/2bw", "muon/2bw")
    halves = [ef_removes_half(d, o) for o in LADDER_OPTIMIZERS]
    measured = {}
    for o in LADDER_OPTIMIZERS:
        measured[f"gap {label(o)}"] = gap_interval(d, f"{o}/2bw")
        measured[f"gap {label(o)} + EF"] = gap_interval(d, f"{o}/2bw+ef")
        measured[f"{label(o)}: gap with EF / gap (Fieller)"] = gap_ratio_interval(
            d, f"{o}/2bw", f"{o}/2bw+ef")
    return result(c, {"19a": headline,
                      "19b": aggregate("EF removes more than half the gap, AdamW and Muon",
                                       "all", halves),
                      "19c": not_measured("Muon's lag extrapolated to 135M", ACROSS_SIZES)},
                  measured=measured)


SIZE_LADDER = Claim(
    id="size-ladder", number=19, figure="Figs. 2-3 at three model sizes",
    statements=(
        central("19a", "AdamW degrades substantially under one-step delay; Muon's final gap is much "
                 "smaller.", "Fig. 3, at each model size",
                 f"at this size (20 tokens per parameter): gap(AdamW) - gap(Muon) > 0, {PAIRED}"),
        statement("19b", "Update-level EF (lam = 1) cuts the gap by more than half.",
                   "Fig. 2, at each model size",
                   f"at this size: gap - 2 gap(EF) > 0 for AdamW and for Muon, {PAIRED}; all"),
        statement("19c", "Muon's best async loss is within about 0.01 of its best sync loss.",
                   "the paper's 135M/360M runs, extrapolated",
                   "across the sizes (reproduce --size-ladder): Muon 2BW's lag fraction extrapolated "
                   "to SmolLM-135M at 20:1 along the per-seed power law in N lies below 2 x 3.7% (a "
                   "factor-2 agreement tolerance on the paper's 0.01 nats as a lag); an "
                   "extrapolation, the project's reading", reading="project")),
    wording="AdamW degrades under one-step delay far more than Muon, and update-level EF cuts "
            "the gap by more than half, at every model size at 20 tokens per parameter; how "
            "does the delay's cost scale with the model size?",
    arms=tuple(a for o in LADDER_OPTIMIZERS for a in (delayed(o, series=optimizer_label(o)),
                                        ef_arm(o, series=optimizer_label(o)))),
    grid="AdamW, Muon x {sync, 2bw, 2bw+ef} at the scale's base run (20 tokens per "
         "parameter), 5 seeds, at each size of the ladder (46k, 113k, 267k parameters)",
    reason="The paper's headline contrasts (Figs. 2-3) at the paper's 20:1 ratio on models "
           "small enough for 2 CPU cores; five seeds for per-seed fits across sizes; AdamW and "
           "Muon only (the budget: NorMuon and SOAP would double it).",
    theory=None, min_seeds=SIZE_LADDER_SEEDS,
    plot=FigureSpec(kind="bars", title="Gap at this model size, 20 tokens per parameter"),
    analyse=_size_ladder_at_size,
    thresholds={"size_ladder_agreement_factor": TOLERANCE})

