"""The law in the explicit step count, lr ratio and size (``size_steps_lr``) on synthetic pairs
whose true law is known."""

from __future__ import annotations

import pytest

from llm_validation.advice.horizon import MIN_TREND_SPREAD
from llm_validation.advice.pilot import pairs
from llm_validation.advice.transfer import (ALL_LAWS, MissingInput, NotIdentified, Target,
                                            law_size_steps_lr, predict_law)
from llm_validation.advice.transfer_choice import score_laws
from tests.llm_validation.advice.synthetic_pairs import run_pair

#: Exact data through a power law: only float rounding separates fit and truth.
EXACT = 1e-9
#: Tokens per step of the synthetic runs (16 x 64).
TPS = 1024
#: The pilot's tuned lr (every synthetic sync run's reference).
LR0 = 1e-3


def true_g(N: float, T: float, lr_ratio: float) -> float:
    """The true law: g = 0.05 (N/1e6)^0.3 (T/1000)^-1 (lr/lr_0)^0.7."""
    return 0.05 * (N / 1e6) ** 0.3 * (T / 1000) ** -1.0 * lr_ratio ** 0.7


def _pilot(Ns=(10**6, 4 * 10**6), Ts=(500, 1000, 2000), ratios=(1.0, 2.0)):
    runs, seed = [], 0
    for N in Ns:
        for T in Ts:
            for r in ratios:
                runs += run_pair(T=T, N=N, g=true_g(N, T, r), seed=seed, lr=LR0 * r)
                seed += 1
    return pairs(runs)


def _target(steps: float, ratio: float | None = 1.0, **kw) -> Target:
    return Target(steps=steps, tokens_per_step=TPS, n_params=8e6,
                  lr_ratio=ratio, pilot_lr=None if ratio is None else LR0, **kw)


def test_reads_the_true_law_at_the_users_steps_and_lr():
    ps = _pilot()
    p = law_size_steps_lr(ps, _target(4000, 2.0))
    assert p.estimate == pytest.approx(true_g(8e6, 4000, 2.0), rel=EXACT)
    assert p.hi - p.lo == pytest.approx(0.0, abs=EXACT)           # zero residual, zero width
    assert p.detail["exponents"] == pytest.approx(
        {"log N": 0.3, "log T": -1.0, "log(lr/lr_0)": 0.7}, rel=1e-6)
    assert p.detail["read_at"] == {"steps": 4000, "lr_ratio": 2.0, "n_params": 8e6}


def test_batch_x4_at_the_same_tokens_is_a_different_cost():
    # the same N and tokens: a 4x batch is 4x fewer steps, so (T^-1) a 4x larger gap
    ps, tokens = _pilot(), 4e6
    small = law_size_steps_lr(ps, _target(tokens / TPS))
    large = law_size_steps_lr(ps, _target(tokens / (4 * TPS)))
    assert large.estimate / small.estimate == pytest.approx(4.0, rel=EXACT)


def test_missing_inputs_name_the_flag():
    ps = _pilot()
    with pytest.raises(MissingInput, match="--batch-tokens"):
        law_size_steps_lr(ps, _target(4000, steps_stated=False))
    with pytest.raises(MissingInput, match="--lr"):
        law_size_steps_lr(ps, _target(4000, None))


def test_a_regressor_the_pilot_does_not_vary():
    ps = _pilot(ratios=(1.0,))                      # one lr in the pilot
    p = law_size_steps_lr(ps, _target(4000, 1.0))   # the target at that lr: the column drops
    assert p.estimate == pytest.approx(true_g(8e6, 4000, 1.0), rel=EXACT)
    assert set(p.detail["exponents"]) == {"log N", "log T"}
    with pytest.raises(NotIdentified, match="the lr ratio has one value"):
        law_size_steps_lr(ps, _target(4000, 2.0))


def test_size_and_steps_moving_together_are_not_separable():
    runs = []
    for i, (N, T) in enumerate(((10**6, 500), (2 * 10**6, 1000), (4 * 10**6, 2000))):
        runs += run_pair(T=T, N=N, g=true_g(N, T, 1.0), seed=i)
    with pytest.raises(NotIdentified, match="move together"):
        law_size_steps_lr(pairs(runs), _target(4000))


def test_dispatch_and_held_out_score():
    ps = _pilot(Ns=(10**6, 2 * 10**6, 4 * 10**6))
    assert predict_law("size_steps_lr", ps, _target(4000, 2.0)).method == "size_steps_lr"
    s = score_laws(ps, laws=ALL_LAWS)["largest_size"]["size_steps_lr"]
    assert s["hits"] == s["pairs"] == 6 and s["mean_abs_log_error"] < 1e-6


def test_a_regressor_spanning_less_than_the_trend_spread_carries_no_exponent():
    """lr ratios 1.0 and 1.1 (a 1.1x span, under MIN_TREND_SPREAD): the column drops for a
    target inside the span and the form is not identified outside it, as with one value."""
    ps = _pilot(ratios=(1.0, 1.1))
    p = law_size_steps_lr(ps, _target(4000, 1.05))
    assert set(p.detail["exponents"]) == {"log N", "log T"}
    with pytest.raises(NotIdentified, match=r"spanning only 1.1x in the pilot"):
        law_size_steps_lr(ps, _target(4000, 2.0))
    # mutation: at the spread itself the lr is a regressor again and recovers the true exponent
    ps = _pilot(ratios=(1.0, MIN_TREND_SPREAD))
    p = law_size_steps_lr(ps, _target(4000, 2.0))
    assert p.detail["exponents"]["log(lr/lr_0)"] == pytest.approx(0.7, rel=1e-6)


def test_tokens_per_parameter_from_batch_rounding_is_not_a_clock():
    """A pilot at one tokens-per-parameter ratio whose batches round to whole sequences (D/N
    from 19.2 to 20.5, as the delay-law design): its slope in D/N would be the seeds' noise over
    a 7% span. tokens_per_param reads it as one horizon, joint is not identified."""
    runs = []
    for i, (N, T, batch) in enumerate(((46_296, 904, 16), (46_296, 579, 24),
                                       (113_000, 904, 40), (266_816, 1083, 76))):
        g = 0.02 * (1 + 0.3 * (-1) ** i)          # scatter with no trend in D/N
        runs += run_pair(T=T, N=N, g=g, seed=i, batch=batch)
    ps = pairs(runs)
    far = Target(steps=15_259, tokens_per_step=65_536, n_params=3.6e8)   # D/N = 2.8
    p = predict_law("tokens_per_param", ps, far)
    assert p.detail["trend"].startswith("none (one horizon: they span only 1.07x")
    assert min(x.value("share") for x in ps) <= p.estimate <= max(x.value("share") for x in ps)
    with pytest.raises(NotIdentified, match="tokens per parameter spans only 1.07x"):
        predict_law("joint", ps, far)
