"""Provenance: what a run records about where it ran (versions, platform, git commit).

Written into every run's ``config.json`` (``meta.environment``) by the emulated loop and by
every pipeline stage, so a result can be traced to the code and the machine that produced it.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["environment", "git_commit"]


def git_commit() -> str | None:
    """The checkout's HEAD commit (None outside a git checkout)."""
    here = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def environment() -> dict[str, Any]:
    """Versions and git commit recorded in config.json."""
    try:
        from importlib.metadata import version
        pkg = version("delaybound")
    except Exception:  # not installed as a distribution
        pkg = None
    return {"python": sys.version.split()[0], "torch": torch.__version__,
            "numpy": np.__version__, "delaybound": pkg, "platform": platform.platform(),
            "git_commit": git_commit(),
            "cuda": torch.version.cuda if torch.cuda.is_available() else None}
