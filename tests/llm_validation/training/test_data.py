"""Corpora (stdlib default, text, .bin shards in both layouts) and the deterministic sampler."""

from __future__ import annotations

import time
import zlib

import numpy as np
import pytest
import torch

from llm_validation.config import DataConfig
from llm_validation.training.data import (
    MODDED_MAGIC,
    STREAM_VAL,
    WindowSampler,
    load_corpus,
    read_bin_shard,
    stdlib_files,
    write_bin_shard,
)

#: The stdlib corpus (~30 MB, ~1800 files) loads in about 0.1-0.3 s on an idle core; 10 s
#: leaves room for a loaded CI machine while still catching an accidental site-packages walk.
STDLIB_LOAD_BUDGET_S = 10.0


def test_stdlib_corpus_is_deterministic_file_split():
    t0 = time.perf_counter()
    corpus = load_corpus(DataConfig())
    assert time.perf_counter() - t0 < STDLIB_LOAD_BUDGET_S
    root, files = stdlib_files()
    assert len(files) > 100
    assert not any("site-packages" in f.parts for f in files)
    rels = [f.relative_to(root).as_posix() for f in files]
    assert rels == sorted(rels)
    val = [f for f, r in zip(files, rels) if zlib.crc32(r.encode()) % 10000 < 1000]
    d = corpus.description
    assert d["kind"] == "stdlib" and d["files"] == len(files) and d["val_files"] == len(val)
    assert 0.05 < len(val) / len(files) < 0.15
    # the validation bytes are exactly the held-out files, in sorted order
    expected = b"".join(f.read_bytes() for f in val)
    assert corpus.val.arrays[0].tobytes() == expected
    assert corpus.byte_level and corpus.vocab_size == 256
    assert load_corpus(DataConfig()) is corpus                      # cached in memory


def test_sampler_is_a_function_of_seed_and_position():
    corpus = load_corpus(DataConfig())
    a = WindowSampler(corpus.train, 4, 32, seed=1)
    b = WindowSampler(corpus.train, 4, 32, seed=1)
    first = [a.next() for _ in range(3)]
    b.load_state_dict({"seed": 1, "stream": 0, "position": 2})
    x2, y2 = b.next()
    assert torch.equal(x2, first[2][0]) and torch.equal(y2, first[2][1])
    x, y = first[0]
    assert x.shape == (4, 32) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])                         # targets = inputs shifted
    other = WindowSampler(corpus.train, 4, 32, seed=2).batch(0)[0]
    assert not torch.equal(other, x)
    val = WindowSampler(corpus.val, 4, 32, seed=1, stream=STREAM_VAL)
    assert torch.equal(val.batch(0)[0], val.batch(0)[0])
    with pytest.raises(ValueError, match="seed"):
        a.load_state_dict({"seed": 5, "stream": 0, "position": 0})


def test_text_file_and_folder(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(bytes(range(256)) * 40)
    c = load_corpus(DataConfig(path=str(f), val_fraction=0.25))
    assert c.train.num_tokens + c.val.num_tokens == 256 * 40
    assert c.val.num_tokens == 256 * 10 and c.description["split"] == "tail"
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(40):
        (folder / f"f{i:02d}.txt").write_bytes(f"file {i}\n".encode() * 50)
    (folder / ".hidden").write_bytes(b"x" * 1000)
    c = load_corpus(DataConfig(path=str(folder), val_fraction=0.2))
    assert c.description["split"] == "file-hash" and c.description["files"] == 40
    assert b"x" * 10 not in c.train.arrays[0].tobytes()


def test_missing_paths_name_the_path(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="nope"):
        load_corpus(DataConfig(path=missing))
    with pytest.raises(FileNotFoundError, match="nope"):
        load_corpus(DataConfig(path=missing + ".bin"))


@pytest.mark.parametrize("header", [True, False])
def test_bin_shard_layouts_round_trip(tmp_path, header):
    tokens = np.arange(5000, dtype=np.int64) % 50000
    path = tmp_path / "train.bin"
    write_bin_shard(path, tokens, header=header)
    got = read_bin_shard(path)
    assert got.dtype == np.uint16 and np.array_equal(got, tokens)
    if header:
        assert np.fromfile(path, dtype=np.int32, count=1)[0] == MODDED_MAGIC


def test_bad_header_is_reported(tmp_path):
    path = tmp_path / "bad.bin"
    write_bin_shard(path, np.arange(100), header=True)
    with open(path, "ab") as fh:
        fh.write(b"\x00\x00")
    with pytest.raises(ValueError, match="header"):
        read_bin_shard(path)


def test_bin_folder_split_and_windows_stay_inside_shards(tmp_path):
    write_bin_shard(tmp_path / "fw_train_000.bin", np.full(3000, 7))
    write_bin_shard(tmp_path / "fw_train_001.bin", np.full(2000, 900), header=False)
    write_bin_shard(tmp_path / "fw_val_000.bin", np.full(1000, 3))
    c = load_corpus(DataConfig(path=str(tmp_path), format="bin", seq_len=16))
    assert not c.byte_level and c.vocab_size is None
    assert c.train.num_tokens == 5000 and c.val.num_tokens == 1000
    s = WindowSampler(c.train, 64, 16, seed=0)
    x, _ = s.batch(0)
    rows = {tuple(sorted(set(r.tolist()))) for r in x}
    assert rows <= {(7,), (900,)} and len(rows) == 2               # never mixes shards
    single = load_corpus(DataConfig(path=str(tmp_path / "fw_train_000.bin"), val_fraction=0.1))
    assert single.val.num_tokens == 300 and single.description["split"] == "tail"


def test_folder_of_shards_needs_bin_format(tmp_path):
    write_bin_shard(tmp_path / "a.bin", np.arange(100))
    with pytest.raises(ValueError, match="bin"):
        load_corpus(DataConfig(path=str(tmp_path)))


def test_too_short_split_is_an_error(tmp_path):
    f = tmp_path / "short.txt"
    f.write_bytes(b"abc" * 10)
    c = load_corpus(DataConfig(path=str(f), val_fraction=0.1))
    with pytest.raises(ValueError, match="seq_len"):
        WindowSampler(c.val, 2, 16, seed=0)
