"""Per-claim scenarios for the claims tests: gaps (and statistics) built to pass and to fail.

``SCENARIOS[claim id] = (gaps that make it pass, gaps that make it fail, statistics)``;
:func:`stats_for` gives the statistics (the alignment claim has its own per outcome).
"""

from __future__ import annotations

from tests.llm_validation.claims.synthetic import DIVERGED, transient

__all__ = ["SCENARIOS", "stats_for"]

_ALL4 = ("adamw", "muon", "normuon", "soap")

#: claim id -> (gaps that make it pass, gaps that make it fail, stats for both)
SCENARIOS = {
    "adamw-vs-muon": (
        {"adamw/2bw": 0.3, "adamw/2bw+sync-start": 0.25, "muon/2bw": 0.0},
        {"adamw/2bw": 0.01, "adamw/2bw+sync-start": 0.01, "muon/2bw": 0.2}, {}),
    "ef-halves-gap": (
        {k: v for o in _ALL4 for k, v in ((f"{o}/2bw", 0.2), (f"{o}/2bw+ef", 0.05),
                                          (f"{o}/2bw+sync-start", 0.15))},
        {k: v for o in _ALL4 for k, v in ((f"{o}/2bw", 0.2), (f"{o}/2bw+ef", 0.18),
                                          (f"{o}/2bw+sync-start", 0.05))},
        {f"{o}/2bw+ef": {"cos_consecutive_update": 0.8} for o in _ALL4}),
    "momentum-direction": (
        {"adamw/2bw": 0.3, "adamw/2bw/beta1=0.8": 0.15, "muon/2bw": 0.1,
         "muon/2bw/momentum=0.85": 0.05},
        {"adamw/2bw": 0.3, "adamw/2bw/beta1=0.8": 0.45, "muon/2bw": 0.1,
         "muon/2bw/momentum=0.85": 0.02}, {}),
    "horizon": (
        {k: v for o in ("adamw", "muon") for k, v in (
            (f"{o}/2bw", 0.2), (f"{o}/2bw/steps=0.5x", 0.2), (f"{o}/2bw+ef", 0.1),
            (f"{o}/2bw+ef/steps=0.5x", 0.1))},
        {k: v for o in ("adamw", "muon") for k, v in (
            (f"{o}/2bw", 0.4), (f"{o}/2bw/steps=0.5x", 0.2), (f"{o}/2bw+ef", 0.1),
            (f"{o}/2bw+ef/steps=0.5x", 0.1))}, {}),
    "pipedream-depth": (
        {"muon/pipedream P=2": 0.05, "muon/pipedream P=3": 0.15, "muon/pipedream P=4": 0.3,
         "muon/2bw": 0.1},
        {"muon/pipedream P=2": 0.3, "muon/pipedream P=3": 0.2, "muon/pipedream P=4": 0.05,
         "muon/2bw": 0.1}, {}),
    "learning-rate": (
        {"muon/2bw": 0.1, "muon/2bw/lr=0.5x": 0.04, "adamw/2bw": 0.3, "adamw/2bw/lr=4x": 0.6},
        {"muon/2bw": 0.1, "muon/2bw/lr=0.5x": 0.2, "adamw/2bw": 0.3, "adamw/2bw/lr=4x": 0.1},
        {}),
    "weight-decay": (
        {"muon/2bw": 0.1, "muon/2bw/wd=0.01": 0.1, "muon/2bw/wd=1": 0.3, "adamw/2bw": 0.3,
         "adamw/2bw/wd=0.01": 0.5, "adamw/2bw/wd=1": 0.5},
        {"muon/2bw": 0.1, "muon/2bw/wd=0.01": 0.3, "muon/2bw/wd=1": 0.3, "adamw/2bw": 0.3,
         "adamw/2bw/wd=0.01": 0.5, "adamw/2bw/wd=1": 0.5}, {}),
    "warmup": (
        {"adamw/2bw": 0.3, "adamw/2bw/warmup=5%": 0.2, "muon/2bw": 0.1,
         "muon/2bw/warmup=5%": 0.08},
        {"adamw/2bw": 0.3, "adamw/2bw/warmup=5%": 0.4, "muon/2bw": 0.1,
         "muon/2bw/warmup=5%": 0.15}, {}),
    "grad-clip": ({}, {"muon/2bw/clip=1": 0.3}, {}),
    "lr-schedule": ({}, {"muon/2bw/constant": 0.4}, {}),
    "beta2": (
        {"adamw/2bw": 0.3, "adamw/2bw/beta2=0.99": 0.4, "soap/2bw": 0.3,
         "soap/2bw/beta2=0.99": 0.2},
        {"adamw/2bw": 0.3, "adamw/2bw/beta2=0.99": 0.4, "soap/2bw": 0.3,
         "soap/2bw/beta2=0.99": 0.4}, {}),
    "batch-size": (
        {"muon/2bw/bs=0.5x": 0.05, "muon/2bw": 0.1, "muon/2bw/bs=2x": 0.2},
        {"muon/2bw/bs=0.5x": 0.2, "muon/2bw": 0.1, "muon/2bw/bs=2x": 0.05}, {}),
    "dcasgd": ({}, {"muon/2bw+dcasgd(c=100000)": 0.0}, {}),
    "ef-coefficient": (
        {k: v for o in _ALL4 for k, v in (
            (f"{o}/2bw", 0.3), (f"{o}/2bw+ef(lam=0.5)", 0.1 if o == "normuon" else 0.2),
            (f"{o}/2bw+ef", 0.2 if o == "normuon" else 0.1))},
        {k: v for o in _ALL4 for k, v in (
            (f"{o}/2bw", 0.3), (f"{o}/2bw+ef(lam=0.5)", 0.25), (f"{o}/2bw+ef", 0.1))}, {}),
    "alignment": ({}, {}, None),
    "grad-level-ef": (
        {"adamw/2bw+grad-ef": DIVERGED, "muon/2bw+grad-ef": DIVERGED},
        {"adamw/2bw+grad-ef": 0.1, "muon/2bw+grad-ef": 0.1}, {}),
    # the ladder: a constant gap over the four horizons (slope ~0: does not grow) passes 18a;
    # a gap that doubles with every doubling of the horizon (slope 1) fails it
    "horizon-ladder": (
        {k: 0.1 for o in ("adamw", "muon") for m in ("2bw", "2bw+ef")
         for k in (f"{o}/{m}",) + tuple(f"{o}/{m}/steps={f}x" for f in (2, 4, 8))},
        {**{f"{o}/{m}": 0.1 for o in ("adamw", "muon") for m in ("2bw", "2bw+ef")},
         **{f"{o}/{m}/steps={f}x": 0.1 * f for o in ("adamw", "muon") for m in ("2bw", "2bw+ef")
            for f in (2, 4, 8)}}, {}),
    "size-ladder": (
        {"adamw/2bw": 0.3, "adamw/2bw+ef": 0.05, "muon/2bw": 0.05, "muon/2bw+ef": 0.01},
        {"adamw/2bw": 0.05, "adamw/2bw+ef": 0.04, "muon/2bw": 0.3, "muon/2bw+ef": 0.25}, {}),
    "sync-phases": (
        {k: v for o in ("adamw", "muon") for k, v in (
            (f"{o}/2bw", 0.3), (f"{o}/2bw+sync-start", 0.25), (f"{o}/2bw+sync-cooldown", 0.05))},
        {k: v for o in ("adamw", "muon") for k, v in (
            (f"{o}/2bw", 0.3), (f"{o}/2bw+sync-start", 0.1), (f"{o}/2bw+sync-cooldown", 0.35))},
        {}),
}

#: Robust optimizers better aligned than AdamW, and a spike of the relative error at the
#: switch that the plain delayed run (0.2 throughout) does not have; the fail scenario reverses
#: both.
_ALIGN_PASS = {"adamw/2bw": {"cos_delayed_fresh": 0.8, "rel_err_delayed_fresh": 0.5},
               **{f"{o}/2bw": {"cos_delayed_fresh": 0.97, "rel_err_delayed_fresh": 0.2}
                  for o in _ALL4[1:]},
               **{f"{o}/2bw+sync-start": {"rel_err_delayed_fresh": transient(0.0, 0.6, 0.2)}
                  for o in _ALL4[1:]}}
_ALIGN_FAIL = {"adamw/2bw": {"cos_delayed_fresh": 0.99, "rel_err_delayed_fresh": 0.1},
               **{f"{o}/2bw": {"cos_delayed_fresh": 0.5, "rel_err_delayed_fresh": 0.8}
                  for o in _ALL4[1:]},
               **{f"{o}/2bw+sync-start": {"rel_err_delayed_fresh": transient(0.0, 0.1, 0.3)}
                  for o in _ALL4[1:]}}


def stats_for(claim_id: str, which: str):
    """The statistics of a claim's pass or fail scenario."""
    if claim_id == "alignment":
        return _ALIGN_PASS if which == "pass" else _ALIGN_FAIL
    return SCENARIOS[claim_id][2]
