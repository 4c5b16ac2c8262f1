"""Per-seed contrasts and Fieller ratios: pairing by seed, and the ratio/contrast agreement."""

from __future__ import annotations

import pytest

from llm_validation.validation.contrast import contrast, contrast_interval, ratio_interval


def test_contrast_pairs_by_seed_and_keeps_common_seeds():
    gap = {0: 0.2, 1: 0.3, 2: 0.25}
    gap_ef = {0: 0.05, 2: 0.1, 5: 9.0}
    assert contrast({"g": gap, "e": gap_ef}, {"g": 1.0, "e": -2.0}) == \
        pytest.approx({0: 0.1, 2: 0.05})
    with pytest.raises(ValueError, match="not given"):
        contrast({"g": gap}, {"x": 1.0})


def test_fieller_ratio_excludes_r_exactly_when_the_contrast_does():
    x = {0: 0.2, 1: 0.24, 2: 0.22, 3: 0.19}
    y = {0: 0.09, 1: 0.13, 2: 0.1, 3: 0.1}
    ratio = ratio_interval(x, y)
    for r in (ratio.lo - 1e-6, ratio.lo + 1e-6, ratio.hi - 1e-6, ratio.hi + 1e-6, 0.5):
        iv = contrast_interval(contrast({"x": x, "y": y}, {"x": r, "y": -1.0}))
        assert (iv.lo > 0 or iv.hi < 0) == (not ratio.contains(r)), r


def test_ratio_is_unbounded_when_the_denominator_is_not_significant():
    iv = ratio_interval({0: 0.1, 1: -0.1, 2: 0.05}, {0: 0.1, 1: 0.1, 2: 0.1})
    assert not iv.bounded and iv.method == "none"
