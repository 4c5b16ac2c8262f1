"""Every `delaybound` command shown in README.md, benchmarks/README.md and docs/*.md runs as
written.

The commands are extracted generically (any subcommand, present or future): every line of a
fenced code block that starts with ``delaybound`` (backslash continuations joined, trailing
``# comments`` and shell redirections dropped). Two kinds:

- a **synopsis** (``[optional]`` parts, ``a|b`` choices or UPPERCASE placeholders such as
  ``DIR``): its subcommand's ``--help`` must work and list every ``--option`` the synopsis
  names;
- a **concrete command**: it must parse as written (options, choices and types, through the
  real parser) and contain no literal ``...``; the cheap ones -- no file argument, finished
  within :data:`CHEAP_BUDGET_S` -- are run and must exit 0; the others (training, files made
  by an earlier command) get ``--help`` of their subcommand.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from delaybound.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md",
        *sorted((ROOT / "docs").glob("*.md"))]
#: Seconds a documented command may take to count as cheap (and be run); a command still
#: running then is stopped and checked like a long one (parse + --help). Generous for a
#: loaded 2-core machine, where the interpreter and torch import alone take several seconds.
CHEAP_BUDGET_S = 60.0
_PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{1,}\b(?![=:])")


def _commands() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for block in re.findall(r"```[a-z]*\n(.*?)```", doc.read_text(), re.S):
            block = re.sub(r"\\\n\s*", " ", block)
            for line in block.splitlines():
                line = line.strip()
                if re.match(r"delaybound\s+[a-z]", line):
                    line = re.split(r"\s+#\s", line)[0].split(" > ")[0].strip()
                    out.append((doc.name, line))
    return out


COMMANDS = _commands()


def _is_synopsis(line: str) -> bool:
    return bool(re.search(r"[\[\]|]", line) or _PLACEHOLDER.search(line.replace("--", " ")))


def _subcommand(argv: list[str]) -> list[str]:
    """The leading words that name (sub)commands: ``theory eval``, ``data prepare``, ``sweep``."""
    path, parser = [], build_parser()
    for word in argv:
        actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
        if not actions or word not in actions[0].choices:
            break
        path.append(word)
        parser = actions[0].choices[word]
    return path


def _help(path: list[str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "delaybound", *path, "--help"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_commands_were_found():
    assert len(COMMANDS) >= 20
    assert {"train", "simulate", "validate", "reproduce"} <= \
        {_subcommand(shlex.split(c)[1:])[0] for _, c in COMMANDS}


@pytest.mark.parametrize("doc,line", COMMANDS, ids=[f"{d}:{c[:60]}" for d, c in COMMANDS])
def test_documented_command_runs_as_written(doc, line, tmp_path):
    argv = shlex.split(line)[1:]
    path = _subcommand(argv)
    assert path, f"{doc}: {line!r} names no delaybound command"
    if _is_synopsis(line):
        text = _help(path)
        for opt in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line):
            assert opt in text, f"{doc}: {opt} of {line!r} is not an option of {' '.join(path)}"
        return
    assert "..." not in line, f"{doc}: {line!r} has a literal '...'"
    ns = build_parser().parse_args(argv)          # options, choices and types as written
    reads_files = any(isinstance(v, str) and ("/" in v or v.endswith(".json"))
                      or isinstance(v, list) and any(isinstance(x, str) and "/" in x for x in v)
                      for v in vars(ns).values())
    if reads_files:
        _help(path)
        return
    try:
        proc = subprocess.run([sys.executable, "-m", "delaybound", *argv], capture_output=True,
                              text=True, timeout=CHEAP_BUDGET_S, cwd=tmp_path,
                              env={**os.environ, "MPLBACKEND": "Agg",
                                   "PYTHONPATH": os.pathsep.join(
                                       filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    except subprocess.TimeoutExpired:                 # not cheap here: parse + --help only
        _help(path)
        return
    assert proc.returncode == 0, f"{doc}: {line!r} exited {proc.returncode}: {proc.stderr[-500:]}"


def test_the_demo_defaults_quoted_in_the_docs_are_the_codes():
    """docs/validation.md quotes the demo's base lrs and the pipeline run's optimizer."""
    from llm_validation.sweep.grid import BASE_OPTIM
    from delaybound.demo import FULL, demo_points
    text = (ROOT / "docs" / "validation.md").read_text()
    for opt, label in (("adamw", "AdamW"), ("muon", "Muon")):
        quoted = re.search(rf"{label} lr ([0-9.e-]+)", text)
        assert quoted and float(quoted.group(1)) == BASE_OPTIM[opt]["lr"], (label, quoted)
    _, points = demo_points(FULL)
    piped = {p.cfg.optim.name for p in points if p.cfg.run.pipeline != "none"}
    quoted = re.search(r"real 2-stage 2BW pipeline run \((\w+), seed 0\)", text)
    assert quoted and {quoted.group(1).lower()} == piped
