"""The gap against the swept hyper-parameters: momentum (claim 3), the peak lr (6), weight
decay (7) and the batch size (12); Figs. 4, 7, 8, 13.

Each claim here is a :class:`~llm_validation.claims.record.claim.Claim` that carries
everything that decides it: the paper's wording and figure, its statements (the paper's
sentences it tests, the theory's predictions), its arms, grid and the reason for them, its
analysis (one check per statement, on finished runs only:
:class:`~llm_validation.claims.decide.data.ClaimData`) and the thresholds its rules use (read
by the protocol, :mod:`llm_validation.claims.report.protocol`). Every comparison is a per-seed
contrast of the arms, decided on its paired t interval (:mod:`llm_validation.claims.decide.checks`).

Every comparison of two settings is the per-seed contrast gap(setting) - gap(base) (each gap
against its own synchronous partner, same seed).
"""

from __future__ import annotations

from llm_validation.claims.catalogue.vocabulary import (LONG, PAIRED, MARGIN_CHANGE, arm_at,
                                                        central, prediction, statement)
from llm_validation.claims.decide.checks import aggregate, make
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.decisions import ClaimResult, result
from llm_validation.claims.decide.measure import (gap_change, gap_interval, gap_ratio_interval,
                                                  gap_side, interval_of, margin, margin_text,
                                                  need, trend_records, vs_base)
from llm_validation.claims.decide.predictions import direction_words, gap_ratio, gap_sign
from llm_validation.claims.decide.regime import MARGIN_RULE
from llm_validation.claims.record.arms import Times, delayed
from llm_validation.claims.record.claim import Claim, FigureSpec
from llm_validation.config import optimizer_label
from llm_validation.config import optimizer_label as label
from llm_validation.validation.trends import batch_check, momentum_check

__all__ = ["MOMENTUM_DIRECTION", "LEARNING_RATE", "WEIGHT_DECAY", "BATCH_SIZE"]

_LONG = {"run.steps": LONG}


# ---------------------------------------------------------------------- momentum-direction
def _momentum_direction(c: Claim, d: ClaimData) -> ClaimResult:
    low = {"adamw": ("adamw/2bw/beta1=0.8", 0.9, 0.8), "muon": ("muon/2bw/momentum=0.85",
                                                                0.95, 0.85)}
    changes, theory, measured, verdicts = {}, [], {}, []
    sign = gap_sign("alpha")               # -1: larger alpha (less momentum), smaller gap
    for o in c.optimizers():
        key, base_mom, low_mom = low[o]
        base = f"{o}/2bw"
        changes[label(o)] = gap_change(d, key, base)
        measured[f"{label(o)}: gap(momentum {low_mom:g}) - gap({base_mom:g})"] = \
            interval_of(changes[label(o)])
        measured[f"{label(o)}: gap ratio low/base momentum, measured (Fieller)"] = \
            gap_ratio_interval(d, base, key)
        measured[f"{label(o)}: gap ratio low/base momentum, PL law"] = gap_ratio(
            {"alpha": 1 - low_mom}, {"alpha": 1 - base_mom})
        theory.append(gap_side(f"{label(o)}: less momentum, "
                               f"{'smaller' if sign < 0 else 'larger'} gap", d, key, base,
                               "below" if sign < 0 else "above"))
        runs = trend_records(d, [key, base])
        if runs:
            verdicts.append(momentum_check(runs, o))
    consistent = need(make("gap(lower momentum) - gap(base) has one sign for every optimizer",
                           "same_sign", changes), d,
                      *(k for o in c.optimizers() for k in (low[o][0], f"{o}/2bw")))
    ivs = [interval_of(v) for v in changes.values() if v]
    if consistent.status == "pass":
        found = "lower momentum, smaller gap" if all(iv.hi < 0 for iv in ivs) \
            else "lower momentum, larger gap"
    else:
        found = "no consistent direction established"
    measured["direction found"] = found
    measured["theory's direction"] = direction_words("alpha", "alpha = 1 - momentum")
    return result(c, {"3a": consistent,
                      "T3": aggregate("the theory's direction for every optimizer", "all",
                                      theory)},
                  measured=measured, theory_verdicts=tuple(verdicts))


MOMENTUM_DIRECTION = Claim(
    id="momentum-direction", number=3, figure="Fig. 4",
    statements=(
        central("3a", "The gap moves with the momentum decay in a consistent, "
                 "optimizer-independent direction.", "Fig. 4",
                 f"per optimizer gap(lower momentum) - gap(base), {PAIRED}: pass when every "
                 "interval lies on one side of 0, fail when two lie on opposite sides"),
        prediction("T3", "less momentum, smaller gap, for every optimizer")),
    wording="The gap moves with the momentum decay in a consistent, optimizer-independent "
            "direction.",
    arms=(arm_at("adamw", "optim.beta1", 0.8, "beta1=0.8"), delayed("adamw", series="AdamW"),
          arm_at("muon", "optim.momentum", 0.85, "momentum=0.85"),
          delayed("muon", series="Muon")),
    grid="AdamW beta1 {0.8, 0.9}, Muon momentum {0.85, 0.95}; sync and 2bw",
    reason="The base momentum and one lower value per optimizer (alpha doubled or tripled, "
           "where the PL law predicts the gap to fall by 2-3x); two values rather than the "
           "paper's sweep: the budget.",
    theory="PL gap law (theory pl_delay_gap, gap_leading): d gap / d alpha < 0, so more "
           "momentum (smaller alpha = 1 - momentum) gives a larger gap",
    plot=FigureSpec(kind="lines", title="Gap vs momentum", x="momentum",
                    xlabel="momentum (AdamW beta1, Muon mu)"),
    analyse=_momentum_direction)


# ---------------------------------------------------------------------- learning-rate
def _learning_rate(c: Claim, d: ClaimData) -> ClaimResult:
    lo = gap_side("Muon: gap(0.5x lr) - gap(tuned lr) < 0", d, "muon/2bw/lr=0.5x", "muon/2bw",
                  "below")
    hi = gap_side("AdamW: gap(4x lr) - gap(tuned lr) > 0", d, "adamw/2bw/lr=4x", "adamw/2bw",
                  "above")
    measured = {
        "Muon gap ratio 0.5x / 1x lr, measured (Fieller)": gap_ratio_interval(
            d, "muon/2bw", "muon/2bw/lr=0.5x"),
        "Muon gap ratio 0.5x / 1x lr, PL law": gap_ratio({"eta": 0.5}, {"eta": 1.0}),
        **{f"AdamW gap ratio {k}x / 1x lr, measured (Fieller)": gap_ratio_interval(
            d, "adamw/2bw", f"adamw/2bw/lr={k}x") for k in (2, 4, 8)},
        "AdamW gap ratio 4x / 1x lr, PL law": gap_ratio({"eta": 4.0}, {"eta": 1.0}),
        "theory's direction": direction_words("eta", "the lr eta")}
    return result(c, {"6a": lo, "6b": hi,
                      "T6": aggregate("the gap grows with the lr (both optimizers)", "all",
                                      [lo, hi])}, measured=measured)


LEARNING_RATE = Claim(
    id="learning-rate", number=6, figure="Fig. 7",
    statements=(
        central("6a", "Lower peak lr mildly reduces the gap for robust optimizers.", "Fig. 7",
                 f"Muon gap(0.5x lr) - gap(tuned lr) < 0, {PAIRED}"),
        statement("6b", "Large lr badly hurts delayed AdamW.", "Fig. 7",
                   f"AdamW gap(4x lr) - gap(swept lr) > 0, {PAIRED} (2x and 8x shown beside it)",
                   "was 2x, too small to show the paper's 'large lr' in the first tiny ledger; the grid now runs "
                   "to 8x"),
        prediction("T6", "the gap grows with the lr (gap ~ eta^2): 6a's and 6b's directions")),
    wording="Lower peak lr mildly reduces the gap for robust optimizers; large lr badly "
            "hurts delayed AdamW.",
    arms=(arm_at("muon", "optim.lr", Times(0.5), "lr=0.5x"), delayed("muon", series="Muon"),
          delayed("adamw", series="AdamW"), arm_at("adamw", "optim.lr", Times(2.0), "lr=2x"),
          arm_at("adamw", "optim.lr", Times(4.0), "lr=4x"),
          arm_at("adamw", "optim.lr", Times(8.0), "lr=8x")),
    grid="Muon lr {0.5x, 1x}, AdamW lr {1x, 2x, 4x, 8x} of the swept lr; sync and 2bw",
    reason="One step down from the swept lr for Muon (the robust optimizers' half; Muon "
           "alone: the budget); AdamW up to 8x, the paper's 'large lr' (2x was too small "
           "to show it in the first tiny ledger), decided at 4x, chosen before the runs as the largest lr "
           "expected to keep the synchronous runs training at tiny (8x is shown beside it: "
           "the ledger's 8x synchronous runs did train).",
    theory="PL gap law: gap ~ eta^2 (d gap / d eta > 0): half the lr, a quarter of the gap; "
           "twice the lr, four times",
    plot=FigureSpec(kind="lines", title="Gap vs peak learning rate", x="optim.lr",
                    xlabel="peak learning rate", logx=True),
    analyse=_learning_rate)


# ---------------------------------------------------------------------- weight-decay
def _weight_decay(c: Claim, d: ClaimData) -> ClaimResult:
    moderate = vs_base("Muon: gap(wd 0.01) - gap(wd 0.1) within the margin", "equivalence",
                       d, "muon/2bw/wd=0.01", "muon/2bw", width=margin(d, "muon/2bw"))
    extreme = [gap_side(f"{label(o)}: gap(wd 1) - gap(wd 0.1) > 0", d, f"{o}/2bw/wd=1",
                        f"{o}/2bw", "above") for o in ("adamw", "muon")]
    small = vs_base("AdamW: gap(wd 0.01) - gap(wd 0.1) differs from 0", "differs", d,
                    "adamw/2bw/wd=0.01", "adamw/2bw", width=margin(d, "adamw/2bw"))
    measured = {f"{label(o)}: gap at wd {w}": gap_interval(d, f"{o}/2bw" + t)
                for o in ("adamw", "muon") for w, t in (("0.01", "/wd=0.01"), ("0.1", ""),
                                                         ("1", "/wd=1"))}
    measured["equivalence margin (Muon)"] = margin_text(d, "muon/2bw")
    measured["equivalence margin (AdamW)"] = margin_text(d, "adamw/2bw")
    return result(c, {"7a": moderate,
                      "7b": aggregate("extreme weight decay worsens the gap", "all", extreme),
                      "7c": small}, measured=measured)


WEIGHT_DECAY = Claim(
    id="weight-decay", number=7, figure="Fig. 8",
    statements=(
        central("7a", "Moderate weight decay has little effect.", "Fig. 8",
                 f"Muon gap(wd 0.01) - gap(wd 0.1) inside the equivalence margin, {PAIRED}, at the "
                 f"ladder's 4H horizon; {MARGIN_RULE}",
                 "was at 200 steps, where weight decay is inert (weights shrink < 1% at wd 0.1); "
                 + MARGIN_CHANGE),
        statement("7b", "Extreme values worsen delayed training.", "Fig. 8",
                   f"gap(wd 1) - gap(wd 0.1) > 0 for AdamW and Muon, {PAIRED}"),
        statement("7c", "AdamW is sensitive to small weight decay.", "Fig. 8",
                   f"AdamW gap(wd 0.01) - gap(wd 0.1) excludes 0 (pass) or lies inside the margin "
                   f"(fail), {PAIRED}; {MARGIN_RULE}", MARGIN_CHANGE)),
    wording="Moderate weight decay has little effect; extreme values worsen delayed "
            "training; AdamW is sensitive to small weight decay.",
    arms=tuple(a for o in ("adamw", "muon") for a in (
        arm_at(o, "optim.weight_decay", 0.01, "wd=0.01", cond=_LONG, long=True),
        delayed(o, cond=_LONG, long=True, series=optimizer_label(o)),   # = the 4H rung
        arm_at(o, "optim.weight_decay", 1.0, "wd=1", cond=_LONG, long=True))),
    grid="AdamW, Muon x weight decay {0.01, 0.1, 1.0} at the ladder's long horizon (4x the "
         "base run: 800 steps at tiny, own full lr schedule); sync and 2bw",
    reason="0.1 is the base (moderate), 0.01 small, 1.0 extreme (lr x wd = 1e-2 per step "
           "for Muon: the weights shrink ~2x in 70 steps). At the long horizon because at "
           "200 steps weight decay is inert (weights shrink < 1% at wd 0.1); the wd 0.1 "
           "runs are the ladder's 4H rung (shared). 4H, not the top rung 8H: 8H would "
           "push the tiny ledger past its 4-hour budget.",
    theory=None,
    plot=FigureSpec(kind="lines", title="Gap vs weight decay", x="optim.weight_decay",
                    xlabel="weight decay (decoupled, per unit lr)", logx=True),
    analyse=_weight_decay)


# ---------------------------------------------------------------------- batch-size
def _batch_size(c: Claim, d: ClaimData) -> ClaimResult:
    small = gap_side("gap(half batch) - gap(base batch) < 0", d, "muon/2bw/bs=0.5x", "muon/2bw",
                     "below")
    large = gap_side("gap(twice the batch) - gap(base batch) > 0", d, "muon/2bw/bs=2x",
                     "muon/2bw", "above")
    measured = {f"Muon: gap at {b} batch": gap_interval(d, k) for b, k in
                (("0.5x", "muon/2bw/bs=0.5x"), ("1x", "muon/2bw"), ("2x", "muon/2bw/bs=2x"))}
    runs = trend_records(d, ["muon/2bw/bs=0.5x", "muon/2bw", "muon/2bw/bs=2x"])
    verdicts = (batch_check(runs, "muon"),) if runs else ()
    return result(c, {"12a": small, "12b": large,
                      "T12": aggregate("docs/theory.md trend 4: larger batches, larger gap", "all",
                                       [small, large])},
                  measured=measured, theory_verdicts=verdicts)


BATCH_SIZE = Claim(
    id="batch-size", number=12, figure="Fig. 13",
    statements=(
        central("12a", "Smaller batches shrink the gap ...", "Fig. 13",
                 f"Muon gap(half batch) - gap(base batch) < 0 at the same token budget, {PAIRED}",
                 "was at the same step count; the paper's runs hold the token budget fixed"),
        statement("12b", "... larger ones grow it.", "Fig. 13",
                   f"Muon gap(twice the batch) - gap(base batch) > 0, {PAIRED}"),
        prediction("T12", "larger batches, larger gap (docs/theory.md trend 4): 12a and 12b")),
    wording="Smaller batches shrink the gap, larger ones grow it (batch x lr grid).",
    arms=(arm_at("muon", "run.batch_size", Times(0.5), "bs=0.5x",
                 cond={"run.steps": Times(2.0)}),
          delayed("muon", series="Muon"),
          arm_at("muon", "run.batch_size", Times(2.0), "bs=2x",
                 cond={"run.steps": Times(0.5)})),
    grid="Muon x batch {0.5x, 1x, 2x} of the base (8, 16, 32 sequences at tiny) at a fixed "
         "token budget (400, 200, 100 steps) and the swept lr; sync and 2bw",
    reason="Half and twice the base batch at a fixed lr and a fixed token budget, as the "
           "paper's runs hold the tokens fixed (the earlier arms held the steps fixed); the "
           "lr axis of the paper's grid is claim 6's (Muon, 0.5x lr): a full 3x3 grid "
           "would cost 4x: the budget.",
    theory="docs/theory.md trend 4: gradient noise (small batches) hides the delay term, larger "
           "batches expose it",
    plot=FigureSpec(kind="lines", title="Gap vs batch size", x="run.batch_size",
                    xlabel="batch size (sequences per step)", logx=True),
    analyse=_batch_size)

