"""Each verdict kind of ``validate`` on hand-made runs whose right answer is known: a bound is
decided by where the measurement lies against it (never by its looseness or by the spread of its
per-seed values), every optimizer present gets its own answer and the pairwise comparisons, and a
damaged seed is dropped by every verdict alike, each saying so."""

from __future__ import annotations

import pytest

from llm_validation.validation.validate import validate
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, PASS, Verdict
from tests.llm_validation.validation.synthetic_runs import fake_run, headline

SEEDS = (0, 1, 2)


def _pairs(root, opt, gap, seeds=SEEDS, spreads=None, ef_share=None, noise=0.002, **kw):
    """sync + 2bw (+ 2bw+ef when ``ef_share``) runs of ``opt`` with the given gap per seed."""
    for i, s in enumerate(seeds):
        base = 2.0 + 0.05 * s
        extra = {"smooth_spread": spreads[i]} if spreads else {}
        fake_run(root, opt=opt, val=base, seed=s, **extra, **kw)
        fake_run(root, opt=opt, val=base + gap + noise * (i - 1), seed=s, tau=1, **extra, **kw)
        if ef_share is not None:
            fake_run(root, opt=opt, val=base + (1 - ef_share) * gap + noise * (i - 1), seed=s,
                     tau=1, lam=1.0, drift=0.6, **extra, **kw)


# ------------------------------------------------------------------------------- bound kind
def test_a_loose_bound_with_scattered_seeds_passes(tmp_path):
    """The user's case: the bound is thousands of times the gap, but its per-seed values
    scatter so much that a t interval over them dips below zero. The measurement lies under
    every seed's bound: the bound holds (it used to read FAIL)."""
    _pairs(tmp_path, "muon", gap=0.002, spreads=(1.0, 1.0, 80.0))
    v = validate([tmp_path]).get("star_convex_delay_term[muon]")
    assert v.kind == "bound"
    assert v.status == PASS, v.reason
    assert v.measured["looseness bound / gap"] > 1000          # reported, not decided
    assert v.measured["bound's delay term, smallest seed"] > 0
    assert v.measured["measured gap / bound"].hi < 1


def test_a_gap_above_the_bound_fails_and_one_near_it_is_undecided(tmp_path):
    _pairs(tmp_path / "over", "muon", gap=10.0)                 # bound ~3 nats at these constants
    v = validate([tmp_path / "over"]).get("star_convex_delay_term[muon]")
    assert v.status == FAIL and v.measured["measured gap / bound"].lo > 1, v.reason
    _pairs(tmp_path / "near", "muon", gap=3.0, noise=1.0)       # the ratio's interval spans 1
    v = validate([tmp_path / "near"]).get("star_convex_delay_term[muon]")
    assert v.status == INCONCLUSIVE, v.reason


# -------------------------------------------------------------------------- assumption kind
@pytest.mark.parametrize("err, expected", [(0.01, PASS), (1e4, FAIL)])
def test_the_momentum_error_lemma_is_decided_by_where_the_error_lies(tmp_path, err, expected):
    """An assumption read against a bound: pass under it, fail over it."""
    _pairs(tmp_path, "muon", gap=0.05, mom_err=err)
    v = validate([tmp_path]).get("momentum_error[muon]")
    assert v.kind == "assumption" and v.status == expected, v.reason


# ------------------------------------------------------------------------------- trend kind
@pytest.mark.parametrize("gap, expected", [(0.2, PASS), (-0.2, FAIL), (0.0, INCONCLUSIVE)])
def test_every_optimizer_gets_its_delay_cost_and_ef_share(tmp_path, gap, expected):
    """Lion alone (no AdamW, no Muon): its own verdict, the gap in nats and as a share of the
    run, and EF's share of it."""
    _pairs(tmp_path, "lion", gap=gap, ef_share=0.4, noise=0.01)
    rep = validate([tmp_path])
    v = rep.get("delay_cost[lion]")
    assert v.kind == "trend" and v.status == expected, v.reason
    assert v.measured["gap (delayed - sync)"].estimate == pytest.approx(gap, abs=1e-9)
    assert "lag: share of the run's steps behind" in v.measured
    assert v.measured["answer"].startswith("the delay costs ")
    if gap:
        share = v.measured["EF (lam = 1) share of the gap removed"]
        assert share.estimate == pytest.approx(0.4, abs=0.02)
        assert "EF removes" in v.measured["answer"]
    assert rep.get("gap_adamw_gt_muon").status == INCONCLUSIVE       # AdamW/Muon absent


def test_pairwise_comparisons_cover_every_optimizer_present(tmp_path):
    _pairs(tmp_path, "lion", gap=0.3)
    _pairs(tmp_path, "adan", gap=0.05)
    _pairs(tmp_path, "sgd", gap=0.05)
    rep = validate([tmp_path])
    pairs = {(c["a"], c["b"]): c for c in rep.comparisons}
    assert set(pairs) == {("sgd", "adan"), ("sgd", "lion"), ("adan", "lion")}
    assert "costs Lion more than SGD" in pairs[("sgd", "lion")]["reading"]
    assert "no difference measured" in pairs[("sgd", "adan")]["reading"]
    assert {v.id for v in rep.verdicts} >= {"delay_cost[lion]", "delay_cost[adan]",
                                            "delay_cost[sgd]"}
    d = rep.to_dict()["comparisons"]
    assert len(d) == 3 and d[0]["difference SGD - Adan"]["method"] == "welch"


# ------------------------------------------------------------------------ damaged seeds
def _damage(root, prefix: str, seed: int):
    """Cut a run's metrics.jsonl in half (half the steps and the closing eval row gone)."""
    run = next(d for d in sorted(root.iterdir())
               if d.name.startswith(prefix) and d.name.endswith(f"-s{seed}"))
    text = (run / "metrics.jsonl").read_text()
    (run / "metrics.jsonl").write_text(text[: len(text) // 2])
    return run


def _dropped(v: Verdict, name: str) -> bool:
    return any(line.startswith(f"{name} (seed 2): metrics.jsonl is damaged") for line in v.dropped)


def test_a_damaged_delayed_run_is_dropped_by_every_verdict_kind_and_each_says_so(tmp_path):
    headline(tmp_path, {"adamw": 0.3})
    victim = _damage(tmp_path, "adamw-2bw-", 2)
    rep = validate([tmp_path])
    readers = ["smoothness[adamw]", "momentum_error[adamw]",                # assumption
               "delay_cost[adamw]", "ef_gain[adamw]", "ef_criterion[adamw]",  # trend (+EF)
               "star_convex_delay_term[adamw]"]                             # bound
    for vid in readers:
        v = rep.get(vid)
        assert victim.name not in v.runs, vid                 # never used, even in part
        assert _dropped(v, victim.name), (vid, v.dropped)
        assert v.n_seeds == 2 and v.status == INCONCLUSIVE, (vid, v.reason)
    assert any(victim.name in n and "stop at step" in n for n in rep.notes)
    assert rep.to_dict()["verdicts"][0]["dropped"] == list(rep.verdicts[0].dropped)


def test_a_damaged_ef_run_is_dropped_only_where_ef_runs_are_read(tmp_path):
    headline(tmp_path, {"adamw": 0.3})
    victim = _damage(tmp_path, "adamw-2bw+ef", 2)
    rep = validate([tmp_path])
    for vid in ("ef_gain[adamw]", "ef_criterion[adamw]"):
        assert _dropped(rep.get(vid), victim.name) and rep.get(vid).n_seeds == 2
    for vid in ("smoothness[adamw]", "star_convex_delay_term[adamw]"):   # delayed runs only
        assert not rep.get(vid).dropped and rep.get(vid).n_seeds == 3
    cost = rep.get("delay_cost[adamw]")          # its gap is whole; its EF share lost seed 2
    assert cost.n_seeds == 3 and _dropped(cost, victim.name)
    assert cost.measured["EF (lam = 1) share of the gap removed"].n == 2
