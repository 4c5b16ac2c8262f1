"""The ledger's checks decided as one family: Holm's family-wise control, BH, or per check.

Every leaf check of a ledger decides at the seeds policy's level (97.5%), so each one's error
is at most 5% over the policy's two looks, but the chance that *some* verdict of a 55-check
ledger is wrong is far larger. :func:`decide_family` decides the leaves of a set of statement
checks as one family, at a family-wise level ``alpha``.

Algorithm
    1. Collect the leaves of the statement checks (the parts of ``all`` / ``most``,
       recursively, depth first). Outside the family, keeping their status: ``divergence``
       (it counts outcomes: no p-value, :mod:`llm_validation.claims.decide.pvalues`) and leaves that
       no level can decide (not measured, a group missing, fewer than ``MIN_SEEDS`` seeds:
       their p-value is 1 whatever the data, so they could never be rejected and would only
       lower every other leaf's threshold).
    2. ``p_raw = min(1, LOOKS p_nom)`` with ``p_nom`` the nominal p-value
       (:func:`~llm_validation.claims.decide.pvalues.nominal_pvalue`) and :data:`LOOKS` the Bonferroni
       factor of the seeds policy's two looks (``1 / min(split, 1 - split)`` = 2,
       :mod:`llm_validation.claims.decide.sequential`): ``p_raw <= alpha`` exactly when the leaf
       decides at the policy's level ``1 - alpha / LOOKS`` = 97.5% (up to a tie at equality).
    3. Adjust ``p_raw`` over the family's ``K`` leaves (Holm, Benjamini-Hochberg or none,
       :mod:`llm_validation.validation.multiplicity`); a leaf is rejected when its adjusted
       p-value is <= ``alpha``.
    4. A rejected leaf is decided by :func:`~llm_validation.claims.decide.checks.at_level` at
       ``1 - l / LOOKS``, ``l`` its rejection level: Holm ``alpha / (K - rank + 1)``, BH
       ``alpha k* / K``, none ``alpha``. Its ``p_nom <= l / LOOKS``, so it decides there (pass
       or fail; at exact equality, a probability-0 tie, it reads inconclusive). A leaf not
       rejected is inconclusive, its reason giving both p-values and its per-check reading.
    5. Aggregates are rebuilt from their new parts with
       :func:`~llm_validation.claims.decide.checks.aggregate` (their params kept).

Assumptions
    Each leaf's ``p_nom`` is valid (normal per-seed values, independent seeds; see
    :mod:`~llm_validation.claims.decide.pvalues`). Holm's type I control holds under any dependence
    between leaves. Reading a rejected leaf by its direction (pass or fail) is covered by
    Shaffer (1980) / Finner (1999) for independent t statistics; the ledger's leaves share
    arms (one arm's gap enters several contrasts), so that part rests on the simulation
    (``tests/llm_validation/claims/test_family.py``, independent leaves with the committed
    tiny ledger's kinds and seed counts, every leaf at its least-favourable truth). The two
    looks: Bonferroni over the looks (``LOOKS``) and the simulated coverage of the
    data-dependent second look (:mod:`~llm_validation.claims.decide.sequential`).

Guarantee
    Holm: the probability of any wrong pass or fail among the family's leaves is at most
    ``alpha`` (simulated: 0.023 for the tiny ledger's 55 leaves at alpha 5%, against 0.74 for
    today's per-check 97.5%; docs/family.md). BH: the expected share of wrong verdicts among
    the decided ones is at most ``alpha`` under independence (Benjamini & Yekutieli 2005 for
    the intervals at ``1 - R alpha / K``). ``none`` is the per-check rule.

Reference
    S. Holm (1979), Scand. J. Statist. 6; Y. Benjamini & Y. Hochberg (1995), J. R. Stat. Soc.
    B 57; J. P. Shaffer (1980), Ann. Statist. 8; H. Finner (1999), Ann. Statist. 27;
    Y. Benjamini & D. Yekutieli (2005), JASA 100.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from llm_validation.claims.decide.checks import (GROUP_KINDS, PART_KINDS, Check, aggregate, at_level,
                                          with_missing)
from llm_validation.claims.decide.pvalues import decidable, nominal_pvalue
from llm_validation.claims.decide.sequential import DEFAULT_POLICY, SeedPolicy
from llm_validation.validation.inference import Interval, level_text
from llm_validation.validation.multiplicity import METHODS, adjusted, rejection_levels
from llm_validation.validation.verdict import INCONCLUSIVE, MIN_SEEDS, STATUSES

__all__ = ["looks_factor", "LOOKS", "RULES", "leaves", "check_from_dict", "outside_reason",
           "redecide", "rebuild", "status_counts", "decide_family"]


def looks_factor(policy: SeedPolicy = DEFAULT_POLICY) -> float:
    """The Bonferroni factor of the seeds policy's looks: ``alpha / min(alpha_1, alpha_2)``
    = ``1 / min(split, 1 - split)`` (2 for the halves). ``LOOKS p_nom <= alpha`` holds exactly
    when ``p_nom`` is within the smaller look's share of ``alpha``."""
    return 1.0 / min(policy.split, 1.0 - policy.split)


#: The default seeds policy's factor (2.0: two looks, alpha split in halves).
LOOKS = looks_factor(DEFAULT_POLICY)
#: How each method's rule reads in a reason.
RULES = {"holm": "Holm's family-wise control",
         "bh": "Benjamini-Hochberg's false-discovery-rate control",
         "gatekeeping": "gatekeeping (central statements first)",
         "none": "no adjustment"}


def leaves(c: Check) -> list[Check]:
    """The leaf checks of ``c``, depth first (``c`` itself when it is not an aggregate)."""
    if c.kind in PART_KINDS:
        return [leaf for p in c.parts for leaf in leaves(p)]
    return [c]


def _seed_map(m: Mapping[str, Any]) -> dict[int, float]:
    """A stored per-seed mapping (string seeds, numbers or their strings) as seed -> float."""
    return {int(k): float(v) for k, v in m.items()}


def check_from_dict(d: Mapping[str, Any]) -> Check:
    """A :class:`~llm_validation.claims.decide.checks.Check` from its ``to_dict()`` (``claims.json``):
    seeds back to ints, ``"nan"`` / ``"inf"`` strings back to floats, parts recursively."""
    return Check(label=d["label"], kind=d["kind"], status=d["status"], reason=d["reason"],
                 interval=Interval.from_dict(d["interval"]) if d.get("interval") else None,
                 n_seeds=int(d.get("n_seeds", 0)), params=dict(d.get("params", {})),
                 samples=_seed_map(d.get("samples", {})),
                 inputs={k: _seed_map(v) for k, v in d.get("inputs", {}).items()},
                 weights={k: float(w) for k, w in d.get("weights", {}).items()},
                 parts=tuple(check_from_dict(p) for p in d.get("parts", ())),
                 seeds_needed=dict(d["seeds_needed"]) if d.get("seeds_needed") else None)


def outside_reason(c: Check) -> str:
    """Why a leaf is outside the family."""
    if c.kind == "divergence":
        return "divergence counts outcomes: no p-value"
    sizes = [len(v) for v in c.inputs.values()] if c.kind in GROUP_KINDS else [len(c.samples)]
    if not sizes or max(sizes) == 0:
        return "not measured"
    if min(sizes) == 0 or len(sizes) < 2 and c.kind in GROUP_KINDS:
        return "a group not measured"
    return f"only {min(sizes)} seed(s); a verdict needs >= {MIN_SEEDS}"


def redecide(c: Check, per: Check, *, p_raw: float, p_adj: float, level: float,
              alpha: float, method: str, k: int, looks: float) -> Check:
    """Leaf ``c`` decided at ``1 - level / looks`` when rejected (``level`` not NaN), else
    inconclusive (``per``: ``c`` at the per-check level, shown in the reason); the family's
    numbers go into its params."""
    family = {"p_raw": p_raw, "p_adj": p_adj, "method": method, "family_size": k,
              "alpha": alpha}
    numbers = f"adjusted p = {p_adj:.2g}, raw p = {p_raw:.2g}"
    if np.isnan(level):
        out = per
        if method != "none":
            out = Check(**{**per.__dict__, "status": INCONCLUSIVE, "reason": (
                f"not decided under {RULES[method]} at {100 * alpha:.3g}% ({numbers}); per "
                f"check at {level_text(1.0 - alpha / looks)}: {per.status}")})
        else:
            out = out.with_reason(f"{out.reason} ({numbers})")
    else:
        out = at_level(c, 1.0 - level / looks)
        rule = f"{RULES[method]} at {100 * alpha:.3g}%"
        out = out.with_reason(f"{out.reason} ({rule}: {numbers})")
    return Check(**{**out.__dict__, "params": {**out.params, **family}})


def rebuild(c: Check, new: Mapping[int, Check], counter: list[int]) -> Check:
    """``c`` with its leaves replaced by ``new`` (index in depth-first order -> leaf) and
    its aggregates decided again from their new parts."""
    if c.kind not in PART_KINDS:
        i = counter[0]
        counter[0] += 1
        return new.get(i, c)
    parts = tuple(rebuild(p, new, counter) for p in c.parts)
    agg = aggregate(c.label, c.kind, parts)
    out = Check(**{**c.__dict__, "status": agg.status, "reason": agg.reason, "parts": parts,
                   "n_seeds": agg.n_seeds})
    return with_missing(out, str(c.params.get("missing", "")))


def status_counts(checks: Sequence[Check]) -> dict[str, int]:
    """Checks per status."""
    return {s: sum(c.status == s for c in checks) for s in STATUSES}


def decide_family(checks: Sequence[Check], alpha: float = 0.05, method: str = "holm", *,
                  looks: float = LOOKS) -> tuple[list[Check], dict[str, Any]]:
    """The statement ``checks`` with their leaves decided as one family (module docstring).

    Returns the rebuilt checks, in the order given, and a summary: ``method``, ``alpha``,
    ``looks``, ``family_size`` (K), ``per_check_level`` (``1 - alpha / looks``), ``decided``
    (the family's leaves per status under ``method``), ``per_check`` (per status at the
    per-check level) and ``outside`` (label, kind, why, for each leaf left out).
    """
    if method not in METHODS:
        raise ValueError(f"decide_family: method={method!r} is not one of {list(METHODS)}")
    if not 0 < alpha < 1:
        raise ValueError(f"decide_family: alpha={alpha!r} must be in (0, 1)")
    if not looks >= 1:
        raise ValueError(f"decide_family: looks={looks!r} must be >= 1")
    flat = [leaf for c in checks for leaf in leaves(c)]
    inside = [i for i, c in enumerate(flat) if decidable(c)]
    k = len(inside)
    p_raw = np.minimum(1.0, looks * np.array([nominal_pvalue(flat[i]) for i in inside],
                                             dtype=np.float64))
    p_adj = adjusted(p_raw, method)
    levels = rejection_levels(p_raw, alpha, method)
    per_check = [at_level(flat[i], 1.0 - alpha / looks) for i in inside]
    new = {i: redecide(flat[i], per_check[j], p_raw=float(p_raw[j]), p_adj=float(p_adj[j]),
                        level=float(levels[j]), alpha=alpha, method=method, k=k, looks=looks)
           for j, i in enumerate(inside)}
    counter = [0]
    out = [rebuild(c, new, counter) for c in checks]
    summary = {"method": method, "alpha": alpha, "looks": looks, "family_size": k,
               "per_check_level": 1.0 - alpha / looks,
               "decided": status_counts(list(new.values())), "per_check": status_counts(per_check),
               "outside": [{"label": c.label, "kind": c.kind, "why": outside_reason(c)}
                           for i, c in enumerate(flat) if i not in new]}
    return out, summary
