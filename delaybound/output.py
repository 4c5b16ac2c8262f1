"""What every ``delaybound`` command shares: JSON output and the CLI's own user errors.

Kept out of :mod:`delaybound.cli` so that the command modules, which ``cli`` loads, never
import ``cli`` back (no import cycle).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["print_json", "UsageError", "check_out_dir", "check_out_file", "check_at_least",
           "check_overrides"]


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


def _file_above(path: Path) -> Path | None:
    """The first existing non-folder among ``path``'s parents (where no folder can be made)."""
    for q in reversed(path.parents):
        if q.exists() and not q.is_dir():
            return q
    return None


def check_out_dir(option: str, path: str | Path | None) -> None:
    """Refuse an output folder (given as ``option``) that exists as a file, or lies below one,
    before any work is done (UsageError naming both)."""
    if path is None:
        return
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{option} {path}: exists and is not a folder")
    if (f := _file_above(p)) is not None:
        raise UsageError(f"{option} {path}: {f} is a file, not a folder")


def check_out_file(option: str, path: str | Path | None) -> None:
    """Refuse an output file (given as ``option``) that exists as a folder or lies below a
    file, before any work is done (UsageError naming both)."""
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    if (f := _file_above(p)) is not None:
        raise UsageError(f"{option} {path}: {f} is a file, not a folder")


def check_at_least(option: str, value: int | float | None, low: int | float) -> None:
    """Refuse ``option``'s value below ``low`` (None: not given, accepted)."""
    if value is not None and value < low:
        raise UsageError(f"{option} {value}: must be >= {low}")


def check_overrides(option: str, overrides: list[str] | tuple[str, ...] | None) -> None:
    """Refuse a ``[OPT:]section.field=value`` override that names no field or gives a value
    the config refuses, blaming ``option`` (checked on the default base run of the optimizer it
    names, or of AdamW)."""
    from llm_validation.sweep.grid import BASE_OPTIM, apply_overrides, default_base, parse_override
    for text in overrides or ():
        try:
            opt = parse_override(text)[0] or "adamw"
            apply_overrides(default_base(opt if opt in BASE_OPTIM else "adamw"), [text])
        except (ValueError, TypeError) as exc:
            raise UsageError(f"{option} {text}: {exc}") from None
