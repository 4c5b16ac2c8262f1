"""What the transfer law does not know: the chosen law's prediction, the spread of the laws not
ruled out, and when advise is extrapolating.

Algorithm
    Per delayed mode (2BW, 2BW + EF) at the user's run (:class:`~.transfer.Target`: steps,
    tokens per step, parameters):

    1. every law (:data:`~.transfer.ALL_LAWS`) is fitted on the pilot's pairs of the
       optimizer and mode (``theory``: calibrated on the family's pairs, applied to the pilot's
       synchronous reference runs) and read at the target; a law the pilot cannot fit is listed
       with its reason;
    2. the law used is the one requested (``choice["requested"]``: refused with the law's own
       one-line reason when it cannot be fitted) or chosen on held-out sizes
       (:func:`~.transfer_choice.choose`), or, when it cannot be fitted at the target, the
       first fitted law of ``steps``, ``theory``;
       its 95% interval is the *statistical* interval (residual scatter of its fit);
    3. the *model-uncertainty range* is ``[min, max]`` of the estimates of the fitted laws not
       ruled out on the held-out scores, and of the law used (always); a law whose estimate is
       a gap share of :data:`MAX_GAP_SHARE` or more is left out of it (named under
       ``outside``): the delayed run would end no lower than where training started, a
       divergence no pilot pair shows, which a power law carried far past its data can
       predict while its saturating twin cannot; both ends become lag fractions on the pilot's
       synchronous curve and time-to-target ratios (:func:`model_time_ratios`);
    4. *extrapolation* (:func:`extrapolation`): the user's model more than
       :data:`EXTRAPOLATION_FACTOR` times the largest pilot size, or the horizon more than that
       many times the pilot's longest, names the chosen law's assumption.

Assumptions
    Those of each law (:mod:`~.transfer`); the range is the spread of point estimates, so it says
    how far the candidate readings of the same pilot disagree, not a probability.

Guarantee
    The chosen law's numbers are exactly what the law predicts; the range always contains the
    used law's estimate.

Reference
    docs/advise.md, "Transfer across sizes".
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from llm_validation.advice.transfer import (ALL_LAWS, ASSUMPTION, NotIdentified, Target,
                                            predict_law)
from llm_validation.advice.time_to_target import lag_fraction_from_gap, ratios_to_reference

__all__ = ["EXTRAPOLATION_FACTOR", "FALLBACK_ORDER", "MAX_GAP_SHARE", "transfer_delay_cost",
           "model_time_ratios", "extrapolation"]

#: Beyond 10x the largest pilot size or the longest pilot horizon (one decade) no held-out
#: score of the pilot speaks for the law: the pilot's own held-out steps span a factor 2-8.
EXTRAPOLATION_FACTOR = 10.0
#: A gap share of the whole synchronous loss decrease: a delayed run ending where training
#: began. A law predicting this much at the target is outside its domain there.
MAX_GAP_SHARE = 1.0
#: Laws tried, in order, when the chosen one cannot be fitted at the target.
FALLBACK_ORDER = ("steps", "theory")


def _iv(pred: Any) -> dict[str, float]:
    return {"estimate": pred.estimate, "lo": pred.lo, "hi": pred.hi}


def transfer_delay_cost(all_pairs: Sequence[Any], ref: Any, optimizer: str, mode: str,
                        target: Target, choice: Mapping[str, Any],
                        frontier: tuple[Sequence[float], Sequence[float]] | None = None
                        ) -> dict[str, Any] | None:
    """``mode``'s delay cost at ``target`` (module docstring): ``used`` (the law), its gap
    fraction, gap at the pilot's scale, lag fraction and lag steps with the statistical interval,
    every law's prediction (``predictions``) or reason (``not_fitted``), and
    ``model_uncertainty`` (the laws in the range, gap and lag fraction ``lo``/``hi``); every
    lag is read on the compute ``frontier`` when given, else on the synchronous curve
    (:func:`~.time_to_target.lag_fraction_from_gap`). None when no law can be fitted."""
    own = [p for p in all_pairs if p.optimizer == optimizer and p.mode == mode]
    preds, reasons = {}, {}
    for law in ALL_LAWS:
        if law != "theory" and not own:
            reasons[law] = f"no pilot pair of {optimizer} in mode {mode!r}"
            continue
        try:
            preds[law] = predict_law(law, own, target, calibration_pairs=all_pairs,
                                     syncs=ref.runs, optimizer=optimizer, mode=mode)
        except NotIdentified as exc:
            reasons[law] = str(exc)
    if choice.get("requested") and choice["law"] not in preds:
        if not own and choice["law"] != "theory":
            return None            # this mode has no pair: no prediction, as for every law
        raise ValueError(f"--law {choice['law']}: {reasons[choice['law']]}")
    if not preds:
        return None
    used = choice["law"] if choice["law"] in preds else next(
        (law for law in FALLBACK_ORDER if law in preds), next(iter(preds)))
    p = preds[used]

    def lag_of(g: float) -> float:
        return lag_fraction_from_gap(ref.steps, ref.vals, g, frontier)
    f = {k: lag_of(v) for k, v in _iv(p).items()}
    outside = {law: preds[law].estimate for law in ALL_LAWS if law in preds and law != used
               and preds[law].estimate >= MAX_GAP_SHARE}
    in_range = [law for law in ALL_LAWS if law in preds and law not in outside
                and (law in choice["not_ruled_out"] or law == used)]
    lo = min(preds[law].estimate for law in in_range)
    hi = max(preds[law].estimate for law in in_range)
    model = {"laws": {law: preds[law].estimate for law in in_range},
             "gap_fraction": {"estimate": p.estimate, "lo": lo, "hi": hi},
             "lag_fraction": {"estimate": f["estimate"],
                              "lo": lag_of(lo), "hi": lag_of(hi)},
             "ruled_out": dict(choice["ruled_out"]), "outside": outside}
    return {"mode": mode, "used": used, "law_reason": (choice["reason"] if used == choice["law"]
                                                       else f"{choice['law']} could not be "
                                                       f"fitted at the target: "
                                                       f"{reasons.get(choice['law'])}"),
            "predictions": {k: v.to_dict() for k, v in preds.items()}, "not_fitted": reasons,
            "gap_fraction": _iv(p),
            "gap_at_pilot_scale": {k: v * ref.loss_drop for k, v in _iv(p).items()},
            "lag_fraction": f, "lag_reading": "curve" if frontier is None else "frontier",
            "lag_steps": {k: v * target.steps for k, v in f.items()},
            "pairs": len(own), "model_uncertainty": model}


def model_time_ratios(step_times: Mapping[str, float], sync_steps: float,
                      delay: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per delayed schedule: the time-to-target ratio to 1F1B at both ends of its
    model-uncertainty lag range (``lo``: the smallest gap, ``hi``: the largest)."""
    lags = {k: d["model_uncertainty"]["lag_fraction"] for k, d in delay.items()
            if k in step_times}
    r = ratios_to_reference(step_times, sync_steps, lags)
    return {k: {"ratio": r[k]["ratio"], "lo": r[k]["ratio_lo"], "hi": r[k]["ratio_hi"]}
            for k in lags}


def extrapolation(*, pilot_params: float | None, pilot_steps: float, target: Target,
                  law: str) -> dict[str, Any] | None:
    """The extrapolation advise makes (None within :data:`EXTRAPOLATION_FACTOR` of the pilot):
    size and horizon factors, what exceeds the bound, and the sentence naming ``law``'s
    assumption."""
    size = (target.n_params / pilot_params if target.n_params and pilot_params else None)
    horizon = target.steps / pilot_steps
    beyond = []
    if size is not None and size > EXTRAPOLATION_FACTOR:
        beyond.append(f"the model is {size:,.0f}x the largest pilot size")
    if horizon > EXTRAPOLATION_FACTOR:
        beyond.append(f"the horizon is {horizon:,.1f}x the pilot's longest")
    if not beyond:
        return None
    text = (f"Extrapolation: {' and '.join(beyond)}; the {law} law assumes "
            f"{ASSUMPTION[law]}, which no pilot measurement checks")
    if not target.n_params:
        text += " (the model's size is unknown: give --params)"
    elif not pilot_params:
        text += " (the pilot's model size is unknown: the size factor is not checked)"
    return {"size_factor": size, "horizon_factor": horizon, "law": law,
            "assumption": ASSUMPTION[law], "text": text}
