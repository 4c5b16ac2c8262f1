"""The gap share at the paper's setting (exploratory, not in the protocol).

The protocol reads the paper's statements on the compute-equivalent lag
(:mod:`~llm_validation.delay_law.paper`). This module prints the other cost the ledger
measures, the gap as a share of the synchronous loss decrease, at the same points, so that the
paper's setting is predicted in both units.

Algorithm
    For each law arm (AdamW 2BW, Muon 2BW): the gap-share law chosen on the held-out cells
    (:func:`~llm_validation.delay_law.laws.choose`, the ledger's ``<arm>:gap_share`` entry),
    refitted on every cell, predicts the share at SmolLM-135M and SmolLM-360M (all parameters
    counted) at the step counts of both batch laws (:mod:`~llm_validation.delay_law.batch_laws`)
    at 20 tokens per parameter, with its per-seed t interval.

Assumptions
    Those of :mod:`~llm_validation.delay_law.paper` (the law holds far past the trained sizes
    and step counts). No threshold is read: a share of the loss decrease becomes nats only
    through the synchronous loss decrease at that size on the paper's tokenizer and data, which
    nothing here measures.

Guarantee
    Descriptive: each number is the law's prediction with its interval; no verdict rests on it,
    and the rule was added after the runs (labelled exploratory wherever printed).

Reference
    Bi et al. (2024) and Li et al. (2025) for the batch laws.
"""

from __future__ import annotations

from typing import Any, Mapping

from llm_validation.claims.decide.regime import PAPER_MODELS
from llm_validation.delay_law.batch_laws import DEEPSEEK, STEP_LAW, steps_at
from llm_validation.delay_law.laws import Observed, candidate_laws, fit_law
from llm_validation.delay_law.measure import observed

__all__ = ["gap_share_predictions"]


def gap_share_predictions(costs: Mapping[str, Any], laws: Mapping[str, Any],
                          arms: tuple[str, ...] = ("adamw/2bw", "muon/2bw")) -> dict[str, Any]:
    """Per law arm: the chosen gap-share law and, per paper model and batch law, its predicted
    share with the interval (see the module docstring); an arm without a chosen law says so."""
    by_name = {law.name: law for law in candidate_laws()}
    out: dict[str, Any] = {}
    for arm in arms:
        chosen = laws.get(f"{arm}:gap_share", {}).get("chosen")
        if chosen is None:
            out[arm] = {"why": "no gap-share law was chosen (held-out cells missing)"}
            continue
        fit = fit_law(by_name[chosen], observed(costs, arm, "gap_share"))
        per_model = {}
        for model, n in PAPER_MODELS.items():
            per_model[model] = {}
            for bl in (DEEPSEEK, STEP_LAW):
                steps, _ = steps_at(bl, n)
                iv = fit.predict(Observed(name=model, n_params=n, steps=steps, values={}))
                per_model[model][bl.name] = {"steps": steps, "share": iv.estimate,
                                             "lo": iv.lo, "hi": iv.hi}
        out[arm] = {"law": chosen, "models": per_model}
    return out
