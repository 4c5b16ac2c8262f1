"""The progress lines' elapsed time and ETA (``train``)."""

from __future__ import annotations

from llm_validation.records.progress import duration, eta_suffix


def test_duration_formats():
    assert [duration(s) for s in (0, 42.4, 185, 7620)] == ["0s", "42s", "3m05s", "2h07m"]


def test_eta_is_the_mean_rate_times_what_is_left():
    assert eta_suffix(10, 30, 20.0) == " | elapsed 20s eta 1m00s"
    assert eta_suffix(0, 30, 1.0) == " | elapsed 1s eta ?"
    assert eta_suffix(5, 0, 9.0) == " | elapsed 9s eta 0s"


def test_train_progress_lines_carry_elapsed_and_eta(tmp_path, capsys):
    from delaybound.cli import main
    assert main(["train", "--preset", "tiny", "--seq-len", "16", "--batch-size", "2",
                 "--eval-batches", "1", "--stats-interval", "0", "--steps", "2",
                 "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "[train] step 2/2 " in err and "| elapsed " in err and " eta 0s" in err
