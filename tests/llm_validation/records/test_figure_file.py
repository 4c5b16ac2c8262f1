"""``save_figure``: the folder is made, the PNG written, the figure closed even when the save
fails."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from llm_validation.records.figure_file import save_figure  # noqa: E402


def test_writes_into_a_new_folder_and_closes(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    path = save_figure(fig, tmp_path / "a" / "b" / "f.png", dpi=50)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)


def test_a_failed_save_still_closes_the_figure(tmp_path):
    fig, _ = plt.subplots()
    with pytest.raises(ValueError):
        save_figure(fig, tmp_path / "f.png", dpi=50, format="no-such-format")
    assert not plt.fignum_exists(fig.number)
