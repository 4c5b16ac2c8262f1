"""Small filesystems for the full-disk and read-only tests: a tmpfs of a given size mounted
where the test may mount one (root with CAP_SYS_ADMIN), else the test is skipped with the
reason; a read-only folder (a read-only remount as root, ``chmod 555`` otherwise)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

__all__ = ["tmpfs", "read_only"]


def _mount(args: list[str]) -> str:
    """'' on success, else why not (the skip reason)."""
    try:
        r = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"mount not available: {exc}"
    return "" if r.returncode == 0 else f"mount {' '.join(args)} failed: {r.stderr.strip()}"


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. ``30m``) mounted at ``where`` for the block (skip when it cannot
    be mounted: not root, no CAP_SYS_ADMIN, a container without mount)."""
    where.mkdir(parents=True, exist_ok=True)
    why = _mount(["-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)])
    if why:
        pytest.skip(f"cannot mount a small tmpfs to fill up ({why})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


@contextlib.contextmanager
def read_only(where: Path) -> Iterator[Path]:
    """``where`` (a folder, possibly holding files already) made read-only for the block: as
    root a tmpfs remounted read-only (root ignores permission bits; skip when mount fails),
    otherwise ``chmod 555``. Files written before the block are kept (they are in ``where``)."""
    if os.geteuid() != 0:
        where.mkdir(parents=True, exist_ok=True)
        modes = {p: p.stat().st_mode for p in [where, *where.rglob("*")] if p.is_dir()}
        for p in modes:
            p.chmod(0o555)
        try:
            yield where
        finally:
            for p, m in modes.items():
                p.chmod(m)
        return
    if not os.path.ismount(where):
        pytest.skip("as root a read-only folder needs a tmpfs mounted at it first (tmpfs())")
    why = _mount(["-o", "remount,ro", str(where)])
    if why:
        pytest.skip(f"cannot remount read-only ({why})")
    try:
        yield where
    finally:
        _mount(["-o", "remount,rw", str(where)])
