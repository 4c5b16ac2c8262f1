"""Analyses of the claims about hyper-parameters and the gap (claims 3, 6-12).

Each function takes the claim and its :class:`~llm_validation.claims.data.ClaimData` and returns
a :class:`~llm_validation.claims.decisions.ClaimResult`; the rule of each is the claim's
``decision`` text in :mod:`llm_validation.claims.registry`. Every comparison of two settings is
of their paired gaps (each against its own synchronous partner), paired again by seed.
"""

from __future__ import annotations

from llm_validation.claims.claim import Claim
from llm_validation.claims.data import ClaimData, paired
from llm_validation.claims.decisions import (Check, ClaimResult, conj, differs_check,
                                             equivalence_check, margin, result,
                                             same_sign_check, side_check, welch_check)
from llm_validation.claims.measure import (gap_interval, mean_gap, need, pairs,
                                           ratio_interval, trend_records)
from llm_validation.claims.predictions import direction_words, gap_ratio, gap_sign
from llm_validation.config import optimizer_label as label
from llm_validation.validation.inference import t_interval
from llm_validation.validation.trends import batch_check, momentum_check
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, PASS

__all__ = ["momentum_direction", "learning_rate", "weight_decay", "warmup", "grad_clip",
           "lr_schedule", "beta2", "batch_size"]


def _change(d: ClaimData, key: str, base: str) -> dict[int, float]:
    """seed -> gap(key) - gap(base)."""
    return paired(d.gaps(key), d.gaps(base))


def momentum_direction(c: Claim, d: ClaimData) -> ClaimResult:
    low = {"adamw": ("adamw/2bw/beta1=0.8", 0.9, 0.8), "muon": ("muon/2bw/momentum=0.85",
                                                                0.95, 0.85)}
    changes, theory, measured, verdicts = {}, [], {}, []
    sign = gap_sign("alpha")               # -1: larger alpha (less momentum), smaller gap
    for o in c.optimizers():
        key, base_mom, low_mom = low[o]
        base = f"{o}/2bw"
        ch = _change(d, key, base)
        changes[label(o)] = ch
        predicted = gap_ratio({"alpha": 1 - low_mom}, {"alpha": 1 - base_mom})
        measured[f"{label(o)}: gap(momentum {low_mom:g}) - gap({base_mom:g})"] = \
            t_interval(list(ch.values()))
        measured[f"{label(o)}: gap ratio low/base momentum, measured"] = ratio_interval(
            pairs(d.gaps(base), d.gaps(key)))
        measured[f"{label(o)}: gap ratio low/base momentum, PL law"] = predicted
        theory.append(need(side_check(f"{label(o)}: less momentum, "
                                      f"{'smaller' if sign < 0 else 'larger'} gap", ch, 0.0,
                                      "below" if sign < 0 else "above"), d, key, base))
        runs = trend_records(d, [key, base])
        if runs:
            verdicts.append(momentum_check(runs, o))
    consistent = same_sign_check("gap(lower momentum) - gap(base) has one sign for every "
                                 "optimizer", changes)
    ivs = [t_interval(list(v.values())) for v in changes.values() if v]
    if consistent.status == PASS:
        found = "lower momentum, smaller gap" if all(iv.hi < 0 for iv in ivs) \
            else "lower momentum, larger gap"
    else:
        found = "no consistent direction established"
    measured["direction found"] = found
    measured["theory's direction"] = direction_words("alpha", "alpha = 1 - momentum")
    return result(c.id, [consistent], measured=measured,
                  theory_check=conj("the theory's direction for every optimizer", theory),
                  theory_verdicts=tuple(verdicts))


def learning_rate(c: Claim, d: ClaimData) -> ClaimResult:
    lo = need(side_check("Muon: gap(0.5x lr) - gap(tuned lr) < 0",
                         _change(d, "muon/2bw/lr=0.5x", "muon/2bw"), 0.0, "below"), d,
              "muon/2bw/lr=0.5x", "muon/2bw")
    hi = need(side_check("AdamW: gap(4x lr) - gap(tuned lr) > 0",
                         _change(d, "adamw/2bw/lr=4x", "adamw/2bw"), 0.0, "above"), d,
              "adamw/2bw/lr=4x", "adamw/2bw")
    measured = {
        "Muon gap ratio 0.5x / 1x lr, measured": ratio_interval(
            pairs(d.gaps("muon/2bw"), d.gaps("muon/2bw/lr=0.5x"))),
        "Muon gap ratio 0.5x / 1x lr, PL law": gap_ratio({"eta": 0.5}, {"eta": 1.0}),
        **{f"AdamW gap ratio {k}x / 1x lr, measured": ratio_interval(
            pairs(d.gaps("adamw/2bw"), d.gaps(f"adamw/2bw/lr={k}x"))) for k in (2, 4, 8)},
        "AdamW gap ratio 4x / 1x lr, PL law": gap_ratio({"eta": 4.0}, {"eta": 1.0}),
        "theory's direction": direction_words("eta", "the lr eta")}
    return result(c.id, [lo, hi], measured=measured,
                  theory_check=conj("the gap grows with the lr (both optimizers)", [lo, hi]))


def weight_decay(c: Claim, d: ClaimData) -> ClaimResult:
    checks = [need(equivalence_check("Muon: gap(wd 0.01) - gap(wd 0.1) within the margin",
                                     _change(d, "muon/2bw/wd=0.01", "muon/2bw"),
                                     margin(mean_gap(d, "muon/2bw"))), d, "muon/2bw/wd=0.01",
                   "muon/2bw")]
    for o in ("adamw", "muon"):
        checks.append(need(side_check(f"{label(o)}: gap(wd 1) - gap(wd 0.1) > 0",
                                      _change(d, f"{o}/2bw/wd=1", f"{o}/2bw"), 0.0, "above"),
                           d, f"{o}/2bw/wd=1", f"{o}/2bw"))
    checks.append(need(differs_check("AdamW: gap(wd 0.01) - gap(wd 0.1) differs from 0",
                                     _change(d, "adamw/2bw/wd=0.01", "adamw/2bw"),
                                     margin(mean_gap(d, "adamw/2bw"))), d, "adamw/2bw/wd=0.01",
                       "adamw/2bw"))
    measured = {f"{label(o)}: gap at wd {w}": gap_interval(d, f"{o}/2bw" + t)
                for o in ("adamw", "muon") for w, t in (("0.01", "/wd=0.01"), ("0.1", ""),
                                                         ("1", "/wd=1"))}
    return result(c.id, checks, measured=measured)


def warmup(c: Claim, d: ClaimData) -> ClaimResult:
    changes = {o: _change(d, f"{o}/2bw/warmup=5%", f"{o}/2bw") for o in ("adamw", "muon")}
    checks = [need(side_check(f"{label(o)}: gap(5% warmup) - gap(no warmup) < 0", ch, 0.0,
                              "below"), d, f"{o}/2bw/warmup=5%", f"{o}/2bw")
              for o, ch in changes.items()]
    checks.append(welch_check("AdamW's change - Muon's change < 0", changes["adamw"],
                              changes["muon"], 0.0, "below"))
    theory = [equivalence_check(f"{label(o)}: the change within the margin", ch,
                                margin(mean_gap(d, f"{o}/2bw"))) for o, ch in changes.items()]
    measured = {f"{label(o)}: gap(5% warmup) - gap(no warmup)": t_interval(list(ch.values()))
                for o, ch in changes.items()}
    return result(c.id, checks, measured=measured,
                  theory_check=conj("no change of the final gap (THEORY.md trend 2)", theory))


def _equivalent_settings(c: Claim, d: ClaimData, base: str, variants: dict[str, str]
                         ) -> list[Check]:
    width = margin(mean_gap(d, base))
    return [need(equivalence_check(f"gap({name}) - gap(base) within +-margin",
                                   _change(d, key, base), width), d, key, base)
            for name, key in variants.items()]


def grad_clip(c: Claim, d: ClaimData) -> ClaimResult:
    checks = _equivalent_settings(c, d, "muon/2bw", {"clip 1": "muon/2bw/clip=1",
                                                     "clip 0.25": "muon/2bw/clip=0.25"})
    measured = {f"Muon: gap {n}": gap_interval(d, k) for n, k in
                (("unclipped", "muon/2bw"), ("clip 1", "muon/2bw/clip=1"),
                 ("clip 0.25", "muon/2bw/clip=0.25"))}
    measured["equivalence margin"] = margin(mean_gap(d, "muon/2bw"))
    return result(c.id, checks, measured=measured)


def lr_schedule(c: Claim, d: ClaimData) -> ClaimResult:
    names = ("linear", "wsd", "constant")
    checks = _equivalent_settings(c, d, "muon/2bw", {s: f"muon/2bw/{s}" for s in names})
    measured = {f"Muon: gap {s}": gap_interval(d, f"muon/2bw/{s}" if s != "cosine" else
                                               "muon/2bw") for s in ("cosine",) + names}
    measured["equivalence margin"] = margin(mean_gap(d, "muon/2bw"))
    recs = d.records("muon/2bw")
    if recs:
        floor = float(recs[0].config["optim"].get("min_lr_ratio", 0.1))
        measured["PL law: gap(constant) / gap(cosine) at the final lrs"] = gap_ratio(
            {"eta": 1.0}, {"eta": floor})
    theory = need(side_check("gap(constant) - gap(cosine) > 0",
                             _change(d, "muon/2bw/constant", "muon/2bw"), 0.0, "above"), d,
                  "muon/2bw/constant", "muon/2bw")
    return result(c.id, checks, measured=measured, theory_check=theory,
                  notes=("NorMuon and SOAP are not run (budget): the verdict is Muon's.",))


def beta2(c: Claim, d: ClaimData) -> ClaimResult:
    changes = {label(o): _change(d, f"{o}/2bw/beta2=0.99", f"{o}/2bw") for o in
               c.optimizers()}
    same = same_sign_check("gap(beta2 0.99) - gap(0.95) has one sign for every optimizer",
                           changes)
    eqs = [equivalence_check(f"{label(o)}: within the margin", changes[label(o)],
                             margin(mean_gap(d, f"{o}/2bw"))) for o in c.optimizers()]
    if same.status == PASS:
        status, why = FAIL, f"a consistent effect: {same.reason}"
    elif same.status == FAIL:
        status, why = PASS, f"no consistent effect: {same.reason}"
    elif all(e.status == PASS for e in eqs):
        status, why = PASS, "no effect for any optimizer: " + "; ".join(e.reason for e in eqs)
    else:
        status, why = INCONCLUSIVE, f"{same.reason}; " + "; ".join(e.reason for e in eqs)
    check = need(Check(label="beta2 has no consistent optimizer-independent effect",
                       status=status, reason=why, n_seeds=same.n_seeds), d,
                 *(f"{o}/2bw{t}" for o in c.optimizers() for t in ("", "/beta2=0.99")))
    measured = {f"{k}: gap(0.99) - gap(0.95)": t_interval(list(v.values()))
                for k, v in changes.items()}
    return result(c.id, [check], details=tuple([same] + eqs), measured=measured)


def batch_size(c: Claim, d: ClaimData) -> ClaimResult:
    small = need(side_check("gap(half batch) - gap(base batch) < 0",
                            _change(d, "muon/2bw/bs=0.5x", "muon/2bw"), 0.0, "below"), d,
                 "muon/2bw/bs=0.5x", "muon/2bw")
    large = need(side_check("gap(twice the batch) - gap(base batch) > 0",
                            _change(d, "muon/2bw/bs=2x", "muon/2bw"), 0.0, "above"), d,
                 "muon/2bw/bs=2x", "muon/2bw")
    measured = {f"Muon: gap at {b} batch": gap_interval(d, k) for b, k in
                (("0.5x", "muon/2bw/bs=0.5x"), ("1x", "muon/2bw"), ("2x", "muon/2bw/bs=2x"))}
    runs = trend_records(d, ["muon/2bw/bs=0.5x", "muon/2bw", "muon/2bw/bs=2x"])
    verdicts = (batch_check(runs, "muon"),) if runs else ()
    return result(c.id, [small, large], measured=measured,
                  theory_check=conj("THEORY.md trend 4: larger batches, larger gap",
                                    [small, large]), theory_verdicts=verdicts)

