"""config_for at the edges of the draw ranges: every configuration satisfies its theorem."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from numerics.draws import (
    ALPHA_RANGE,
    ETA_RANGE,
    FRAC_RANGE,
    LAM_RANGE,
    RADIUS_RANGE,
    SIGMA_RANGE,
    TAU_MAX,
    Draws,
    config_for,
)
from numerics.problems import make_problem
from numerics.specs import SPECS

#: EF coefficients tried at the edges of LAM_RANGE and in between (the gd_ef step limit depends
#: on (1 + lam)^2; lam = 0.375 once put the float64 limit 2e-16 past the condition).
LAMS = tuple(np.linspace(*LAM_RANGE, 13))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_edge_draws_satisfy_the_theorem(name):
    spec = SPECS[name]
    problems = [make_problem(fam, 3, 0) for fam in spec.families]
    edges = itertools.product((0, 1, TAU_MAX), ETA_RANGE, (ALPHA_RANGE[0], 1.0), RADIUS_RANGE,
                              (0.0, SIGMA_RANGE[1]), LAMS, FRAC_RANGE, (False, True))
    checked = 0
    for tau, eta, alpha, radius, sigma, lam, frac, wd in edges:
        d = Draws(tau=tau, eta=eta, alpha=alpha, radius=radius, sigma=sigma, lam=float(lam),
                  frac=frac, wd=wd)
        for p in problems:
            c = config_for(spec.kind, p, d)
            reason = spec.applies(p, c)
            assert reason == "", f"{name} on {p.name}: {c}: {reason}"
            checked += 1
    assert checked > 0
