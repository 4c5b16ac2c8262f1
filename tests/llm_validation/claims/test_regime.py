"""The paper's nats apply only in the paper's regime; elsewhere as a share of the decrease."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from llm_validation.claims.regime import PAPER_GAP_FRACTION, in_paper_regime, nats_threshold


def _rec(vocab, tokens, params, vals=(5.5, 2.0, 1.5)):
    steps = np.arange(len(vals)) * 100
    return SimpleNamespace(config={"model": {"vocab_size": vocab}},
                           summary={"tokens": tokens, "n_params": params}, final_val=vals[-1],
                           series=lambda key: (steps, np.asarray(vals)))


def test_tiny_is_not_the_papers_regime_and_uses_the_share():
    tiny = _rec(256, 204_800, 1_049_728)
    assert in_paper_regime(tiny)[0] is False and "nats per byte" in in_paper_regime(tiny)[1]
    value, text = nats_threshold([tiny])
    assert value == pytest.approx(PAPER_GAP_FRACTION * 4.0) and "%" in text


def test_paper_regime_keeps_the_papers_number():
    big = _rec(49152, 3e9, 135e6)
    assert in_paper_regime(big)[0] is True
    assert nats_threshold([big])[0] == 0.01
