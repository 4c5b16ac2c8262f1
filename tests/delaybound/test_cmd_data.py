"""`delaybound data prepare|info` and `delaybound train --data DIR`: round trip through the CLI,
one-line errors with exit code 2 and nothing written or started."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from delaybound.cli import main
from tests.llm_validation.training.corpus_sample import stdlib_sample

#: Both sides of the path-hash split on a ~30-file sample (see test_shards.VAL_FRACTION).
VAL = "0.2"
SMALL_RUN = ["train", "--preset", "tiny", "--seq-len", "16", "--batch-size", "2",
             "--eval-batches", "1", "--stats-interval", "0", "--quiet"]


def _call(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own errors
        return int(exc.code)


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return stdlib_sample(tmp_path_factory.mktemp("sample"))


@pytest.fixture(scope="module")
def prepared(sample, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data") / "bpe"
    assert main(["data", "prepare", "--input", str(sample), "--tokenizer", "bpe:400",
                 "--out", str(out), "--val-fraction", VAL, "--quiet"]) == 0
    return out


def test_prepare_json_info_and_determinism(sample, prepared, tmp_path, capsys):
    capsys.readouterr()
    again = tmp_path / "again"
    assert main(["data", "prepare", "--input", str(sample), "--tokenizer", "bpe:400",
                 "--out", str(again), "--val-fraction", VAL, "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["vocab_size"] == 400 and out["split"]["rule"] == "file-hash"
    assert out["splits"]["train"]["tokens"] > 0 and out["splits"]["val"]["tokens"] > 0
    assert {f.name: f.read_bytes() for f in again.iterdir()} == \
        {f.name: f.read_bytes() for f in prepared.iterdir()}
    assert main(["data", "info", str(prepared), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in info.items() if k != "out_dir"} == \
        {k: v for k, v in out.items() if k != "out_dir"}


def test_train_on_prepared_data_takes_the_manifest_vocabulary(prepared, tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*SMALL_RUN, "--steps", "2", "--data", str(prepared), "--vocab-size", "448",
                 "--out", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "completed"
    saved = json.loads((run / "config.json").read_text())
    assert saved["data"]["format"] == "shards" and saved["model"]["vocab_size"] == 448
    assert saved["meta"]["corpus"]["kind"] == "shards"
    # resuming keeps the run's padded vocabulary (no --vocab-size needed)
    assert main(["train", "--resume", "--steps", "3", "--out", str(run), "--quiet",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 3
    plain = tmp_path / "plain"
    assert main([*SMALL_RUN, "--steps", "1", "--data", str(prepared), "--out", str(plain)]) == 0
    assert json.loads((plain / "config.json").read_text())["model"]["vocab_size"] == 400


@pytest.mark.parametrize("case", ["missing-input", "not-json", "json-not-tokenizer",
                                  "missing-tokenizer", "bad-spec", "too-large", "busy-out"])
def test_prepare_bad_input_is_one_line_exit_2(case, sample, tmp_path, capsys):
    (tmp_path / "plain.json").write_text("vocab: 1, 2, 3")
    (tmp_path / "other.json").write_text('{"vocab": {"a": 0}}')
    out = tmp_path / "out"
    tok, inp, needle = "bpe:300", str(sample), None
    if case == "missing-input":
        inp, needle = str(tmp_path / "nowhere"), "input not found"
    elif case == "not-json":
        tok, needle = str(tmp_path / "plain.json"), "not a tokenizers tokenizer.json"
    elif case == "json-not-tokenizer":
        tok, needle = str(tmp_path / "other.json"), "not a tokenizers tokenizer.json"
    elif case == "missing-tokenizer":
        tok, needle = str(tmp_path / "nope.json"), "tokenizer file not found"
    elif case == "bad-spec":
        tok, needle = "bpe:lots", "VOCAB must be an integer"
    elif case == "too-large":
        tok, needle = "bpe:70000", "65536"
    else:
        out.mkdir()
        (out / "keep.txt").write_text("x")
        needle = "not empty"
    code = _call(["data", "prepare", "--input", inp, "--tokenizer", tok, "--out", str(out),
                  "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not out.exists() or [f.name for f in out.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("case", ["vocab-overflow", "smaller-vocab", "no-manifest"])
def test_train_bad_data_is_one_line_exit_2(case, prepared, tmp_path, capsys):
    data, extra, needle = tmp_path / "data", [], None
    shutil.copytree(prepared, data)
    if case == "vocab-overflow":
        m = json.loads((data / "manifest.json").read_text())
        m["vocab_size"] = 70000
        (data / "manifest.json").write_text(json.dumps(m))
        needle = "uint16"
    elif case == "smaller-vocab":
        extra, needle = ["--vocab-size", "256"], "smaller than the data's vocabulary 400"
    else:
        (data / "manifest.json").unlink()
        extra, needle = ["--data-format", "shards"], "no manifest.json"
    run = tmp_path / "run"
    code = _call([*SMALL_RUN, "--steps", "1", "--data", str(data), *extra, "--out", str(run)])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not run.exists()                                  # nothing was started
