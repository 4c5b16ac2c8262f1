"""Run-directory files: config.json, metrics.jsonl, checkpoints/, summary.json.

Layout (DESIGN.md, "Run directory")::

    <out_dir>/config.json         resolved TrainConfig + versions + git commit + corpus facts
    <out_dir>/metrics.jsonl       one JSON object per line (flushed after every line)
    <out_dir>/checkpoints/step_<N>.pt   model, optimizer + delay/EF buffers, sampler, RNG, probe
    <out_dir>/summary.json        RunResult of the last (possibly resumed) invocation

metrics.jsonl: NaN/inf become ``null`` (strict JSON). :func:`read_metrics` skips a truncated
last line (a run killed mid-write) with a warning; a malformed line elsewhere is an error.
Checkpoints are written to a temporary file and renamed (atomic); the newest
:data:`KEEP_CHECKPOINTS` are kept.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

__all__ = [
    "KEEP_CHECKPOINTS",
    "RunPaths",
    "MetricsWriter",
    "read_metrics",
    "rewrite_metrics_before",
    "save_checkpoint",
    "latest_checkpoint",
    "load_checkpoint",
    "rng_state",
    "set_rng_state",
    "environment",
    "write_json",
    "read_json",
]

#: Number of checkpoints kept in checkpoints/ (older ones are deleted).
KEEP_CHECKPOINTS = 2
_CKPT = re.compile(r"^step_(\d+)\.pt$")


class RunPaths:
    """The paths of a run directory."""

    def __init__(self, out_dir: str | Path) -> None:
        self.root = Path(out_dir)
        self.config = self.root / "config.json"
        self.metrics = self.root / "metrics.jsonl"
        self.checkpoints = self.root / "checkpoints"
        self.summary = self.root / "summary.json"

    def has_run(self) -> bool:
        """True when the directory already holds a run (metrics or checkpoints)."""
        return self.metrics.exists() or (self.checkpoints.is_dir()
                                         and any(self.checkpoints.iterdir()))


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def write_json(path: str | Path, obj: Any) -> None:
    """Strict JSON (NaN/inf -> null), written atomically."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_clean(obj), indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def read_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    return json.loads(path.read_text())


class MetricsWriter:
    """Appends one JSON object per line and flushes it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._f = open(self.path, "a", encoding="utf-8")

    def write(self, row: Mapping[str, Any]) -> None:
        self._f.write(json.dumps(_clean(dict(row))) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "MetricsWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a metrics.jsonl (a run directory or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"metrics file not found: {path}")
    text = path.read_text(encoding="utf-8")
    lines, complete = text.split("\n"), text.endswith("\n")
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            last = i == len(lines) - 1 and not complete
            if last:
                warnings.warn(f"{path}: skipping truncated last line {i + 1}", stacklevel=2)
                continue
            raise ValueError(f"{path}: line {i + 1} is not valid JSON: {exc}") from None
    return rows


def rewrite_metrics_before(path: str | Path, step: int) -> None:
    """Keep only rows with ``row["step"] < step`` (used on resume; drops a truncated line)."""
    path = Path(path)
    if not path.exists():
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = [r for r in read_metrics(path) if int(r.get("step", -1)) < step]
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)


def rng_state() -> dict[str, Any]:
    """torch (CPU and CUDA), numpy and Python RNG states."""
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
             "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(paths: RunPaths, step: int, payload: Mapping[str, Any]) -> Path:
    """Write ``checkpoints/step_<step>.pt`` atomically; keep the newest KEEP_CHECKPOINTS."""
    paths.checkpoints.mkdir(parents=True, exist_ok=True)
    final = paths.checkpoints / f"step_{step:08d}.pt"
    tmp = final.with_suffix(".pt.tmp")
    torch.save(dict(payload), tmp)
    os.replace(tmp, final)
    found = sorted((int(m.group(1)), f) for f in paths.checkpoints.iterdir()
                   if (m := _CKPT.match(f.name)))
    for _, old in found[:-KEEP_CHECKPOINTS]:
        old.unlink()
    return final


def latest_checkpoint(paths: RunPaths) -> Path | None:
    """The checkpoint with the largest step, or None."""
    if not paths.checkpoints.is_dir():
        return None
    found = sorted((int(m.group(1)), f) for f in paths.checkpoints.iterdir()
                   if (m := _CKPT.match(f.name)))
    return found[-1][1] if found else None


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    return torch.load(path, map_location=map_location, weights_only=False)


def _git_commit() -> str | None:
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
            "git_commit": _git_commit(),
            "cuda": torch.version.cuda if torch.cuda.is_available() else None}
