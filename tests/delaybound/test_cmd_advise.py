"""``delaybound advise`` on the command line: bad input, a synthetic ledger, a real tiny pilot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from delaybound.cli import main
from llm_validation.advice.transfer_choice import choose
from tests.llm_validation.advice.synthetic_ledger import pair_records, write_ledger

SHAPE = ["--stages", "4", "--microbatches", "8", "--model", "smollm-135m", "--seq-len", "512",
         "--rank-schedules"]     # it fits one device: the schedules are ranked on request
MICRO = ["--set", "model.n_layer=1", "--set", "model.d_model=16", "--set", "model.n_head=2",
         "--set", "model.n_kv_head=1", "--set", "model.d_ff=32", "--set", "data.seq_len=16",
         "--set", "run.batch_size=4", "--set", "run.eval_batches=1",
         "--set", "run.eval_interval=4", "--set", "run.stats_interval=2"]


def _code(args: list[str]) -> int:
    """main's exit code, argparse's own errors (SystemExit) included."""
    try:
        return main(args)
    except SystemExit as exc:
        return int(exc.code)


@pytest.fixture()
def ledger(tmp_path):
    recs = [pair_records(opt="muon", T=200, seed=s, g=0.05 + 0.01 * s) for s in range(3)]
    recs += [pair_records(opt="muon", T=100, seed=s, g=0.04 + 0.01 * s) for s in range(3)]
    recs += [pair_records(opt="muon", T=200, seed=s, g=0.02, mode="ef") for s in range(3)]
    return write_ledger(tmp_path / "ledger", recs)


@pytest.mark.parametrize("extra, names", [
    (["--optimizer", "rmsprop"], "--optimizer"),
    (["--stages", "1"], "--stages"),
    (["--tokens", "-5"], "--tokens"),
    (["--tokens", "1e3"], "shorter than the pilot"),
    (["--optimizer", "adamw"], "no finished synchronous run of 'adamw'"),
    (["--ledger", "NOWHERE"], "--ledger"),
])
def test_bad_input_is_one_line_and_exit_2(ledger, capsys, extra, names):
    args = ["advise", "--optimizer", "muon", *SHAPE, "--tokens", "1e9", "--ledger", str(ledger),
            "--quiet"]
    for i in range(0, len(extra), 2):          # later flags replace earlier ones
        if extra[i] in args:
            args[args.index(extra[i]) + 1] = extra[i + 1]
    args = [a.replace("NOWHERE", str(ledger / "nowhere")) for a in args]
    assert _code(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and names in err[0], err


def test_pilot_without_pairs_is_refused(tmp_path, capsys):
    led = write_ledger(tmp_path / "l", [{k: v for k, v in pair_records(
        opt="muon", T=200, seed=0, g=0.1).items() if "sync" in k}])
    assert main(["advise", "--optimizer", "muon", *SHAPE, "--tokens", "1e9", "--ledger",
                 str(led), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no 2BW/sync pair" in err[0]


def test_ledger_json_text_and_figure(ledger, tmp_path, capsys):
    out = tmp_path / "adv"
    assert main(["advise", "--optimizer", "muon", *SHAPE, "--tokens", "1e9", "--ledger",
                 str(ledger), "--out", str(out), "--json", "--quiet"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert set(r["throughput"]) == {"1f1b", "gpipe", "interleaved-1f1b", "zb-h1", "2bw", "2bw+ef"}
    d = r["delay_cost"]["2bw"]
    assert d["predictions"]["steps"]["trend"] == "log g = a + b log T"   # two horizons
    f = {k: math.inf if v is None else v for k, v in d["lag_fraction"].items()}  # JSON: inf -> null
    assert f["lo"] <= f["estimate"] <= f["hi"]
    t = r["time_to_target"]["2bw"]
    assert t["ratio_lo"] <= t["ratio"] <= (math.inf if t["ratio_hi"] is None else t["ratio_hi"])
    assert r["recommendation"]["schedule"] in r["time_to_target"]
    assert Path(r["files"]["figure"]).stat().st_size > 10_000
    assert json.loads((out / "advice.json").read_text())["target_steps"] == r["target_steps"]
    assert main(["advise", "--optimizer", "muon", *SHAPE, "--tokens", "1e9", "--ledger",
                 str(ledger), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "recommendation:" in text and "time to the synchronous final loss" in text
    assert "model uncertainty (" in text
    assert "transfer law: steps (the pilot's model sizes are unknown" in text


def test_one_ledger_per_size_chooses_the_law_on_held_out_cells(tmp_path, capsys):
    # g = 0.1 / (tokens per parameter / 10) at three sizes: the Chinchilla clock wins on the
    # held-out step counts of every size (batch and horizon cells; no step count is shared by
    # the sizes, so no size cell), tied with size_steps, which has one coefficient more
    leds = []
    for N in (10_000, 100_000, 1_000_000):
        recs = [pair_records(opt="muon", T=round(tpp * N / 1024), seed=0, n_params=N,
                             g=1.0 / tpp) for tpp in (5, 10, 20)]
        leds += ["--ledger", str(write_ledger(tmp_path / f"n{N}", recs))]
    assert main(["advise", "--optimizer", "muon", *SHAPE, "--tokens", "1e8", *leds,
                 "--params", "2e6", "--json", "--quiet"]) == 0
    r = json.loads(capsys.readouterr().out)
    c = r["transfer"]["choice"]
    assert c["law"] == "tokens_per_param" and c["deciding_hold_out"] == "cells"
    cells = r["transfer"]["held_out_cells"]
    assert "skipped" in cells["size"] and "skipped" in cells["lr"]
    # both exact up to the step counts' rounding to whole steps (>= 49 steps: < 1%)
    assert cells["horizon"]["tokens_per_param"]["mean_abs_log_error"] < 0.01
    assert cells["horizon"]["size_steps"]["mean_abs_log_error"] < 0.01
    assert choose(r["transfer"]["held_out"])["law"] == "tokens_per_param"   # on sizes too
    assert r["delay_cost"]["2bw"]["used"] == "tokens_per_param"
    # 2x the largest size, 1e8 / 4096 = 24,414 steps: 1.25x the longest pilot run (19,531)
    assert r["extrapolation"] is None and "Extrapolation" not in r["recommendation"]["why"]
    assert r["delay_cost"]["2bw"]["gap_fraction"]["estimate"] == pytest.approx(
        1 / (1e8 / 2e6), rel=1e-2)                # 50 tokens per parameter: g = 1/50


def test_plan_pilot(capsys):
    assert main(["advise", "--optimizer", "muon", *SHAPE, "--tokens", "1e9", "--plan-pilot",
                 "--params", "3e8", "--json", "--quiet"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan_pilot"]
    assert plan["runs"][0]["params"] == 30_000_000 and plan["total_runs"] == 45
    assert 0 < plan["share_of_target"] < 1
    assert main(["advise", "--optimizer", "muon", *SHAPE, "--tokens", "1e9", "--plan-pilot",
                 "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "largest size" in text and "assumption:" in text
    assert "at your step count: 13,451,501 parameters for your 244,141 steps of 4096 tokens" in text


def test_plan_pilot_at_the_users_step_count(ledger, capsys):
    import statistics
    assert main(["advise", "--optimizer", "muon", *SHAPE, "--tokens", "1e9", "--plan-pilot",
                 "--params", "3e8", "--batch-tokens", "16384", "--ledger", str(ledger),
                 "--json", "--quiet"]) == 0
    p = json.loads(capsys.readouterr().out)["plan_pilot"]["step_pilot"]
    assert p["params"] == 30_000_000 and p["steps"] == math.ceil(1e9 / 16384)
    assert p["tokens_per_step"] == 16384 and 0 < p["share_of_target"] < 1
    # the fixture's arms: 2BW at 200 and 100 steps (g = 0.05/0.06/0.07, 0.04/0.05/0.06), EF flat
    arms = [[0.05, 0.06, 0.07], [0.04, 0.05, 0.06], [0.02] * 3]
    pooled = math.sqrt(sum(2 * statistics.variance([math.log(g) for g in a]) for a in arms) / 6)
    assert p["interval"]["scatter"] == pytest.approx(pooled, rel=1e-9)


def test_round_trip_from_a_real_tiny_pilot(tmp_path, capsys):
    # the smallest real pilot: one seed of sync + 2BW, 8 steps of a one-layer model
    pilot = tmp_path / "pilot"
    assert main(["sweep", "--out", str(pilot), "--optimizer", "muon", "--mode", "sync,2bw",
                 "--seeds", "0", "--steps", "8", "--jobs", "0", "--quiet", *MICRO]) == 0
    capsys.readouterr()
    assert main(["advise", "--optimizer", "muon", *SHAPE, "--tokens", "1e8", "--pilot",
                 str(pilot), "--json", "--quiet"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["pilot"]["pairs"] == 1 and r["pilot"]["reference_horizon"] == 8
    d = r["delay_cost"]["2bw"]
    # the forms without a step, size or lr term (a constant) fit one pair too
    assert d["pairs"] == 1 and set(d["predictions"]) == {"steps", "tokens_per_param", "theory",
                                                         "const", "const/saturating"}
    assert "one model size" in d["not_fitted"]["joint"]
    # one pair: a point prediction whose interval the data cannot bound (on the log scale of
    # the law: from 0 to +inf, printed as null)
    assert d["predictions"]["steps"]["lo"] == 0.0 and d["predictions"]["steps"]["hi"] is None
    # a one-layer pilot for a 1e8-token run of a preset: the recommendation says extrapolation
    assert r["extrapolation"]["size_factor"] > 10
    assert "Extrapolation: the model is" in r["recommendation"]["why"]
    assert r["time_to_target"]["2bw"]["ratio"] > 0 and "2bw+ef" not in r["delay_cost"]


def test_demo_advice_section(tmp_path):
    from delaybound.cmd_advise import demo_advice
    from llm_validation.validation.report import write_report
    from tests.llm_validation.validation.synthetic_runs import fake_run
    for seed in (0, 1):
        fake_run(tmp_path / "runs", opt="muon", val=2.0, seed=seed)
        fake_run(tmp_path / "runs", opt="muon", val=2.1 + 0.01 * seed, seed=seed, tau=1)
    lines = demo_advice(tmp_path / "runs", tmp_path / "advice", tmp_path)
    text = "\n".join(lines)
    assert "recommendation:" in text and "![advice muon](advice/muon/advice.png)" in text
    assert (tmp_path / "advice" / "muon" / "advice.png").is_file()
    assert "- adamw: advise could not run: the pilot has no finished synchronous run" in text
    rep = write_report(tmp_path / "report.md", notes=["a note"], advice=lines).read_text()
    assert rep.index("## Notes") < rep.index("## Should I use 2BW?")
    assert rep.rstrip().endswith(lines[-2].rstrip()) or rep.rstrip().endswith(lines[-1].rstrip())


@pytest.fixture()
def ladder(tmp_path):
    """A ledger whose true law is g = 0.05 (N/1e6)^0.3 (T/1000)^-1 (lr/1e-3): two sizes, three
    horizons, two lrs."""
    recs = [pair_records(opt="muon", T=T, seed=0, lr=lr, n_params=N,
                         g=0.05 * (N / 1e6) ** 0.3 * (T / 1000) ** -1 * (lr / 1e-3))
            for N in (10**6, 4 * 10**6) for T in (500, 1000, 2000) for lr in (1e-3, 2e-3)]
    return write_ledger(tmp_path / "ladder", recs)


def _explicit(ladder, capsys, *extra):
    assert main(["advise", "--optimizer", "muon", *SHAPE, "--tokens", "4e6", "--ledger",
                 str(ladder), "--params", "8e6", "--law", "size_steps_lr", "--json", "--quiet",
                 *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_changed_batch_or_lr_gives_a_different_stated_cost(ladder, capsys):
    base = _explicit(ladder, capsys, "--batch-tokens", "1024", "--lr", "1e-3")
    batch4 = _explicit(ladder, capsys, "--batch-tokens", "4096", "--lr", "1e-3")
    lr2 = _explicit(ladder, capsys, "--batch-tokens", "1024", "--lr", "2e-3")
    g = {k: r["delay_cost"]["2bw"]["gap_fraction"]["estimate"]
         for k, r in (("base", base), ("batch4", batch4), ("lr2", lr2))}
    assert base["delay_cost"]["2bw"]["used"] == "size_steps_lr"
    assert g["base"] == pytest.approx(0.05 * 8 ** 0.3 / (4e6 / 1024 / 1000), rel=1e-6)
    assert g["batch4"] / g["base"] == pytest.approx(4.0, rel=1e-6)    # 4x fewer steps
    assert g["lr2"] / g["base"] == pytest.approx(2.0, rel=1e-6)       # lr exponent 1
    assert batch4["target_steps"] == pytest.approx(4e6 / 4096)
    assert main(["advise", "--optimizer", "muon", *SHAPE, "--tokens", "4e6", "--ledger",
                 str(ladder), "--params", "8e6", "--law", "size_steps_lr", "--quiet",
                 "--batch-tokens", "4096", "--lr", "1e-3"]) == 0
    text = capsys.readouterr().out
    assert "4e+06 tokens = 977 steps of 4096 tokens" in text
    assert "size_steps_lr: gap fraction 0.0955" in text and "read at 977 steps" in text
    assert "transfer law: size_steps_lr (requested with --law" in text


def test_lr_ratio_is_the_ratio_the_laws_read(ladder, capsys):
    """``--lr-ratio R`` states the run's lr over its own size's tuned lr: the same reading as
    ``--lr`` at R times the pilot's tuned lr (1e-3 here), said so in the header; both at once
    is one line and exit 2."""
    by_lr = _explicit(ladder, capsys, "--batch-tokens", "1024", "--lr", "2e-3")
    by_ratio = _explicit(ladder, capsys, "--batch-tokens", "1024", "--lr-ratio", "2")
    assert by_ratio["delay_cost"]["2bw"]["gap_fraction"] == \
        by_lr["delay_cost"]["2bw"]["gap_fraction"]
    assert by_ratio["lr"] == {"run": None, "pilot": 1e-3, "ratio": 2.0}
    args = ["advise", "--optimizer", "muon", *SHAPE, "--tokens", "4e6", "--ledger", str(ladder),
            "--params", "8e6", "--law", "size_steps_lr", "--quiet", "--batch-tokens", "1024"]
    assert main([*args, "--lr-ratio", "1"]) == 0
    assert "peak lr 1x the lr tuned for its size (--lr-ratio)" in capsys.readouterr().out
    assert _code([*args, "--lr-ratio", "1", "--lr", "1e-3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not both" in err[0], err


@pytest.mark.parametrize("drop, flag", [("--batch-tokens", "--batch-tokens"),
                                        ("--lr", "--lr-ratio")])
def test_a_law_without_its_input_is_one_line_and_exit_2(ladder, capsys, drop, flag):
    given = {"--batch-tokens": "1024", "--lr": "1e-3"}
    del given[drop]
    args = ["advise", "--optimizer", "muon", *SHAPE, "--tokens", "4e6", "--ledger", str(ladder),
            "--params", "8e6", "--law", "size_steps_lr", "--quiet",
            *[x for kv in given.items() for x in kv]]
    assert _code(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"needs {flag}" in err[0], err


def test_a_ratio_past_the_shown_maximum_is_a_bound():
    from llm_validation.advice.time_to_target import RATIO_SHOWN_MAX, ratio_text
    assert ratio_text(0.937) == "0.937x" and ratio_text(RATIO_SHOWN_MAX) == "100x"
    assert ratio_text(2.02e15) == "over 100x"
