"""``delaybound reproduce``: the list, bad input, and one tiny real end-to-end --quick claim
that a second invocation reuses entirely."""

from __future__ import annotations

import json

import pytest

from delaybound.cli import main

#: A micro model and 4-step runs: the real pipeline end to end in a few seconds.
MICRO = ["--set", "model.n_layer=1", "--set", "model.d_model=16", "--set", "model.n_head=2",
         "--set", "model.n_kv_head=1", "--set", "model.d_ff=32", "--set", "data.seq_len=16",
         "--set", "run.batch_size=4", "--set", "run.eval_batches=1", "--set", "run.steps=4",
         "--set", "run.stats_interval=2"]


def test_list_json_has_all_claims(capsys):
    assert main(["reproduce", "--list", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    ids = [c["id"] for c in d["claims"]]
    assert len(ids) == 18 == len(set(ids)) and ids[-1] == "horizon-ladder"
    assert all(c["runs_needed"] > 0 and c["estimated_process_s"] > 0 and c["reason"]
               for c in d["claims"])
    assert d["distinct_runs"] < sum(c["runs_needed"] for c in d["claims"])
    assert d["sections"]["theory"] == ["sync-phases"] and len(d["sections"]["paper"]) == 17
    for c in d["claims"]:
        paper = [s for s in c["statements"] if s["section"] == "paper"]
        assert all(s["quote"] and s["source"] and s["decision"] for s in paper), c["id"]
        assert bool(paper) == (c["section"] == "paper")
    first = d["claims"][0]["statements"]
    assert [s["id"] for s in first] == ["1a", "1b", "T1"] and "appendix" in first[1]["source"]
    assert d["cost_model"]["source"] == "constants"      # no calibration without --out
    phases = {s["phase"]: s for s in d["phases"]}
    assert list(phases) == ["lr-sweep", "claims", "extra-seeds"]
    assert phases["lr-sweep"]["estimated_process_s"] > 0 and phases["lr-sweep"]["seeds"] >= 2
    assert phases["extra-seeds"]["policy"]["max_seeds"] == 8
    assert phases["extra-seeds"]["estimated_process_s_max"] > 0
    assert d["estimated_process_s"] == pytest.approx(sum(s["estimated_process_s"]
                                                         for s in d["phases"]), abs=0.5)
    assert main(["reproduce", "--list", "--claims", "dcasgd"]) == 0
    out = capsys.readouterr().out
    assert "13. dcasgd (Fig. 14)" in out and "distinct runs" in out


@pytest.mark.parametrize("args, text", [
    (["--claims", "nope", "--out", "x"], "unknown claim id"),
    (["--seeds", "0", "--out", "x"], "--seeds 0"),
    (["--claims", "dcasgd"], "--out DIR is required"),
    (["--scale", "huge", "--list"], "--scale 'huge'"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, text):
    assert main(["reproduce", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and text in err[0]


def test_quick_end_to_end_then_nothing_to_run(tmp_path, capsys):
    args = ["reproduce", "--quick", "--claims", "dcasgd", "--jobs", "0", "--quiet",
            "--out", str(tmp_path), "--json", *MICRO]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    # phase 1 trained the lr sweep (its run at the chosen lr may be the claim's own sync run)
    assert doc["budget"]["ran"] + doc["budget"]["reused"] == 4
    sweep = json.loads((tmp_path / "lr_sweep.json").read_text())
    assert sweep["optimizers"]["muon"]["source"] in ("sweep", "edge")
    assert (tmp_path / "figures" / "lr_sweep.png").is_file()
    assert doc["phases"]["lr_sweep"]["optimizers"]["muon"]["lr"] == \
        sweep["optimizers"]["muon"]["lr"]
    claim = doc["claims"][0]
    assert claim["id"] == "dcasgd" and claim["result"]["status"] == "inconclusive"
    assert "only 1 seed" in claim["result"]["reason"]
    assert (tmp_path / "claims.md").is_file() and (tmp_path / "figures" / "dcasgd.png").is_file()
    assert not any((tmp_path / "runs").glob("*/checkpoints"))
    calibration = json.loads((tmp_path / "calibration.json").read_text())
    assert calibration["source"] == "calibrated" and calibration["sec_per_step"]["muon"] > 0
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["budget"]["ran"] == 0 and again["budget"]["reused"] == 4
    assert json.loads((tmp_path / "calibration.json").read_text()) == calibration  # reused
    assert main(["reproduce", "--list", "--json", "--quick", "--claims", "dcasgd", "--jobs", "0",
                 "--out", str(tmp_path), *MICRO]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["cost_model"]["source"] == "calibrated"


def test_extra_seeds_phase_writes_the_first_look_then_the_extended_ledger(tmp_path, capsys,
                                                                           monkeypatch):
    """Phase 3 end to end on real micro runs: the seeds policy's extension (forced here: which
    checks extend is tested in claims/test_phases.py) trains seed 3 of the claim's arms, the
    first look's ledger is written before (marked pending), the final one after with 4 seeds,
    and a second invocation trains nothing."""
    from llm_validation.claims import phases
    from llm_validation.claims import reproduce as front_door

    monkeypatch.setattr(front_door, "extension_seeds",
                        lambda results, policy, seeds_now: [phases.Extension("dcasgd", 4,
                                                                             {"forced": 4})])
    written = []
    real_write = front_door.write_ledger

    def recording(plan, results, out, summary=None, seeds_policy=None, protocol=None):
        written.append(bool((seeds_policy or {}).get("pending")))
        doc = real_write(plan, results, out, summary, seeds_policy, protocol)
        written.append((tmp_path / "claims.md").read_text().count("still training"))
        return doc
    monkeypatch.setattr(front_door, "write_ledger", recording)
    args = ["reproduce", "--claims", "dcasgd", "--jobs", "0", "--out", str(tmp_path), "--json",
            "--set", "muon:optim.lr=0.01", *MICRO]
    assert main(args) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert written == [True, 1, False, 0]
    assert "first look written" in out.err and "phase 3/3: extra seeds" in out.err
    assert doc["budget"]["ran"] == 16 and doc["claims"][0]["result"]["n_seeds"] == 4
    (ext,) = doc["phases"]["seeds_policy"]["extensions"]
    assert ext["claim"] == "dcasgd" and ext["seeds"] == 4
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["budget"]["ran"] == 0


def test_reuse_sweep_trains_the_claims_at_the_recorded_lrs_and_sweeps_nothing(tmp_path, capsys):
    """A ledger swept under older rules keeps its sweep: with ``--reuse-sweep`` phase 1 reads
    ``lr_sweep.json`` (here edited to an lr the sweep never tried) and trains nothing, and the
    claims' runs train at the recorded lr; without the file it is one line and exit 2."""
    args = ["reproduce", "--quick", "--claims", "dcasgd", "--jobs", "0", "--quiet",
            "--out", str(tmp_path), "--json", *MICRO]
    assert main([*args, "--reuse-sweep"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--reuse-sweep" in err[0] and "lr_sweep.json" in err[0]
    assert main(args) == 0                          # the ordinary ledger sweeps, then trains
    capsys.readouterr()
    runs_before = {p.name for p in (tmp_path / "runs").iterdir()}
    sweep = json.loads((tmp_path / "lr_sweep.json").read_text())
    recorded = 0.0123                                # not on the sweep's factor-2 grid
    assert all(abs(g["lr"] - recorded) > 1e-6 for g in sweep["optimizers"]["muon"]["grid"])
    sweep["optimizers"]["muon"]["lr"] = recorded
    (tmp_path / "lr_sweep.json").write_text(json.dumps(sweep))
    assert main([*args, "--reuse-sweep"]) == 0
    doc = json.loads(capsys.readouterr().out)
    new = {p.name for p in (tmp_path / "runs").iterdir()} - runs_before
    assert new and all(n.startswith(f"muon-") and f"lr{recorded}-" in n for n in new), new
    assert doc["budget"]["ran"] == len(new)          # the claims' runs only: no sweep run
    assert json.loads((tmp_path / "lr_sweep.json").read_text()) == sweep   # left as recorded
    assert main([*args, "--reuse-sweep", "--stop-after", "sweep"]) == 2
    assert "nothing would run" in capsys.readouterr().err
