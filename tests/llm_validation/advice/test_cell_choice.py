"""The law chosen on held-out cells (another batch, size, lr, horizon) on synthetic designed
pilots whose true law is known."""

from __future__ import annotations

import math
import random

import pytest

from llm_validation.advice.cell_choice import (KINDS, MIN_KINDS, cell_folds, cell_summary,
                                               choose_on_cells, goal, score_cells)
from llm_validation.advice.pilot import pairs, reference_lrs
from llm_validation.advice.transfer import ALL_LAWS
from llm_validation.advice.transfer_choice import SEED_REFERENCE
from llm_validation.delay_law.laws import candidate_laws
from llm_validation.advice.transfer import advise_name
from tests.llm_validation.advice.synthetic_pairs import DROP, V_T, frontier_run, run_pair

#: Exact data through the true law: only float rounding separates fit and truth.
EXACT = 1e-9
SIZES = (10**6, 2 * 10**6, 4 * 10**6, 8 * 10**6)
SEEDS = (0, 1, 2, 3)
#: Sequences x steps per cell: a fixed token budget, so each step count has its own batch (as
#: at a fixed tokens-per-parameter budget), and no cell's synchronous run is another's frontier.
BATCH_TOKENS = 16_000


def true_g(T: float, ratio: float) -> float:
    """The truth of these pilots: no size term, g = 0.05 (T/1000)^-1 ratio^0.7."""
    return 0.05 * (T / 1000) ** -1.0 * ratio ** 0.7


def _design(lr_cells=True, noise=0.0, tuned=None, rng_seed=0):
    """Sizes x step counts {500, 1000, 2000} (1000 shared by all) at each size's tuned lr, and
    lr 0.5x / 2x cells at N=2e6, T=1000; four seeds; multiplicative seed noise ``noise``."""
    rng = random.Random(rng_seed)
    tuned = tuned or {n: 1e-3 for n in SIZES}
    cells = [(n, t, 1.0) for n in SIZES for t in (500, 1000, 2000)]
    if lr_cells:
        cells += [(2 * 10**6, 1000, 0.5), (2 * 10**6, 1000, 2.0)]
    runs = []
    for n, t, r in cells:
        for s in SEEDS:
            g = true_g(t, r) * math.exp(noise * rng.gauss(0, 1))
            runs += run_pair(T=t, N=n, g=g, seed=s, lr=tuned[n] * r, batch=BATCH_TOKENS // t)
    return runs


def test_every_delay_law_form_is_a_candidate():
    assert {advise_name(law) for law in candidate_laws()} <= set(ALL_LAWS)


def test_tuned_lr_per_size_is_the_most_common_one():
    tuned = {n: 1e-3 * (i + 1) for i, n in enumerate(SIZES)}
    ps = pairs(_design(tuned=tuned))
    assert reference_lrs(_design(tuned=tuned))[("muon", 2 * 10**6)] == tuned[2 * 10**6]
    assert sorted({round(p.lr_rel, 9) for p in ps}) == [0.5, 1.0, 2.0]


def test_folds_never_train_on_what_they_hold_out():
    ps = pairs(_design())
    for kind in KINDS:
        folds = cell_folds(ps, kind)
        assert not isinstance(folds, str), kind
        for label, held, scored in folds:
            assert set(scored) <= set(held) and scored, (kind, label)
            if kind == "size":      # every pair of the held-out size leaves the fit
                n = ps[scored[0]].n_params
                assert {i for i, p in enumerate(ps) if p.n_params == n} == set(held)
    assert len(cell_folds(ps, "size")) == len(SIZES)
    assert len(cell_folds(ps, "horizon")) == len(SIZES)
    assert len(cell_folds(ps, "batch")) == 2 * len(SIZES)
    assert len(cell_folds(ps, "lr")) == 2


def test_the_true_law_is_chosen_and_predicts_every_kind_exactly():
    scores = score_cells(pairs(_design()))
    choice = choose_on_cells(scores)
    assert choice["law"] == "size_steps_lr"           # the only law with the lr term
    for kind in KINDS:
        s = scores[kind]["size_steps_lr"]
        assert s["hits"] == s["pairs"] > 0 and s["mean_abs_log_error"] < EXACT, kind
    # the steps law cannot follow the lr cells: it misses them by about the lr factor
    assert scores["lr"]["steps"]["mean_abs_log_error"] > 0.5 * 0.7 * math.log(2)


def test_a_tie_goes_to_fewer_coefficients():
    # no lr cells: steps (2 coefficients) and the size forms fit exactly; steps is chosen
    choice = choose_on_cells(score_cells(pairs(_design(lr_cells=False))))
    assert choice["law"] == "steps"
    assert choice["kinds"] == ["batch", "size", "horizon"]
    tied = choice["reason"].split("tied within 0.01 with ")[1].split(";")[0].split(", ")
    assert "steps" not in tied and "size_steps" in tied    # the others, not the chosen one


def test_too_few_kinds_leave_the_choice_to_sizes_and_horizons():
    runs = []
    for t in (500, 1000, 2000):                        # one size: batch and horizon only...
        for s in SEEDS:
            runs += run_pair(T=t, N=10**6, g=true_g(t, 1.0), seed=s)
    scores = score_cells(pairs(runs))
    assert "skipped" in scores["size"] and "skipped" in scores["lr"]
    assert choose_on_cells(scores) is not None          # ...two kinds: still chosen
    one = score_cells(pairs([r for r in runs if r.steps != 500]))
    assert [k for k in KINDS if "skipped" not in one[k]] == ["batch", "horizon"]
    only_longest = {k: ({"skipped": "x"} if k != "horizon" else one[k]) for k in KINDS}
    assert choose_on_cells({**one, **only_longest}) is None and MIN_KINDS == 2


def test_seed_reference_and_goal_on_noisy_cells():
    ps = pairs(_design(noise=0.2))
    scores = score_cells(ps)
    choice = choose_on_cells(scores)
    g = goal(scores, choice["law"])
    assert set(g) == set(KINDS)
    for kind, v in g.items():
        ref = scores[kind][SEED_REFERENCE]
        assert ref["predicted"] == ref["pairs"] == v["pairs"]   # four seeds: three siblings
        assert v["seed_reference"] == ref["hit_rate_all"]       # every pair transferable here
        assert v["hit_rate"] == scores[kind][choice["law"]]["hit_rate_all"]
        assert v["met"] == (v["hit_rate"] >= v["seed_reference"] - 0.10)
    # with pure seed noise of 20% the truth's form is near the reference on every kind
    assert choice["law"] in ("size_steps_lr", "size_steps_lr/saturating")


def test_the_choice_does_not_depend_on_the_pairs_order():
    ps = pairs(_design(noise=0.2))
    shuffled = list(ps)
    random.Random(1).shuffle(shuffled)
    a, b = choose_on_cells(score_cells(ps)), choose_on_cells(score_cells(shuffled))
    assert a["law"] == b["law"] and a["mean_log_error"] == pytest.approx(b["mean_log_error"])


def test_the_lag_is_scored_where_the_pilot_holds_a_frontier():
    runs = _design(lr_cells=False)
    assert score_cells(pairs(runs), "lag")["pairs"] == 0
    # half-length synchronous runs of every pair's setting: the frontier is two points, and a
    # delayed loss of V_T + g DROP sits on the log-linear line between them
    half_loss = V_T + 0.5
    for r in [r for r in runs if r.mode == "sync"]:
        runs.append(frontier_run(T=r.steps // 2, N=r.n_params, final=half_loss, seed=r.seed,
                                 lr=r.lr, batch=r.batch_size))
    ps = pairs(runs)
    for p in ps:
        g = p.gap_fraction * DROP / 0.5                  # the gap as a share of the half gap
        assert p.frontier_lag == pytest.approx(1 - 2 ** -g, rel=1e-9)
    summary = cell_summary(ps)
    assert summary["lag"]["pairs"] == len(ps)
    assert summary["lag_choice"]["law"] is not None
    assert summary["goal"] is not None


def test_an_arm_run_in_one_cell_only_is_not_held_against_the_laws():
    # an AdamW 2BW arm in one cell: no fitted law has pairs of it elsewhere, only theory's family
    # calibration predicts it; the laws stay eligible and the truth's form is still chosen
    runs = _design()
    for s in SEEDS:
        runs += run_pair(opt="adamw", T=1000, N=2 * 10**6, g=0.2, seed=s, batch=16)
    scores = score_cells(pairs(runs))
    rows = [r for r in scores["batch"]["_rows"] + scores["horizon"]["_rows"]
            + scores["size"]["_rows"] + scores["lr"]["_rows"] if r["optimizer"] == "adamw"]
    assert rows and not any(r["transferable"] for r in rows)
    choice = choose_on_cells(scores)
    assert "size_steps_lr" in choice["eligible"] and choice["law"] == "size_steps_lr"
    g = goal(scores, choice["law"])
    assert all(v["pairs"] == scores[k]["size_steps_lr"]["pairs"] - sum(
        r["optimizer"] == "adamw" for r in scores[k]["_rows"]) for k, v in g.items())



def test_the_scores_figure(tmp_path):
    from llm_validation.advice.figures import plot_cell_scores
    summary = cell_summary(pairs(_design()))
    path = plot_cell_scores(summary, tmp_path / "cells.png", title="synthetic design")
    assert path.stat().st_size > 10_000
    none = {**summary, "share": {**summary["share"],
                                 **{k: {"skipped": "x"} for k in KINDS}}}
    with pytest.raises(ValueError, match="no kind"):
        plot_cell_scores(none, tmp_path / "none.png", title="x")
