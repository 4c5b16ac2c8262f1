"""``delaybound simulate`` on the command line: unit costs, model costs with files, a profiled
run (--from), a projection, --quality, and bad input as one line with exit code 2."""

from __future__ import annotations

import json

import pytest

from delaybound.cli import main
from llm_validation.config import DelayConfig, RunConfig, TrainConfig
from tests.llm_validation.pipeline.timeline_oracle import schedule_timeline
from tests.llm_validation.simulation.profiles import hand_profile, write_hand_profile

MODEL = ["--model", "tiny", "--gpu-tflops", "1", "--link-gbps", "100", "--seq-len", "64"]


def _json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_unit_costs_json_and_text(capsys):
    s = _json(capsys, ["simulate", "--schedule", "1f1b", "--stages", "4", "--microbatches", "6",
                       "--batches", "2", "--unit-costs"])
    assert s["makespan"] == 2 * 2 * (6 + 4 - 1) and s["step_time"] == 18
    assert s["bubble_fraction"] == 3 / 9 and s["steady_step_time"] == 18
    assert s["tokens_per_s"] is None and s["time_unit"] == "tick"
    assert [m["activations_in_flight"] for m in s["peak_memory"]] == [4, 3, 2, 1]
    assert main(["simulate", "--schedule", "2bw", "--stages", "3", "--microbatches", "3",
                 "--batches", "3", "--unit-costs"]) == 0
    out = capsys.readouterr().out
    assert "makespan 22 ticks" in out and schedule_timeline(3, 3, 3) in out


def test_model_costs_write_json_and_timeline(tmp_path, capsys):
    s = _json(capsys, ["simulate", "--schedule", "zb-h1", "--stages", "2", "--microbatches",
                       "4", *MODEL, "--out", str(tmp_path / "o")])
    assert s["tokens_per_s"] > 0 and s["tokens_per_batch"] == 4 * 64
    assert s["tokens_per_s"] == pytest.approx(4 * 256 / s["makespan"], rel=1e-12)
    assert all(m["total_bytes"] > 0 for m in s["peak_memory"])
    assert json.loads((tmp_path / "o" / "simulation.json").read_text())["makespan"] == \
        s["makespan"]
    assert (tmp_path / "o" / "timeline.png").stat().st_size > 10_000


def test_from_a_profiled_run(tmp_path, capsys):
    run = tmp_path / "run"
    write_hand_profile(run)
    s = _json(capsys, ["simulate", "--from", str(run), "--batches", "2"])
    assert (s["schedule"], s["stages"], s["microbatches"]) == ("2bw", 3, 4)
    prof = hand_profile()["per_stage"]
    for row, p in zip(s["per_stage"], prof):   # the measured compute, every microbatch
        assert row["compute"] == pytest.approx(2 * 4 * (p["forward_s"] + p["backward_s"]),
                                               rel=1e-12)
    assert s["tokens_per_s"] == pytest.approx(2 * 4 * 512 / s["makespan"], rel=1e-12)
    assert "total_bytes" not in s["peak_memory"][0]          # no config.json: counts only
    cfg = TrainConfig(run=RunConfig(pipeline="2bw", stages=3, microbatches=4, batch_size=16),
                      delay=DelayConfig(tau=1))
    (run / "config.json").write_text(json.dumps(cfg.to_dict()))
    s = _json(capsys, ["simulate", "--from", str(run), "--schedule", "1f1b"])
    assert s["schedule"] == "1f1b" and s["peak_memory"][0]["total_bytes"] > 0


def test_projection_with_quality(tmp_path, capsys):
    gaps = {"verdicts": [{"id": "gap_adamw_gt_muon", "status": "pass", "measured": {
        "gap AdamW": {"estimate": 0.47, "lo": 0.4, "hi": 0.54, "n": 3}}}]}
    (tmp_path / "v.json").write_text(json.dumps(gaps))
    out = _json(capsys, ["simulate", *MODEL, "--stages", "2,4", "--microbatches", "2x",
                         "--schedule", "1f1b,2bw", "--quiet", "--out", str(tmp_path / "p"),
                         "--quality", str(tmp_path / "v.json")])
    assert len(out["rows"]) == 4 and len(out["comparison"]) == 2
    assert all(c["speedup_2bw"] > 1 for c in out["comparison"])
    assert out["quality"]["gaps"][0]["estimate"] == 0.47
    assert (tmp_path / "p" / "projection.png").is_file()
    assert main(["simulate", "--schedule", "2bw", "--stages", "2", "--microbatches", "4",
                 *MODEL, "--quality", str(tmp_path / "v.json")]) == 0
    text = capsys.readouterr().out
    assert "2BW throughput over 1f1b: x1." in text and "gap AdamW = 0.47 [0.4, 0.54]" in text


@pytest.mark.parametrize("argv,match", [
    (["--schedule", "2bw", "--stages", "4", "--microbatches", "2", "--unit-costs"],
     "microbatches >= stages - 1"),
    (["--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--model", "tiny",
      "--gpu-tflops", "0", "--link-gbps", "1"], "gpu_tflops"),
    (["--schedule", "fifo", "--stages", "2", "--microbatches", "2", "--unit-costs"],
     "unknown schedule"),
    (["--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--unit-costs",
      "--model", "tiny"], "not allowed with"),
    (["--schedule", "1f1b", "--stages", "2", "--microbatches", "2"], "exactly one cost source"),
    (["--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--unit-costs",
      "--batches", "0"], "--batches"),
    (["--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--model", "tiny"],
     "--gpu-tflops"),
    (["--stages", "2,4", "--unit-costs"], "needs --model"),
    (["--schedule", "1f1b", "--microbatches", "2", "--unit-costs"], "--stages is required"),
])
def test_bad_input_is_one_line_exit_2(argv, match, capsys):
    try:
        code = main(["simulate", *argv])
    except SystemExit as exc:          # argparse's own errors (choices, exclusive flags)
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0]


def test_a_bad_profile_is_one_line_exit_2(tmp_path, capsys):
    prof = hand_profile()
    prof["per_stage"][1]["backward_s"] = -0.1
    (tmp_path / "profile.json").write_text(json.dumps(prof))
    assert main(["simulate", "--from", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "backward_s" in err[0] and "profile.json" in err[0]


def test_flush_and_clipping_flags(tmp_path, capsys):
    """``--clip`` puts 2BW's step after F((t+1)M + P - 1) and makes it wait for the norm;
    ``--log-interval`` / ``--flush-ms`` price the flush; a profile that clipped and flushed
    every 2 steps is replayed with its own settings, ``--log-interval`` overrides them."""
    base = ["simulate", "--schedule", "2bw", "--stages", "2", "--microbatches", "4", *MODEL]
    plain = _json(capsys, base)
    s = _json(capsys, [*base, "--clip", "--log-interval", "2", "--flush-ms", "5"])
    assert (s["step_after"], s["flush_interval"], s["clip"]) == ("forward", 2, True)
    assert (plain["step_after"], plain["flush_interval"], plain["clip"]) == ("backward", 1, False)
    assert s["steady_step_time"] > plain["steady_step_time"]         # 5 ms every other step
    run = tmp_path / "run"
    write_hand_profile(run)
    prof = json.loads((run / "profile.json").read_text())
    prof.update(log_interval=2, grad_clip=1.0)
    for p in prof["per_stage"]:
        p["flush_s"] = 0.01
    (run / "profile.json").write_text(json.dumps(prof))
    s = _json(capsys, ["simulate", "--from", str(run)])
    assert (s["step_after"], s["flush_interval"], s["clip"]) == ("forward", 2, True)
    every = _json(capsys, ["simulate", "--from", str(run), "--log-interval", "1"])
    assert every["flush_interval"] == 1
    assert every["steady_step_time"] == pytest.approx(s["steady_step_time"] + 0.005, rel=1e-9)
