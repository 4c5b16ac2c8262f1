"""Conventions every command follows: each --help shows its defaults; no issue numbers or
development history in --help or in the docs (that is CHANGELOG.md's); the changelog exists with
versions; ``--tensorboard`` writes the metrics through torch.utils.tensorboard."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path

import pytest

from delaybound.cli import build_parser, help_without_default, main

ROOT = Path(__file__).resolve().parents[2]
#: Development history in user-facing text: issue numbers (not a path such as
#: ``claims_tiny/issue16/``, a folder name), "predates", "since commit".
#: Ledgers kept as the record of how an earlier rule set read its runs (their claims.md is that
#: assembly's output, word for word); every current ledger's claims.md is checked.
ARCHIVED_LEDGERS = ("issue16", "first_look")
HISTORY = re.compile(r"\bissues? ?[#_-]?\d+(?![\d/])|\bpredate|\bsince commit", re.IGNORECASE)


def _helps(parser: argparse.ArgumentParser) -> list[str]:
    out = [parser.format_help()]
    for a in parser._actions:                                            # noqa: SLF001
        if isinstance(a, argparse._SubParsersAction):                    # noqa: SLF001
            for sub in a.choices.values():
                out += _helps(sub)
    return out


def test_every_help_shows_its_defaults(capsys):
    assert help_without_default(build_parser()) == []
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("--lr LR peak learning rate (default: 0.001)",
                  "checkpoint every N steps (0: end only) (default: 0)",
                  "--checkpoint-minutes MIN", "(default: 10.0)",
                  "--steps STEPS optimizer steps (default: 200)"):
        assert shown in text, shown
    with pytest.raises(SystemExit):
        main(["advise", "--help"])
    assert "(default: 80.0)" in " ".join(capsys.readouterr().out.split())


def test_no_issue_numbers_or_history_in_help_or_docs():
    found = [f"--help: {m.group(0)}" for h in _helps(build_parser())
             for m in HISTORY.finditer(h)]
    docs = [ROOT / "README.md"]
    docs += [ROOT / "docs" / p for p in sorted(p.name for p in (ROOT / "docs").glob("*.md"))]
    docs += sorted((ROOT / "docs").glob("claims_*/README.md"))
    docs += sorted((ROOT / "docs").glob("claims_*/*/README.md"))
    docs += [p for p in sorted((ROOT / "docs").glob("claims_*/**/claims.md"))
             if p.parent.name not in ARCHIVED_LEDGERS]
    for path in docs:
        rel = path.relative_to(ROOT).as_posix()
        for i, line in enumerate(path.read_text().splitlines(), 1):
            found += [f"{rel}:{i}: {m.group(0)}" for m in HISTORY.finditer(line)]
    assert not found, found


def test_a_changelog_with_versions_exists():
    text = (ROOT / "CHANGELOG.md").read_text()
    from delaybound import __version__
    assert f"## {__version__}" in text and "## Unreleased" in text
    assert re.search(r"^### \d{4}-\d{2}-\d{2}$", text, re.MULTILINE)


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None,
                    reason="the tensorboard package is absent (pip install -e '.[test]' "
                           "installs it: the tensorboard extra)")
def test_train_writes_tensorboard_scalars(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from llm_validation.rundir import read_metrics
    out, tb = tmp_path / "run", tmp_path / "tb"
    assert main(["train", "--preset", "tiny", "--seq-len", "16", "--batch-size", "2",
                 "--eval-batches", "1", "--stats-interval", "2", "--steps", "4", "--quiet",
                 "--out", str(out), "--tensorboard", str(tb)]) == 0
    acc = EventAccumulator(str(tb))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "train/grad_norm", "eval/val_loss"} <= tags
    loss = [e.value for e in acc.Scalars("train/loss")]
    rows = [r["loss"] for r in read_metrics(out) if r["kind"] == "train"]
    assert loss == pytest.approx(rows, rel=1e-6)        # float32 events of the float64 rows


def test_tensorboard_without_the_package_is_one_line(tmp_path, capsys, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)     # as if absent
    code = main(["train", "--preset", "tiny", "--steps", "1", "--quiet",
                 "--out", str(tmp_path / "r"), "--tensorboard", str(tmp_path / "tb")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "delaybound[tensorboard]" in err[0]
    assert not (tmp_path / "r").exists()


class _FakeWriter:
    """Stands in for torch.utils.tensorboard.SummaryWriter: records what it is given (the
    plumbing from the rows to the scalars, checked without the tensorboard package)."""

    made: list["_FakeWriter"] = []

    def __init__(self, log_dir: str) -> None:
        self.log_dir, self.scalars, self.closed = log_dir, [], False
        _FakeWriter.made.append(self)

    def add_scalar(self, tag: str, value: float, global_step: int) -> None:
        self.scalars.append((tag, value, global_step))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_train_and_the_recorder_feed_every_row_to_the_writer(tmp_path, capsys, monkeypatch):
    import sys
    import types

    import torch

    from llm_validation import DelayedOptimizer, StatsRecorder
    from llm_validation.rundir import read_metrics
    fake = types.ModuleType("torch.utils.tensorboard")
    fake.SummaryWriter = _FakeWriter
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fake)
    _FakeWriter.made.clear()
    out = tmp_path / "run"
    assert main(["train", "--preset", "tiny", "--seq-len", "16", "--batch-size", "2",
                 "--eval-batches", "1", "--stats-interval", "2", "--steps", "3", "--quiet",
                 "--out", str(out), "--tensorboard", str(tmp_path / "tb")]) == 0
    (w,) = _FakeWriter.made
    assert w.closed and w.log_dir == str(tmp_path / "tb")
    rows = read_metrics(out)
    losses = [(v, s) for t, v, s in w.scalars if t == "train/loss"]
    assert losses == [(r["loss"], r["step"]) for r in rows if r["kind"] == "train"]
    assert [(v, s) for t, v, s in w.scalars if t == "eval/val_loss"] == \
        [(r["val_loss"], r["step"]) for r in rows if r["kind"] == "eval"]
    assert any(t == "train/smoothness_est" for t, _, _ in w.scalars)       # statistics too
    # the recorder: one row per step and the closing eval row
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = DelayedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), tau=1)
    rec = StatsRecorder(model, opt, tmp_path / "rec", seed=0, batch_size=2, steps=2,
                        stats_interval=0, tensorboard=tmp_path / "tb2")
    x = torch.randn(2, 4)
    for _ in range(2):
        def closure():
            loss = model(x).pow(2).mean()
            loss.backward()
            return loss.detach()
        with opt.delayed_weights():
            loss = closure()
        rec.step(loss, closure)
    rec.finish(val_loss=0.5)
    w2 = _FakeWriter.made[-1]
    assert w2.closed and [s for t, _, s in w2.scalars if t == "train/loss"] == [0, 1]
    assert ("eval/val_loss", 0.5, 2) in w2.scalars
