"""What every ``delaybound`` command shares: JSON output and the CLI's own user errors.

Kept out of :mod:`delaybound.cli` so that the command modules, which ``cli`` loads, never
import ``cli`` back (no import cycle).
"""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["print_json", "UsageError"]


class UsageError(ValueError):
    """A user error detected by the CLI itself (bad argument combination, bad k=v pair)."""


def print_json(obj: Any) -> None:
    """Print ``obj`` as JSON on stdout (NaN/inf become null so the output is strict JSON)."""

    def clean(x: Any) -> Any:
        if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
            return None
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    json.dump(clean(obj), sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
    sys.stdout.flush()
