"""Analyses of the claims about the delay itself and its fixes (claims 1, 2, 4, 5, 13-17).

Each function takes the claim and its :class:`~llm_validation.claims.data.ClaimData` and returns
a :class:`~llm_validation.claims.decisions.ClaimResult`; the rule of each is the claim's
``decision`` text in :mod:`llm_validation.claims.registry`.
"""

from __future__ import annotations

import numpy as np

from llm_validation.claims.claim import Claim
from llm_validation.claims.data import ClaimData, paired
from llm_validation.claims.decisions import (Check, ClaimResult, conj, margin, most,
                                             not_better_check, ratio_check, result, side_check,
                                             welch_check)
from llm_validation.claims.measure import (gap_interval, mean_gap, need, pairs,
                                           ratio_interval, ratio_of_means, share_removed,
                                           trend_records)
from llm_validation.claims.registry import DCASGD_COEFS
from llm_validation.config import optimizer_label as label
from llm_validation.validation.inference import fit_linear, t_interval
from llm_validation.validation.trends import adamw_vs_muon_check, ef_gain_check
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, MIN_SEEDS, PASS, decide

__all__ = ["MUON_BEST_TOL", "GROWTH_TOL", "ALIGNED_COS", "SMALL_REL_ERR", "EF_HELPS_COS",
           "adamw_vs_muon", "ef_halves_gap", "horizon", "pipedream_depth", "dcasgd",
           "ef_coefficient", "alignment", "grad_level_ef", "sync_phases"]

#: Claim 1: "within about 0.01" (the paper's number, nats).
MUON_BEST_TOL = 0.01
#: Claim 4: "grows" = the gap of the full run exceeds 1.25x the half run's.
GROWTH_TOL = 1.25
#: Claim 15: "aligned" = mean cosine above 0.9 (within 26 degrees).
ALIGNED_COS = 0.9
#: Claim 15: "small" relative error = below half the update's size.
SMALL_REL_ERR = 0.5
#: docs/theory.md result 5 (l2): EF with lam = 1 helps iff consecutive updates have cosine > 1/2.
EF_HELPS_COS = 0.5


def adamw_vs_muon(c: Claim, d: ClaimData) -> ClaimResult:
    ga, gs, gm = d.gaps("adamw/2bw"), d.gaps("adamw/2bw+sync-start"), d.gaps("muon/2bw")
    best = paired(d.vals("muon/2bw", "best"), d.vals("muon/sync", "best"))
    checks = [
        need(welch_check("gap(AdamW) - gap(Muon) > 0", ga, gm, 0.0, "above"), d,
             "adamw/2bw", "muon/2bw"),
        need(welch_check("gap(AdamW, synchronous start) - gap(Muon) > 0", gs, gm, 0.0,
                         "above"), d, "adamw/2bw+sync-start", "muon/2bw"),
        need(side_check(f"Muon best val loss, delayed - sync < {MUON_BEST_TOL:g}", best,
                        MUON_BEST_TOL, "below"), d, "muon/2bw", "muon/sync")]
    measured = {"gap AdamW": t_interval(list(ga.values())),
                "gap AdamW with synchronous start": t_interval(list(gs.values())),
                "gap Muon": t_interval(list(gm.values())),
                "Muon best val, delayed - sync": t_interval(list(best.values()))}
    verdicts = ()
    runs = trend_records(d, ["adamw/2bw", "muon/2bw"])
    base = {o: d.records(f"{o}/sync")[0].condition for o in ("adamw", "muon")
            if d.records(f"{o}/sync")}
    if len(base) == 2:
        verdicts = (adamw_vs_muon_check(runs, base),)
    return result(c.id, checks, measured=measured, theory_check=checks[0],
                  theory_verdicts=verdicts)


def ef_halves_gap(c: Claim, d: ClaimData) -> ClaimResult:
    shares, beats, theory, measured, verdicts = [], [], [], {}, []
    for o in c.optimizers():
        g0, g1 = d.gaps(f"{o}/2bw"), d.gaps(f"{o}/2bw+ef")
        rows = pairs(g0, g1)
        shares.append(need(ratio_check(f"{label(o)}: share of the gap EF removes > 0.5", rows,
                                       0.5, "above", share_removed), d, f"{o}/2bw",
                           f"{o}/2bw+ef"))
        beats.append(need(side_check(f"{label(o)}: val(EF) - val(synchronous start) < 0",
                                     paired(d.vals(f"{o}/2bw+ef"),
                                            d.vals(f"{o}/2bw+sync-start")), 0.0, "below"),
                          d, f"{o}/2bw+ef", f"{o}/2bw+sync-start"))
        cos = d.mean_stat(f"{o}/2bw+ef", "cos_consecutive_update")
        measured[f"{label(o)}: gap / gap with EF"] = \
            f"{gap_interval(d, f'{o}/2bw').fmt()} / {gap_interval(d, f'{o}/2bw+ef').fmt()}"
        if cos:
            mc = float(np.mean(list(cos.values())))
            measured[f"{label(o)}: mean cos(consecutive updates), EF run"] = mc
            side = "above" if mc > EF_HELPS_COS else "below"
            theory.append(side_check(f"{label(o)}: EF gain {side} 0 (cos {mc:.2f} vs 1/2)",
                                     paired(g0, g1), 0.0, side))
        sync = d.records(f"{o}/sync")
        if sync:
            verdicts.append(ef_gain_check(trend_records(d, [f"{o}/2bw", f"{o}/2bw+ef"]), o,
                                          sync[0].condition))
    checks = [most("EF removes more than half the gap, for most optimizers", shares),
              most("EF beats the synchronous start, for most optimizers", beats)]
    return result(c.id, checks, details=tuple(shares + beats), measured=measured,
                  theory_check=conj("EF gain has the sign cos - 1/2 predicts", theory)
                  if theory else None, theory_verdicts=tuple(verdicts))


def horizon(c: Claim, d: ClaimData) -> ClaimResult:
    checks, growth, measured = [], [], {}
    for o in c.optimizers():
        full, half = d.gaps(f"{o}/2bw"), d.gaps(f"{o}/2bw/steps=0.5x")
        g = need(ratio_check(f"{label(o)}: gap(full run) / gap(half run) < {GROWTH_TOL:g}",
                             pairs(half, full), GROWTH_TOL, "below", ratio_of_means), d,
                 f"{o}/2bw", f"{o}/2bw/steps=0.5x")
        growth.append(g)
        checks.append(g)
        for tag, key in (("full", f"{o}/2bw"), ("half", f"{o}/2bw/steps=0.5x")):
            ef_key = key.replace("2bw", "2bw+ef", 1)
            checks.append(need(side_check(f"{label(o)}: EF gain at the {tag} run > 0",
                                          paired(d.gaps(key), d.gaps(ef_key)), 0.0, "above"),
                               d, key, ef_key))
        measured[f"{label(o)}: gap half / full run"] = \
            f"{gap_interval(d, f'{o}/2bw/steps=0.5x').fmt()} / {gap_interval(d, f'{o}/2bw').fmt()}"
    return result(c.id, checks, measured=measured,
                  theory_check=conj("the gap does not grow with the horizon", growth))


def pipedream_depth(c: Claim, d: ClaimData) -> ClaimResult:
    xs, ys, counts, measured = [], [], {}, {}
    for p in (2, 3, 4):
        g = d.gaps(f"muon/pipedream P={p}")
        counts[p] = len(g)
        xs += [float(p)] * len(g)
        ys += list(g.values())
        measured[f"gap PipeDream P={p}"] = t_interval(list(g.values()))
    g2bw = d.gaps("muon/2bw")
    measured["gap 2BW (tau = 1 at every P)"] = t_interval(list(g2bw.values()))
    label_s = "slope of the PipeDream gap vs P > 0"
    levels = [p for p, n in counts.items() if n]
    if len(levels) >= 2:
        fit = fit_linear(np.stack([np.ones(len(xs)), np.asarray(xs)], axis=1), ys)
        n = min(counts[p] for p in levels)
        status, reason = decide(fit.coef[1], boundary=0.0, predicted="above", n_seeds=n)
        slope = Check(label=label_s, status=status, reason=reason, interval=fit.coef[1],
                      n_seeds=n)
    else:
        slope = Check(label=label_s, status=INCONCLUSIVE,
                      reason=f"not measured: gaps at {levels} only")
    slope = need(slope, d, *(f"muon/pipedream P={p}" for p in (2, 3, 4)))
    deep = need(welch_check("gap(PipeDream P=4) - gap(2BW) > 0",
                            d.gaps("muon/pipedream P=4"), g2bw, 0.0, "above"), d,
                "muon/pipedream P=4", "muon/2bw")
    return result(c.id, [slope, deep], measured=measured, theory_check=slope,
                  notes=("2BW's emulated delay is one step at every P: its run is the same "
                         "for every P (the real pipeline matches the emulator exactly, "
                         "tests/llm_validation/pipeline).",))


def dcasgd(c: Claim, d: ClaimData) -> ClaimResult:
    plain = d.vals("muon/2bw")
    width = margin(mean_gap(d, "muon/2bw"))
    checks = []
    for coef in DCASGD_COEFS:
        key = f"muon/2bw+dcasgd(c={coef:g})"
        checks.append(need(not_better_check(f"c = {coef:g}: val(DC-ASGD) - val(plain 2bw) "
                                            "not below 0", paired(d.vals(key), plain), width),
                           d, key, "muon/2bw"))
    return result(c.id, checks, measured={"gap plain 2bw": gap_interval(d, "muon/2bw"),
                                          "equivalence margin": width})


def ef_coefficient(c: Claim, d: ClaimData) -> ClaimResult:
    checks, theory, measured = [], [], {}
    for o in c.optimizers():
        k0, kh, k1 = f"{o}/2bw", f"{o}/2bw+ef(lam=0.5)", f"{o}/2bw+ef"
        v0, vh, v1 = d.vals(k0), d.vals(kh), d.vals(k1)
        if o == "normuon":
            checks.append(need(side_check("NorMuon: val(lam 0.5) - val(lam 0) < 0",
                                          paired(vh, v0), 0.0, "below"), d, kh, k0))
            checks.append(need(side_check("NorMuon: val(lam 0.5) - val(lam 1) < 0",
                                          paired(vh, v1), 0.0, "below"), d, kh, k1))
        else:
            checks.append(need(side_check(f"{label(o)}: val(lam 1) - val(lam 0.5) < 0",
                                          paired(v1, vh), 0.0, "below"), d, k1, kh))
        means = {lam: float(np.mean(list(v.values()))) for lam, v in
                 ((0.0, v0), (0.5, vh), (1.0, v1)) if v}
        if means:
            measured[f"{label(o)}: best lam measured"] = min(means, key=means.get)
        cos = d.mean_stat(k1, "cos_consecutive_update")
        if cos:
            mc = float(np.mean(list(cos.values())))
            measured[f"{label(o)}: best lam predicted (mean cos of consecutive updates)"] = mc
            side = "below" if mc > 0.75 else "above"
            theory.append(side_check(f"{label(o)}: val(lam 1) - val(lam 0.5) {side} 0 "
                                     f"(predicted best lam {mc:.2f})", paired(v1, vh), 0.0,
                                     side))
    return result(c.id, checks, measured=measured,
                  theory_check=conj("the better of lam 0.5 and 1 is the one nearer the mean "
                                    "cosine", theory) if theory else None)


def _transient(d: ClaimData, key: str, metric: str) -> dict[int, float]:
    """seed -> metric at the first statistics step after the switch - its last-half mean."""
    out = {}
    for r in d.records(key):
        start = int(r.config.get("delay", {}).get("sync_start", 0))
        steps, v = r.series(metric)
        after, late = v[steps >= start], v[steps >= r.steps / 2]
        if after.size and late.size:
            out[r.seed] = float(after[0] - late.mean())
    return out


def alignment(c: Claim, d: ClaimData) -> ClaimResult:
    checks, measured = [], {}
    for o in c.optimizers():
        key = f"{o}/2bw"
        cos = d.mean_stat(key, "cos_delayed_fresh")
        rel = d.mean_stat(key, "rel_err_delayed_fresh")
        measured[f"{label(o)}: mean cos(delayed, fresh)"] = t_interval(list(cos.values()))
        measured[f"{label(o)}: mean relative error"] = t_interval(list(rel.values()))
        if o == "adamw":
            continue
        checks.append(need(side_check(f"{label(o)}: mean cos > {ALIGNED_COS:g}", cos,
                                      ALIGNED_COS, "above"), d, key))
        checks.append(need(side_check(f"{label(o)}: mean relative error < {SMALL_REL_ERR:g}",
                                      rel, SMALL_REL_ERR, "below"), d, key))
        start = f"{o}/2bw+sync-start"
        checks.append(need(side_check(f"{label(o)}: relative error just after the switch - "
                                      "late mean > 0",
                                      _transient(d, start, "rel_err_delayed_fresh"), 0.0,
                                      "above"), d, start))
    return result(c.id, checks, measured=measured)


def grad_level_ef(c: Claim, d: ClaimData) -> ClaimResult:
    checks, measured = [], {}
    for o in c.optimizers():
        dg, du = d.diverged(f"{o}/2bw+grad-ef"), d.diverged(f"{o}/2bw+ef")
        n = min(len(dg), len(du))
        text = (f"gradient-level diverged {sum(dg.values())}/{len(dg)}, update-level "
                f"{sum(du.values())}/{len(du)}")
        measured[f"{label(o)}: diverged runs"] = text
        diff = paired(d.vals(f"{o}/2bw+grad-ef"), d.vals(f"{o}/2bw+ef"))
        if diff:
            measured[f"{label(o)}: val(grad-level) - val(update-level), finished runs"] = \
                t_interval(list(diff.values()))
        lbl = f"{label(o)}: gradient-level EF diverges, update-level does not"
        if n < MIN_SEEDS:
            status, why = INCONCLUSIVE, f"only {n} seed(s); a verdict needs >= {MIN_SEEDS}"
        elif not any(dg.values()):
            status, why = FAIL, "no gradient-level run diverged"
        elif all(dg.values()) and not any(du.values()):
            status, why = PASS, "every gradient-level run diverged, no update-level run did"
        else:
            status, why = INCONCLUSIVE, "mixed outcomes"
        checks.append(need(Check(label=lbl, status=status, reason=f"{why} ({text})",
                                 n_seeds=n), d, f"{o}/2bw+grad-ef", f"{o}/2bw+ef"))
    return result(c.id, checks, measured=measured,
                  notes=("diverged = a non-finite loss stopped the run, or its final "
                         "validation loss is above the one at the initial weights",))


def sync_phases(c: Claim, d: ClaimData) -> ClaimResult:
    checks, measured = [], {}
    for o in c.optimizers():
        g, gs, gc = (d.gaps(f"{o}/{m}") for m in ("2bw", "2bw+sync-start", "2bw+sync-cooldown"))
        checks.append(need(side_check(f"{label(o)}: gap(sync cooldown) - gap(2bw) < 0",
                                      paired(gc, g), 0.0, "below"), d, f"{o}/2bw+sync-cooldown",
                           f"{o}/2bw"))
        checks.append(need(side_check(f"{label(o)}: gap(sync start) - gap(sync cooldown) > 0",
                                      paired(gs, gc), 0.0, "above"), d, f"{o}/2bw+sync-start",
                           f"{o}/2bw+sync-cooldown"))
        for name, v in (("2bw", g), ("sync start", gs), ("sync cooldown", gc)):
            measured[f"{label(o)}: gap {name}"] = t_interval(list(v.values()))
        measured[f"{label(o)}: gap(sync cooldown) / gap(2bw)"] = ratio_interval(pairs(g, gc))
    return result(c.id, checks, measured=measured,
                  theory_check=conj("docs/theory.md trend 2's directions", checks))
