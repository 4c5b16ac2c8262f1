"""Leave-one-out evaluation of the delay-cost predictors over a ledger's pairs.

Algorithm
    For each hold-out kind, split the (delayed, synchronous) pairs into folds; for each fold fit
    the predictors on the other folds only and predict every held-out pair's final gap:

    - ``horizon``: one fold per horizon (steps);
    - ``lr``: one fold per (optimizer, learning rate);
    - ``optimizer``: one fold per optimizer.

    The empirical predictor (:func:`~llm_validation.advice.horizon.predict_empirical`) uses the
    training pairs of the held-out pair's optimizer and mode, or, when there are none, those of
    its family (:data:`~llm_validation.advice.delay_term.FAMILIES`); the theory predictor
    (:func:`~llm_validation.advice.delay_term.predict_theory`) is calibrated on the training
    pairs of the family and mode and applied to the held-out pair's synchronous partner. A
    predicted gap fraction becomes a gap in nats with the partner's loss decrease
    ``v_0 - v_T`` (the synchronous baseline is what a user runs anyway; only the delayed run is
    predicted). A prediction *hits* when it and the measured gap are both positive and within a
    factor :data:`FACTOR` of each other.

Assumptions
    The held-out pairs are never seen by the fits of their fold (nothing is tuned on them).

Guarantee
    Every held-out pair is either predicted or counted as "no prediction" (with the reason);
    the hit rate is given over the predicted pairs and over all pairs.

Reference
    Leave-one-group-out cross-validation (e.g. Hastie, Tibshirani & Friedman, ESL 7.10).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from llm_validation.advice.delay_term import FAMILIES, calibrate, predict_theory
from llm_validation.advice.horizon import predict_empirical
from llm_validation.advice.pilot import DelayPair

__all__ = ["FACTOR", "HOLDOUTS", "WORST", "hit", "folds", "predict_pair", "evaluate"]

#: The goal's tolerance: predicted within a factor 2 of the measured gap.
FACTOR = 2.0
HOLDOUTS = ("horizon", "lr", "optimizer")
#: Worst misses listed per predictor and hold-out kind.
WORST = 5


def hit(predicted: float, measured: float, factor: float = FACTOR) -> bool:
    """Both positive and ``1/factor <= predicted / measured <= factor``."""
    if not (predicted > 0 and measured > 0):
        return False
    return 1.0 / factor <= predicted / measured <= factor


def folds(pairs: Sequence[DelayPair], kind: str) -> list[tuple[str, list[int]]]:
    """``(label, indices of the held-out pairs)`` per fold of ``kind`` (:data:`HOLDOUTS`)."""
    if kind not in HOLDOUTS:
        raise ValueError(f"unknown hold-out {kind!r}; choose from {', '.join(HOLDOUTS)}")
    key: Callable[[DelayPair], str] = {
        "horizon": lambda p: f"{p.horizon} steps",
        "lr": lambda p: f"{p.optimizer} lr={p.delayed.lr:g}",
        "optimizer": lambda p: p.optimizer,
    }[kind]
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        groups.setdefault(key(p), []).append(i)
    return sorted(groups.items())


def predict_pair(p: DelayPair, train: Sequence[DelayPair]) -> dict[str, Any]:
    """Both predictors' gap (nats) for the held-out pair ``p`` from ``train`` (None with a
    reason when a predictor has nothing to fit on)."""
    out: dict[str, Any] = {}
    own = [q for q in train if q.optimizer == p.optimizer and q.mode == p.mode]
    if not own:
        own = [q for q in train if q.mode == p.mode
               and FAMILIES.get(q.optimizer) == FAMILIES.get(p.optimizer)]
    try:
        g = predict_empirical(own, p.horizon).estimate if own else None
    except ValueError:
        g = None
    out["empirical"] = None if g is None else g * p.loss_drop
    cal = calibrate(train, p.optimizer, p.mode)
    try:
        g = predict_theory([p.sync], cal).estimate if cal.n else None
    except ValueError:
        g = None
    out["theory"] = None if g is None else g * p.loss_drop
    return out


def _summary(rows: list[dict[str, Any]], predictor: str) -> dict[str, Any]:
    done = [r for r in rows if r[predictor] is not None]
    hits = [r for r in done if hit(r[predictor], r["measured"])]

    def miss(r: dict[str, Any]) -> float:
        a, b = r[predictor], r["measured"]
        return abs(math.log(a / b)) if a > 0 and b > 0 else math.inf
    worst = sorted(done, key=miss, reverse=True)[:WORST]
    return {"pairs": len(rows), "predicted": len(done), "hits": len(hits),
            "hit_rate": len(hits) / len(done) if done else None,
            "hit_rate_all": len(hits) / len(rows) if rows else None,
            "measured_nonpositive": sum(r["measured"] <= 0 for r in rows),
            "worst": [{"delayed": r["delayed"], "fold": r["fold"], "measured": r["measured"],
                       "predicted": r[predictor]} for r in worst]}


def evaluate(pairs: Sequence[DelayPair], kinds: Sequence[str] = HOLDOUTS,
             progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Per hold-out kind and predictor: pairs, predicted, hits, hit rates, worst misses; plus
    every row (held-out pair, fold, measured and predicted gaps)."""
    result: dict[str, Any] = {"factor": FACTOR, "pairs": len(pairs), "holdouts": {}}
    all_folds = [(k, lab, idx) for k in kinds for lab, idx in folds(pairs, k)]
    for n, (kind, label, idx) in enumerate(all_folds):
        held = set(idx)
        train = [q for j, q in enumerate(pairs) if j not in held]
        rows = result["holdouts"].setdefault(kind, {"rows": []})["rows"]
        for i in idx:
            p = pairs[i]
            rows.append({"delayed": p.delayed.name, "mode": p.mode, "fold": label,
                         "measured": p.gap, **predict_pair(p, train)})
        if progress is not None:
            progress(n + 1, len(all_folds), f"{kind}: {label}")
    for kind, block in result["holdouts"].items():
        for predictor in ("empirical", "theory"):
            block[predictor] = _summary(block["rows"], predictor)
    return result
