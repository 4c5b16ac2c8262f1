"""The progress lines' elapsed time and ETA (``train``)."""

from __future__ import annotations

from llm_validation.progress import duration, eta_suffix


def test_duration_formats():
    assert [duration(s) for s in (0, 42.4, 185, 7620)] == ["0s", "42s", "3m05s", "2h07m"]


def test_eta_is_the_mean_rate_times_what_is_left():
    assert eta_suffix(10, 30, 20.0) == " | elapsed 20s eta 1m00s"
    assert eta_suffix(0, 30, 1.0) == " | elapsed 1s eta ?"
    assert eta_suffix(5, 0, 9.0) == " | elapsed 9s eta 0s"
