"""The Theorem API: names, evaluate (and its rejections), trends, reductions, tuned corollaries,
complexity, LaTeX, and the tau = 0 comparison with Kovalev (2025) Theorem 2."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from theory import THEOREMS, get_theorem
from theory.nonconvex import KOVALEV_CONSTANTS, KOVALEV_REMAINDER, KOVALEV_TERMS
from theory.symbols import tau

#: Relative float64 slack for "tuned bound <= eps": the bound is a sum of <= 6 terms each
#: computed to a few ulps (~1e-15 relative); 1e-12 leaves a wide margin and no room for a real
#: violation of the eps/4 split.
TUNED_RTOL = 1e-12

REQUIRED = {
    "star_convex_sync": ["K", "L", "eta", "alpha", "beta", "sigma", "rho", "tau", "r0"],
    "star_convex_delayed": ["K", "L", "eta", "alpha", "beta", "sigma", "rho", "tau", "r0"],
    "star_convex_delayed_ef": ["K", "L", "eta", "alpha", "beta", "sigma", "rho", "tau", "r0",
                               "lam", "omega_bar"],
    "nonconvex_delayed": ["K", "L", "eta", "alpha", "sigma", "rho", "tau", "Delta0"],
    "nonconvex_delayed_ef": ["K", "L", "eta", "alpha", "sigma", "rho", "tau", "Delta0", "lam",
                             "omega_bar"],
    "pl_delay_gap": ["L", "eta", "alpha", "tau", "mu"],
    "geometry_weight_decay": ["eta", "beta"],
    "momentum_error": ["k", "L", "eta", "alpha", "sigma", "rho", "s", "omega_bar"],
    "nonconvex_delayed_gd": ["K", "L", "gamma", "tau", "Delta0"],
    "nonconvex_delayed_gd_ef": ["K", "L", "gamma", "lam", "Delta0"],
}

VALID = {
    "star_convex_sync": dict(K=1000, L=1, eta=0.01, alpha=0.1, beta=0.005, sigma=0.5, rho=2, r0=1),
    "star_convex_delayed": dict(K=1000, L=1, eta=0.01, alpha=0.1, beta=0.005, sigma=0.5, rho=2,
                                tau=1, r0=1),
    "star_convex_delayed_ef": dict(K=1000, L=1, eta=0.01, alpha=0.1, beta=0.005, sigma=0.5, rho=2,
                                   r0=1, lam=1, omega_bar=1.5),
    "nonconvex_delayed": dict(K=1000, L=1, eta=0.01, alpha=0.1, sigma=0.5, rho=2, tau=1, Delta0=1),
    "nonconvex_delayed_ef": dict(K=1000, L=1, eta=0.01, alpha=0.1, sigma=0.5, rho=2, Delta0=1,
                                 lam=1, omega_bar=1.5),
    "pl_delay_gap": dict(L=1, eta=0.01, alpha=0.1, tau=1, mu=0.1),
    "geometry_weight_decay": dict(eta=0.01, beta=0.005),
    "momentum_error": dict(k=3, L=1, eta=0.01, alpha=0.1, sigma=0.5, rho=2, s=1, omega_bar=1),
    "nonconvex_delayed_gd": dict(K=100, L=1, gamma=0.3, tau=2, Delta0=1),
    "nonconvex_delayed_gd_ef": dict(K=100, L=1, gamma=0.3, lam=0.5, Delta0=1),
}


def test_required_names_and_parameters():
    assert set(REQUIRED) <= set(THEOREMS)
    for name, params in REQUIRED.items():
        assert list(THEOREMS[name].parameters) == params, name


def test_cli_example_value():
    """The issue's example: star_convex_delayed at K=1000, L=1, eta=0.01, alpha=0.1, beta=0.005,
    sigma=0, rho=1, tau=1, r0=1 (D = 2): (1-0.005)^1000 + 4*0.01*2*(9 + 1) + 2*0.01*2."""
    value = THEOREMS["star_convex_delayed"].evaluate(
        K=1000, L=1, eta=0.01, alpha=0.1, beta=0.005, sigma=0, rho=1, tau=1, r0=1)
    assert value == pytest.approx(0.995 ** 1000 + 0.8 + 0.04, rel=1e-12)


@pytest.mark.parametrize("name", list(THEOREMS))
def test_valid_values_evaluate_to_a_finite_nonnegative_float(name):
    value = THEOREMS[name].evaluate(**VALID[name])
    assert isinstance(value, float) and math.isfinite(value) and value >= 0


# ------------------------------------------------------------------------------- bad input
BAD_REAL = st.one_of(st.just(math.nan), st.just(math.inf), st.just(-math.inf),
                     st.floats(max_value=-1e-6, min_value=-1e6, allow_nan=False))
NOT_A_NUMBER = st.one_of(st.text(max_size=4), st.none(), st.booleans(), st.just([1.0]),
                         st.just(1 + 2j))



@given(st.sampled_from(sorted(THEOREMS)), st.data())
def test_bad_values_are_rejected_with_the_parameter_named(name, data):
    theorem = THEOREMS[name]
    values = dict(VALID[name])
    param = data.draw(st.sampled_from(sorted(values)))
    bad = data.draw(st.one_of(BAD_REAL, NOT_A_NUMBER))
    values[param] = bad
    # every domain has lower end >= 0, so each negative real is out of domain (ValueError)
    assert all(dom.lower >= 0 for dom in theorem.domains.values())
    expected = TypeError if isinstance(bad, (str, bool, list, complex)) or bad is None else ValueError
    with pytest.raises(expected) as info:
        theorem.evaluate(**values)
    assert param in str(info.value)


@pytest.mark.parametrize("name, param, value", [
    ("star_convex_delayed", "eta", 0), ("star_convex_delayed", "L", -1),
    ("star_convex_delayed", "K", 0), ("star_convex_delayed", "K", 2.5),
    ("star_convex_delayed", "alpha", 0), ("star_convex_delayed", "alpha", 1.5),
    ("star_convex_delayed", "beta", 0), ("star_convex_delayed", "beta", 1),
    ("star_convex_delayed", "tau", -1), ("star_convex_delayed", "tau", 0.5),
    ("star_convex_delayed", "rho", 0.5), ("nonconvex_delayed_ef", "tau", 2),
    ("star_convex_sync", "tau", 1),
])
def test_out_of_domain_values(name, param, value):
    with pytest.raises(ValueError, match=rf"{param}={value!r} .*allowed: "):
        THEOREMS[name].evaluate(**{**VALID[name], param: value})


def test_unknown_and_missing_names_are_type_errors():
    theorem = THEOREMS["nonconvex_delayed"]
    with pytest.raises(TypeError, match="unexpected parameter.*'gamma'"):
        theorem.evaluate(**VALID["nonconvex_delayed"], gamma=1)
    values = dict(VALID["nonconvex_delayed"])
    del values["eta"]
    with pytest.raises(TypeError, match=r"missing parameter.*'eta'"):
        theorem.evaluate(**values)
    with pytest.raises(ValueError, match="unknown theorem"):
        get_theorem("nope")


def test_fixed_parameters_may_be_omitted_or_given():
    ef = THEOREMS["nonconvex_delayed_ef"]
    assert ef.evaluate(**VALID["nonconvex_delayed_ef"]) == ef.evaluate(
        **VALID["nonconvex_delayed_ef"], tau=1)


def test_side_conditions_reject_with_numbers():
    with pytest.raises(ValueError, match=r"2\*beta\*lam < 1.*fails: 1\.2"):
        THEOREMS["star_convex_delayed_ef"].evaluate(**{**VALID["star_convex_delayed_ef"],
                                                       "beta": 0.6, "lam": 1})
    with pytest.raises(ValueError, match=r"step-size condition.*fails"):
        THEOREMS["nonconvex_delayed_gd"].evaluate(K=10, L=1, gamma=0.5, tau=2, Delta0=1)
    with pytest.raises(ValueError, match=r"step-size condition.*fails"):
        THEOREMS["nonconvex_delayed_gd_ef"].evaluate(K=10, L=1, gamma=0.4, lam=1, Delta0=1)


# ------------------------------------------------------------------------- trends and forms
@pytest.mark.parametrize("name", ["star_convex_delayed", "nonconvex_delayed", "pl_delay_gap"])
def test_delay_increases_the_delayed_bounds(name):
    assert THEOREMS[name].trend("tau") == 1
    assert THEOREMS[name].trend(tau) == 1


@pytest.mark.parametrize("name", ["nonconvex_delayed_ef", "star_convex_delayed_ef"])
def test_read_mismatch_increases_the_ef_bounds(name):
    assert THEOREMS[name].trend("omega_bar") == 1


@pytest.mark.parametrize("name", ["star_convex_sync", "star_convex_delayed",
                                  "star_convex_delayed_ef"])
def test_more_steps_decrease_the_star_convex_bounds(name):
    assert THEOREMS[name].trend("K") == -1


def test_trend_edge_cases():
    nc = THEOREMS["nonconvex_delayed"]
    assert nc.trend("K") == -1 and nc.trend("sigma") == 1
    assert THEOREMS["nonconvex_delayed_ef"].trend("lam") == 0  # lam acts only through omega_bar
    with pytest.raises(ValueError, match="cannot decide"):  # eta trades Delta0/eta against L eta
        nc.trend("eta")
    with pytest.raises(ValueError, match="fixed"):
        THEOREMS["nonconvex_delayed_ef"].trend("tau")
    with pytest.raises(ValueError, match="not a parameter"):
        nc.trend("beta")


def test_sync_is_delayed_at_tau_zero():
    sync, delayed = THEOREMS["star_convex_sync"], THEOREMS["star_convex_delayed"]
    assert sympy.simplify(sync.bound - delayed.bound.subs(tau, 0)) == 0
    assert sync.evaluate(**VALID["star_convex_sync"]) == pytest.approx(
        delayed.evaluate(**{**VALID["star_convex_delayed"], "tau": 0}), rel=1e-14)


def test_ef_reduces_to_delay_one_at_lam_zero():
    ef, delayed = THEOREMS["star_convex_delayed_ef"], THEOREMS["star_convex_delayed"]
    base = {k: v for k, v in VALID["star_convex_delayed"].items() if k != "tau"}
    assert ef.evaluate(**base, lam=0, omega_bar=2) == pytest.approx(
        delayed.evaluate(**base, tau=1), rel=1e-14)
    nef, ndel = THEOREMS["nonconvex_delayed_ef"], THEOREMS["nonconvex_delayed"]
    nbase = {k: v for k, v in VALID["nonconvex_delayed"].items() if k != "tau"}
    assert nef.evaluate(**nbase, lam=0, omega_bar=1) == pytest.approx(
        ndel.evaluate(**nbase, tau=1), rel=1e-14)
    gd, gd_ef = THEOREMS["nonconvex_delayed_gd"], THEOREMS["nonconvex_delayed_gd_ef"]
    assert gd_ef.evaluate(K=10, L=1, gamma=0.6, lam=0, Delta0=1) == gd.evaluate(
        K=10, L=1, gamma=0.6, tau=1, Delta0=1)


def test_tau_zero_matches_kovalev_theorem_2_form():
    """At tau = 0: exactly 1, 2, 2, 2 times Kovalev's four terms Delta0/(eta K), rho sigma/(alpha K),
    sqrt(alpha) rho sigma, L eta/alpha, minus 3 L eta/2; hence within [1/4, 2] of the unit-constant
    form for every alpha in (0, 1] (documented constants)."""
    nc = THEOREMS["nonconvex_delayed"]
    at_zero = nc.bound.subs(tau, 0)
    form = sum(c * t for c, t in zip(KOVALEV_CONSTANTS, KOVALEV_TERMS)) + KOVALEV_REMAINDER
    assert sympy.simplify(at_zero - form) == 0
    unit = sum(KOVALEV_TERMS)
    for alpha in (1.0, 0.5, 1e-3):
        for K, eta, sigma in ((10, 0.1, 0.0), (10 ** 4, 1e-3, 2.0)):
            values = dict(K=K, L=1, eta=eta, alpha=alpha, sigma=sigma, rho=1, tau=0, Delta0=1)
            ours = nc.evaluate(**values)
            ref = float(unit.subs({nc.parameters[k]: v for k, v in values.items()}))
            assert ref / 4 <= ours <= 2 * ref


def test_pl_gap_law():
    pl = THEOREMS["pl_delay_gap"]
    v = dict(L=2.0, eta=0.01, alpha=0.1, tau=3, mu=0.05)
    gap = pl.evaluate_extra("gap", **v)
    floor_tau, floor_0 = pl.evaluate(**v), pl.evaluate(**{**v, "tau": 0})
    assert gap == pytest.approx(floor_tau - floor_0, rel=1e-12)
    lead = pl.evaluate_extra("gap_leading", **v)
    assert lead == pytest.approx(2 * 4 * 1e-4 * 3 * (3 + 18 + 0.5) / 0.05, rel=1e-12)
    assert gap - lead == pytest.approx(2 * 2.0 * 1e-4 * 3, rel=1e-9)
    # quadratic in eta
    assert pl.evaluate_extra("gap", **{**v, "eta": 0.02}) == pytest.approx(4 * gap, rel=1e-12)


# ------------------------------------------------------------------------ tuned corollaries
PROBLEM = {
    "star_convex_sync": dict(L=st.floats(0.01, 100), sigma=st.floats(0, 10), rho=st.floats(1, 30),
                             r0=st.floats(0, 100), D=st.floats(0.1, 10)),
    "star_convex_delayed": dict(L=st.floats(0.01, 100), sigma=st.floats(0, 10),
                                rho=st.floats(1, 30), tau=st.integers(0, 10), r0=st.floats(0, 100),
                                D=st.floats(0.1, 10)),
    "star_convex_delayed_ef": dict(L=st.floats(0.01, 100), sigma=st.floats(0, 10),
                                   rho=st.floats(1, 30), r0=st.floats(0, 100),
                                   D=st.floats(0.1, 10), lam=st.floats(0, 2),
                                   omega_bar=st.floats(0, 6)),
    "nonconvex_delayed": dict(L=st.floats(0.01, 100), sigma=st.floats(0, 10), rho=st.floats(1, 30),
                              tau=st.integers(0, 10), Delta0=st.floats(0, 100)),
    "nonconvex_delayed_ef": dict(L=st.floats(0.01, 100), sigma=st.floats(0, 10),
                                 rho=st.floats(1, 30), Delta0=st.floats(0, 100),
                                 lam=st.floats(0, 1), omega_bar=st.floats(0, 4)),
    "pl_delay_gap": dict(L=st.floats(0.01, 100), alpha=st.floats(1e-3, 1), tau=st.integers(0, 10),
                         mu=st.floats(1e-3, 10)),
    "nonconvex_delayed_gd": dict(L=st.floats(0.01, 100), tau=st.integers(0, 10),
                                 Delta0=st.floats(0, 100)),
    "nonconvex_delayed_gd_ef": dict(L=st.floats(0.01, 100), lam=st.floats(0, 1),
                                    Delta0=st.floats(0, 100)),
}



@given(st.sampled_from(sorted(PROBLEM)), st.floats(1e-3, 10), st.data())
def test_tuned_parameters_make_the_bound_at_most_eps(name, eps, data):
    theorem = THEOREMS[name]
    problem = {k: data.draw(s, label=k) for k, s in PROBLEM[name].items()}
    result = theorem.tuned(eps=eps, **problem)
    assert result["bound"] <= eps * (1 + TUNED_RTOL)
    assert theorem.evaluate(**result["parameters"]) == result["bound"]  # valid parameters
    if theorem.tuning.K_expr is not None:
        assert result["K"] == theorem.complexity(eps, **problem)["K"]



@given(st.sampled_from(["star_convex_delayed", "nonconvex_delayed", "nonconvex_delayed_gd"]),
       st.integers(10, 10 ** 7), st.data())
def test_tuned_for_a_budget_of_steps(name, budget, data):
    theorem = THEOREMS[name]
    problem = {k: data.draw(s, label=k) for k, s in PROBLEM[name].items()}
    result = theorem.tuned(K=budget, **problem)
    assert result["K"] == budget
    assert result["bound"] <= result["eps"] * (1 + TUNED_RTOL)
    assert theorem.complexity(result["eps"], **problem)["K"] <= budget


def test_complexity_scaling():
    """tau multiplies only the deterministic term; noise brings in 1/eps^3 (star-convex) and
    1/eps^4 (nonconvex)."""
    sc = THEOREMS["star_convex_delayed"]
    det = [sc.complexity(e, L=1, sigma=0, rho=1, tau=4, r0=1, D=1)["K_real"] for e in (1e-2, 1e-3)]
    assert det[1] / det[0] == pytest.approx(10 * math.log(4e3) / math.log(4e2), rel=0.05)
    noisy = [sc.complexity(e, L=1, sigma=1, rho=1, tau=4, r0=1, D=1)["K_real"]
             for e in (1e-2, 1e-3)]
    assert noisy[1] / noisy[0] == pytest.approx(1e3 * math.log(4e3) / math.log(4e2), rel=0.05)
    nc = THEOREMS["nonconvex_delayed"]
    k = [nc.complexity(e, L=1, sigma=1, rho=1, tau=0, Delta0=1)["K_real"] for e in (1e-2, 1e-3)]
    assert k[1] / k[0] == pytest.approx(1e4, rel=0.01)
    expr = nc.complexity(0.1, L=1, sigma=1, rho=1, tau=0, Delta0=1)["expression"]
    assert isinstance(expr, sympy.Expr)
    with pytest.raises(ValueError, match="no iteration count"):
        THEOREMS["pl_delay_gap"].complexity(0.1, L=1, alpha=0.5, tau=1, mu=1)
    with pytest.raises(ValueError, match="no tuned corollary"):
        THEOREMS["momentum_error"].tuned(eps=0.1)
    with pytest.raises(TypeError, match="missing problem"):
        sc.tuned(eps=0.1, L=1)
    with pytest.raises(ValueError, match="eps"):
        sc.tuned(eps=-1, L=1, sigma=0, rho=1, tau=0, r0=1, D=1)


# ---------------------------------------------------------------------------------- LaTeX
@pytest.mark.parametrize("name", list(THEOREMS))
def test_latex_renders_with_mathtext(name):
    from matplotlib.mathtext import MathTextParser

    text = THEOREMS[name].latex()
    assert r"\leq" in text
    MathTextParser("path").parse(f"${text}$")


def test_importing_theory_does_not_import_torch():
    code = "import sys, theory; theory.THEOREMS['nonconvex_delayed'].evaluate(K=1, L=1, eta=1, " \
           "alpha=1, sigma=0, rho=1, tau=0, Delta0=1); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
