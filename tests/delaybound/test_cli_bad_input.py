"""Bad input to every command: one line on stderr naming the argument or file, exit code 2,
no traceback, nothing destroyed and no stray file left.

One table: each case is (id, argv with ``{tmp}`` / ``{runs}`` placeholders, the text the line
must contain, the setup it needs). ``{runs}`` is a folder of small synthetic run directories
(no training); ``{file}`` an existing plain file, ``{dir}`` an existing folder, ``{binary}`` a
file of non-UTF-8 bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from delaybound.cli import main
from tests.llm_validation.validation.synthetic_runs import headline

#: (id, argv, text the one error line must contain)
CASES = [
    # an output path that exists as a plain file where a folder is written
    ("train-out-file", "train --preset tiny --steps 1 --out {file}", "{file}"),
    ("demo-out-file", "demo --quick --out {file}", "{file}"),
    ("plot-out-file", "plot rates --quick --out {file}", "{file}"),
    ("simulate-out-file", "simulate --schedule 1f1b --stages 2 --microbatches 2 --unit-costs "
                          "--out {file}", "{file}"),
    ("sweep-out-file", "sweep --out {file} --steps 1 --dry-run", "{file}"),
    ("reproduce-out-file", "reproduce --quick --claims dcasgd --out {file}", "{file}"),
    ("validate-figures-file", "validate {runs} --figures {file}", "{file}"),
    ("validate-report-dir", "validate {runs} --report {dir}", "{dir}"),
    # values
    ("sweep-lr-word", "sweep --out {tmp}/s --lr abc", "--lr"),
    ("sweep-threads-0", "sweep --out {tmp}/s --steps 1 --threads 0", "--threads"),
    ("reproduce-threads-neg", "reproduce --quick --claims dcasgd --out {tmp}/r --threads -1",
     "--threads"),
    ("reproduce-jobs-neg", "reproduce --quick --claims dcasgd --out {tmp}/r --jobs -1",
     "--jobs"),
    ("reproduce-extra-budget-neg", "reproduce --list --extra-budget -5", "--extra-budget"),
    ("validate-config-list", "validate {listcfg}", "config.json"),
    ("reproduce-set-section", "reproduce --quick --claims dcasgd --out {tmp}/r --set nope.x=1",
     "--set"),
    ("reproduce-set-value", "reproduce --quick --claims dcasgd --out {tmp}/r "
                            "--set optim.lr=abc", "--set"),
    ("sweep-grid-binary", "sweep --out {tmp}/s --grid {binary}", "{binary}"),
    ("sweep-range-message", "sweep --out {tmp}/s --lr -1 --dry-run", "lr"),
    ("bench-timeout-neg", "bench --timeout -1 numerics", "--timeout"),
    ("demo-steps-0", "demo --steps 0 --out {tmp}/d", "--steps"),
    ("demo-seeds-0", "demo --seeds 0 --out {tmp}/d", "--seeds"),
    ("demo-jobs-neg", "demo --jobs -1 --out {tmp}/d", "--jobs"),
    # the simulator
    ("simulate-huge", "simulate --schedule 1f1b --stages 100000 --microbatches 100000 "
                      "--unit-costs", "--microbatches"),
    ("simulate-seq-len-0", "simulate --schedule 1f1b --stages 2 --microbatches 2 --model tiny "
                           "--gpu-tflops 100 --link-gbps 100 --seq-len 0", "--seq-len"),
    ("simulate-dp-0", "simulate --schedule 1f1b --stages 2 --microbatches 2 --unit-costs "
                      "--data-parallel 0", "--data-parallel"),
    ("simulate-chunks-1f1b", "simulate --schedule 1f1b --stages 2 --microbatches 2 "
                             "--unit-costs --chunks 3", "--chunks"),
    ("simulate-separate-master-unit", "simulate --schedule 2bw --stages 2 --microbatches 2 "
                                    "--unit-costs --separate-master", "--separate-master"),
    ("simulate-too-fine", "simulate --schedule 1f1b --stages 64 --microbatches 4x "
                          "--model smollm-360m --gpu-tflops 400 --link-gbps 400", "--stages"),
]

#: Messages that must not appear: the internal file of --set, a range written as an interval.
FORBIDDEN = ("claims.json.tmp", "finite and in (", "Traceback")


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_input")
    headline(root / "runs", {"adamw": 0.3, "muon": 0.05})
    (root / "file").write_text("not a folder\n")
    (root / "dir").mkdir()
    (root / "binary").write_bytes(bytes(range(128, 256)) * 4)
    headline(root / "listcfg", {"adamw": 0.3})
    cfg = sorted((root / "listcfg").iterdir())[0] / "config.json"
    cfg.write_text(json.dumps([1, 2, 3]))
    return root


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(case, fixtures, tmp_path, capsys):
    _, argv, expected = case
    names = {"tmp": str(tmp_path), "runs": str(fixtures / "runs"),
             "file": str(fixtures / "file"), "dir": str(fixtures / "dir"),
             "binary": str(fixtures / "binary"), "listcfg": str(fixtures / "listcfg")}
    before = {p: p.stat().st_mtime_ns for p in fixtures.rglob("*")}
    code = _run(argv.format(**names).split())
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert expected.format(**names) in lines[0], lines[0]
    assert not any(f in err for f in FORBIDDEN), err
    after = {p: p.stat().st_mtime_ns for p in fixtures.rglob("*")}
    assert after == before            # nothing written, removed or left over (e.g. DIR.tmp)


def _run(argv: list[str]) -> int:
    """The exit code of ``delaybound argv``, whether the parser exits or main returns."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)
