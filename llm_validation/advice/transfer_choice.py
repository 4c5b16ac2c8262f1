"""Choosing the transfer law on held-out sizes and horizons, in the direction advise extrapolates.

Algorithm
    Two hold-outs (:data:`HELD_OUT`), each one fold:

    - ``largest_size``: the pairs of the largest model size are held out; every law is fitted on
      the smaller sizes only (per optimizer and mode) and predicts each held-out pair at its own
      size, steps and tokens per step;
    - ``longest_horizon``: per size, the pairs at that size's longest horizon are held out and
      predicted from the rest.

    ``theory`` is calibrated on the training pairs of the family and mode and applied to the
    held-out pair's synchronous partner (the synchronous run a user has anyway). Per law and
    hold-out: the pairs, how many the law predicted, the *hits* (predicted and measured gap
    fraction both positive and within a factor :data:`~llm_validation.advice.loo.FACTOR`,
    :func:`~llm_validation.advice.loo.hit`) and the mean absolute log error ``|log(pred/meas)|``.

    The choice (:func:`choose`): with at least two sizes, the law with the most hits on
    ``largest_size`` (ties: the smaller mean log error, then :data:`~.transfer.LAWS`' order);
    with one size the transfer across sizes is not identified and advise falls back to the
    horizon law ``steps`` (and says so). A law is *ruled out* when, on the deciding hold-out
    (``largest_size`` when it exists, else ``longest_horizon``), it predicted pairs and fewer
    than :data:`RULE_OUT_HIT_RATE` of them hit; a law never tested is not ruled out.

    The chosen law's score on ``largest_size`` is the best of the laws on that fold, so it reads
    high; :func:`confirmation` scores it again on a fold that played no part in the choice (the
    next largest size from the sizes below it, the largest left out), where the pilot has three
    sizes or more.

Assumptions
    One law for the whole pilot (chosen on the pairs of every optimizer and mode pooled; each
    fit is still per optimizer and mode): the largest size's few seeds per arm could not choose
    per arm. The held-out sizes are the pilot's: a win over a 2.4x step in size says little about
    a 1000x one (advise flags that as an extrapolation).

Guarantee
    Every held-out pair is predicted by each law or counted as not predicted; nothing of a
    held-out pair enters the fits of its fold.

Reference
    Leave-one-group-out cross-validation (ESL 7.10); docs/advise.md, "Transfer across sizes".
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from llm_validation.advice.loo import FACTOR, hit
from llm_validation.advice.transfer import LAWS, NotIdentified, Target, predict_law

__all__ = ["HELD_OUT", "RULE_OUT_HIT_RATE", "FALLBACK", "GOAL", "SEED_REFERENCE",
           "held_out_split", "pair_target", "predict_pair", "arm_key", "siblings_mean",
           "score_rows", "score_laws",
           "choose", "confirmation", "transfer_summary"]

HELD_OUT = ("largest_size", "longest_horizon")
#: A law whose held-out hit rate is below one half misses by more than a factor 2 on most
#: held-out pairs: worse than a coin at the goal's tolerance, so its spread is not counted.
RULE_OUT_HIT_RATE = 0.5
#: The law used when the pilot has one size (the transfer across sizes is not identified).
FALLBACK = "steps"
#: The goal: the chosen law within a factor 2 on >= 80% of held-out largest-size pairs
#: (the leave-one-out goal of docs/advise.md).
GOAL = 0.8
#: Worst misses listed per law and hold-out.
WORST = 3
#: The key of the leave-one-seed-out reference of :func:`score_laws` (not a law).
SEED_REFERENCE = "seed_reference"


def held_out_split(pairs: Sequence[Any], kind: str) -> tuple[list[int], str] | str:
    """(indices of the held-out pairs, label) of ``kind`` (:data:`HELD_OUT`), or the reason
    there is no such fold (a string)."""
    if kind == "largest_size":
        sizes = sorted({p.n_params for p in pairs if p.n_params})
        if len(sizes) < 2:
            return ("one model size in the pilot" if sizes else
                    "the pilot's model sizes are unknown")
        return [i for i, p in enumerate(pairs) if p.n_params == sizes[-1]], f"N={sizes[-1]:,}"
    if kind == "longest_horizon":
        longest: dict[Any, int] = {}
        for p in pairs:
            longest[p.n_params] = max(longest.get(p.n_params, 0), p.horizon)
        idx = [i for i, p in enumerate(pairs) if p.horizon == longest[p.n_params]
               and sum(q.n_params == p.n_params and q.horizon < p.horizon for q in pairs)]
        if not idx:
            return "one horizon per size in the pilot"
        label = ", ".join(f"{T} steps" + (f" at N={n:,}" if n else "")
                          for n, T in sorted(longest.items(), key=lambda kv: kv[0] or 0))
        return idx, label
    raise ValueError(f"unknown hold-out {kind!r}; choose from {', '.join(HELD_OUT)}")


def pair_target(p: Any) -> Target:
    """The run of pair ``p`` as a law's target: its steps (stated), batch, size and lr ratio
    against its size's tuned lr (1 when the pilot does not say which that is)."""
    ratio = p.lr_rel if p.lr_rel is not None else 1.0
    return Target(steps=p.horizon, tokens_per_step=p.delayed.tokens_per_step,
                  n_params=p.n_params, lr_ratio=ratio,
                  pilot_lr=p.lr_ref if p.lr_ref is not None else p.delayed.lr)


def predict_pair(law: str, p: Any, train: Sequence[Any], quantity: str = "share"
                 ) -> float | None:
    """``law`` fitted on ``train``'s pairs of ``p``'s optimizer and mode (``theory``: calibrated
    on all of ``train``) and read at ``p`` (:func:`pair_target`); None when it cannot be."""
    own = [q for q in train if q.optimizer == p.optimizer and q.mode == p.mode]
    if law != "theory" and not own:
        return None
    try:
        return predict_law(law, own, pair_target(p), calibration_pairs=train, syncs=[p.sync],
                           optimizer=p.optimizer, mode=p.mode, quantity=quantity).estimate
    except NotIdentified:
        return None


def score_rows(rows: list[dict[str, Any]], law: str) -> dict[str, Any]:
    """Pairs / predicted / hits / hit rates / mean absolute log error / worst misses of the
    predictor ``law`` over ``rows`` (each with ``measured`` and the predictor's value)."""
    done = [r for r in rows if r[law] is not None]
    hits = [r for r in done if hit(r[law], r["measured"])]
    errs = [abs(math.log(r[law] / r["measured"])) for r in done
            if r[law] > 0 and r["measured"] > 0]
    worst = sorted(done, key=lambda r: abs(math.log(r[law] / r["measured"]))
                   if r[law] > 0 and r["measured"] > 0 else math.inf, reverse=True)[:WORST]
    return {"pairs": len(rows), "predicted": len(done), "hits": len(hits),
            "hit_rate": len(hits) / len(done) if done else None,
            "hit_rate_all": len(hits) / len(rows) if rows else None,
            "mean_abs_log_error": sum(errs) / len(errs) if errs else None,
            "worst": [{"delayed": r["delayed"], "measured": r["measured"], "predicted": r[law]}
                      for r in worst]}


def arm_key(p: Any) -> tuple[Any, ...]:
    """What makes two pairs seeds of one arm: optimizer, mode, size, steps, batch and lr."""
    return (p.optimizer, p.mode, p.n_params, p.horizon, p.delayed.tokens_per_step, p.delayed.lr)


def siblings_mean(pairs: Sequence[Any], i: int, idx: Sequence[int],
                  quantity: str = "share") -> float | None:
    """The mean ``quantity`` of the other held-out pairs of pair ``i``'s arm (its other seeds),
    or None when it has none."""
    sib = [pairs[j].value(quantity) for j in idx
           if j != i and arm_key(pairs[j]) == arm_key(pairs[i])]
    sib = [v for v in sib if v is not None]
    return sum(sib) / len(sib) if sib else None


def score_laws(pairs: Sequence[Any], laws: Sequence[str] = LAWS,
               rows: bool = False) -> dict[str, Any]:
    """Per hold-out kind: the fold's label and, per law, pairs / predicted / hits / hit rates /
    mean absolute log error / worst misses (gap fractions); ``skipped`` with the reason when the
    pilot has no such fold. ``rows=True`` keeps every held-out pair's predictions.

    Beside the laws, :data:`SEED_REFERENCE` scores the same way a predictor that is not a law:
    each held-out pair predicted by the mean of its own arm's other seeds (same optimizer,
    mode, size, horizon, batch and lr; leave one seed out). No transfer law knows more about
    a held-out arm than that mean, so its hit rate says how much of the factor-2 criterion the
    seed-to-seed scatter alone leaves reachable: a reference for reading the laws' hit rates,
    not a bound (a law can beat it by chance) and never chosen."""
    out: dict[str, Any] = {"factor": FACTOR, "laws": list(laws)}
    for kind in HELD_OUT:
        split = held_out_split(pairs, kind)
        if isinstance(split, str):
            out[kind] = {"skipped": split}
            continue
        idx, label = split
        held = set(idx)
        train = [q for j, q in enumerate(pairs) if j not in held]
        table = [{"delayed": pairs[i].delayed.name, "optimizer": pairs[i].optimizer,
                  "mode": pairs[i].mode, "measured": pairs[i].gap_fraction,
                  SEED_REFERENCE: siblings_mean(pairs, i, idx),
                  **{law: predict_pair(law, pairs[i], train) for law in laws}} for i in idx]
        out[kind] = {"held_out": label, **{law: score_rows(table, law) for law in laws},
                     SEED_REFERENCE: score_rows(table, SEED_REFERENCE)}
        if rows:
            out[kind]["rows"] = table
    return out


def choose(scores: dict[str, Any]) -> dict[str, Any]:
    """The law advise uses and the laws not ruled out (module docstring), with the reason."""
    laws = scores["laws"]
    deciding = next((k for k in HELD_OUT if "skipped" not in scores[k]), None)
    ruled_out = {}
    if deciding is not None:
        for law in laws:
            s = scores[deciding][law]
            if s["predicted"] and s["hit_rate"] < RULE_OUT_HIT_RATE:
                ruled_out[law] = (f"{s['hits']}/{s['predicted']} held-out pairs within a factor "
                                  f"{FACTOR:g} on {deciding} (< {RULE_OUT_HIT_RATE:.0%})")
    kept = [law for law in laws if law not in ruled_out]
    if deciding == "largest_size":
        block = scores["largest_size"]

        def rank(law: str) -> tuple[float, float, int]:
            s = block[law]
            err = s["mean_abs_log_error"]
            return (-(s["hits"] if s["predicted"] else -1),
                    err if err is not None else math.inf, laws.index(law))
        law = min(laws, key=rank)
        s = block[law]
        reason = (f"most held-out largest-size pairs within a factor {FACTOR:g}: {s['hits']}/"
                  f"{s['pairs']} ({block['held_out']} predicted from the smaller sizes)")
    else:
        law = FALLBACK
        why = scores["largest_size"]["skipped"]
        reason = (f"{why}: the transfer across sizes is not identified, so the horizon law "
                  f"({FALLBACK}) is used")
    return {"law": law, "reason": reason, "deciding_hold_out": deciding,
            "not_ruled_out": kept, "ruled_out": ruled_out}


def confirmation(pairs: Sequence[Any], law: str) -> dict[str, Any]:
    """The chosen ``law`` scored on a size fold that did not choose it.

    The acceptance hit rate is read on the fold that chose the law: the best of
    :data:`~.transfer.LAWS` on that fold, so an optimistic estimate of the chosen law's hit rate
    (the winner's curse of selection on the test fold). With three sizes or more, the largest
    size is dropped altogether and the next largest held out and predicted from the sizes below
    it (the same direction, one step down the ladder), a fold whose outcome played no part in
    the choice. Returns ``{"held_out", "fitted_on", **score}`` of ``law`` (as
    :func:`score_laws`), or ``{"skipped": reason}``."""
    sizes = sorted({p.n_params for p in pairs if p.n_params})
    if len(sizes) < 3:
        return {"skipped": f"needs three model sizes (the pilot has {len(sizes)})"}
    block = score_laws([p for p in pairs if p.n_params != sizes[-1]], laws=(law,))
    return {"held_out": block["largest_size"]["held_out"],
            "fitted_on": sizes[:-2], **block["largest_size"][law]}


def transfer_summary(pairs: Sequence[Any], rows: bool = False) -> dict[str, Any]:
    """The pilot's sizes, the held-out scores (:func:`score_laws`), the choice (:func:`choose`),
    ``acceptance``: the chosen law's share of held-out largest-size pairs within the factor
    against :data:`GOAL`, or why it is not measurable; and ``confirmation``
    (:func:`confirmation`): the chosen law on a size fold that did not choose it."""
    scores = score_laws(pairs, rows=rows)
    choice = choose(scores)
    sizes = sorted({p.n_params for p in pairs if p.n_params})
    block = scores["largest_size"]
    if "skipped" in block:
        acc: dict[str, Any] = {"measurable": False, "goal": GOAL,
                               "reason": f"{block['skipped']} (sizes: {sizes}): no largest "
                                         f"size to hold out"}
    else:
        s = block[choice["law"]]
        ref = block[SEED_REFERENCE]
        acc = {"measurable": True, "goal": GOAL, "law": choice["law"], "hits": s["hits"],
               "pairs": s["pairs"], "hit_rate_all": s["hit_rate_all"],
               "met": s["hit_rate_all"] is not None and s["hit_rate_all"] >= GOAL,
               "seed_reference": {"hits": ref["hits"], "pairs": ref["pairs"],
                                  "hit_rate_all": ref["hit_rate_all"]}}
    return {"sizes": sizes, "held_out": scores, "choice": choice, "acceptance": acc,
            "confirmation": confirmation(pairs, choice["law"])}
