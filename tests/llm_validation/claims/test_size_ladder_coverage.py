"""The size ladder's statistics hold what they state, by simulation at the ladder's own design
(three sizes, five seeds): the size exponent's 95% t interval and the extrapolated 95% interval
cover their targets, and the two agreement checks together wrongly decide at most the protocol's
family-wise 5%. Each test also shows that a weaker rule (a normal interval, no Bonferroni) misses
its rate, so the tests can fail.

The model: per seed ``s`` the log lag fraction is a straight line in ``log N``,
``a + b_s (log N - log N*) + e_{s,N}``, with a per-seed slope ``b_s = b + u_s`` and independent
noise at each size; the targets are the mean slope ``b`` and the mean log value ``a`` at the
paper's size ``N*`` (what the per-seed fits' t intervals estimate).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from llm_validation.claims.decide.checks import at_level
from llm_validation.claims.report.size_ladder import AGREEMENT_LEVEL, agreement_verdicts
from llm_validation.claims.sizes.fit import (AGREEMENT_RULES, TARGETS, TOLERANCE,
                                               SizeLadderData, paper_lag_fraction, size_fits)
from llm_validation.config import preset
from llm_validation.validation.verdict import INCONCLUSIVE

#: The ladder's sizes, from the presets the ledgers run (total -> non-embedding parameters).
SIZES = {m.n_params(): m.n_params() - 2 * m.vocab_size * m.d_model
         for m in (preset(n) for n in ("n46k", "n113k", "n267k"))}
#: The size-ladder claim's seeds (catalogue.size.SIZE_LADDER_SEEDS).
SEEDS = range(5)
#: Replications: the binomial standard error of a 95% coverage is 0.0049 at 2,000.
REPS = 2000
#: Allowed departure from the nominal rate: 3.5 binomial standard errors at REPS (a correct
#: rule fails this about once in 2,000 runs of the test; the seed is fixed, so never here).
SLACK = 3.5 * math.sqrt(0.05 * 0.95 / REPS)
TARGET = "SmolLM-135M"
N_STAR = TARGETS[TARGET]
#: Spread of the per-seed slopes and of the per-size noise (log scale), roughly the measured
#: ledgers' (per-seed exponents spread ~0.2; log values ~0.1 around each seed's line).
SLOPE_SD, NOISE_SD = 0.2, 0.1


def _values(rng: np.random.Generator, a: float, b: float) -> dict[int, dict[int, float]]:
    """N -> seed -> a lag fraction drawn from the module's model."""
    slopes = b + SLOPE_SD * rng.standard_normal(len(SEEDS))
    return {n: {s: math.exp(a + slopes[s] * (math.log(n) - math.log(N_STAR))
                            + NOISE_SD * rng.standard_normal()) for s in SEEDS}
            for n in SIZES}


def _fit(values: dict[int, dict[int, float]], arm: str = "muon/2bw"):
    d = SizeLadderData(gap_fraction={arm: values}, lag_fraction={arm: values},
                       non_embedding=SIZES)
    return size_fits(d, targets={TARGET: N_STAR})[arm]["lag_fraction"]


def _normal_covers(samples: list[float], truth: float, level: float = 0.95) -> bool:
    """The weaker rule: a normal (z) interval over seeds instead of Student's t."""
    x = np.asarray(samples)
    half = stats.norm.ppf(0.5 + level / 2) * x.std(ddof=1) / math.sqrt(x.size)
    return abs(x.mean() - truth) <= half


def test_the_size_exponent_and_the_extrapolation_cover_at_95_percent():
    rng = np.random.default_rng(20261126)
    a, b = math.log(0.01), -0.5
    hits = {"exponent": 0, "extrapolation": 0, "exponent, normal": 0}
    for _ in range(REPS):
        f = _fit(_values(rng, a, b))
        e = f.fit.interval
        hits["exponent"] += e.lo <= b <= e.hi
        x = f.extrapolations[TARGET].interval
        hits["extrapolation"] += x.lo <= math.exp(a) <= x.hi
        hits["exponent, normal"] += _normal_covers(list(f.fit.slopes.values()), b)
    rate = {k: v / REPS for k, v in hits.items()}
    assert abs(rate["exponent"] - 0.95) <= SLACK, rate
    assert abs(rate["extrapolation"] - 0.95) <= SLACK, rate
    # the same seeds with a normal interval: about 88% at 5 seeds, outside the slack
    assert rate["exponent, normal"] < 0.95 - SLACK, rate


def _at_the_boundaries(rng: np.random.Generator) -> dict[str, dict[int, dict[int, float]]]:
    """Muon 2BW's mean log lag fraction at N* exactly on its rule's boundary (TOLERANCE x the
    paper's lag fraction) and AdamW's per-seed ratio to it at 1 (log 0): every decision of
    either rule is an error."""
    muon = _values(rng, math.log(TOLERANCE * paper_lag_fraction()), -0.5)
    ratio = _values(rng, 0.0, 0.0)
    adamw = {n: {s: muon[n][s] * ratio[n][s] for s in SEEDS} for n in SIZES}
    return {"muon/2bw": muon, "adamw/2bw": adamw}


def test_the_agreement_checks_hold_the_family_wise_error():
    assert len(AGREEMENT_RULES) == 2 and AGREEMENT_LEVEL == pytest.approx(0.975)
    rng = np.random.default_rng(7)
    wrong = wrong_at_95 = 0
    for _ in range(REPS):
        arms = _at_the_boundaries(rng)
        d = SizeLadderData(gap_fraction=arms, lag_fraction=arms, non_embedding=SIZES)
        fits = size_fits(d, targets={TARGET: N_STAR})
        checks, _ = agreement_verdicts(fits, TOLERANCE)
        assert len(checks) == 2
        wrong += any(c.status != INCONCLUSIVE for c in checks)
        # the weaker rule: each check at 95%, no Bonferroni over the two
        wrong_at_95 += any(at_level(c, 0.95).status != INCONCLUSIVE for c in checks)
    fwer, fwer_95 = wrong / REPS, wrong_at_95 / REPS
    assert fwer <= 0.05 + SLACK, fwer
    assert fwer_95 > 0.05 + SLACK, fwer_95          # about 10%: the test can fail

