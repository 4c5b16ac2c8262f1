"""Domains: the single place where parameter values are validated."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from theory.domain import (
    AT_LEAST_ONE,
    NONNEGATIVE,
    NONNEGATIVE_INTEGER,
    POSITIVE,
    POSITIVE_INTEGER,
    UNIT_HALF_OPEN,
    UNIT_OPEN,
    Domain,
    fixed,
)


@pytest.mark.parametrize("dom, text", [
    (POSITIVE, "(0, inf)"), (NONNEGATIVE, "[0, inf)"), (UNIT_OPEN, "(0, 1)"),
    (UNIT_HALF_OPEN, "(0, 1]"), (AT_LEAST_ONE, "[1, inf)"), (POSITIVE_INTEGER, "integer >= 1"),
    (NONNEGATIVE_INTEGER, "integer >= 0"), (fixed(1), "{1}"),
])
def test_describe(dom, text):
    assert dom.describe() == text


@pytest.mark.parametrize("dom, good, bad", [
    (POSITIVE, [1e-300, 1, 5.5], [0, -1e-9]),
    (UNIT_HALF_OPEN, [1e-9, 0.5, 1], [0, 1.0000001, -0.5]),
    (UNIT_OPEN, [1e-9, 0.999], [0, 1]),
    (AT_LEAST_ONE, [1, 7.2], [0.999]),
    (NONNEGATIVE_INTEGER, [0, 3, 2.0], [-1, 0.5, 1.5]),
    (POSITIVE_INTEGER, [1, 10**12], [0, 2.5]),
    (fixed(1), [1, 1.0], [0, 2]),
])
def test_validate_accepts_and_rejects(dom, good, bad):
    for v in good:
        out = dom.validate("p", v)
        assert out == v and isinstance(out, int if dom.integer else float)
    for v in bad:
        with pytest.raises(ValueError, match=r"^p=.*allowed: "):
            dom.validate("p", v)


@given(st.one_of(st.text(max_size=5), st.booleans(), st.none(), st.complex_numbers(),
                 st.lists(st.integers(), max_size=2)))
def test_non_numbers_are_type_errors(value):
    with pytest.raises(TypeError, match=r"^p=.* must be a real number"):
        POSITIVE.validate("p", value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_is_value_error(value):
    with pytest.raises(ValueError, match="not finite"):
        NONNEGATIVE.validate("p", value)


def test_bad_domain_construction():
    with pytest.raises(ValueError):
        Domain(lower=2.0, upper=1.0)
    with pytest.raises(ValueError):
        Domain(lower=1.0, upper=1.0, lower_open=True)
    with pytest.raises(TypeError):
        Domain(lower="0")
