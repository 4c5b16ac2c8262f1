"""The candidate transfer laws, one hand case each, and their choice on held-out sizes."""

from __future__ import annotations

import math

import pytest

from llm_validation.advice.delay_term import delay_statistic
from llm_validation.advice.transfer import (NotIdentified, Target, law_joint, law_steps,
                                            law_theory, law_tokens_per_param, predict_law)
from llm_validation.advice.transfer_choice import FALLBACK, choose, held_out_split, score_laws
from tests.llm_validation.advice.synthetic_pairs import make_pairs, run_pair

#: Exact data through a power law: only float rounding separates fit and truth.
EXACT = 1e-9
#: Tokens per step of the synthetic runs (16 x 64).
TPS = 1024


def test_steps_law_by_hand():
    # g = 0.2 (T/100)^-0.5: at 1600 steps 0.05, whatever the size
    _, ps = make_pairs([(T, 1000, 0.2 * (T / 100) ** -0.5) for T in (100, 400, 900)])
    p = law_steps(ps, Target(steps=1600, tokens_per_step=TPS, n_params=10**9))
    assert p.estimate == pytest.approx(0.05, rel=EXACT)
    assert p.hi - p.lo == pytest.approx(0.0, abs=EXACT)       # zero residual, zero width
    assert p.detail["b"] == pytest.approx(-0.5, rel=EXACT) and p.method == "steps"


def test_tokens_per_param_law_by_hand():
    # g = 0.3 / (D/N): a model 10x larger at the same tokens per parameter has the same g
    pts = [(T, N, 0.3 / (T * TPS / N)) for T, N in ((100, 10240), (400, 10240), (100, 2048))]
    _, ps = make_pairs(pts)
    t = Target(steps=1000, tokens_per_step=TPS, n_params=102400)   # 10 tokens per parameter
    assert law_tokens_per_param(ps, t).estimate == pytest.approx(0.03, rel=EXACT)
    with pytest.raises(NotIdentified, match="unknown"):
        law_tokens_per_param(ps, Target(steps=1000, tokens_per_step=TPS))


def test_joint_law_by_hand():
    # g = 0.01 N^0.25 (D/N)^-0.5 on two sizes x two horizons (+ one point): read at a third size
    def g(T, N):
        return 0.01 * N ** 0.25 * (T * TPS / N) ** -0.5
    pts = [(T, N, g(T, N)) for N in (4096, 65536) for T in (100, 400)] + [(200, 4096, g(200, 4096))]
    _, ps = make_pairs(pts)
    t = Target(steps=3000, tokens_per_step=TPS, n_params=10**6)
    p = law_joint(ps, t)
    assert p.estimate == pytest.approx(g(3000, 10**6), rel=1e-8)
    assert p.detail["size_exponent"] == pytest.approx(0.25, rel=1e-8)
    assert p.detail["tokens_per_param_exponent"] == pytest.approx(-0.5, rel=1e-8)
    _, one = make_pairs([(T, 4096, g(T, 4096)) for T in (100, 200, 400)])
    with pytest.raises(NotIdentified, match="one model size"):
        law_joint(one, t)


def test_theory_law_by_hand():
    # calibration pairs with g / Z = 2 exactly: the prediction is 2 Z of the new synchronous run
    runs = []
    for seed, L in enumerate((5.0, 20.0)):
        sync = run_pair(T=200, N=1000, g=0.01, seed=seed, L=L)[0]
        z = delay_statistic(sync)
        runs += run_pair(T=200, N=1000, g=2 * z, seed=seed, L=L)
    from llm_validation.advice.pilot import pairs
    ps = pairs(runs)
    new_sync = run_pair(T=200, N=1000, g=0.01, seed=9, L=40.0)[0]
    p = law_theory(ps, [new_sync], "muon", "delay")
    assert p.estimate == pytest.approx(2 * delay_statistic(new_sync), rel=EXACT)
    with pytest.raises(NotIdentified, match="no calibration pair"):
        law_theory(ps, [new_sync], "muon", "ef")
    with pytest.raises(ValueError, match="unknown transfer law"):
        predict_law("chinchilla", ps, Target(steps=1, tokens_per_step=1))


def _ladder(law: str):
    """Three sizes x three tokens-per-parameter values, gaps from ``law``."""
    pts = []
    for N in (10_000, 100_000, 1_000_000):
        for tpp in (5, 10, 20):
            T = round(tpp * N / TPS)
            g = 0.1 * (tpp / 10) ** -1 if law == "tokens_per_param" else 0.1 * (T / 1000) ** -0.5
            pts.append((T, N, g))
    return make_pairs(pts)[1]


@pytest.mark.parametrize("truth", ["tokens_per_param", "steps"])
def test_the_law_that_generated_the_data_wins_on_held_out_sizes(truth):
    scores = score_laws(_ladder(truth))
    assert scores["largest_size"]["held_out"] == "N=1,000,000"
    c = choose(scores)
    assert c["law"] == truth and c["deciding_hold_out"] == "largest_size"
    s = scores["largest_size"][truth]
    assert s["hits"] == s["pairs"] == 3 and s["mean_abs_log_error"] < 0.01
    assert "theory" in c["ruled_out"] and "theory" not in c["not_ruled_out"]


def test_one_size_falls_back_to_the_horizon_law():
    _, ps = make_pairs([(T, 1000, 0.2 * (T / 100) ** -0.5) for T in (100, 200, 400, 800)])
    scores = score_laws(ps)
    assert scores["largest_size"] == {"skipped": "one model size in the pilot"}
    assert held_out_split(ps, "longest_horizon")[1] == "800 steps at N=1,000"
    c = choose(scores)
    assert c["law"] == FALLBACK == "steps" and "not identified" in c["reason"]
    assert scores["longest_horizon"]["steps"]["hits"] == 1
    assert scores["longest_horizon"]["joint"]["predicted"] == 0    # one size: never fitted


def test_plan_pilot_by_hand():
    from llm_validation.advice.pilot_plan import plan_pilot
    # 1e9 parameters, 2e10 tokens (20 per parameter), 1e6 tokens a step, 1 device-second a step
    r = plan_pilot(params=1e9, tokens=2e10, tokens_per_step=1e6, device_seconds_per_step=1.0)
    big = r["runs"][0]
    assert big["params"] == 10**8 and big["steps"] == 2000      # 1/10 the size, 1/10 the steps
    # c = 1 / (1e6 x 1e9) s per token-parameter; 9 runs x 1e8 x 2e9 x c = 1800 s
    assert big["device_hours"] == pytest.approx(0.5, rel=EXACT)
    assert r["target"]["device_hours"] == pytest.approx(2e4 / 3600, rel=EXACT)
    assert len({x["params"] for x in r["runs"]}) == 3 and r["total_runs"] == 45
    assert r["runs"][-1]["params"] == round(1e8 / 5)             # the ladder spans 5x
    assert r["share_of_target"] < 0.2 and math.isfinite(r["device_hours"])
    with pytest.raises(ValueError, match="params"):
        plan_pilot(params=0, tokens=1, tokens_per_step=1, device_seconds_per_step=1)


@pytest.mark.parametrize("truth", ["tokens_per_param", "steps"])
def test_confirmation_scores_the_chosen_law_on_a_fold_that_did_not_choose_it(truth):
    from llm_validation.advice.transfer_choice import confirmation, transfer_summary
    ps = _ladder(truth)
    t = transfer_summary(ps)
    f = t["confirmation"]
    assert t["choice"]["law"] == truth
    # the next largest size (100k) predicted from the smallest alone; the largest never seen
    assert f["held_out"] == "N=100,000" and f["fitted_on"] == [10_000]
    assert f["hits"] == f["pairs"] == 3
    # a law that did not generate the data misses there
    other = "steps" if truth == "tokens_per_param" else "tokens_per_param"
    assert confirmation(ps, other)["hits"] < 3
    two_sizes = [p for p in ps if p.n_params != 1_000_000]
    assert confirmation(two_sizes, truth) == {"skipped": "needs three model sizes (the pilot has 2)"}


def test_seed_reference_predicts_each_pair_by_its_arms_other_seeds():
    from llm_validation.advice.transfer_choice import SEED_REFERENCE
    # two smaller sizes (fitted), the largest held out: three seeds of one arm each
    small = [(T, N, 0.1) for N in (1_000, 10_000) for T in (100, 200)]
    tight = make_pairs(small + [(400, 100_000, g) for g in (0.10, 0.12, 0.15)])[1]
    ref = score_laws(tight)["largest_size"][SEED_REFERENCE]
    # 0.10 vs mean(0.12, 0.15) = 0.135; 0.12 vs 0.125; 0.15 vs 0.11: all within a factor 2
    assert (ref["hits"], ref["predicted"], ref["pairs"]) == (3, 3, 3)
    wide = make_pairs(small + [(400, 100_000, g) for g in (0.10, 0.10, 0.40)])[1]
    ref = score_laws(wide)["largest_size"][SEED_REFERENCE]
    # 0.10 vs mean(0.10, 0.40) = 0.25 (2.5x); 0.40 vs 0.10 (4x): none within a factor 2
    assert (ref["hits"], ref["predicted"]) == (0, 3)
    assert ref["mean_abs_log_error"] == pytest.approx(
        (2 * math.log(2.5) + math.log(4)) / 3, rel=EXACT)
    # one seed per arm: nothing to predict from; never a candidate of the choice
    lone = score_laws(_ladder("steps"))
    assert lone["largest_size"][SEED_REFERENCE]["predicted"] == 0
    assert choose(lone)["law"] != SEED_REFERENCE and SEED_REFERENCE not in lone["laws"]


def test_step_count_pilot_by_hand():
    from llm_validation.advice.pilot_plan import step_count_pilot
    # 1e9 parameters, 2e10 tokens at 1e6 a step (20,000 steps), 1 device-second a step
    r = step_count_pilot(params=1e9, tokens=2e10, tokens_per_step=1e6,
                         device_seconds_per_step=1.0, scatter=0.2)
    assert r["params"] == 10**8 and r["steps"] == 20_000 and r["runs"] == 9
    # 9 runs x 1e8 parameters x 2e10 tokens x 1e-15 s = 18,000 s of the target's 20,000 s
    assert r["device_hours"] == pytest.approx(5.0, rel=EXACT)
    assert r["share_of_target"] == pytest.approx(0.9, rel=EXACT)
    # t_{0.975, 2} = 4.302653 (tables), sqrt(1 + 1/3)
    per_s = 4.302653 * math.sqrt(4 / 3)
    assert r["interval"]["log_half_width_per_scatter"] == pytest.approx(per_s, rel=1e-6)
    assert r["interval"]["factor"] == pytest.approx(math.exp(0.2 * per_s), rel=1e-6)
    assert step_count_pilot(params=1e9, tokens=2e10, tokens_per_step=1e6,
                            device_seconds_per_step=1.0)["interval"]["factor"] is None
