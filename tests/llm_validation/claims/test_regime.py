"""The paper's 0.01 nats as a compute-equivalent lag (issue 26), read off synchronous curves."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from llm_validation.claims.decide.regime import (CHINCHILLA_FIT, PAPER_LAG_FRACTION, PAPER_MODELS,
                                          PAPER_NATS, compute_lag_fraction, lag_margin,
                                          reached_paper_horizon)
from llm_validation.validation.lag import lag

#: Float64 round-off of a closed form evaluated at D ~ 1e9-1e10 (relative).
RTOL = 1e-10


def _rec(tokens, params, vals=(5.5, 3.0, 2.0, 1.6, 1.5)):
    steps = np.arange(len(vals), dtype=float) * 100
    return SimpleNamespace(summary={"tokens": tokens, "n_params": params}, final_val=vals[-1],
                           series=lambda key: (steps, np.asarray(vals, dtype=float)))


@pytest.mark.parametrize("n", list(PAPER_MODELS.values()))
def test_the_lag_fraction_loses_exactly_the_nats_on_chinchillas_data_term(n):
    b, beta = CHINCHILLA_FIT["B"], CHINCHILLA_FIT["beta"]
    d = 20.0 * n
    f = compute_lag_fraction(PAPER_NATS, n)
    assert b * ((1 - f) * d) ** -beta - b * d ** -beta == pytest.approx(PAPER_NATS, rel=RTOL)


def test_the_protocols_lag_is_the_stricter_of_the_papers_two_models():
    lags = [compute_lag_fraction(PAPER_NATS, n) for n in PAPER_MODELS.values()]
    assert PAPER_LAG_FRACTION == min(lags) and 0.036 < PAPER_LAG_FRACTION < 0.038
    assert max(lags) > PAPER_LAG_FRACTION     # the larger model's lag is looser


def test_lag_margin_is_the_loss_a_lag_of_that_fraction_is_worth():
    r = _rec(2e6, 1e5)
    width, text = lag_margin([r], fraction=0.1)
    steps, vals = r.series("val_loss")
    assert lag(steps, vals, vals.min() + width).fraction == pytest.approx(0.1, rel=RTOL)
    assert "10.0%" in text
    assert np.isnan(lag_margin([])[0])


def test_reached_paper_horizon():
    assert reached_paper_horizon([_rec(25e6, 1e6)])[0] is True
    short, why = reached_paper_horizon([_rec(25e6, 1e6), _rec(0.8e6, 1e6)])
    assert short is False and "0.8" in why
    assert reached_paper_horizon([])[0] is False
