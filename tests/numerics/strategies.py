"""Shared Hypothesis strategies for the numerics property suites (all floats bounded, no NaN)."""

from __future__ import annotations

from hypothesis import strategies as st

from numerics.draws import (
        ALPHA_RANGE,
        ETA_RANGE,
        FRAC_RANGE,
        LAM_RANGE,
        RADIUS_RANGE,
        SIGMA_RANGE,
        Draws,
)

__all__ = ["draws", "SIZE"]

#: Problem sizes drawn in the property suites (small keeps each example ~0.1 s).
SIZE = {"quadratic_l2": (2, 8), "quadratic_linf": (2, 8), "matrix_ls": (2, 3), "angular": (2, 8),
        "pl_sine": (1, 8)}

draws = st.builds(
    Draws,
    tau=st.integers(0, 8),
    eta=st.floats(*ETA_RANGE, allow_nan=False),
    alpha=st.one_of(st.just(1.0), st.floats(*ALPHA_RANGE, allow_nan=False)),
    radius=st.floats(*RADIUS_RANGE, allow_nan=False),
    sigma=st.one_of(st.just(0.0), st.floats(*SIGMA_RANGE, allow_nan=False)),
    lam=st.floats(*LAM_RANGE, allow_nan=False),
    frac=st.floats(*FRAC_RANGE, allow_nan=False),
    wd=st.booleans(),
    seed=st.integers(0, 2**31),
)
