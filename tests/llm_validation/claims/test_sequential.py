"""The two-look seed policy: the second look's size and the policy's checks (its coverage is
simulated in tests/llm_validation/validation/test_inference.py, with the other methods')."""

from __future__ import annotations

import pytest

from llm_validation.claims.decide.sequential import DEFAULT_POLICY, SeedPolicy, second_look

def test_second_look_caps_at_max_seeds():
    near = [0.9, 1.1, 1.6]                     # mean 1.2, sd 0.36: a few more seeds decide
    far = [0.1, -0.2, 0.35]                    # mean near 0: far more than 8
    n, need = second_look(near, 0.0, DEFAULT_POLICY)
    assert n == max(need, 4) and DEFAULT_POLICY.first < n <= DEFAULT_POLICY.max_seeds
    n, need = second_look(far, 0.0, DEFAULT_POLICY)
    assert n is None and (need is None or need > DEFAULT_POLICY.max_seeds)


def test_policy_validates():
    with pytest.raises(ValueError, match="max-seeds"):
        SeedPolicy(max_seeds=2, first=3)
    with pytest.raises(ValueError):
        SeedPolicy(alpha=0.0)
    assert DEFAULT_POLICY.level1 == DEFAULT_POLICY.level2 == 0.975


def test_extra_budget_validates():
    with pytest.raises(ValueError, match="extra-budget"):
        SeedPolicy(budget_min=-1.0)
    with pytest.raises(ValueError, match="extra-budget"):
        SeedPolicy(budget_min=float("inf"))
    assert SeedPolicy(budget_min=0).to_dict()["budget_min"] == 0
