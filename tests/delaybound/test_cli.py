"""The CLI dispatcher itself: help, unknown commands, one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from delaybound.cli import COMMAND_MODULES, build_parser, main


def test_every_command_module_is_importable_and_registers():
    import importlib

    for name in COMMAND_MODULES:
        assert hasattr(importlib.import_module(name), "register"), name


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for cmd in ("theory", "verify", "plot", "train", "validate", "sweep", "bench", "demo"):
        assert cmd in out


def test_unknown_command_is_one_line_exit_2():
    proc = subprocess.run(
        [sys.executable, "-m", "delaybound", "frobnicate"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2  # argparse usage line + the error line


def test_build_parser_is_reusable():
    assert build_parser().prog == "delaybound"
