"""PEPit cross-check (a few small SDPs): theory's delayed-GD bounds are never below PEPit's worst
case where their step-size condition holds; the formulation is exact at tau = 0, gamma = 1/L."""

from __future__ import annotations

import math

import pytest

from numerics.pep import PEP_ATOL, PEP_RTOL, pep_table, worst_case_delayed_gd

pytest.importorskip("PEPit")  # extra `pep`, installed by `make test`


def test_formulation_is_tight_for_plain_gd_at_step_one_over_L():
    """tau = 0, gamma L = 1: the worst case of (1/K) sum ||grad f(x_k)||^2 is exactly 2 Delta0/(gamma K)
    (the f_low relaxation loses nothing here), so the SDP reproduces theory's value."""
    assert math.isclose(worst_case_delayed_gd(1.0, 1.0, 3, 0), 2.0 / 3.0, rel_tol=1e-4)


def test_theory_is_never_below_pepit_and_no_guarantee_cells_are_listed():
    rows = pep_table(taus=(1,), gammas=(0.5, 0.75), lams=(1.0,), Ks=(3,))
    by = {(r.method, r.gamma): r for r in rows}
    # delayed GD, tau = 1: gamma = 0.5 satisfies L gamma + L^2 gamma^2 <= 1, gamma = 0.75 does not
    assert by[("delayed_gd", 0.5)].ok is True
    assert by[("delayed_gd", 0.5)].theory >= by[("delayed_gd", 0.5)].pep * (1 - PEP_RTOL) - PEP_ATOL
    assert by[("delayed_gd", 0.75)].theory is None and math.isfinite(by[("delayed_gd", 0.75)].pep)
    # EF-GD, lam = 1: condition L gamma + 4 L^2 gamma^2 <= 1 fails at both step sizes
    assert by[("ef_gd", 0.5)].theory is None and by[("ef_gd", 0.5)].ok is None
    assert all(r.pep > 0 for r in rows)


def test_ef_gd_below_theory_where_the_condition_holds():
    rows = pep_table(taus=(), gammas=(0.3,), lams=(0.5,), Ks=(3,))
    (row,) = rows
    assert row.method == "ef_gd" and row.theory is not None and row.ok is True, row


def test_no_guarantee_regions_summarise_pep_over_K():
    from numerics.pep import PepRow, no_guarantee_regions

    rows = [PepRow(method="delayed_gd", tau=2, lam=0.0, gamma=0.75, K=k, pep=v, theory=None)
            for k, v in ((2, 1.06), (4, 1.44), (6, 2.02))]
    rows += [PepRow(method="ef_gd", tau=1, lam=0.5, gamma=0.5, K=k, pep=v, theory=None)
             for k, v in ((2, 1.25), (4, 0.64), (6, 0.45))]
    rows += [PepRow(method="delayed_gd", tau=0, lam=0.0, gamma=0.5, K=2, pep=1.25, theory=2.0)]
    regions = no_guarantee_regions(rows)
    assert [(r["method"], r["decreasing_in_K"]) for r in regions] == [("delayed_gd", False), ("ef_gd", True)]
    assert regions[0]["pep_by_K"] == {"2": 1.06, "4": 1.44, "6": 2.02}
