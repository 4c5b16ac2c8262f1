"""The paper's setting predicted: AdamW's and Muon's compute-equivalent lag at SmolLM-135M and
SmolLM-360M at 20 tokens per parameter, at the batch of the law the paper cites, against the
paper's statements.

Algorithm
    For each law arm (AdamW 2BW, Muon 2BW): the law chosen on the held-out cells
    (:func:`~llm_validation.delay_law.laws.choose`), refitted on every cell, predicts the lag at
    ``N*`` (the SmolLM preset, all parameters counted), ``S*`` the step count of DeepSeek LLM's
    batch law at ``20 N*`` tokens (the paper's citation), and ``lr_rel = 1`` (the paper tuned its
    lr); Step Law's step count gives the model uncertainty. Each statement is read against the
    paper's 0.01 nats as a compute-equivalent lag at that size
    (:func:`~llm_validation.claims.decide.regime.compute_lag_fraction`, Chinchilla's data term):

    - "AdamW degrades substantially": supported when the interval's low end exceeds it,
      contradicted when its high end lies below it;
    - "Muon stays within about 0.01 nats": supported when the high end lies below it,
      contradicted when the low end exceeds it;
    - otherwise (either batch law): cannot decide, with the interval.
    "EF cuts the gap by more than half" is not predicted: EF arms run at one step count per
    size, so no law in the step count exists for them (said in the output).

Assumptions
    The chosen law holds 2.4-2.9 decades past the largest trained size and up to ~10x past the
    longest trained step count; the byte vocabulary stands for the paper's 49,152 tokens. None of
    this is tested: every output says "extrapolation".

Guarantee
    The intervals are the law's per-seed t intervals (:meth:`~llm_validation.delay_law.laws.
    LawFit.predict`); a statement is decided only when both batch laws' intervals agree.

Reference
    The paper's Figs. 2-3 sentences; Bi et al. (2024) and Li et al. (2025) for the batch laws.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from llm_validation.claims.decide.regime import PAPER_MODELS, PAPER_NATS, compute_lag_fraction
from llm_validation.delay_law.batch_laws import DEEPSEEK, STEP_LAW, steps_at
from llm_validation.delay_law.laws import Law, Observed, candidate_laws, fit_law
from llm_validation.delay_law.measure import observed

__all__ = ["STATEMENTS", "paper_predictions", "read_statement"]

#: The paper's statements this module reads, by law arm: (text, side of the threshold).
STATEMENTS = {"adamw/2bw": ("AdamW degrades substantially under one-step delay", "above"),
              "muon/2bw": ("Muon stays within about 0.01 nats of synchronous", "below")}


def read_statement(side: str, intervals: list[tuple[float, float]], threshold: float) -> str:
    """``supported``, ``contradicted`` or ``cannot decide`` from every batch law's interval."""
    above = [lo > threshold for lo, _ in intervals]
    below = [hi < threshold for _, hi in intervals]
    if all(above):
        return "supported" if side == "above" else "contradicted"
    if all(below):
        return "supported" if side == "below" else "contradicted"
    return "cannot decide"


def paper_predictions(costs: Mapping[str, Any], laws: Mapping[str, Any]) -> dict[str, Any]:
    """Per paper model and law arm: the chosen law's lag prediction at both batch laws' step
    counts, the paper's threshold and the reading (see the module docstring)."""
    by_name = {law.name: law for law in candidate_laws()}
    out: dict[str, Any] = {"ef": "not predicted: EF arms run at one step count per size",
                           "label": "extrapolation"}
    for arm, (text, side) in STATEMENTS.items():
        chosen = laws.get(f"{arm}:lag", {}).get("chosen")
        if chosen is None:
            out[arm] = {"statement": text, "reading": "cannot decide",
                        "why": "no law was chosen (held-out cells missing)"}
            continue
        law: Law = by_name[chosen]
        fit = fit_law(law, observed(costs, arm, "lag"))
        per_model = {}
        for model, n in PAPER_MODELS.items():
            threshold = compute_lag_fraction(PAPER_NATS, n)
            preds = {}
            for bl in (DEEPSEEK, STEP_LAW):
                steps, batch = steps_at(bl, n)
                iv = fit.predict(Observed(name=model, n_params=n, steps=steps, values={}))
                preds[bl.name] = {"steps": steps, "batch_tokens": batch, "lag": iv.estimate,
                                  "lo": iv.lo, "hi": iv.hi}
            per_model[model] = {"threshold": threshold, "predictions": preds,
                                "reading": read_statement(side, [(p["lo"], p["hi"]) for p in
                                                                 preds.values()], threshold)}
        out[arm] = {"statement": text, "law": chosen, "models": per_model}
    return out
