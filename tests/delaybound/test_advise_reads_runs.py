"""``advise`` on the user's own runs: a model that fits one device needs no pipeline (said, not
ranked), the model size of a recorded run comes from its config.json, and a law fitted in log g
prints no negative interval end."""

from __future__ import annotations

import json

from delaybound.cli import main
from llm_validation.advice.pilot import model_params, runs_from_dirs
from llm_validation.records.atomic_io import read_json, write_json
from tests.llm_validation.advice.synthetic_ledger import pair_records, write_ledger
from tests.llm_validation.validation.synthetic_runs import headline

TINY = ["advise", "--optimizer", "muon", "--stages", "2", "--microbatches", "4", "--model",
        "tiny", "--tokens", "1e9", "--quiet"]


def _ledger(tmp_path):
    recs = [pair_records(opt="muon", T=200, seed=s, g=0.05 + 0.01 * s) for s in range(3)]
    return write_ledger(tmp_path / "ledger", recs)


def test_a_model_that_fits_one_device_is_told_it_needs_no_pipeline(tmp_path, capsys):
    led = str(_ledger(tmp_path))
    assert main([*TINY, "--ledger", led]) == 0
    out = capsys.readouterr().out
    assert "recommendation: no pipeline. pipelining is not needed" in out
    assert "x 1F1B" not in out and "time to the synchronous final loss" not in out
    assert main([*TINY, "--ledger", led, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["pipeline_needed"] is False and r["one_device"]["fits"] is True
    assert 0 < r["one_device"]["total_gib"] < 1                # a tiny model: far below 80 GiB
    # on a device too small for it, the schedules are ranked (and it says so with --rank too)
    assert main([*TINY, "--ledger", led, "--device-memory-gib", "1e-6"]) == 0
    out = capsys.readouterr().out
    assert "time to the synchronous final loss" in out and "no pipeline" not in out
    assert main([*TINY, "--ledger", led, "--rank-schedules"]) == 0
    out = capsys.readouterr().out
    assert "time to the synchronous final loss" in out
    assert "pipelining is not needed" in out and "--rank-schedules was given" in out


def test_a_recorded_runs_model_size_comes_from_its_config(tmp_path):
    """StatsRecorder writes n_params in the model section of a model this project did not
    build; advise's pilot reads it (it used to say the sizes were unknown)."""
    external = {"name": "Net", "external": True, "class": "mine.Net", "n_params": 123_456}
    assert model_params(external) == 123_456
    assert model_params({"name": "Net", "external": True}, {"n_params": 77}) == 77   # meta's
    assert model_params({"name": "Net", "external": True}) is None
    headline(tmp_path, {"muon": 0.1})
    for d in tmp_path.iterdir():
        cfg = read_json(d / "config.json")
        write_json(d / "config.json", {**cfg, "model": external})
    runs = runs_from_dirs([tmp_path])
    assert runs and all(r.n_params == 123_456 for r in runs)
