"""Figure axes read as plain numbers: '16' and '0.002', not '1.6 x 10^1' (matplotlib's default
on a log axis that spans less than a decade or two)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from llm_validation.validation.figures import plain_ticks  # noqa: E402


def _labels(axis) -> list[str]:
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text()]


def test_plain_ticks_at_the_data_values_on_a_log_axis():
    fig, ax = plt.subplots()
    ax.plot([8, 16, 32], [0.1, 0.2, 0.3])
    ax.set_xscale("log")
    fig.canvas.draw()
    assert any("times" in s or "^" in s for s in _labels(ax.xaxis) + [
        t.get_text() for t in ax.xaxis.get_minorticklabels()]), "matplotlib's default changed"
    plain_ticks(ax.xaxis, [8, 16, 32, 16])
    fig.canvas.draw()
    assert _labels(ax.xaxis) == ["8", "16", "32"]
    assert not any(t.get_text() for t in ax.xaxis.get_minorticklabels())
    plt.close(fig)


def test_plain_ticks_label_the_minor_ticks_of_a_short_log_axis():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1.5, 6.0])
    ax.set_yscale("log")
    plain_ticks(ax.yaxis)
    fig.canvas.draw()
    minor = [t.get_text() for t in ax.yaxis.get_minorticklabels() if t.get_text()]
    assert {"2", "3", "4", "5"} <= set(minor)
    assert not any("times" in s or "^" in s for s in minor + _labels(ax.yaxis))
    plt.close(fig)
