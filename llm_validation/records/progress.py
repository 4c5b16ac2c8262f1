"""Progress lines of long work: elapsed time and an ETA from the rate so far.

``train`` prints ``[train] step N/M loss ... | elapsed 12s eta 1m40s`` every 5% of the run (the
emulated loop and a pipeline's stage 0 alike); the ETA is the steps left at the mean rate of
the steps this invocation has done (a resumed run counts only its own steps), so it is
pessimistic while the first, slower steps (allocation, warm-up) dominate.
"""

from __future__ import annotations

__all__ = ["duration", "eta_suffix"]


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta_suffix(done: int, left: int, elapsed: float) -> str:
    """`` | elapsed E eta T`` after ``done`` units in ``elapsed`` seconds with ``left`` to go
    (no ETA before the first unit)."""
    eta = duration(elapsed / done * left) if done > 0 else "?"
    return f" | elapsed {duration(elapsed)} eta {eta}"
