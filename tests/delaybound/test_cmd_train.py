"""`delaybound train`: one-line errors for bad input, a JSON summary, --resume extension."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from delaybound.cli import main

SMALL_RUN = ["train", "--preset", "tiny", "--seq-len", "16", "--batch-size", "2",
             "--eval-batches", "1", "--stats-interval", "0", "--quiet"]


@pytest.mark.parametrize("args,needle", [
    (["--optimizer", "lamb"], "invalid choice"),
    (["--correction", "dcasgd"], "correction_coef"),
    (["--correction", "pipemare"], "invalid choice"),
    (["--grad-clip", "-1"], "grad_clip"),
    (["--pipeline", "2bw", "--stages", "2", "--microbatches", "2", "--sync-start", "3"],
     "no flush"),
    (["--delay", "-1"], "tau"),
    (["--ef", "nan"], "ef_lambda"),
    (["--microbatches", "0"], "microbatches"),
    (["--batch-size", "3", "--microbatches", "2"], "divisible"),
    (["--data", "/nonexistent/corpus.txt"], "/nonexistent/corpus.txt"),
    (["--stage-taus", "2,x"], "stage taus"),
    (["--pipeline", "gpipe", "--stages", "2", "--delay", "1"], "synchronous"),
    (["--resume"], "no checkpoint found in"),   # a typo in a run name never starts a new run
    (["--resume", "sometimes"], "--resume takes no value or 'auto'"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, args, needle):
    try:
        code = main([*SMALL_RUN, "--steps", "1", "--out", str(tmp_path / "r"), *args])
    except SystemExit as exc:          # argparse's own errors (choices, types)
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()             # nothing was started


def test_library_errors_exit_2_in_a_subprocess(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "delaybound", *SMALL_RUN, "--delay", "-2",
                           "--out", str(tmp_path / "r")], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "tau=-2" in proc.stderr


def test_json_summary_and_resume_extension(tmp_path, capsys):
    out = str(tmp_path / "run")
    assert main([*SMALL_RUN, "--steps", "2", "--delay", "1", "--ef", "1", "--out", out,
                 "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["status"] == "completed" and first["steps"] == 2
    # only --resume, --steps and --out: the rest comes from the saved config.json
    assert main(["train", "--resume", "--steps", "3", "--out", out, "--quiet", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["steps"] == 3 and second["tokens"] == 3 * 2 * 16
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["delay"]["tau"] == 1 and saved["delay"]["ef_lambda"] == 1.0
    assert saved["meta"]["resumed_from_step"] == 2
    assert main(["train", "--resume", "--steps", "3", "--optimizer", "sgd", "--out", out,
                 "--quiet"]) == 2
    assert "optim.name" in capsys.readouterr().err


def test_resume_without_a_checkpoint_names_the_directory_and_starts_nothing(tmp_path, capsys):
    out = tmp_path / "typo-in-the-name"
    assert main([*SMALL_RUN, "--steps", "1", "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"no checkpoint found in {out}" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("optimizer", ["normuon", "soap", "lion", "adan"])
def test_the_papers_optimizers_train_under_delay_and_ef(tmp_path, capsys, optimizer):
    out = tmp_path / optimizer
    assert main([*SMALL_RUN, "--steps", "2", "--optimizer", optimizer, "--delay", "1",
                 "--ef", "1", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "completed" and summary["steps"] == 2
    saved = json.loads((out / "config.json").read_text())
    assert saved["optim"]["name"] == optimizer and saved["delay"]["ef_lambda"] == 1.0


def test_schedule_clip_sync_phase_and_correction_flags_reach_the_config(tmp_path, capsys):
    out = tmp_path / "knobs"
    assert main([*SMALL_RUN, "--steps", "3", "--optimizer", "nadamw", "--beta1", "0.99",
                 "--beta2", "0.999", "--grad-clip", "1", "--schedule", "wsd",
                 "--wsd-decay-fraction", "0.5", "--delay", "1", "--sync-start", "1",
                 "--sync-cooldown", "1", "--correction", "dcasgd", "--correction-coef", "0.1",
                 "--out", str(out)]) == 0
    saved = json.loads((out / "config.json").read_text())
    assert {k: saved["optim"][k] for k in ("name", "beta1", "beta2", "grad_clip", "schedule",
                                           "wsd_decay_fraction")} == \
        {"name": "nadamw", "beta1": 0.99, "beta2": 0.999, "grad_clip": 1.0, "schedule": "wsd",
         "wsd_decay_fraction": 0.5}
    assert {k: saved["delay"][k] for k in ("tau", "sync_start", "sync_cooldown", "correction",
                                           "correction_coef")} == \
        {"tau": 1, "sync_start": 1, "sync_cooldown": 1, "correction": "dcasgd",
         "correction_coef": 0.1}


def test_resume_falls_back_from_a_corrupt_newest_checkpoint(tmp_path, capsys):
    """The newest checkpoint cut short (a crash mid-copy): --resume warns in one line naming it
    and continues from the older intact one that is kept."""
    out = tmp_path / "run"
    assert main([*SMALL_RUN, "--steps", "3", "--checkpoint-interval", "1", "--out", str(out),
                 "--quiet"]) == 0
    ckpts = sorted((out / "checkpoints").glob("step_*.pt"))
    assert len(ckpts) == 2
    ckpts[-1].write_bytes(ckpts[-1].read_bytes()[:100])
    capsys.readouterr()
    assert main(["train", "--resume", "--steps", "4", "--out", str(out), "--quiet",
                 "--json"]) == 0
    cap = capsys.readouterr()
    warn = [ln for ln in cap.err.splitlines() if "warning" in ln]
    assert len(warn) == 1 and str(ckpts[-1]) in warn[0] and ckpts[0].name in warn[0]
    assert json.loads(cap.out)["steps"] == 4
    saved = json.loads((out / "config.json").read_text())
    assert saved["meta"]["resumed_from_step"] == 2


def test_resume_auto_starts_then_continues_and_deterministic_is_recorded(tmp_path, capsys):
    out = tmp_path / "auto"
    args = [*SMALL_RUN, "--out", str(out), "--resume", "auto", "--deterministic", "--json"]
    try:
        assert main([*args, "--steps", "1"]) == 0          # nothing to continue: starts
        assert main([*args, "--steps", "2"]) == 0          # continues from step 1
    finally:
        import torch
        torch.use_deterministic_algorithms(False)          # a process-wide torch setting
    saved = json.loads((out / "config.json").read_text())
    assert saved["run"]["resume"] == "auto" and saved["run"]["deterministic"] is True
    assert saved["meta"]["resumed_from_step"] == 1
    assert saved["meta"]["numerics"]["deterministic"] is True


#: SMALL_RUN without the preset: the shape comes from --model-config.
NO_PRESET = ["train", "--seq-len", "16", "--batch-size", "2", "--eval-batches", "1", "--quiet"]
SHAPE = {"n_layer": 2, "d_model": 48, "n_head": 6, "n_kv_head": 3, "d_ff": 96,
         "max_seq_len": 32}


def test_model_config_trains_a_shape_that_is_no_preset(tmp_path, capsys):
    shape = tmp_path / "shape.json"
    shape.write_text(json.dumps(SHAPE))
    out = tmp_path / "run"
    assert main([*NO_PRESET, "--stats-interval", "0", "--model-config", str(shape),
                 "--steps", "2", "--out", str(out)]) == 0
    model = json.loads((out / "config.json").read_text())["model"]
    assert {k: model[k] for k in SHAPE} == SHAPE and model["name"] == "custom"


@pytest.mark.parametrize("content,needle", [
    ({"n_layer": 2, "d_model": 50, "n_head": 4}, "divisible by n_head"),
    ({"d_model": 48, "n_head": 16, "n_kv_head": 2}, "must be even"),
    ({"n_layer": 0}, "n_layer"),
    ({"n_layers": 2}, "unknown fields ['n_layers']"),
    ({"tied": "yes"}, "tied"),
    ([1, 2], "must hold a JSON object"),
    ("{not json", "is not valid JSON"),
    (None, "no such file"),
])
def test_bad_model_config_is_one_line_exit_2(tmp_path, capsys, content, needle):
    shape = tmp_path / "shape.json"
    if content is not None:
        shape.write_text(content if isinstance(content, str) else json.dumps(content))
    code = main([*NO_PRESET, "--steps", "1", "--model-config", str(shape),
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r").exists()


def test_config_reruns_a_recorded_run_exactly(tmp_path, capsys):
    """A run with non-default flags and a custom shape, re-run from its config.json alone:
    every metrics row (every statistic, every loss) is the same, bitwise."""
    shape = tmp_path / "shape.json"
    shape.write_text(json.dumps(SHAPE))
    first, second = tmp_path / "first", tmp_path / "second"
    assert main([*NO_PRESET, "--model-config", str(shape),
                 "--optimizer", "muon", "--lr", "0.02", "--delay", "1", "--ef", "0.5",
                 "--microbatches", "2", "--stats-interval", "2", "--seed", "3",
                 "--steps", "4", "--out", str(first)]) == 0
    assert main(["train", "--config", str(first / "config.json"), "--out", str(second),
                 "--quiet"]) == 0
    assert (first / "metrics.jsonl").read_text() == (second / "metrics.jsonl").read_text()
    a, b = (json.loads((d / "config.json").read_text()) for d in (first, second))
    a["run"].pop("out_dir"), b["run"].pop("out_dir")
    assert {k: v for k, v in a.items() if k != "meta"} == \
        {k: v for k, v in b.items() if k != "meta"}
    # flags on top of the file override it; the run's own directory is refused
    assert main(["train", "--config", str(first), "--quiet"]) == 2
    assert "holds a finished run" in capsys.readouterr().err


@pytest.mark.parametrize("content,extra,needle", [
    ({"model": {"name": "Net", "external": True}}, [], "not build"),
    ({"optim": {"name": "lamb"}}, [], "not a valid run config"),
    ({"run": {"steps": 2}}, ["--resume"], "not both"),
])
def test_bad_config_is_one_line_exit_2(tmp_path, capsys, content, extra, needle):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(content))
    code = main(["train", "--config", str(path), "--out", str(tmp_path / "r"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
