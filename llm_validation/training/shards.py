"""Prepare a token folder: tokenize a corpus in parallel into modded-nanogpt shards + a manifest.

Algorithm (:func:`prepare`, the library side of ``delaybound data prepare``):

1. Documents: the input's files, one document each (the default input is the stdlib corpus of
   :mod:`llm_validation.training.data`; a text file; or every non-hidden file of a folder), read
   as UTF-8 (files that are not UTF-8 are skipped and listed in the manifest).
2. Split: a file goes to validation when ``crc32(relative path) mod 10000 < val_fraction *
   10000`` (:func:`llm_validation.training.data.hash_split`, the byte corpora's rule); when that
   leaves a split empty (few files), the last ``val_fraction`` of the token stream is validation
   (``tail``).
3. Order: the documents of each split are permuted by numpy PCG64 seeded with
   ``SeedSequence([seed, split])`` (0 train, 1 validation).
4. Tokenizer (:mod:`llm_validation.training.tokenizer`): ``bytes``, a local ``tokenizer.json``
   (copied byte for byte), or byte-level BPE trained on the first ``tokenizer_sample_bytes`` of
   the ordered training documents (validation text is never seen by the tokenizer).
5. Encoding: chunks of documents through ``Tokenizer.encode_batch_fast`` (parallel over
   documents on the library's thread pool; ``RAYON_NUM_THREADS`` caps it), with a progress bar;
   the end-of-text token (if the tokenizer has one) is written before every document.
6. Shards: ``train_000000.bin``, ... and ``val_000000.bin``, ... of at most ``shard_tokens``
   tokens each (a shard is cut across documents), modded-nanogpt layout
   (:func:`llm_validation.training.data.write_bin_shard`); then ``manifest.json``, last.

Guarantee: the same input, tokenizer spec and seed give byte-identical files (every step above
is a pure function of them; the parallel encoder returns documents in order).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
from tokenizers import Tokenizer
from tqdm import tqdm

from llm_validation.training.data import folder_files, hash_split, stdlib_files, write_bin_shard
from llm_validation.training.manifest import (
    MANIFEST_NAME, Manifest, SplitInfo, file_sha256, is_prepared, read_manifest, write_manifest)
from llm_validation.training.tokenizer import (
    EOT_TOKEN, LIBRARY, TokenizerSpec, bytes_tokenizer, load_tokenizer, parse_spec, tokenizer_json,
    tokenizer_vocab_size, train_bpe)

__all__ = ["PrepareConfig", "Document", "read_documents", "split_documents", "prepare"]

#: Documents are encoded in chunks of about this many bytes (progress granularity; each chunk
#: is one parallel ``encode_batch_fast`` call).
_CHUNK_BYTES = 4 << 20
_TOKENIZER_FILE = "tokenizer.json"


@dataclass(frozen=True, kw_only=True)
class PrepareConfig:
    """What :func:`prepare` does (the flags of ``delaybound data prepare``)."""

    tokenizer: str
    """``bytes``, ``bpe:VOCAB`` (train byte-level BPE) or the path of a tokenizer.json."""
    out_dir: str
    """The folder to write (created; must be empty or absent, see ``overwrite``)."""
    input: str | None = None
    """None: the stdlib corpus (``*.py`` of this interpreter). Else a text file or a folder."""
    seed: int = 0
    """Seed of the document order and so of the tokenizer's training sample."""
    val_fraction: float = 0.1
    """Fraction held out for validation (of files by path hash, else of tokens)."""
    shard_tokens: int = 100_000_000
    """Most tokens per shard (modded-nanogpt's FineWeb shards hold 10^8)."""
    tokenizer_sample_bytes: int = 16_000_000
    """BPE only: bytes of training text the tokenizer is trained on."""
    min_frequency: int = 2
    """BPE only: least count of a pair to be merged."""
    overwrite: bool = False
    """Replace an existing prepared folder (only the files its manifest lists are removed)."""

    def __post_init__(self) -> None:
        for name in ("tokenizer", "out_dir"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise TypeError(f"PrepareConfig.{name}={getattr(self, name)!r} must be a "
                                "non-empty str")
        if self.input is not None and (not isinstance(self.input, str) or not self.input):
            raise TypeError(f"PrepareConfig.input={self.input!r} must be None or a path")
        for name, lo in (("seed", 0), ("shard_tokens", 1), ("tokenizer_sample_bytes", 1),
                         ("min_frequency", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"PrepareConfig.{name}={v!r} must be an int >= {lo}")
        v = self.val_fraction
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v <= 0.5:
            raise ValueError(f"PrepareConfig.val_fraction={v!r} must be in (0, 0.5]")
        if not isinstance(self.overwrite, bool):
            raise TypeError(f"PrepareConfig.overwrite={self.overwrite!r} must be a bool")


@dataclass(frozen=True)
class Document:
    """One input file: its path relative to the input root, its text and its size in bytes."""

    rel: str
    text: str
    nbytes: int


def read_documents(input_path: str | None) -> tuple[list[Document], dict]:
    """The documents of the input (sorted by relative path) and a description of it."""
    if input_path is None:
        root, files, kind = *stdlib_files(), "stdlib"
    else:
        p = Path(input_path)
        if not p.exists():
            raise FileNotFoundError(f"input not found: {input_path}")
        if p.is_file():
            root, files, kind = p.parent, [p], "text-file"
        else:
            root, files, kind = p, folder_files(p), "text-folder"
    docs, skipped = [], []
    for f in files:
        rel = f.relative_to(root).as_posix()
        raw = f.read_bytes()
        try:
            docs.append(Document(rel, raw.decode("utf-8"), len(raw)))
        except UnicodeDecodeError:
            skipped.append(rel)
    if not docs:
        raise ValueError(f"no UTF-8 text files in the input {input_path or root}")
    source = {"kind": kind, "path": str(root if kind != "text-file" else files[0]),
              "files": len(files), "documents": len(docs),
              "bytes": sum(d.nbytes for d in docs), "skipped_not_utf8": skipped}
    return docs, source


def _permuted(docs: list[Document], seed: int, stream: int) -> list[Document]:
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, stream])))
    return [docs[i] for i in rng.permutation(len(docs))]


def split_documents(docs: list[Document], val_fraction: float,
                    seed: int) -> tuple[list[Document], list[Document], str]:
    """(train, validation, rule): the file-hash split, each side in its seeded order; with the
    ``tail`` rule every document is in ``train`` (in seeded order) and ``val`` is empty."""
    is_val = hash_split([d.rel for d in docs], val_fraction)
    train = [d for d, v in zip(docs, is_val) if not v]
    val = [d for d, v in zip(docs, is_val) if v]
    if train and val:
        return _permuted(train, seed, 0), _permuted(val, seed, 1), "file-hash"
    return _permuted(docs, seed, 0), [], "tail"


def _sample(docs: list[Document], budget: int) -> Iterator[str]:
    """The first ``budget`` bytes of the documents' text (the last one cut at a character)."""
    for d in docs:
        if budget <= 0:
            return
        yield d.text if d.nbytes <= budget else \
            d.text.encode("utf-8")[:budget].decode("utf-8", errors="ignore")
        budget -= d.nbytes


def _encode(tok: Tokenizer, docs: list[Document], eot: int | None, desc: str,
            progress: bool) -> Iterator[np.ndarray]:
    """uint16 tokens of each document, in order (EOT first when there is one)."""
    head = [] if eot is None else [eot]
    with tqdm(total=sum(d.nbytes for d in docs), desc=desc, unit="B", unit_scale=True,
              disable=not progress, file=sys.stderr, leave=False) as bar:
        i = 0
        while i < len(docs):
            j, size = i, 0
            while j < len(docs) and (j == i or size + docs[j].nbytes <= _CHUNK_BYTES):
                size += docs[j].nbytes
                j += 1
            encoded = tok.encode_batch_fast([d.text for d in docs[i:j]], add_special_tokens=False)
            for e in encoded:
                yield np.asarray(head + e.ids, dtype=np.uint16)
            bar.update(size)
            i = j


class _ShardWriter:
    """Cuts a token stream into ``split_000000.bin``, ... of at most ``max_tokens`` tokens."""

    def __init__(self, folder: Path, split: str, max_tokens: int) -> None:
        self.folder, self.split, self.max = folder, split, max_tokens
        self.buf: list[np.ndarray] = []
        self.n = 0
        self.shards: list[tuple[str, int]] = []

    def add(self, tokens: np.ndarray) -> None:
        while tokens.size:
            take = min(tokens.size, self.max - self.n)
            self.buf.append(tokens[:take])
            self.n += take
            tokens = tokens[take:]
            if self.n == self.max:
                self._flush()

    def _flush(self) -> None:
        name = f"{self.split}_{len(self.shards):06d}.bin"
        write_bin_shard(self.folder / name, np.concatenate(self.buf))
        self.shards.append((name, self.n))
        self.buf, self.n = [], 0

    def close(self) -> tuple[tuple[str, int], ...]:
        if self.n:
            self._flush()
        return tuple(self.shards)


def _check_output(out: Path, overwrite: bool) -> Manifest | None:
    """Raise unless ``out`` may be written; returns the manifest of a folder to replace."""
    if not out.exists():
        return None
    if not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    if not any(out.iterdir()):
        return None
    if not is_prepared(out):
        raise ValueError(f"--out {out} is not empty and is not a prepared folder")
    if not overwrite:
        raise ValueError(f"--out {out} already holds a prepared folder (pass --overwrite to "
                         "replace it)")
    return read_manifest(out)


def _files(manifest: Manifest) -> list[str]:
    return [manifest.tokenizer_file, *(f for s in manifest.splits.values() for f, _ in s.shards)]


def _write(out: Path, cfg: PrepareConfig, spec: TokenizerSpec, tok: Tokenizer,
           parts: dict) -> dict[str, SplitInfo]:
    """tokenizer.json and the shards of ``parts`` (split -> (documents, token arrays))."""
    tok_path = out / _TOKENIZER_FILE
    if spec.kind == "file":
        shutil.copyfile(spec.path, tok_path)
    else:
        tok_path.write_bytes(tokenizer_json(tok))
    splits = {}
    for split, (documents, arrays) in parts.items():
        w = _ShardWriter(out, split, cfg.shard_tokens)
        try:
            for arr in arrays:
                w.add(arr)
        finally:
            shards = w.close()
        splits[split] = SplitInfo(documents=documents, tokens=sum(c for _, c in shards),
                                  shards=shards)
        if not shards:
            raise ValueError(f"the {split} split has no tokens")
    return splits


def prepare(cfg: PrepareConfig, *, progress: bool = True) -> Manifest:
    """Write the prepared folder ``cfg.out_dir`` (see the module docstring); returns its
    manifest. Bad input (spec, tokenizer file, input, output folder) raises before anything
    is written; a failure while writing removes what was written."""
    if not isinstance(cfg, PrepareConfig):
        raise TypeError(f"prepare needs a PrepareConfig, got {type(cfg).__name__}")
    spec = parse_spec(cfg.tokenizer)
    tok = load_tokenizer(spec.path) if spec.kind == "file" else None
    out = Path(cfg.out_dir)
    old = _check_output(out, cfg.overwrite)
    docs, source = read_documents(cfg.input)
    train_docs, val_docs, rule = split_documents(docs, cfg.val_fraction, cfg.seed)
    if spec.kind == "bytes":
        tok = bytes_tokenizer()
    elif spec.kind == "bpe":
        budget = cfg.tokenizer_sample_bytes
        if rule == "tail":  # keep the tail (validation) out of the sample, to the byte
            budget = min(budget, int(sum(d.nbytes for d in docs) * (1.0 - cfg.val_fraction)))
        if progress:
            print(f"[data] training byte-level BPE ({spec}) on "
                  f"{tqdm.format_sizeof(min(budget, sum(d.nbytes for d in train_docs)), 'B')}",
                  file=sys.stderr, flush=True)
        tok = train_bpe(_sample(train_docs, budget), spec.vocab_size,
                        min_frequency=cfg.min_frequency)
    tok.encode_special_tokens = True   # a literal <|endoftext|> in a document is plain text
    eot = tok.token_to_id(EOT_TOKEN)
    if rule == "file-hash":
        parts = {"train": (len(train_docs), _encode(tok, train_docs, eot, "encode train",
                                                     progress)),
                 "val": (len(val_docs), _encode(tok, val_docs, eot, "encode val", progress))}
    else:  # tail: the last val_fraction of the token stream (few files: encoded in memory)
        arrays = list(_encode(tok, train_docs, eot, "encode", progress))
        ends = np.cumsum([a.size for a in arrays])
        starts = ends - np.array([a.size for a in arrays])
        total = int(ends[-1])
        cut = int(total * (1.0 - cfg.val_fraction))
        if cut in (0, total):
            raise ValueError(f"the input has {total} tokens: too few for a validation split of "
                             f"{cfg.val_fraction}")
        stream = np.concatenate(arrays)
        parts = {"train": (int((starts < cut).sum()), [stream[:cut]]),
                 "val": (int((ends > cut).sum()), [stream[cut:]])}

    if old is not None:
        for name in [*_files(old), MANIFEST_NAME]:
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    try:
        splits = _write(out, cfg, spec, tok, parts)
        manifest = Manifest(
            tokenizer_file=_TOKENIZER_FILE, tokenizer_sha256=file_sha256(out / _TOKENIZER_FILE),
            tokenizer_spec=str(spec), vocab_size=tokenizer_vocab_size(tok), eot_id=eot,
            seed=cfg.seed, split_rule=rule, val_fraction=cfg.val_fraction, source=source,
            splits=splits, shard_tokens=cfg.shard_tokens, library=LIBRARY)
    except BaseException:  # leave no half-written folder behind (no manifest = not prepared)
        for f in [out / _TOKENIZER_FILE, *out.glob("train_*.bin"), *out.glob("val_*.bin")]:
            f.unlink(missing_ok=True)
        raise
    write_manifest(out, manifest)
    return manifest
