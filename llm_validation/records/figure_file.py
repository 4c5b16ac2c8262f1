"""A figure written to its file: the one tail of every ``plot_*`` that writes a PNG.

Algorithm
    Create the file's folder (parents too), save the figure at the given resolution (any other
    ``savefig`` keyword passed through), close it so pyplot does not keep it alive across a
    ledger's many figures, and return the path. Layout (``tight_layout`` and its margins) stays
    with the caller, which knows its legend and titles.

Guarantee
    The figure is closed whether or not the save succeeds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["save_figure"]


def save_figure(fig: Any, path: str | Path, *, dpi: int, **savefig: Any) -> Path:
    """Write ``fig`` to ``path`` at ``dpi`` (folder created), close it, return the path."""
    import matplotlib.pyplot as plt
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, **savefig)
    finally:
        plt.close(fig)
    return path
