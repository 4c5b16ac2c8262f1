"""Where the paper's loss thresholds apply, and what they become elsewhere (scale-free gaps).

The paper states some conditions in nats ("within about 0.01"; the ledger's equivalence
margins have the same 0.01 floor). Those numbers are losses per token of 135M-10B parameter
models trained on 20+ tokens per parameter. A tiny CPU run measures nats per *byte* at ~0.2
tokens per parameter, where 0.01 means something else. So a threshold in nats is applied as
is only in the paper's regime (:func:`in_paper_regime`); elsewhere it is applied as the same
share of the synchronous run's loss decrease (the scale-free ``gap_fraction`` of
:mod:`llm_validation.validation.lag`): :data:`PAPER_GAP_FRACTION`.

Algorithm
    ``PAPER_GAP_FRACTION = PAPER_NATS / PAPER_LOSS_DROP``. At another scale a threshold of
    ``PAPER_NATS`` nats becomes ``PAPER_GAP_FRACTION * (v_0 - v_T)`` in that scale's units, with
    ``v_0 - v_T`` the synchronous run's loss decrease from its first evaluation (the initial
    weights) to its end, averaged over seeds (:func:`nats_threshold`).

Assumptions
    The paper's loss decrease is an estimate (the paper's curves are not in the repository):
    from ``ln(49152) = 10.8`` nats (uniform over SmolLM's vocabulary, the initial loss) to about
    3 nats at the end, so ``PAPER_LOSS_DROP = 7.8`` and 0.01 nats is ~0.13% of it.

Guarantee
    In the paper's regime the thresholds are the paper's numbers exactly; elsewhere the rule is
    written beside each statement that uses it (claims.md).

Reference
    Issue 15 ("0.01-nat thresholds do not transfer across scales"); Hoffmann et al. (2022) for
    the 20 tokens per parameter regime.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

__all__ = ["PAPER_NATS", "PAPER_TOKENS_PER_PARAM", "PAPER_LOSS_DROP", "PAPER_GAP_FRACTION",
           "EQUIV_REL", "in_paper_regime", "nats_threshold", "loss_decrease"]

#: The paper's resolution in nats per token ("within about 0.01").
PAPER_NATS = 0.01
#: The paper's regime: at least this many training tokens per parameter.
PAPER_TOKENS_PER_PARAM = 20.0
#: Estimated loss decrease of the paper's runs in nats per token (module docstring).
PAPER_LOSS_DROP = 7.8
#: 0.01 nats as a share of the paper's loss decrease.
PAPER_GAP_FRACTION = PAPER_NATS / PAPER_LOSS_DROP
#: Relative equivalence margin: a change of less than a quarter of the reference gap is "no
#: effect" (a smaller margin than that is below what 3 seeds resolve at this scale).
EQUIV_REL = 0.25
#: Byte-level vocabularies measure nats per byte, not per token.
_BYTE_VOCAB = 256


def in_paper_regime(record: Any) -> tuple[bool, str]:
    """(True when a run is in the paper's regime, why): a token vocabulary (not bytes) and at
    least :data:`PAPER_TOKENS_PER_PARAM` tokens per parameter."""
    vocab = int(record.config.get("model", {}).get("vocab_size", 0))
    summary = record.summary or {}
    tokens, params = summary.get("tokens"), summary.get("n_params")
    tpp = float(tokens) / float(params) if tokens and params else float("nan")
    unit = "nats per byte" if vocab <= _BYTE_VOCAB else "nats per token"
    ok = vocab > _BYTE_VOCAB and math.isfinite(tpp) and tpp >= PAPER_TOKENS_PER_PARAM
    return ok, f"{unit}, {tpp:.2g} tokens per parameter"


def loss_decrease(record: Any) -> float | None:
    """``v_0 - v_T`` of a completed run's validation curve (None without two evaluations)."""
    steps, vals = record.series("val_loss")
    if record.final_val is None or vals.size < 2:
        return None
    return float(vals[0] - vals[-1])


def nats_threshold(sync_records: Sequence[Any], nats: float = PAPER_NATS
                   ) -> tuple[float, str]:
    """(``nats`` in the runs' loss units, the rule in words) for runs whose synchronous
    records are ``sync_records`` (see the module docstring); NaN without records."""
    if not sync_records:
        return float("nan"), "no synchronous run"
    ok, why = in_paper_regime(sync_records[0])
    if ok:
        return nats, f"the paper's {nats:g} nats ({why}: the paper's regime)"
    drops = [x for r in sync_records if (x := loss_decrease(r)) is not None]
    if not drops:
        return float("nan"), "no synchronous loss decrease"
    share = nats / PAPER_LOSS_DROP
    val = share * float(np.mean(drops))
    return val, (f"{nats:g} nats of the paper = {share:.2%} of its loss decrease; here ({why}) "
                 f"{share:.2%} of the synchronous decrease {np.mean(drops):.3g} = {val:.3g}")
