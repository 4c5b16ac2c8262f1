"""numerics test helpers: print the tightness search's worst ratios in the terminal summary."""

from __future__ import annotations

import sys


def pytest_terminal_summary(terminalreporter):
    mod = sys.modules.get("test_verify")
    worst = getattr(mod, "WORST", None) if mod is not None else None
    if not worst:
        return
    terminalreporter.write_line("worst observed/bound ratios found by the tightness search "
                                "(ratio: seed mean; lower: mean - 4 se; tail: lower over the second half of the steps):")
    for name, w in sorted(worst.items()):
        terminalreporter.write_line(f"  {name:26s} ratio {w['ratio']:.4f} lower {w['ratio_lower']:.4f} "
                                    f"tail {w['ratio_tail']:.4f}  {w['where']}")
