"""The lr-sweep phase: choosing the best lr, widening the grid until it is interior, overrides,
and the loop that trains only the new points (with a fake trainer writing run directories)."""

from __future__ import annotations

import json
import math

import pytest

from llm_validation.claims.plan import lr_sweep as ls
from llm_validation.claims.plan.scales import get_scale


def test_choose_prefers_the_lowest_mean_and_reports_interior():
    table = {-1: {0: 3.0, 1: 3.1}, 0: {0: 2.5, 1: 2.6}, 1: {0: 2.9, 1: 2.8}}
    assert ls.choose(table) == (0, True)
    table[1] = {0: 2.0, 1: 2.1}
    assert ls.choose(table) == (1, False)


def test_a_seed_that_diverged_or_is_missing_disqualifies_the_lr():
    table = {-1: {0: 3.0, 1: 3.0}, 0: {0: 1.0, 1: math.inf}, 1: {0: 2.0}}
    assert ls.choose(table) == (-1, False)
    assert ls.choose({0: {0: math.inf, 1: math.inf}}) == (None, False)


def test_widen_adds_one_point_past_the_edge():
    assert ls.widen((-1, 0, 1), 1) == (-1, 0, 1, 2)
    assert ls.widen((-1, 0, 1), -1) == (-2, -1, 0, 1)
    assert ls.widen((-1, 0, 1), 0) is None
    assert ls.widen((-1, 0, 1), None) is None


def test_override_wins_for_its_optimizer_only():
    assert ls.overridden("soap", ["soap:optim.lr=0.003"]) == 0.003
    assert ls.overridden("muon", ["soap:optim.lr=0.003"]) is None
    assert ls.overridden("muon", ["optim.lr=0.02", "muon:optim.lr=0.01"]) == 0.01


def _fake_trainer(runs_dir, best_lr, trained):
    """Writes a finished run whose final loss is |log2(lr / best_lr)| + 2 + seed/100."""
    def train(todo):
        for name, cfg in todo:
            d = runs_dir / name
            if (d / "summary.json").exists():
                continue
            trained.append(name)
            d.mkdir(parents=True)
            (d / "config.json").write_text(json.dumps(cfg.to_dict()))
            (d / "metrics.jsonl").write_text("")
            v = abs(math.log2(cfg.optim.lr / best_lr)) + 2 + cfg.run.seed / 100
            (d / "summary.json").write_text(json.dumps(
                {"status": "completed", "final_val_loss": v, "steps": cfg.run.steps}))
    return train


def test_sweep_widens_until_interior_and_reuses_finished_runs(tmp_path):
    scale = get_scale("tiny")
    base = scale.lrs["soap"]
    trained: list[str] = []
    train = _fake_trainer(tmp_path, base * 8, trained)       # the best is 3 doublings up
    got = ls.run_lr_sweep(scale, ["soap"], tmp_path, train, quick=True)["soap"]
    assert got.source == "sweep" and got.lr == pytest.approx(base * 8, rel=1e-5)
    assert got.exponents == (-1, 0, 1, 2, 3, 4)
    assert len(trained) == 6 * ls.SWEEP_SEEDS
    rows = got.to_dict()["grid"]
    mean_seed = sum(ls.sweep_seeds()) / ls.SWEEP_SEEDS
    assert [r["mean"] for r in rows] == pytest.approx(
        [abs(k - 3) + 2 + mean_seed / 100 for k in range(-1, 5)], abs=1e-4)
    # |log2(lr/best)| + 2 + mean seed/100; the sweep's own seeds, none a claim uses
    assert min(ls.sweep_seeds()) == ls.FIRST_SWEEP_SEED > 8
    assert all(f"-s{ls.FIRST_SWEEP_SEED}-" in n or f"-s{ls.FIRST_SWEEP_SEED + 1}-" in n
               for n in trained)
    assert min(rows, key=lambda r: r["mean"])["lr"] == pytest.approx(got.lr, rel=1e-5)
    one = ls.run_lr_sweep(scale, ["soap"], tmp_path / "one", _fake_trainer(
        tmp_path / "one", base * 8, []), quick=True, seeds=1)["soap"]
    assert all(isinstance(r["mean"], float) for r in one.to_dict()["grid"])   # 1 seed: finite
    again: list[str] = []
    ls.run_lr_sweep(scale, ["soap"], tmp_path, _fake_trainer(tmp_path, base * 8, again),
                    quick=True)
    assert again == []                                       # a second invocation trains nothing
    tuned = ls.tuned_scale(scale, {"soap": got})
    assert tuned.lrs["soap"] == got.lr and tuned.lrs["adamw"] == scale.lrs["adamw"]


def test_sweep_stops_at_the_edge_after_max_widen(tmp_path):
    scale = get_scale("tiny")
    trained: list[str] = []
    got = ls.run_lr_sweep(scale, ["adamw"], tmp_path,
                          _fake_trainer(tmp_path, scale.lrs["adamw"] * 1e6, trained),
                          quick=True)["adamw"]
    assert got.source == "edge" and len(got.exponents) == len(ls.FIRST_GRID) + ls.MAX_WIDEN


def test_override_skips_the_sweep(tmp_path):
    trained: list[str] = []
    got = ls.run_lr_sweep(get_scale("tiny"), ["muon"], tmp_path,
                          _fake_trainer(tmp_path, 1.0, trained), quick=True,
                          overrides=("muon:optim.lr=0.005",))["muon"]
    assert got.source == "override" and got.lr == 0.005 and trained == []
