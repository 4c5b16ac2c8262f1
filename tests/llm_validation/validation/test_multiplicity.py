"""Holm and Benjamini-Hochberg adjusted p-values: textbook answers, rows as families, and the
levels a rejected test is decided at."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_validation.validation.multiplicity import (adjusted, benjamini_hochberg, holm,
                                                     rejected, rejection_levels)

#: Benjamini & Hochberg (1995), section 4: 15 p-values from a trial; at 5% Bonferroni-type
#: procedures (Holm) reject 3, BH rejects 4.
BH_1995 = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240,
           0.4262, 0.5719, 0.6528, 0.7590, 1.0000]


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert rejected(p, 0.05, "holm").tolist() == [True, False, False, True]
    assert rejection_levels(p, 0.05, "holm") == pytest.approx([0.05 / 3, np.nan, np.nan,
                                                                0.05 / 4], nan_ok=True)
    assert holm([0.6, 0.9]) == pytest.approx([1.0, 1.0])     # capped at 1


def test_bh_by_hand_and_the_1995_example():
    # sorted 0.005, 0.01, 0.03, 0.04: 4p/k = 0.02, 0.02, 0.04, 0.04 (running min from the top)
    p = [0.01, 0.04, 0.03, 0.005]
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert rejected(p, 0.05, "bh").all()                     # Holm rejects only 2 of them
    assert rejection_levels(p, 0.05, "bh") == pytest.approx([0.05] * 4)
    assert rejected(BH_1995, 0.05, "holm").sum() == 3
    assert rejected(BH_1995, 0.05, "bh").sum() == 4
    assert rejection_levels(BH_1995, 0.05, "bh")[:4] == pytest.approx([0.05 * 4 / 15] * 4)


def test_none_is_the_per_test_rule_and_bad_input_is_refused():
    p = [0.01, 0.2, 0.049]
    assert adjusted(p, "none").tolist() == p
    assert rejected(p, 0.05, "none").tolist() == [True, False, True]
    with pytest.raises(ValueError, match="method"):
        adjusted(p, "bonferroni")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([0.1, float("nan")])
    with pytest.raises(ValueError, match="alpha"):
        rejected(p, 1.5, "holm")
    assert holm([]).size == 0 and benjamini_hochberg([]).size == 0


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30),
       st.sampled_from(["holm", "bh"]))
def test_rows_are_families_and_the_order_is_kept(p, method):
    x = np.array(p)
    perm = np.random.default_rng(len(p)).permutation(x.size)
    one = adjusted(x, method)
    assert np.all(one >= x - 1e-15) and np.all(one <= 1.0)
    assert adjusted(x[perm], method) == pytest.approx(one[perm])      # permutation-equivariant
    rows = adjusted(np.stack([x, x[::-1]]), method)                   # one family per row
    assert rows[0] == pytest.approx(one) and rows[1] == pytest.approx(one[::-1])
    if method == "holm":                                              # Holm >= BH, <= Bonferroni
        assert np.all(one >= benjamini_hochberg(x) - 1e-15)
        assert np.all(one <= np.minimum(1.0, x.size * x) + 1e-15)
    levels = rejection_levels(x, 0.05, method)
    hit = ~np.isnan(levels)
    assert np.array_equal(hit, rejected(x, 0.05, method)) and np.all(x[hit] <= levels[hit])
