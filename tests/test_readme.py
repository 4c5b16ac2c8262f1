"""README's "Read the code first" list cannot drift: every file it names exists and has the
number of lines the list gives it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: One entry of the list: ``N. `path` (lines): what it is.``
ENTRY = re.compile(r"^\d+\. `([^`]+)` \((\d+)\):", re.M)


def _reading_list() -> list[tuple[str, int]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Read the code first", 1)[1].split("\n## ", 1)[0]
    return [(path, int(n)) for path, n in ENTRY.findall(section)]


def test_the_reading_list_gives_each_file_its_line_count():
    entries = _reading_list()
    assert 7 <= len(entries) <= 9, f"the list names {len(entries)} files (7-9 wanted)"
    wrong = [f"{path}: listed {n}, has {len((ROOT / path).read_text().splitlines())}"
             for path, n in entries
             if not (ROOT / path).is_file()
             or len((ROOT / path).read_text().splitlines()) != n]
    assert not wrong, "README's reading list is stale:\n  " + "\n  ".join(wrong)
