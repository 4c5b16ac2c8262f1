"""Counting host synchronisations: every read of a device value by the host, per step.

On a GPU, reading a tensor's value on the host (``float(t)``, ``t.item()``, ``t.tolist()``,
``bool(t)``, ``t.cpu()``, ``t.numpy()``) waits for every kernel queued before it: a host
synchronisation that stalls the launch queue. The training loop and the stage runtime read
at most one batch of values per step (:func:`llm_validation.training.stats.to_host`); this
module makes that rule testable on CPU, where nothing synchronises.

Algorithm: :class:`HostSyncCounter` is a ``TorchFunctionMode`` that sees every tensor method
call; it counts the reads above on floating-point and boolean tensors (the values a step
computes: losses, norms, partial sums). Integer tensors (token windows, control-message
bytes, checksums) are host data in every runtime and are not counted, nor are the reads
inside ``torch.optim`` (its optimizers' step counters are host tensors on a GPU too). :meth:`mark` closes the
window of a step: ``windows`` is the list of ``(step, reads, where)``, ``where`` the call sites
(file:line) of the reads, so a failing test names the line that added one.

Stage processes count when ``DELAYBOUND_HOST_SYNCS=DIR`` is set: the worker enters a counter
(:func:`install`), the stage runtime and the emulated loop mark each step (:func:`mark`, a no-op otherwise) and
the worker writes ``DIR/host_syncs_rank<r>.json`` (:func:`write`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["HOST_SYNCS_ENV", "HostSyncCounter", "install", "uninstall", "mark", "write",
           "read_counts"]

#: The environment variable naming the directory of the per-rank counts.
HOST_SYNCS_ENV = "DELAYBOUND_HOST_SYNCS"

_READS = {torch.Tensor.item, torch.Tensor.__float__, torch.Tensor.__int__,
          torch.Tensor.__bool__, torch.Tensor.tolist, torch.Tensor.cpu, torch.Tensor.numpy,
          torch.Tensor.__index__}
_HERE = __file__.replace("\\", "/")
_TORCH_OPTIM = "/torch/optim/"


def _site() -> str | None:
    """file:line of the first frame outside torch and this module; None for a read inside
    ``torch.optim`` (its optimizers read their step counters, host tensors on every device
    unless ``capturable``)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename.replace("\\", "/")
        if _TORCH_OPTIM in name:
            return None
        if name != _HERE and "/torch/" not in name:
            return f"{Path(name).name}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


class HostSyncCounter(TorchFunctionMode):
    """Counts host reads of floating-point / boolean tensors (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.windows: list[tuple[Any, int, list[str]]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _READS and args and isinstance(args[0], torch.Tensor) and (
                args[0].is_floating_point() or args[0].dtype == torch.bool):
            site = _site()
            if site is not None:
                self.reads.append(site)
        return func(*args, **kwargs)

    def mark(self, step: Any) -> None:
        """Close the window of ``step``: the reads since the previous mark."""
        self.windows.append((step, len(self.reads), list(self.reads)))
        self.reads = []


_active: dict[str, HostSyncCounter | None] = {"counter": None}


def install() -> HostSyncCounter:
    """Count in this process from now on (the stage worker's main thread)."""
    counter = HostSyncCounter()
    counter.__enter__()
    _active["counter"] = counter
    return counter


def uninstall() -> None:
    """Stop counting in this process (the installed counter keeps its windows)."""
    counter = _active["counter"]
    if counter is not None:
        counter.__exit__(None, None, None)
        _active["counter"] = None


def mark(step: Any) -> None:
    """Close the step's window of the installed counter (no-op when none is installed)."""
    counter = _active["counter"]
    if counter is not None:
        counter.mark(step)


def write(directory: str | Path, rank: int) -> Path | None:
    """Write the installed counter's windows to ``directory/host_syncs_rank<rank>.json``."""
    counter = _active["counter"]
    if counter is None:
        return None
    path = Path(directory) / f"host_syncs_rank{rank}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"step": s, "reads": n, "where": w}
                                for s, n, w in counter.windows]))
    return path


def read_counts(directory: str | Path) -> dict[int, list[dict[str, Any]]]:
    """Every rank's windows from a counts directory."""
    out = {}
    for path in sorted(Path(directory).glob("host_syncs_rank*.json")):
        out[int(path.stem.removeprefix("host_syncs_rank"))] = json.loads(path.read_text())
    return out
