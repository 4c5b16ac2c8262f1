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
- **19d** (Fig. 3, claim 1's sentence): ``gap(AdamW) - gap(Muon) > 0`` and ``gap(AdamW,
  synchronous start) - gap(Muon) > 0``, all: claim 1's central statement at this size, so
  that claim 1 is reported at a size only with its synchronous-start arm (the ladder trains
  it at every size);
- **19c** (the project's reading): Muon's lag at the paper's sizes. Not decided by the
  ladder: its step count grows with N (one batch, 20 tokens per parameter), so an
  extrapolation in N alone reads a step-count effect as a size effect
  (:data:`~llm_validation.claims.sizes.fit.CONFOUND`); the delay-law design
  (docs/delay_law.md) measures N at fixed steps.

Each arm's gap share of the loss decrease and lag fraction are in the arm table (the inputs
of the cross-size fit).
"""

from __future__ import annotations

from llm_validation.claims.catalogue.headline import ef_removes_half
from llm_validation.claims.catalogue.vocabulary import (LADDER_OPTIMIZERS, PAIRED, central,
                                                        ef_arm, start_arm, statement)
from llm_validation.claims.decide.checks import aggregate, diff, not_measured
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.decisions import ClaimResult, result
from llm_validation.claims.decide.measure import gap_interval, gap_ratio_interval, need
from llm_validation.claims.record.arms import delayed
from llm_validation.claims.record.claim import Claim, FigureSpec
from llm_validation.config import optimizer_label
from llm_validation.config import optimizer_label as label

__all__ = ["SIZE_LADDER", "SIZE_LADDER_SEEDS", "ACROSS_SIZES"]

#: The size ladder's seeds: five, for per-seed fits across sizes.
SIZE_LADDER_SEEDS = 5
#: Why statement 19c has no verdict in a size-ladder ledger.
ACROSS_SIZES = ("not decided by the size ladder: its step count grows with N (one batch at 20 "
                "tokens per parameter), so an extrapolation in N alone is confounded with the "
                "step count; the delay-law design (docs/delay_law.md) measures N at fixed steps")
# ---------------------------------------------------------------------- size-ladder
def _size_ladder_at_size(c: Claim, d: ClaimData) -> ClaimResult:
    """Statements 19a and 19b at this scale's size (module docstring)."""
    ga, gm = d.gaps("adamw/2bw"), d.gaps("muon/2bw")
    headline = need(diff("gap(AdamW) - gap(Muon) > 0", "side", ("gap AdamW", ga),
                        ("gap Muon", gm), boundary=0.0, predicted="above"),
                   d, "adamw/2bw", "muon/2bw")
    start = need(diff("gap(AdamW, synchronous start) - gap(Muon) > 0", "side",
                      ("gap AdamW sync start", d.gaps("adamw/2bw+sync-start")),
                      ("gap Muon", gm), boundary=0.0, predicted="above"),
                 d, "adamw/2bw+sync-start", "muon/2bw")
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
                      "19c": not_measured("Muon's lag extrapolated to 135M", ACROSS_SIZES),
                      "19d": aggregate("AdamW degrades more than Muon, even with a synchronous "
                                       "start", "all", [headline, start])},
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
                   "not decided by the ladder (an extrapolation in N alone: the ladder's step "
                   "count grows with N, so it would read a step-count effect as a size effect); "
                   "the delay-law design (docs/delay_law.md) measures N at fixed steps; the "
                   "project's reading",
                   "was Muon 2BW's lag fraction extrapolated to SmolLM-135M along the per-seed "
                   "power law in N (below 2 x 3.7%); dropped: the ladder's step count grows with N",
                   reading="project"),
        statement("19d", "AdamW degrades substantially under one-step delay, even with a "
                   "synchronous start; Muon's final gap is much smaller.", "Fig. 3 (claim 1's "
                   "sentence), at each model size",
                   f"at this size: gap(AdamW) - gap(Muon) > 0 and gap(AdamW, synchronous start) - "
                   f"gap(Muon) > 0, {PAIRED}; all (claim 1's central statement, so that claim 1 "
                   f"is reported at a size only with its synchronous-start arm)")),
    wording="AdamW degrades under one-step delay far more than Muon, and update-level EF cuts "
            "the gap by more than half, at every model size at 20 tokens per parameter; how "
            "does the delay's cost move along the ladder (size and step count together)?",
    arms=tuple(a for o in LADDER_OPTIMIZERS for a in (delayed(o, series=optimizer_label(o)),
                                        ef_arm(o, series=optimizer_label(o))))
    + (start_arm("adamw"),),
    grid="AdamW, Muon x {sync, 2bw, 2bw+ef} and AdamW 2bw+sync-start (claim 1's arm) at the "
         "scale's base run (20 tokens per parameter), 5 seeds, at each size of the ladder "
         "(46k, 113k, 267k parameters)",
    reason="The paper's headline contrasts (Figs. 2-3) at the paper's 20:1 ratio on models "
           "small enough for 2 CPU cores; five seeds for per-seed fits across sizes; AdamW and "
           "Muon only (the budget: NorMuon and SOAP would double it). AdamW's synchronous-"
           "start arm (five runs a size) so that claim 1's sentence, which names it, is "
           "decided wherever claim 1 is reported (19d).",
    theory=None, min_seeds=SIZE_LADDER_SEEDS,
    plot=FigureSpec(kind="bars", title="Gap at this model size, 20 tokens per parameter"),
    analyse=_size_ladder_at_size)

