"""``delaybound validate``, ``sweep`` and ``bench`` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

from delaybound.cli import main
from tests.llm_validation.validation.synthetic_runs import headline

MICRO = ["--set", "model.n_layer=1", "--set", "model.d_model=16", "--set", "model.n_head=2",
         "--set", "model.n_kv_head=1", "--set", "model.d_ff=32", "--set", "data.seq_len=16",
         "--set", "run.batch_size=4", "--set", "run.eval_batches=1"]


def test_validate_json_and_text(tmp_path, capsys):
    headline(tmp_path / "runs", {"adamw": 0.3, "muon": 0.05})
    assert main(["validate", str(tmp_path / "runs"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    st = {v["id"]: v["status"] for v in rep["verdicts"]}
    assert st["gap_adamw_gt_muon"] == "pass"
    assert rep["counts"]["pass"] >= 1 and "paired" in rep["gap_definition"]
    assert main(["validate", str(tmp_path / "runs"), "--figures", str(tmp_path / "p"),
                 "--report", str(tmp_path / "r.md")]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "gap_adamw_gt_muon" in out
    assert (tmp_path / "p" / "loss_curves.png").is_file()
    md = (tmp_path / "r.md").read_text()
    assert "![loss_curves.png](p/loss_curves.png)" in md


def test_validate_errors_are_one_line(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such run directory" in err[0]
    assert main(["validate", str(tmp_path)]) == 2
    assert "no run directories" in capsys.readouterr().err


def test_validate_names_a_config_that_is_not_json(tmp_path, capsys):
    headline(tmp_path / "runs", {"adamw": 0.3})
    bad = sorted((tmp_path / "runs").iterdir())[0] / "config.json"
    bad.write_text('{"model": ')
    assert main(["validate", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "not valid JSON" in err[0]
    assert "line 1, column 11" in err[0]


def test_sweep_dry_run_and_run(tmp_path, capsys):
    out = str(tmp_path / "sw")
    args = ["sweep", "--out", out, "--optimizer", "adamw", "--mode", "sync,2bw",
            "--lr", "adamw=1e-3,2e-3", "--seeds", "0", "--steps", "2", *MICRO]
    assert main(args + ["--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [r["action"] for r in plan["runs"]] == ["start"] * 4
    assert main(args + ["--jobs", "0", "--quiet"]) == 0
    assert main(args + ["--dry-run"]) == 0
    assert capsys.readouterr().out.strip().endswith("4 runs (4 finished)")
    index = json.loads((Path(out) / "index.json").read_text())
    assert len(index["runs"]) == 4 and index["grid"]["lrs"] == {"adamw": [0.001, 0.002]}


def test_sweep_bad_input(tmp_path, capsys):
    assert main(["sweep", "--out", str(tmp_path), "--mode", "async"]) == 2
    assert "modes" in capsys.readouterr().err
    assert main(["sweep", "--out", str(tmp_path), "--lr", "1e-3", "--lr", "muon=1e-2"]) == 2
    assert main(["sweep", "--out", str(tmp_path), "--grid", str(tmp_path / "g.json")]) == 2
    (tmp_path / "g.json").write_text('{"optimizers": ["adamw"], "bogus": 1}')
    assert main(["sweep", "--out", str(tmp_path), "--grid", str(tmp_path / "g.json")]) == 2
    assert "bogus" in capsys.readouterr().err


def test_bench_list_and_unknown(capsys):
    assert main(["bench", "--list"]) == 0
    assert "delay" in capsys.readouterr().out
    assert main(["bench", "no_such_bench"]) == 2


def test_bench_runs_a_benchmark_script(tmp_path, monkeypatch, capsys):
    import delaybound.cmd_bench as cb
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "bench_ok.py").write_text("import json, sys\nprint(json.dumps({'args': sys.argv[1:]}))\n")
    (bench / "bench_bad.py").write_text("print('not json')\n")
    monkeypatch.setattr(cb, "benchmark_dir", lambda: bench)
    assert main(["bench", "ok", "--json", "--args", "--reps 3"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": {"args": ["--json", "--reps", "3"]}}
    assert main(["bench", "bad", "--json"]) == 1
    assert "not one JSON object" in capsys.readouterr().out


def test_validate_warns_of_damaged_metrics_and_names_the_lost_seed(tmp_path, capsys):
    """Half of one seed's metrics.jsonl cut off: one warning line naming the file and what it
    misses, the run in the notes, and every verdict that would have read it lists it in its own
    'dropped' line (JSON and text), none of them AdamW-free."""
    headline(tmp_path / "runs", {"adamw": 0.3, "muon": 0.05})
    victim = next(d for d in sorted((tmp_path / "runs").iterdir())
                  if d.name.startswith("adamw-2bw") and d.name.endswith("-s2"))
    text = (victim / "metrics.jsonl").read_text()
    (victim / "metrics.jsonl").write_text(text[: len(text) // 2])
    assert main(["validate", str(tmp_path / "runs"), "--json"]) == 0
    cap = capsys.readouterr()
    warn = [ln for ln in cap.err.splitlines() if "warning" in ln]
    assert len(warn) == 1 and str(victim / "metrics.jsonl") in warn[0]
    assert "training rows stop at step" in warn[0] and "no closing eval row" in warn[0]
    rep = json.loads(cap.out)
    assert any(victim.name in n for n in rep["notes"])
    touched = [v for v in rep["verdicts"] if any(victim.name in d for d in v["dropped"])]
    assert touched and all("adamw" in v["id"] or "AdamW" in v["claim"] for v in touched)
    assert not any(victim.name in v["runs"] for v in rep["verdicts"])
    assert main(["validate", str(tmp_path / "runs")]) == 0
    lines = [ln.strip() for ln in capsys.readouterr().out.splitlines()]
    assert sum(ln.startswith(f"dropped: {victim.name} (seed 2)") for ln in lines) == len(touched)


def test_validate_figures_of_a_single_run_say_why_none(tmp_path, capsys):
    """A single run has nothing to compare: the --figures folder stays empty and one note says
    why (issue 33)."""
    headline(tmp_path / "runs", {"adamw": 0.3})
    one = next(p for p in sorted((tmp_path / "runs").iterdir()) if "sync" in p.name)
    assert main(["validate", str(one), "--figures", str(tmp_path / "p")]) == 0
    err = capsys.readouterr().err
    assert not list((tmp_path / "p").iterdir())
    assert f"no figure written to {tmp_path / 'p'}" in err and "none to compare" in err
    # the flag's older name still works (hidden from --help)
    assert main(["validate", str(one), "--plots", str(tmp_path / "q")]) == 0
    assert "no figure written to" in capsys.readouterr().err
