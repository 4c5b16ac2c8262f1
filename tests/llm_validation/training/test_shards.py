"""Prepared token folders: exact tokenizer round trips, deterministic shards, manifest checks,
loading (format='shards') and a short training run on them."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from tokenizers import pre_tokenizers

from llm_validation.config import DataConfig, OptimConfig, RunConfig, TrainConfig
from llm_validation.run import run
from llm_validation.training.data import load_corpus
from llm_validation.training.manifest import (
    MANIFEST_NAME, UINT16_VOCAB, model_vocab, read_manifest, with_prepared_data)
from llm_validation.training.shards import (
    PrepareConfig, prepare, read_documents, split_documents)
from llm_validation.training.tokenizer import (
    EOT_TOKEN, byte_alphabet, bytes_tokenizer, load_tokenizer, parse_spec, train_bpe)
from tests.llm_validation.helpers import MICRO
from tests.llm_validation.training.corpus_sample import stdlib_sample

#: A validation fraction large enough that a ~30-file sample has files on both sides of the
#: path-hash split on any CPython version (P(no validation file) = 0.8^30 ~ 1e-3).
VAL_FRACTION = 0.2
#: A small BPE vocabulary: trains in well under a second on the sample.
VOCAB = 512


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return stdlib_sample(tmp_path_factory.mktemp("stdlib_sample"))


def _prep(sample: Path, out: Path, **kw) -> object:
    cfg = dict(tokenizer=f"bpe:{VOCAB}", out_dir=str(out), input=str(sample),
               val_fraction=VAL_FRACTION)
    return prepare(PrepareConfig(**{**cfg, **kw}), progress=False)


@pytest.fixture(scope="module")
def prepared(sample, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prepared") / "bpe"
    _prep(sample, out, shard_tokens=20_000)
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(folder.iterdir())}


# ------------------------------------------------------------------------------ tokenizers
def test_byte_alphabet_is_the_byte_level_pre_tokenizers_alphabet():
    alpha = byte_alphabet()
    assert sorted(alpha) == list(range(256)) and len(set(alpha.values())) == 256
    assert set(alpha.values()) == set(pre_tokenizers.ByteLevel.alphabet())


def test_bytes_tokenizer_ids_are_the_utf8_bytes(sample):
    docs, _ = read_documents(str(sample))
    tok = bytes_tokenizer()
    texts = [d.text for d in docs] + ["h\u00e9llo \u2713 \U0001f600\x00\t\r\n"]
    for text, enc in zip(texts, tok.encode_batch_fast(texts, add_special_tokens=False)):
        assert enc.ids == list(text.encode("utf-8"))
        assert tok.decode(enc.ids) == text


def test_byte_level_bpe_round_trip_is_exact_on_a_stdlib_sample(sample):
    # Exact because: no normalizer; the 256 byte characters are the initial alphabet (nothing is
    # unknown); the ByteLevel decoder inverts the byte map. Special tokens are encoded as text.
    docs, _ = read_documents(str(sample))
    tok = train_bpe([d.text for d in docs], VOCAB)
    tok.encode_special_tokens = True
    eot = tok.token_to_id(EOT_TOKEN)
    assert eot == 0 and tok.get_vocab_size() == VOCAB
    texts = [d.text for d in docs] + [f"x = '{EOT_TOKEN}'  # a literal separator\n"]
    n_tokens = n_bytes = 0
    for text, enc in zip(texts, tok.encode_batch_fast(texts, add_special_tokens=False)):
        assert eot not in enc.ids
        assert tok.decode(enc.ids, skip_special_tokens=False) == text
        n_tokens, n_bytes = n_tokens + len(enc.ids), n_bytes + len(text.encode())
    assert n_tokens < 0.6 * n_bytes          # merges were learned (about 2.5 bytes per token)


@pytest.mark.parametrize("spec,error", [
    ("bpe:abc", ValueError), ("bpe:100", ValueError), (f"bpe:{UINT16_VOCAB + 1}", ValueError),
    ("", ValueError)])
def test_bad_specs_are_refused(spec, error):
    with pytest.raises(error):
        parse_spec(spec)


def test_a_file_that_is_not_a_tokenizer_is_refused(tmp_path):
    (tmp_path / "a.json").write_text('{"vocab": [1, 2]}')
    (tmp_path / "b.json").write_text("not json at all")
    for name in ("a.json", "b.json"):
        with pytest.raises(ValueError, match="not a tokenizers tokenizer.json"):
            load_tokenizer(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        load_tokenizer(tmp_path / "missing.json")


# -------------------------------------------------------------------------------- prepare
def test_same_input_and_seed_give_byte_identical_folders(sample, prepared, tmp_path):
    _prep(sample, tmp_path / "again", shard_tokens=20_000)
    assert _files(tmp_path / "again") == _files(prepared)
    other = tmp_path / "seed1"
    _prep(sample, other, shard_tokens=20_000, seed=1)
    a, b = read_manifest(prepared), read_manifest(other)
    # BPE counts words, so the tokenizer does not depend on the order of its (whole) sample;
    # the document order, hence the shard bytes, does.
    assert a.tokenizer_sha256 == b.tokenizer_sha256
    assert (a.splits["train"].tokens, a.splits["val"].tokens) == \
        (b.splits["train"].tokens, b.splits["val"].tokens)
    assert _files(other)["train_000000.bin"] != _files(prepared)["train_000000.bin"]


def test_shards_hold_the_split_documents_in_seeded_order(sample, prepared):
    man = read_manifest(prepared)
    assert man.split_rule == "file-hash" and man.vocab_size == VOCAB and man.eot_id == 0
    docs, _ = read_documents(str(sample))
    train_docs, val_docs, _ = split_documents(docs, VAL_FRACTION, 0)
    tok = load_tokenizer(prepared / man.tokenizer_file)
    corpus = load_corpus(DataConfig(path=str(prepared), format="shards"))
    assert corpus.description["vocab_size"] == VOCAB and not corpus.byte_level
    for split, split_docs, arrays in (("train", train_docs, corpus.train.arrays),
                                      ("val", val_docs, corpus.val.arrays)):
        info = man.splits[split]
        assert [n for n, _ in info.shards] == [f"{split}_{i:06d}.bin"
                                               for i in range(len(info.shards))]
        assert all(c <= man.shard_tokens for _, c in info.shards)
        stream = np.concatenate([np.asarray(a) for a in arrays])
        assert stream.size == info.tokens and info.documents == len(split_docs)
        starts = np.flatnonzero(stream == man.eot_id)
        assert starts[0] == 0 and len(starts) == len(split_docs)
        bounds = [*starts.tolist(), stream.size]
        decoded = [tok.decode(stream[bounds[i] + 1:bounds[i + 1]].tolist(),
                              skip_special_tokens=False) for i in range(len(split_docs))]
        assert decoded == [d.text for d in split_docs]
    assert len(man.splits["train"].shards) > 1        # 20k-token shards cut the stream


def test_a_local_tokenizer_file_is_copied_and_gives_the_same_shards(sample, prepared, tmp_path):
    out = tmp_path / "from_file"
    man = _prep(sample, out, tokenizer=str(prepared / "tokenizer.json"), shard_tokens=20_000)
    assert man.tokenizer_sha256 == read_manifest(prepared).tokenizer_sha256
    assert {k: v for k, v in _files(out).items() if k.endswith(".bin")} == \
        {k: v for k, v in _files(prepared).items() if k.endswith(".bin")}


def test_one_file_uses_the_tail_rule(sample, tmp_path):
    one = next(p for p in sorted(sample.rglob("*.py")) if p.stat().st_size > 5_000)
    man = prepare(PrepareConfig(tokenizer="bytes", out_dir=str(tmp_path / "o"), input=str(one)),
                  progress=False)
    raw = one.read_bytes()
    assert man.split_rule == "tail" and man.vocab_size == 256 and man.eot_id is None
    corpus = load_corpus(DataConfig(path=str(tmp_path / "o"), format="shards"))
    train, val = np.asarray(corpus.train.arrays[0]), np.asarray(corpus.val.arrays[0])
    assert train.size == int(len(raw) * 0.9)
    assert np.concatenate([train, val]).astype(np.uint8).tobytes() == raw


def test_a_literal_separator_inside_a_document_stays_text(tmp_path):
    text = f"s = '{EOT_TOKEN}'\nx = 1\n" * 200
    (tmp_path / "doc.py").write_text(text)
    man = prepare(PrepareConfig(tokenizer="bpe:300", out_dir=str(tmp_path / "o"),
                                input=str(tmp_path / "doc.py")), progress=False)
    corpus = load_corpus(DataConfig(path=str(tmp_path / "o"), format="shards"))
    stream = np.concatenate([np.asarray(corpus.train.arrays[0]), np.asarray(corpus.val.arrays[0])])
    assert stream[0] == man.eot_id and int((stream == man.eot_id).sum()) == 1
    tok = load_tokenizer(tmp_path / "o" / "tokenizer.json")
    assert tok.decode(stream[1:].tolist(), skip_special_tokens=False) == text


def test_bad_input_writes_nothing(sample, prepared, tmp_path):
    out = tmp_path / "never"
    with pytest.raises(FileNotFoundError, match="input not found"):
        _prep(tmp_path / "missing", out)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a tokenizers"):
        _prep(sample, out, tokenizer=str(tmp_path / "bad.json"))
    assert not out.exists()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        _prep(sample, tmp_path / "busy")
    copy = tmp_path / "copy"
    shutil.copytree(prepared, copy)
    with pytest.raises(ValueError, match="--overwrite"):
        _prep(sample, copy)
    _prep(sample, copy, overwrite=True, tokenizer="bytes")
    assert read_manifest(copy).vocab_size == 256
    assert sorted(f.name for f in copy.iterdir()) == sorted(
        ["manifest.json", "tokenizer.json", *(n for s in read_manifest(copy).splits.values()
                                              for n, _ in s.shards)])


# --------------------------------------------------------------------------- manifest checks
def _tampered(prepared: Path, dest: Path, edit) -> Path:
    shutil.copytree(prepared, dest)
    d = json.loads((dest / MANIFEST_NAME).read_text())
    edit(d, dest)
    (dest / MANIFEST_NAME).write_text(json.dumps(d))
    return dest


def test_tampered_folders_are_refused(prepared, tmp_path):
    def vocab(d, _):
        d["vocab_size"] = UINT16_VOCAB + 1

    def shard_count(d, _):
        d["splits"]["val"]["shards"][0]["tokens"] += 1
        d["splits"]["val"]["tokens"] += 1

    def tokenizer(_, dest):
        (dest / "tokenizer.json").write_text((dest / "tokenizer.json").read_text() + " ")

    with pytest.raises(ValueError, match="uint16"):
        read_manifest(_tampered(prepared, tmp_path / "v", vocab))
    for name, edit, needle in (("c", shard_count, "says"), ("t", tokenizer, "sha256")):
        with pytest.raises(ValueError, match=needle):
            load_corpus(DataConfig(path=str(_tampered(prepared, tmp_path / name, edit)),
                                   format="shards"))
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        load_corpus(DataConfig(path=str(tmp_path), format="shards"))


def test_data_config_shards_needs_a_path_and_no_val_path():
    with pytest.raises(ValueError, match="needs a path"):
        DataConfig(format="shards")
    with pytest.raises(ValueError, match="val_path"):
        DataConfig(path="x", format="shards", val_path="y.bin")
    assert DataConfig(path="x", format="shards").is_bin


def test_model_vocabulary_comes_from_the_manifest(prepared):
    assert model_vocab(300) == 300 and model_vocab(300, 512) == 512
    with pytest.raises(ValueError, match="smaller than the data's vocabulary"):
        model_vocab(300, 299)
    cfg = with_prepared_data(TrainConfig(data=DataConfig(path=str(prepared))))
    assert cfg.data.format == "shards" and cfg.model.vocab_size == VOCAB
    assert with_prepared_data(TrainConfig()) == TrainConfig()   # other data: unchanged


def test_a_short_training_run_on_prepared_shards(prepared, tmp_path):
    cfg = with_prepared_data(TrainConfig(
        model=MICRO, data=DataConfig(path=str(prepared), seq_len=16),
        optim=OptimConfig(lr=3e-3, schedule="constant"),
        run=RunConfig(steps=4, batch_size=4, eval_interval=0, eval_batches=1, stats_interval=0,
                      out_dir=str(tmp_path / "run"))))
    result = run(cfg, progress=False)
    assert result.status == "completed" and result.steps == 4
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    first = next(r["loss"] for r in rows if "loss" in r)
    # an untrained model predicts about uniformly over the manifest's vocabulary
    assert abs(first - math.log(VOCAB)) < 0.5
