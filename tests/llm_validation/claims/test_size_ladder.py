"""Size ladder: per-seed size exponents, extrapolation to the paper's sizes, agreement rules,
figure and markdown section."""

from __future__ import annotations

import math

import pytest

from llm_validation.claims.decide import regime
from llm_validation.claims.decide.checks import recheck
from llm_validation.claims.sizes.fit import (AGREEMENT_RULES, TARGETS, TOLERANCE, VERDICT,
                                               SizeLadderData, agreement_checks,
                                               paper_lag_fraction, rules_text, size_fits)
from llm_validation.claims.sizes.markdown import (PAPER_LAG_LABEL, plot_size_ladder,
                                                      size_ladder_axes, size_ladder_markdown)
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, PASS

#: The ladder's sizes (total -> non-embedding), roughly the issue's 47k / 126k / 279k.
SIZES = {47_104: 30_720, 126_208: 93_440, 279_040: 230_016}
SEEDS = range(5)
#: The protocol's lag fraction the tests decide against (the lead's regime constant, ~0.04).
LAG = 0.04
N135 = TARGETS["SmolLM-135M"]


def _law(c: dict[int, float], b: float) -> dict[int, dict[int, float]]:
    """N -> seed -> c_s (N / 47,104)^b: an exact power law per seed."""
    return {n: {s: c[s] * (n / 47_104) ** b for s in c} for n in SIZES}


def _data(lag: dict[str, dict[int, dict[int, float]]], gap=None) -> SizeLadderData:
    return SizeLadderData(gap_fraction=gap if gap is not None else lag, lag_fraction=lag,
                          non_embedding=SIZES)


def _flat(per_seed: dict[int, float]) -> dict[int, dict[int, float]]:
    """The same value at every size (exponent 0): the extrapolation is that value."""
    return {n: dict(per_seed) for n in SIZES}


def test_targets_are_the_presets_counts():
    assert TARGETS["SmolLM-135M"] == 134_515_008
    assert 3.6e8 < TARGETS["SmolLM-360M"] < 3.65e8


def test_exact_power_law_recovered_and_extrapolated():
    c = {0: 0.10, 1: 0.12, 2: 0.09, 3: 0.11, 4: 0.10}
    d = _data({"muon/2bw": _law(c, -0.5)})
    f = size_fits(d)["muon/2bw"]["lag_fraction"]
    assert f.exponent.estimate == pytest.approx(-0.5, abs=1e-12)
    assert f.exponent.hi - f.exponent.lo == pytest.approx(0.0, abs=1e-9)   # no spread
    assert f.exponent.n == 5 and not f.excluded
    e = f.extrapolations["SmolLM-135M"]
    for s, cs in c.items():     # per seed: c_s (N / 47,104)^-0.5 at N = 134,515,008
        assert math.exp(e.log_values[s]) == pytest.approx(cs * (N135 / 47_104) ** -0.5,
                                                          rel=1e-9)
    geo = math.exp(sum(math.log(v) for v in c.values()) / 5) * (N135 / 47_104) ** -0.5
    assert e.interval.estimate == pytest.approx(geo, rel=1e-9)
    assert e.interval.lo < geo < e.interval.hi


def test_non_positive_value_left_out_and_counted():
    vals = _law({s: 0.1 for s in SEEDS}, -0.3)
    vals[126_208][2] = 0.0
    d = _data({"adamw/2bw": vals})
    f = size_fits(d)["adamw/2bw"]["lag_fraction"]
    assert set(f.excluded) == {2} and "126208" in f.excluded[2]
    assert f.exponent.n == 4 and set(f.extrapolations["SmolLM-135M"].log_values) == {0, 1, 3, 4}
    assert "left out: 1 seed(s)" in f.text()
    md = "\n".join(size_ladder_markdown(d, size_fits(d), [], paper_lag=LAG))
    assert "seed 2: value <= 0" in md


def test_extrapolation_is_labelled_everywhere():
    d = _data({"muon/2bw": _law({s: 0.05 + 0.01 * s for s in SEEDS}, -0.4),
               "adamw/2bw": _law({s: 0.2 + 0.01 * s for s in SEEDS}, -0.2)})
    fits = size_fits(d)
    e = fits["muon/2bw"]["lag_fraction"].extrapolations["SmolLM-360M"]
    assert e.note.startswith("extrapolation") and "(extrapolation)" in e.fmt()
    assert "power law in N holds" in e.note and "byte-level vocabulary" in e.note
    assert "49,152" in e.note and "decades" in e.note
    checks, measured = agreement_checks(fits, paper_lag=LAG)
    assert all("EXTRAPOLATION" in c.label for c in checks)
    assert all("EXTRAPOLATION" in k for k in measured if "SmolLM" in k and "bound" not in k)
    assert all("extrapolation" in t for t in rules_text(LAG))
    md = size_ladder_markdown(d, fits, checks, paper_lag=LAG)
    assert all("EXTRAPOLATION" in line for line in md if line.startswith("| SmolLM"))


@pytest.mark.parametrize("muon,want", [
    ({0: 0.010, 1: 0.012, 2: 0.011, 3: 0.009, 4: 0.010}, PASS),     # ~1%: below 2 x 4%
    ({0: 0.30, 1: 0.25, 2: 0.35, 3: 0.28, 4: 0.31}, FAIL),          # ~30%: above 8%
    ({0: 0.02, 1: 0.30, 2: 0.05, 3: 0.20, 4: 0.08}, INCONCLUSIVE),  # spans 8%
])
def test_muon_rule_on_hand_cases(muon, want):
    fits = size_fits(_data({"muon/2bw": _flat(muon), "adamw/2bw": _flat(muon)}))
    checks, measured = agreement_checks(fits, paper_lag=LAG)
    c = checks[0]
    assert c.params["rule"] == AGREEMENT_RULES[0].key == "muon-within-0.01"
    assert c.params["boundary"] == pytest.approx(math.log(TOLERANCE * LAG))
    logs = [math.log(v) for v in muon.values()]      # exponent 0: the log values themselves
    assert c.interval.estimate == pytest.approx(sum(logs) / 5, rel=1e-9)
    assert c.status == want and c.reason.startswith(VERDICT[want])
    assert recheck(c.to_dict()) == want               # decided again from claims.json alone


@pytest.mark.parametrize("ratio,want", [
    ({0: 3.0, 1: 2.5, 2: 3.5, 3: 2.8, 4: 3.2}, PASS),         # AdamW ~3x Muon
    ({0: 0.3, 1: 0.25, 2: 0.35, 3: 0.28, 4: 0.32}, FAIL),     # AdamW below Muon
    ({0: 0.5, 1: 2.0, 2: 0.8, 3: 1.5, 4: 1.1}, INCONCLUSIVE),  # straddles 1
])
def test_adamw_over_muon_rule_on_hand_cases(ratio, want):
    muon = {s: 0.02 + 0.001 * s for s in SEEDS}
    adamw = {s: ratio[s] * muon[s] for s in SEEDS}
    fits = size_fits(_data({"muon/2bw": _flat(muon), "adamw/2bw": _flat(adamw)}))
    checks, measured = agreement_checks(fits, paper_lag=LAG)
    c = checks[1]
    assert c.params["rule"] == "adamw-over-muon" and c.params["boundary"] == 0.0
    assert c.status == want
    shown = measured["adamw-over-muon: AdamW/Muon lag ratio at SmolLM-135M (EXTRAPOLATION)"]
    geo = math.exp(sum(math.log(r) for r in ratio.values()) / 5)
    assert shown.estimate == pytest.approx(geo, rel=1e-9)


def test_missing_arm_is_undetermined():
    fits = size_fits(_data({"muon/2bw": _flat({s: 0.01 for s in SEEDS})}))
    checks, _ = agreement_checks(fits, paper_lag=LAG)
    assert checks[1].status == INCONCLUSIVE and "adamw/2bw" in checks[1].reason


def test_paper_lag_fraction_has_one_definition():
    if hasattr(regime, "PAPER_LAG_FRACTION"):
        assert paper_lag_fraction() == regime.PAPER_LAG_FRACTION
    else:
        with pytest.raises(ValueError, match="PAPER_LAG_FRACTION"):
            paper_lag_fraction()


@pytest.mark.parametrize("kw", [
    {"non_embedding": {47_104: 50_000}},                    # more non-embedding than total
    {"lag_fraction": {"muon/sync": {47_104: {0: 0.1}}}},    # not a delayed mode
    {"lag_fraction": {"muon/2bw": {12_345: {0: 0.1}}}},     # not one of the sizes
    {"lag_fraction": {"muon/2bw": {47_104: {True: 0.1}}}},  # a bool is not a seed
])
def test_data_is_validated(kw):
    base = {"gap_fraction": {}, "lag_fraction": {}, "non_embedding": {47_104: 30_720}}
    with pytest.raises(ValueError):
        SizeLadderData(**{**base, **kw})


def test_figure_and_markdown(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = _data({"muon/2bw": _law({s: 0.05 + 0.005 * s for s in SEEDS}, -0.4),
               "adamw/2bw": _law({s: 0.2 + 0.01 * s for s in SEEDS}, -0.2),
               "muon/2bw+ef": _law({s: 0.03 + 0.005 * s for s in SEEDS}, -0.45)})
    fits = size_fits(d)
    checks, _ = agreement_checks(fits, paper_lag=LAG)
    path = plot_size_ladder(d, fits, tmp_path / "figs" / "size-ladder.png", paper_lag=LAG)
    assert path.exists() and path.stat().st_size > 10_000
    fig, axes = plt.subplots(1, 2)
    size_ladder_axes(axes, d, fits, paper_lag=LAG)
    for ax in axes:
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        texts = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any("extrapolation" in t for t in texts)
        assert any("exponent" in t and "Muon 2BW" in t for t in texts)
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert "135" in ticks and "0.279" in ticks          # plain labels, millions
    lag_texts = [t.get_text() for t in axes[1].get_legend().get_texts()]
    assert any(t.startswith(PAPER_LAG_LABEL) for t in lag_texts)
    ref = [ln for ln in axes[1].get_lines() if ln.get_label().startswith(PAPER_LAG_LABEL)]
    assert ref and ref[0].get_ydata()[0] == pytest.approx(100 * LAG)
    plt.close(fig)
    md = size_ladder_markdown(d, fits, checks, paper_lag=LAG)
    text = "\n".join(md)
    for arm in ("Muon 2BW", "AdamW 2BW", "Muon 2BW + EF"):
        assert f"#### {arm}" in text
    assert text.count("| step-and-size exponent") == 3
    assert f"**{VERDICT[checks[0].status]}**" in text
    assert "muon-within-0.01" in text and "adamw-over-muon" in text
