"""Choosing the transfer law on held-out cells: another batch, another size at the same step
count, another lr, a longer horizon.

A *cell* is one training setting of the pilot: model size ``N``, step count ``T`` and the lr
relative to the size's tuned lr (:attr:`~llm_validation.advice.pilot.DelayPair.lr_rel`); its
pairs are that setting's seeds, per optimizer and mode. A designed pilot (the delay-law ledger's
runs) holds several step counts per size at the tuned lr, one step count shared by several
sizes, and cells at another lr.

Algorithm
    Four hold-out kinds (:data:`KINDS`), each a set of folds; a fold holds out a group of
    pairs, fits every law on all the other pairs of the held-out pair's optimizer and mode
    (``theory``: calibrated on all the other pairs of its family) and predicts each held-out
    pair at its own size, steps, batch and lr ratio (:class:`~llm_validation.advice.transfer.
    Target`):

    - ``batch``: per size with two step counts or more at the tuned lr, each step count that is
      not the size's longest (the same model and, at a fixed tokens-per-parameter budget,
      another batch);
    - ``horizon``: per such size, its longest step count (extrapolation in ``T``);
    - ``size``: at the step count shared by the most sizes, with three sizes or more there,
      each size in turn, *every* pair of that size held out and its shared-step pairs predicted
      (extrapolation or interpolation in ``N`` at fixed ``T``);
    - ``lr``: each cell at another lr ratio than the tuned one.

    Scores per kind and law (:func:`~llm_validation.advice.transfer_choice.score_rows`): hits
    within a factor :data:`~llm_validation.advice.loo.FACTOR` and the mean absolute log error,
    on either cost (``quantity``: the gap share or the compute-equivalent lag). Beside them the
    *seed reference* (:data:`~llm_validation.advice.transfer_choice.SEED_REFERENCE`): each
    held-out pair predicted by the mean of its own arm's other seeds, i.e. by the cell's
    measured mean, what no law fitted elsewhere can know; its score is the seeds' own scatter.

    The rule that picks the law (:func:`choose_on_cells`), fixed before any designed pilot was
    scored: on the gap share (the cost advise converts into a time), among the laws that
    predicted at least :data:`COVERAGE` of every scored kind's transferable held-out pairs
    (those whose optimizer and mode has pairs in the fold's fit), the smallest mean
    over kinds of the kind's mean absolute log error, each kind's error taken over the same
    pairs for every such law (those all of them predicted above zero, measured above zero), so
    each kind weighs the same however many pairs it holds and no law is scored on easier
    pairs; a tie within :data:`~llm_validation.delay_law.laws.TIE_LOG_ERROR` goes to fewer
    coefficients (:data:`COEFFICIENTS`), then to
    :data:`~llm_validation.advice.transfer.ALL_LAWS`' order.
    It applies when at least :data:`MIN_KINDS` kinds can be scored; otherwise the size-and-
    horizon choice of :mod:`~llm_validation.advice.transfer_choice` stands. A law is *ruled out*
    when fewer than :data:`~llm_validation.advice.transfer_choice.RULE_OUT_HIT_RATE` of its
    predicted pairs, pooled over the kinds, hit.

    The goal (:func:`goal`), per kind: the chosen law's share of held-out pairs within the
    factor at least the seed reference's minus :data:`GOAL_MARGIN`. The reference predicts each
    pair by the mean of the cell's other seeds; a law that knew every cell's mean exactly would
    score about the same (slightly better: no noise in its centre), so a law short of it by
    more than the margin misses something the cells' means carry.

Assumptions
    The tuned lr of a size is the pilot's most common lr there
    (:func:`~llm_validation.advice.pilot.reference_lrs`); cells are identified by
    ``(N, T, lr ratio)`` with the ratio rounded to :data:`LR_DIGITS` significant digits. The
    folds are not independent (one seed's runs share its data order), so the scores describe
    this pilot, not a sampling distribution.

Guarantee
    Nothing of a held-out group enters the fits of its fold; every held-out pair is predicted
    by each law or counted as not predicted.

Reference
    Leave-one-group-out cross-validation (ESL 7.10); docs/advise.md, "Choosing the law on
    held-out cells".
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from llm_validation.advice.loo import FACTOR, hit
from llm_validation.advice.transfer import ALL_LAWS, FORMS
from llm_validation.advice.transfer_choice import (RULE_OUT_HIT_RATE, SEED_REFERENCE,
                                                   pair_target, predict_pair, score_rows,
                                                   siblings_mean)
from llm_validation.delay_law.laws import TIE_LOG_ERROR

__all__ = ["KINDS", "MIN_KINDS", "COVERAGE", "GOAL_MARGIN", "LR_DIGITS", "COEFFICIENTS",
           "cell_of", "cell_folds", "score_cells", "choose_on_cells", "goal", "drop_rows",
           "cell_summary"]

KINDS = ("batch", "size", "lr", "horizon")
#: The held-out cells decide the law only when at least two kinds can be scored: one kind
#: alone (e.g. only longer horizons) says nothing about the other variables a user moves.
MIN_KINDS = 2
#: A law is compared only if it predicts at least this share of every scored kind's
#: transferable held-out pairs (those whose optimizer and mode has pairs in the fold's fit; a
#: pair of an arm the pilot ran in one cell only can be predicted by no fitted law, only by
#: ``theory``'s family calibration, and says nothing about the laws): a law that cannot follow
#: what the user changes for a tenth of them (an lr it never saw move, a size it never saw
#: vary) is not one advise can use there.
COVERAGE = 0.9
#: The goal's margin below the seed reference's hit rate: with 16-40 held-out pairs a kind's
#: hit rate moves in steps of 2.5-6 points, and a law fitted elsewhere carries its own fitting
#: noise; 10 points is two to four such steps.
GOAL_MARGIN = 0.10
#: Significant digits of the lr ratio that identify a cell (a ratio of two stored floats).
LR_DIGITS = 6
#: Coefficients of each law (the tie-break toward simpler laws): ``theory`` is one calibration
#: constant, the forms their intercept and exponents.
COEFFICIENTS = {"steps": 2, "tokens_per_param": 2, "joint": 3, "theory": 1,
                **{name: 1 + len(law.features) for name, law in FORMS.items()}}


def _ratio(p: Any) -> float:
    r = p.lr_rel if p.lr_rel is not None else 1.0
    return float(f"{r:.{LR_DIGITS}g}")


def cell_of(p: Any) -> tuple[Any, int, float]:
    """``(N, T, lr ratio)`` of a pair (module docstring)."""
    return (p.n_params, p.horizon, _ratio(p))


def cell_folds(pairs: Sequence[Any], kind: str
               ) -> list[tuple[str, list[int], list[int]]] | str:
    """``(label, held-out indices, scored indices)`` per fold of ``kind`` (:data:`KINDS`), or
    the reason the pilot has no such fold (a string)."""
    if kind not in KINDS:
        raise ValueError(f"unknown hold-out {kind!r}; choose from {', '.join(KINDS)}")
    tuned = [i for i, p in enumerate(pairs) if _ratio(p) == 1.0 and p.n_params]
    steps_of: dict[Any, set[int]] = {}
    for i in tuned:
        steps_of.setdefault(pairs[i].n_params, set()).add(pairs[i].horizon)
    folds = []
    if kind in ("batch", "horizon"):
        for n, ts in sorted(steps_of.items()):
            if len(ts) < 2:
                continue
            chosen = [max(ts)] if kind == "horizon" else sorted(ts)[:-1]
            for t in chosen:
                idx = [i for i in tuned if cell_of(pairs[i])[:2] == (n, t)]
                folds.append((f"N={n:,} at {t} steps", idx, idx))
        if not folds:
            return "no model size with two step counts at its tuned lr"
    elif kind == "size":
        sizes_at: dict[int, set[Any]] = {}
        for n, ts in steps_of.items():
            for t in ts:
                sizes_at.setdefault(t, set()).add(n)
        if not sizes_at or max(len(v) for v in sizes_at.values()) < 3:
            return "no step count shared by three model sizes at their tuned lr"
        shared = max(sizes_at, key=lambda t: (len(sizes_at[t]), -t))
        for n in sorted(sizes_at[shared]):
            held = [i for i, p in enumerate(pairs) if p.n_params == n]
            scored = [i for i in tuned if cell_of(pairs[i])[:2] == (n, shared)]
            folds.append((f"N={n:,} at {shared} steps", held, scored))
    else:
        cells = sorted({cell_of(p) for p in pairs if _ratio(p) != 1.0 and p.n_params},
                       key=lambda c: (c[0], c[1], c[2]))
        for c in cells:
            idx = [i for i, p in enumerate(pairs) if cell_of(p) == c]
            folds.append((f"N={c[0]:,} at {c[1]} steps, lr x{c[2]:g}", idx, idx))
        if not folds:
            return "no cell at another lr than its size's tuned one"
    return folds


def score_cells(pairs: Sequence[Any], quantity: str = "share",
                laws: Sequence[str] = ALL_LAWS,
                progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Per kind (:data:`KINDS`): its folds' labels and, per law and for
    :data:`~llm_validation.advice.transfer_choice.SEED_REFERENCE`, the score of
    :func:`~llm_validation.advice.transfer_choice.score_rows` over the held-out pairs of every
    fold, and every held-out row under ``_rows`` (:func:`drop_rows` removes them); ``skipped``
    with the reason when the pilot has no such fold. Pairs without the ``quantity`` (no compute
    frontier for the lag) are left out first."""
    use = [p for p in pairs if p.value(quantity) is not None]
    out: dict[str, Any] = {"quantity": quantity, "factor": FACTOR, "laws": list(laws),
                           "pairs": len(use)}
    plan = {k: cell_folds(use, k) for k in KINDS}
    total = sum(len(v) for v in plan.values() if not isinstance(v, str))
    done = 0
    for kind, folds in plan.items():
        if isinstance(folds, str):
            out[kind] = {"skipped": folds}
            continue
        table = []
        for label, held, scored in folds:
            out_of_fit = set(held)
            train = [q for j, q in enumerate(use) if j not in out_of_fit]
            arms = {(q.optimizer, q.mode) for q in train}
            # a fitted law reads a pair only through its arm and its target, which the seeds of
            # one cell share: fit it once per (law, arm, target) in this fold; ``theory`` reads
            # each pair's own synchronous partner and is predicted per pair
            fitted: dict[tuple[Any, ...], float | None] = {}

            def predict(law: str, p: Any) -> float | None:
                if law == "theory":
                    return predict_pair(law, p, train, quantity)
                key = (law, p.optimizer, p.mode, pair_target(p))
                if key not in fitted:
                    fitted[key] = predict_pair(law, p, train, quantity)
                return fitted[key]
            for i in scored:
                p = use[i]
                table.append({"delayed": p.delayed.name, "fold": label, "optimizer": p.optimizer,
                              "mode": p.mode, "measured": p.value(quantity),
                              "transferable": (p.optimizer, p.mode) in arms,
                              SEED_REFERENCE: siblings_mean(use, i, scored, quantity),
                              **{law: predict(law, p) for law in laws}})
            done += 1
            if progress is not None:
                progress(done, total, f"{quantity} {kind}: {label}")
        out[kind] = {"folds": [label for label, _, _ in folds],
                     **{law: score_rows(table, law) for law in laws},
                     SEED_REFERENCE: score_rows(table, SEED_REFERENCE), "_rows": table}
    return out


def _coverage(table: Sequence[dict[str, Any]], law: str) -> float:
    """The share of the transferable rows (their optimizer and mode has pairs in the fold's
    fit) that ``law`` predicted; 1 when there is none."""
    rows = [r for r in table if r["transferable"]]
    return sum(r[law] is not None for r in rows) / len(rows) if rows else 1.0


def _common_error(table: Sequence[dict[str, Any]], laws: Sequence[str]) -> dict[str, float]:
    """Each law's mean ``|log(pred / measured)|`` over the rows every law of ``laws`` predicted
    above zero and whose measured value is above zero (the same pairs for every law)."""
    common = [r for r in table if r["measured"] > 0
              and all(r[law] is not None and r[law] > 0 for law in laws)]
    if not common:
        return {}
    return {law: sum(abs(math.log(r[law] / r["measured"])) for r in common) / len(common)
            for law in laws}


def choose_on_cells(scores: dict[str, Any]) -> dict[str, Any] | None:
    """The law the held-out cells choose (module docstring), the laws not ruled out and the
    reason; None when fewer than :data:`MIN_KINDS` kinds were scored. Needs the rows
    (:func:`score_cells` keeps them under ``_rows`` for this)."""
    kinds = [k for k in KINDS if "skipped" not in scores[k]]
    if len(kinds) < MIN_KINDS:
        return None
    laws = scores["laws"]
    eligible = [law for law in laws if all(_coverage(scores[k]["_rows"], law) >= COVERAGE
                                           for k in kinds)]
    ruled_out = {}
    for law in laws:
        blocks = [scores[k][law] for k in kinds]
        pred, hits = sum(b["predicted"] for b in blocks), sum(b["hits"] for b in blocks)
        if pred and hits / pred < RULE_OUT_HIT_RATE:
            ruled_out[law] = (f"{hits}/{pred} held-out cell pairs within a factor {FACTOR:g} "
                              f"(< {RULE_OUT_HIT_RATE:.0%})")
    per_kind = {k: _common_error(scores[k]["_rows"], eligible) for k in kinds}
    used = [k for k in kinds if per_kind[k]]
    kept = [law for law in laws if law not in ruled_out]
    if not eligible or not used:
        return {"law": None, "reason": f"no law predicted {COVERAGE:.0%} of every kind's "
                                       "held-out pairs", "kinds": kinds, "mean_log_error": {},
                "eligible": eligible, "not_ruled_out": kept, "ruled_out": ruled_out}
    err = {law: sum(per_kind[k][law] for k in used) / len(used) for law in eligible}
    best = min(err.values())
    tied = [law for law in eligible if err[law] <= best + TIE_LOG_ERROR]
    law = min(tied, key=lambda x: (COEFFICIENTS[x], laws.index(x)))
    return {"law": law, "kinds": used, "mean_log_error": err, "eligible": eligible,
            "reason": (f"smallest mean held-out log error over the {len(used)} kinds of "
                       f"held-out cells ({', '.join(used)}): {err[law]:.3f}"
                       + (f" (tied within {TIE_LOG_ERROR:g} with "
                          f"{', '.join(x for x in tied if x != law)}; fewer coefficients)"
                          if len(tied) > 1 else "")),
            "not_ruled_out": kept, "ruled_out": ruled_out}


def goal(scores: dict[str, Any], law: str) -> dict[str, Any]:
    """Per scored kind, over its transferable held-out pairs (the rows a fitted law can be asked
    about, :data:`COVERAGE`): ``law``'s share within the factor (a pair it did not predict is a
    miss), the seed reference's share on the same pairs, and whether the goal (module
    docstring) is met. Needs the rows of :func:`score_cells`."""
    out = {}
    for kind in KINDS:
        block = scores[kind]
        if "skipped" in block:
            continue
        rows = [r for r in block["_rows"] if r["transferable"]]
        if not rows:
            continue

        def rate(key: str) -> float:
            return sum(r[key] is not None and hit(r[key], r["measured"]) for r in rows) / len(rows)
        mine, reach = rate(law), rate(SEED_REFERENCE)
        out[kind] = {"pairs": len(rows), "hit_rate": mine, "seed_reference": reach,
                     "goal": max(0.0, reach - GOAL_MARGIN), "met": mine >= reach - GOAL_MARGIN}
    return out


def drop_rows(scores: dict[str, Any], keep: bool = False) -> dict[str, Any]:
    """``scores`` of :func:`score_cells` without the ``_rows`` (or with them as ``rows`` when
    ``keep``), as printed."""
    out = dict(scores)
    for kind in KINDS:
        if kind in out and "_rows" in out[kind]:
            block = dict(out[kind])
            rows = block.pop("_rows")
            if keep:
                block["rows"] = rows
            out[kind] = block
    return out


def cell_summary(pairs: Sequence[Any], rows: bool = False,
                 progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Both quantities' scores (:func:`score_cells`), the choice on the gap share
    (:func:`choose_on_cells`), the choice on the lag beside it, and the goal per kind
    (:func:`goal`); ``rows=True`` keeps every held-out pair's predictions."""
    share = score_cells(pairs, "share", progress=progress)
    lag = score_cells(pairs, "lag", progress=progress)
    choice = choose_on_cells(share)
    law = None if choice is None else choice["law"]
    return {"share": drop_rows(share, rows), "lag": drop_rows(lag, rows), "choice": choice,
            "lag_choice": choose_on_cells(lag),
            "goal": None if law is None else goal(share, law)}
