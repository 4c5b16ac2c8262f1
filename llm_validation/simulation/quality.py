"""The quality side of a throughput projection: the measured loss gap of an optimizer under delay.

Reads a ``delaybound validate --json`` output or a ``claims.json`` of ``delaybound reproduce``
and collects, for one optimizer, every measured loss gap (delayed minus synchronous, paired by
seed) with its interval. A gap is a measurement whose name holds ``gap`` (not a slope,
exponent, share or ratio) inside a verdict or claim (an object with ``id`` and ``measured``)
that concerns this optimizer: its name carries the optimizer's label (``gap Muon``), or the verdict's id names the optimizer
(``ef_gain[muon]``: ``gap without EF``, ``gap with EF``) and the measurement names no other.
Only the structure is assumed, so a ledger that nests its claims deeper is read the same way.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator, Mapping

from llm_validation.config import OPTIMIZER_LABELS, optimizer_label
from llm_validation.records.atomic_io import read_json

__all__ = ["read_gaps", "format_gap"]


def _records(obj: Any) -> Iterator[Mapping[str, Any]]:
    """Every object with an ``id`` and a ``measured`` mapping, depth first."""
    if isinstance(obj, Mapping):
        if "id" in obj and isinstance(obj.get("measured"), Mapping):
            yield obj
        for v in obj.values():
            yield from _records(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _records(v)


def _as_interval(value: Any) -> dict[str, Any] | None:
    if isinstance(value, Mapping) and isinstance(value.get("estimate"), (int, float)):
        return {"estimate": float(value["estimate"]),
                "lo": value.get("lo"), "hi": value.get("hi"), "n": value.get("n")}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"estimate": float(value), "lo": None, "hi": None, "n": None}
    return None


#: Measurements whose name holds "gap" but that are not a gap (slopes, exponents, shares...).
NOT_A_GAP = ("slope", "exponent", "prefactor", "share", "ratio", "/ d", "cos")


def _is_gap(name: str) -> bool:
    n = name.lower()
    return "gap" in n and not any(w in n for w in NOT_A_GAP)


def _mentions(text: str, name: str) -> bool:
    t = text.lower()
    return name.lower() in t or optimizer_label(name).lower() in t


def read_gaps(path: str | Path, optimizer: str) -> dict[str, Any]:
    """``{"source", "optimizer", "gaps": [{"id", "name", "status", "estimate", "lo", "hi",
    "n"}]}`` for ``optimizer`` (see the module docstring). ``ValueError`` when the file holds no
    gap for it, naming the optimizers it does hold."""
    path = Path(path)
    data = read_json(path)
    others = [o for o in OPTIMIZER_LABELS if o != optimizer and not _mentions(optimizer, o)]
    gaps, seen = [], set()
    for rec in _records(data):
        rid = str(rec["id"])
        for name, value in rec["measured"].items():
            if not _is_gap(name):
                continue
            iv = _as_interval(value)
            if iv is None or not math.isfinite(iv["estimate"]):
                continue
            seen.update(o for o in OPTIMIZER_LABELS if _mentions(name, o) or _mentions(rid, o))
            if any(_mentions(name, o) for o in others):
                continue
            if _mentions(name, optimizer) or _mentions(rid, optimizer):
                gaps.append({"id": rid, "name": name, "status": rec.get("status"), **iv})
    if not gaps:
        held = sorted(seen) or "none"
        raise ValueError(f"{path}: no measured loss gap for optimizer {optimizer!r} "
                         f"(optimizers with gaps there: {held})")
    return {"source": str(path), "optimizer": optimizer, "gaps": gaps}


def format_gap(g: Mapping[str, Any]) -> str:
    """``gap Muon = 0.155 [0.124, 0.186] (gap_adamw_gt_muon, pass)``."""
    ci = ""
    if isinstance(g.get("lo"), (int, float)) and isinstance(g.get("hi"), (int, float)):
        ci = f" [{g['lo']:.4g}, {g['hi']:.4g}]"
    status = f", {g['status']}" if g.get("status") else ""
    return f"{g['name']} = {g['estimate']:.4g}{ci} ({g['id']}{status})"
