"""benchmarks/device_checks.sh, the script run on a lent GPU machine: its argument handling and
its first part run here (on CPU the env part records that there is no GPU); the GPU parts are
what docs/pipeline.md ("What ran on a GPU") reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "device_checks.sh"


def _run(tmp_path: Path, *parts: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PY": sys.executable,
           "WHEELS": str(tmp_path / "no-wheels")}
    return subprocess.run(["bash", str(SCRIPT), *parts], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=120)


def test_unknown_part_is_refused_with_one_line(tmp_path):
    got = _run(tmp_path, "bogus")
    assert got.returncode == 2
    assert got.stderr.strip().splitlines() == ["unknown part: bogus (env tests mfu loop pipeline)"]


def test_env_part_records_the_machine(tmp_path):
    got = _run(tmp_path, "env")
    assert got.returncode == 0, got.stderr
    env = (tmp_path / "out" / "env.txt").read_text()
    assert "torch " in env and ("no GPU" in env or "cuda" in env)
    assert (tmp_path / "out" / "parts.txt").read_text().startswith("env: exit 0")
