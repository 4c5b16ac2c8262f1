"""How the verdicts move with the regime: one row per claim, tiny (0.2 tokens per parameter) ->
the smallest 20:1 size (the whole ledger) -> the other sizes -> the size trend.

The tiny ledger decides the paper's claims in the early-training regime (~1M parameters, 0.2
tokens per parameter); the size ladder's ledgers decide them at the paper's 20:1. This module
reads their ``claims.json`` files and lays the verdicts side by side. It decides nothing itself:
every cell is a verdict some ledger reached under its committed protocol.

Algorithm
    Per claim (by its registry number): the claim's status in each ledger that ran it. A larger
    size that did not run a claim but ran the size-ladder claim (19) shows the size-ladder
    statement that carries the same sentence (:data:`LADDER_STATEMENT`: claim 1, "AdamW
    degrades far more than Muon, even with a synchronous start", is 19d, which needs the
    synchronous-start arm; claim 2, "EF halves the gap", is 19b), marked with the statement's
    id. A ledger without that statement (assembled before 19d existed) shows "inconclusive"
    with the reason: claim 1 is not reported at a size without its synchronous-start arm.
    The size-trend cell is the per-size statuses in words (the ladder's step count grows with
    N, so no cross-size extrapolation stands for a size trend).

Guarantee
    A cell is a verdict read from a ledger file, or "-" (the ledger did not run the claim) or
    "not run" (no ledger for that size yet); nothing is re-decided or re-analysed here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from llm_validation.claims.catalogue.registry import CLAIMS

__all__ = ["LADDER_STATEMENT", "MISSING_STATEMENT", "RegimeRow", "claim_statuses", "regime_rows",
           "regime_markdown", "read_ledger"]

#: The size-ladder claim's registry number.
_LADDER = CLAIMS["size-ladder"].number
#: Claims whose sentence the size-ladder claim (19) repeats at every size: claim -> statement.
LADDER_STATEMENT: dict[int, str] = {1: f"{_LADDER}d", 2: f"{_LADDER}b"}
#: Why a claim's cell is inconclusive when its ladder statement is absent from a ledger.
MISSING_STATEMENT: dict[int, str] = {
    1: "no synchronous-start arm at this size: claim 1's sentence names it"}
_NOT_RUN = "not run"


@dataclass(frozen=True, kw_only=True)
class RegimeRow:
    """One claim across the regimes."""

    number: int
    """The claim's registry number."""
    claim_id: str
    """The claim's id (``adamw-vs-muon``, ...)."""
    wording: str
    """The paper's sentence the claim decides."""
    cells: dict[str, str] = field(default_factory=dict)
    """Per ledger (its column name): the status, ``"-"`` (not in that ledger) or ``"not run"``."""
    trend: str = "-"
    """The size trend: the cross-size agreement checks, or the per-size statuses in words."""

    def __post_init__(self) -> None:
        if self.number < 1:
            raise ValueError(f"RegimeRow.number must be >= 1, got {self.number}")


def read_ledger(path: str | Path) -> dict[str, Any] | None:
    """A ledger's ``claims.json`` (``path`` is the file or its folder); None when absent."""
    p = Path(path)
    p = p / "claims.json" if p.is_dir() or not p.suffix else p
    return json.loads(p.read_text()) if p.is_file() else None


def claim_statuses(doc: Mapping[str, Any]) -> dict[int, tuple[str, dict[str, str]]]:
    """Per claim number: (the claim's status, {statement id: status})."""
    out = {}
    for c in doc["claims"]:
        r = c.get("result") or {}
        out[int(c["number"])] = (r.get("status", _NOT_RUN),
                                 {s["id"]: s["status"] for s in r.get("statements", ())})
    return out


def _cell(number: int, statuses: Mapping[int, tuple[str, dict[str, str]]] | None) -> str:
    if statuses is None:
        return _NOT_RUN
    if number in statuses:
        return statuses[number][0]
    sid = LADDER_STATEMENT.get(number)
    ladder = statuses.get(_LADDER, ("", {}))[1]
    if sid is not None and sid in ladder:
        return f"{ladder[sid]} ({sid})"
    if sid is not None and ladder and number in MISSING_STATEMENT:
        return f"inconclusive ({MISSING_STATEMENT[number]})"
    return "-"


def _trend(size_cells: Mapping[str, str]) -> str:
    decided = {k: v for k, v in size_cells.items() if v not in ("-", _NOT_RUN)}
    if len(decided) < 2:
        return "-"
    return ", ".join(f"{k} {v}" for k, v in decided.items())


def regime_rows(tiny: Mapping[str, Any], sizes: Mapping[str, Mapping[str, Any] | None]
                ) -> list[RegimeRow]:
    """One row per claim of the tiny ledger or of any size (ordered by number).

    ``sizes`` maps a column name (``"n46k"``, ...; smallest first) to that size's
    ``claims.json`` (None: not run yet).
    While a size is not run, every trend is labelled ``preliminary`` with the sizes it lacks
    (a trend over part of the ladder is not the ladder's).
    """
    docs = [tiny, *(d for d in sizes.values() if d is not None)]
    wording: dict[int, tuple[str, str]] = {}
    for d in docs:
        for c in d["claims"]:
            wording.setdefault(int(c["number"]), (c["id"], c["wording"]))
    tiny_st = claim_statuses(tiny)
    size_st = {k: (claim_statuses(d) if d is not None else None) for k, d in sizes.items()}
    missing = [k for k, d in sizes.items() if d is None]
    rows = []
    for n in sorted(wording):
        size_cells = {k: _cell(n, st) for k, st in size_st.items()}
        trend = _trend(size_cells)
        if missing and trend != "-":
            trend = f"preliminary ({', '.join(missing)} not run): {trend}"
        rows.append(RegimeRow(number=n, claim_id=wording[n][0], wording=wording[n][1],
                              cells={"tiny": _cell(n, tiny_st), **size_cells}, trend=trend))
    return rows


def _bold(s: str) -> str:
    word = s.split(" ")[0]
    return f"**{s}**" if word in ("pass", "fail") else s


def regime_markdown(rows: Sequence[RegimeRow], columns: Mapping[str, str]) -> list[str]:
    """The table, one line per claim (its wording's first sentence); ``columns`` maps a cell
    key to its header text."""
    head = "| claim | " + " | ".join(columns.values()) + " | size trend |"
    lines = [head, "|" + "---|" * (len(columns) + 2)]
    for r in rows:
        cells = " | ".join(_bold(r.cells.get(k, "-")) for k in columns)
        first = r.wording.split(". ")[0]
        first += "" if first.endswith((".", "?", "!")) else "."
        lines.append(f"| {r.number} {r.claim_id}: {first} | {cells} | {r.trend} |")
    return lines
