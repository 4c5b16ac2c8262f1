"""The size ladder's analysis at one model size (claim 19, ``size-ladder``).

At every size of the ladder (the 20:1 scales, :data:`llm_validation.claims.plan.scales.SIZE_LADDER`)
the claim decides the paper's two headline contrasts on its own runs (AdamW and Muon x {sync,
2BW, 2BW + EF}, five seeds):

- **19a** (central, Fig. 3): ``gap(AdamW) - gap(Muon) > 0`` per seed, t interval over seeds;
- **19b** (Fig. 2): ``gap - 2 gap(EF) > 0`` for AdamW and for Muon (EF removes more than half
  the gap), all;
- **19c** (the project's reading): decided across sizes only, by the size-ladder assembly
  (``reproduce --size-ladder``: per-seed power laws in the parameter count, extrapolated to
  SmolLM-135M; :mod:`llm_validation.claims.sizes.fit`); at one size it is reported as such.

Each arm's gap share of the loss decrease and lag fraction are in the arm table (the inputs
of the cross-size fit).
"""

from __future__ import annotations

from llm_validation.claims.catalogue.analysis_delay import ef_removes_half
from llm_validation.claims.decide.checks import aggregate, diff, not_measured
from llm_validation.claims.record.claim import Claim
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.decisions import ClaimResult, result
from llm_validation.claims.decide.measure import gap_interval, gap_ratio_interval, need
from llm_validation.claims.catalogue.registry import LADDER_OPTIMIZERS
from llm_validation.config import optimizer_label as label

__all__ = ["size_ladder_at_size", "ACROSS_SIZES"]

#: Why statement 19c has no verdict in one size's ledger.
ACROSS_SIZES = ("decided across the sizes' ledgers by `delaybound reproduce --size-ladder` "
                "(a fit over model sizes; one size cannot show a trend)")


def size_ladder_at_size(c: Claim, d: ClaimData) -> ClaimResult:
    """Statements 19a and 19b at this scale's size (module docstring)."""
    ga, gm = d.gaps("adamw/2bw"), d.gaps("muon/2bw")
    central = need(diff("gap(AdamW) - gap(Muon) > 0", "side", ("gap AdamW", ga),
                        ("gap Muon", gm), boundary=0.0, predicted="above"),
                   d, "adamw/2bw", "muon/2bw")
    halves = [ef_removes_half(d, o) for o in LADDER_OPTIMIZERS]
    measured = {}
    for o in LADDER_OPTIMIZERS:
        measured[f"gap {label(o)}"] = gap_interval(d, f"{o}/2bw")
        measured[f"gap {label(o)} + EF"] = gap_interval(d, f"{o}/2bw+ef")
        measured[f"{label(o)}: gap with EF / gap (Fieller)"] = gap_ratio_interval(
            d, f"{o}/2bw", f"{o}/2bw+ef")
    return result(c, {"19a": central,
                      "19b": aggregate("EF removes more than half the gap, AdamW and Muon",
                                       "all", halves),
                      "19c": not_measured("Muon's lag extrapolated to 135M", ACROSS_SIZES)},
                  measured=measured)
