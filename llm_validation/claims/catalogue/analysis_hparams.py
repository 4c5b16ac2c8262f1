"""Analyses of the claims about hyper-parameters and the gap (claims 3, 6-12).

Each function takes the claim and its :class:`~llm_validation.claims.decide.data.ClaimData` and returns
a :class:`~llm_validation.claims.decide.decisions.ClaimResult` with one check per statement of
:mod:`llm_validation.claims.catalogue.statements`. Every comparison of two settings is the per-seed
contrast gap(setting) - gap(base) (each gap against its own synchronous partner, same seed),
decided on its paired t interval.
"""

from __future__ import annotations

from llm_validation.claims.decide.checks import Check, aggregate, diff, make
from llm_validation.claims.record.claim import Claim
from llm_validation.claims.decide.data import ClaimData, paired
from llm_validation.claims.decide.decisions import ClaimResult, result
from llm_validation.claims.decide.measure import (gap_interval, gap_ratio_interval, interval_of,
                                           margin, margin_text, need, trend_records)
from llm_validation.claims.decide.predictions import direction_words, gap_ratio, gap_sign
from llm_validation.config import optimizer_label as label
from llm_validation.validation.trends import batch_check, momentum_check

__all__ = ["momentum_direction", "learning_rate", "weight_decay", "warmup", "grad_clip",
           "lr_schedule", "beta2", "batch_size"]


def _change(d: ClaimData, key: str, base: str) -> dict[int, float]:
    """seed -> gap(key) - gap(base)."""
    return paired(d.gaps(key), d.gaps(base))


def _vs_base(text: str, kind: str, d: ClaimData, key: str, base: str, **params) -> Check:
    """A ``kind`` check of the contrast gap(key) - gap(base), with missing runs named."""
    return need(diff(text, kind, (f"gap {key}", d.gaps(key)), (f"gap {base}", d.gaps(base)),
                     **params), d, key, base)


def _side(text: str, d: ClaimData, key: str, base: str, predicted: str) -> Check:
    return _vs_base(text, "side", d, key, base, boundary=0.0, predicted=predicted)


def momentum_direction(c: Claim, d: ClaimData) -> ClaimResult:
    low = {"adamw": ("adamw/2bw/beta1=0.8", 0.9, 0.8), "muon": ("muon/2bw/momentum=0.85",
                                                                0.95, 0.85)}
    changes, theory, measured, verdicts = {}, [], {}, []
    sign = gap_sign("alpha")               # -1: larger alpha (less momentum), smaller gap
    for o in c.optimizers():
        key, base_mom, low_mom = low[o]
        base = f"{o}/2bw"
        changes[label(o)] = _change(d, key, base)
        measured[f"{label(o)}: gap(momentum {low_mom:g}) - gap({base_mom:g})"] = \
            interval_of(changes[label(o)])
        measured[f"{label(o)}: gap ratio low/base momentum, measured (Fieller)"] = \
            gap_ratio_interval(d, base, key)
        measured[f"{label(o)}: gap ratio low/base momentum, PL law"] = gap_ratio(
            {"alpha": 1 - low_mom}, {"alpha": 1 - base_mom})
        theory.append(_side(f"{label(o)}: less momentum, "
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


def learning_rate(c: Claim, d: ClaimData) -> ClaimResult:
    lo = _side("Muon: gap(0.5x lr) - gap(tuned lr) < 0", d, "muon/2bw/lr=0.5x", "muon/2bw",
               "below")
    hi = _side("AdamW: gap(4x lr) - gap(tuned lr) > 0", d, "adamw/2bw/lr=4x", "adamw/2bw",
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


def weight_decay(c: Claim, d: ClaimData) -> ClaimResult:
    moderate = _vs_base("Muon: gap(wd 0.01) - gap(wd 0.1) within the margin", "equivalence",
                        d, "muon/2bw/wd=0.01", "muon/2bw", width=margin(d, "muon/2bw"))
    extreme = [_side(f"{label(o)}: gap(wd 1) - gap(wd 0.1) > 0", d, f"{o}/2bw/wd=1",
                     f"{o}/2bw", "above") for o in ("adamw", "muon")]
    small = _vs_base("AdamW: gap(wd 0.01) - gap(wd 0.1) differs from 0", "differs", d,
                     "adamw/2bw/wd=0.01", "adamw/2bw", width=margin(d, "adamw/2bw"))
    measured = {f"{label(o)}: gap at wd {w}": gap_interval(d, f"{o}/2bw" + t)
                for o in ("adamw", "muon") for w, t in (("0.01", "/wd=0.01"), ("0.1", ""),
                                                         ("1", "/wd=1"))}
    measured["equivalence margin (Muon)"] = margin_text(d, "muon/2bw")
    measured["equivalence margin (AdamW)"] = margin_text(d, "adamw/2bw")
    return result(c, {"7a": moderate,
                      "7b": aggregate("extreme weight decay worsens the gap", "all", extreme),
                      "7c": small}, measured=measured)


def warmup(c: Claim, d: ClaimData) -> ClaimResult:
    keys = {o: (f"{o}/2bw/warmup=5%", f"{o}/2bw") for o in ("adamw", "muon")}
    changes = {o: _change(d, *k) for o, k in keys.items()}
    lower = [_side(f"{label(o)}: gap(5% warmup) - gap(no warmup) < 0", d, *keys[o], "below")
             for o in keys]
    most = need(diff("AdamW's change - Muon's change < 0", "side",
                     ("change AdamW", changes["adamw"]), ("change Muon", changes["muon"]),
                     boundary=0.0, predicted="below"), d, *keys["adamw"], *keys["muon"])
    theory = [_vs_base(f"{label(o)}: the change within the margin", "equivalence", d,
                       *keys[o], width=margin(d, f"{o}/2bw")) for o in keys]
    measured = {f"{label(o)}: gap(5% warmup) - gap(no warmup)": interval_of(ch)
                for o, ch in changes.items()}
    return result(c, {"8a": aggregate("warmup reduces the gap", "all", lower), "8b": most,
                      "T8": aggregate("no change of the final gap (docs/theory.md trend 2)", "all",
                                      theory)}, measured=measured)


def _equivalent_settings(d: ClaimData, base: str, variants: dict[str, str]) -> list[Check]:
    width = margin(d, base)
    return [_vs_base(f"gap({name}) - gap(base) within +-margin", "equivalence", d, key, base,
                     width=width) for name, key in variants.items()]


def grad_clip(c: Claim, d: ClaimData) -> ClaimResult:
    checks = _equivalent_settings(d, "muon/2bw", {"clip 1": "muon/2bw/clip=1",
                                                  "clip 0.25": "muon/2bw/clip=0.25"})
    measured = {f"Muon: gap {n}": gap_interval(d, k) for n, k in
                (("unclipped", "muon/2bw"), ("clip 1", "muon/2bw/clip=1"),
                 ("clip 0.25", "muon/2bw/clip=0.25"))}
    measured["equivalence margin"] = margin_text(d, "muon/2bw")
    return result(c, {"9a": aggregate("insensitive to the clipping threshold", "all", checks)},
                  measured=measured)


def lr_schedule(c: Claim, d: ClaimData) -> ClaimResult:
    names = ("linear", "wsd", "constant")
    checks = _equivalent_settings(d, "muon/2bw", {s: f"muon/2bw/{s}" for s in names})
    measured = {f"Muon: gap {s}": gap_interval(d, f"muon/2bw/{s}" if s != "cosine" else
                                               "muon/2bw") for s in ("cosine",) + names}
    measured["equivalence margin"] = margin_text(d, "muon/2bw")
    recs = d.records("muon/2bw")
    if recs:
        floor = float(recs[0].config["optim"].get("min_lr_ratio", 0.1))
        measured["PL law: gap(constant) / gap(cosine) at the final lrs"] = gap_ratio(
            {"eta": 1.0}, {"eta": floor})
    theory = _side("gap(constant) - gap(cosine) > 0", d, "muon/2bw/constant", "muon/2bw",
                   "above")
    return result(c, {"10a": aggregate("similar gap across schedules", "all", checks),
                      "T10": theory}, measured=measured,
                  notes=("NorMuon and SOAP are not run (budget): the verdict is Muon's.",))


def beta2(c: Claim, d: ClaimData) -> ClaimResult:
    keys = {label(o): (f"{o}/2bw/beta2=0.99", f"{o}/2bw") for o in c.optimizers()}
    changes = {k: _change(d, *v) for k, v in keys.items()}
    widths = {k: margin(d, v[1]) for k, v in keys.items()}
    check = need(make("beta2 has no consistent optimizer-independent effect",
                      "no_consistent_effect", changes, widths=widths), d,
                 *(k for v in keys.values() for k in v))
    measured = {f"{k}: gap(0.99) - gap(0.95)": interval_of(v) for k, v in changes.items()}
    measured.update({f"{k}: equivalence margin": margin_text(d, v[1]) for k, v in keys.items()})
    return result(c, {"11a": check}, measured=measured)


def batch_size(c: Claim, d: ClaimData) -> ClaimResult:
    small = _side("gap(half batch) - gap(base batch) < 0", d, "muon/2bw/bs=0.5x", "muon/2bw",
                  "below")
    large = _side("gap(twice the batch) - gap(base batch) > 0", d, "muon/2bw/bs=2x",
                  "muon/2bw", "above")
    measured = {f"Muon: gap at {b} batch": gap_interval(d, k) for b, k in
                (("0.5x", "muon/2bw/bs=0.5x"), ("1x", "muon/2bw"), ("2x", "muon/2bw/bs=2x"))}
    runs = trend_records(d, ["muon/2bw/bs=0.5x", "muon/2bw", "muon/2bw/bs=2x"])
    verdicts = (batch_check(runs, "muon"),) if runs else ()
    return result(c, {"12a": small, "12b": large,
                      "T12": aggregate("docs/theory.md trend 4: larger batches, larger gap", "all",
                                       [small, large])},
                  measured=measured, theory_verdicts=verdicts)
