"""Token corpora and the deterministic window sampler.

Corpora (:func:`load_corpus`, cached in memory per process):
- default (``DataConfig.path is None``): the ``*.py`` files under the running interpreter's
  stdlib directory (``sysconfig.get_paths()["stdlib"]``; ``site-packages``/``dist-packages``
  excluded), sorted by relative path, raw bytes (vocabulary 256). A file goes to validation when
  ``crc32(relative path) mod 10000 < val_fraction * 10000``: deterministic, machine-independent
  for a given file set, and stable when files are added.
- a text file (bytes; the last ``val_fraction`` of it is validation) or a folder (every
  non-hidden regular file, split by file as above; if a split would be empty, the tail of the
  concatenation is used instead).
- ``.bin`` token shards (uint16): nanoGPT layout (raw uint16, ``train.bin``/``val.bin``) or
  modded-nanogpt layout (a header of 256 int32: magic 20240520, version, token count; then the
  tokens), detected per file by the magic number. ``path`` is a shard, a glob or a folder;
  validation shards come from ``val_path``, else the ``*val*`` shards of the folder/glob, else
  the tail ``val_fraction`` of the only shard (or the last shard when there are several).
- a prepared folder (``format="shards"``, written by ``delaybound data prepare``): the shards
  its ``manifest.json`` lists (:mod:`llm_validation.training.manifest`), checked against the
  manifest (tokenizer sha256, token count of every shard) before training starts.

Sampling (:class:`WindowSampler`): batch ``i`` of a stream is a pure function of
``(seed, stream, i)`` (numpy PCG64 seeded by ``SeedSequence([seed, stream, i])``): B window
starts drawn uniformly among all windows of T + 1 tokens that lie inside one array. The sampler's
``position`` (the next batch index) is all the state a checkpoint needs. Streams: 0 training,
1 validation (fixed batches 0..n-1, the same at every evaluation), 2 large batches (momentum error).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import sysconfig
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor

from llm_validation.config import BYTE_VOCAB, DataConfig
from llm_validation.training.manifest import MANIFEST_NAME, SPLITS, file_sha256, read_manifest

__all__ = [
    "Corpus",
    "TokenArrays",
    "WindowSampler",
    "tiled_windows",
    "load_corpus",
    "stdlib_files",
    "folder_files",
    "hash_split",
    "read_bin_shard",
    "write_bin_shard",
    "MODDED_MAGIC",
    "STREAM_TRAIN",
    "STREAM_VAL",
    "STREAM_LARGE",
]

#: modded-nanogpt shard header: 256 int32, [0] = magic, [1] = version, [2] = number of tokens.
MODDED_MAGIC = 20240520
MODDED_HEADER_INT32 = 256
#: Hash buckets of the file-level split.
_SPLIT_BUCKETS = 10_000
STREAM_TRAIN, STREAM_VAL, STREAM_LARGE = 0, 1, 2
_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}


class TokenArrays:
    """One split: a list of 1-D token arrays (numpy uint8 bytes or uint16 tokens)."""

    def __init__(self, arrays: list[np.ndarray], name: str) -> None:
        self.arrays = [a for a in arrays if len(a) > 0]
        self.name = name
        if not self.arrays:
            raise ValueError(f"{name} split is empty")

    @property
    def num_tokens(self) -> int:
        return int(sum(len(a) for a in self.arrays))

    def window_counts(self, seq_len: int) -> np.ndarray:
        """Number of windows of seq_len + 1 tokens starting in each array."""
        return np.array([max(len(a) - seq_len, 0) for a in self.arrays], dtype=np.int64)


@dataclass(frozen=True)
class Corpus:
    """Train and validation token arrays, the vocabulary (256 for bytes) and a description."""

    train: TokenArrays
    val: TokenArrays
    byte_level: bool
    description: dict[str, Any]

    @property
    def vocab_size(self) -> int | None:
        """256 for byte-level data, None (the model's) for token shards."""
        return BYTE_VOCAB if self.byte_level else None


def hash_split(rel_paths: list[str], val_fraction: float) -> list[bool]:
    """Which files are validation: ``crc32(relative path) mod 10000 < val_fraction * 10000``."""
    cut = val_fraction * _SPLIT_BUCKETS
    return [zlib.crc32(r.encode()) % _SPLIT_BUCKETS < cut for r in rel_paths]


def stdlib_files() -> tuple[Path, list[Path]]:
    """The stdlib directory and its ``*.py`` files (sorted, site/dist-packages excluded; the
    walk does not descend into them, which keeps loading well under a second)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise FileNotFoundError(f"stdlib directory not found: {root}")
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in _SKIP_DIRS]
        files.extend(Path(d) / n for n in names if n.endswith(".py"))
    return root, sorted(files, key=lambda f: f.relative_to(root).as_posix())


def _bytes_corpus(root: Path, files: list[Path], val_fraction: float, what: str) -> Corpus:
    rels = [f.relative_to(root).as_posix() for f in files]
    is_val = hash_split(rels, val_fraction)
    blobs = [f.read_bytes() for f in files]
    train = b"".join(b for b, v in zip(blobs, is_val) if not v)
    val = b"".join(b for b, v in zip(blobs, is_val) if v)
    split = "file-hash"
    if not train or not val:  # too few files for a file-level split: tail of the concatenation
        whole = train + val if train else val
        cut = int(len(whole) * (1.0 - val_fraction))
        train, val, split = whole[:cut], whole[cut:], "tail"
    desc = {"kind": what, "root": str(root), "files": len(files), "split": split,
            "val_files": int(sum(is_val)) if split == "file-hash" else None,
            "train_tokens": len(train), "val_tokens": len(val)}
    return Corpus(TokenArrays([np.frombuffer(train, dtype=np.uint8)], "train"),
                  TokenArrays([np.frombuffer(val, dtype=np.uint8)], "val"), True, desc)


def read_bin_shard(path: str | Path) -> np.ndarray:
    """Memory-map one uint16 shard (modded-nanogpt header detected by its magic number)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"token shard not found: {path}")
    size = path.stat().st_size
    header = np.fromfile(path, dtype=np.int32, count=MODDED_HEADER_INT32) \
        if size >= 4 * MODDED_HEADER_INT32 else np.zeros(1, dtype=np.int32)
    if header[0] == MODDED_MAGIC:
        ntok = int(header[2])
        if size != 4 * MODDED_HEADER_INT32 + 2 * ntok:
            raise ValueError(f"{path}: header says {ntok} tokens but the file has "
                             f"{(size - 4 * MODDED_HEADER_INT32) // 2}")
        return np.memmap(path, dtype=np.uint16, mode="r", offset=4 * MODDED_HEADER_INT32,
                         shape=(ntok,))
    if size % 2:
        raise ValueError(f"{path}: odd file size {size} is not a uint16 token array")
    return np.memmap(path, dtype=np.uint16, mode="r")


def write_bin_shard(path: str | Path, tokens: np.ndarray, header: bool = True) -> None:
    """Write uint16 tokens as a shard (with the modded-nanogpt header, or raw nanoGPT)."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or (tokens.size and (tokens.min() < 0 or tokens.max() > 65535)):
        raise ValueError("write_bin_shard needs a 1-D array of values in [0, 65535]")
    with open(path, "wb") as f:
        if header:
            h = np.zeros(MODDED_HEADER_INT32, dtype=np.int32)
            h[0], h[1], h[2] = MODDED_MAGIC, 1, tokens.size
            f.write(h.tobytes())
        f.write(tokens.astype(np.uint16).tobytes())


def _expand(pattern: str) -> list[Path]:
    p = Path(pattern)
    if p.is_dir():
        return sorted(p.glob("*.bin"))
    if any(ch in pattern for ch in "*?["):
        return sorted(Path(f) for f in glob.glob(pattern))
    if not p.exists():
        raise FileNotFoundError(f"data path not found: {pattern}")
    return [p]


def _bin_corpus(cfg: DataConfig) -> Corpus:
    shards = _expand(cfg.path)
    if not shards:
        raise FileNotFoundError(f"no .bin shards found at: {cfg.path}")
    if cfg.val_path is not None:
        val_shards = _expand(cfg.val_path)
        if not val_shards:
            raise FileNotFoundError(f"no .bin shards found at: {cfg.val_path}")
        train_shards = shards
    else:
        val_shards = [s for s in shards if fnmatch.fnmatch(s.name, "*val*")]
        train_shards = [s for s in shards if s not in val_shards]
    split = "shards"
    train = [read_bin_shard(s) for s in train_shards]
    val = [read_bin_shard(s) for s in val_shards]
    if not val:
        if len(train) > 1:
            val, train, split = [train[-1]], train[:-1], "last-shard"
        else:
            cut = int(len(train[0]) * (1.0 - cfg.val_fraction))
            train, val, split = [train[0][:cut]], [train[0][cut:]], "tail"
    if not train:
        raise ValueError(f"only validation shards found at: {cfg.path}")
    desc = {"kind": "bin", "path": cfg.path, "train_shards": [str(s) for s in train_shards],
            "val_shards": [str(s) for s in val_shards], "split": split,
            "train_tokens": int(sum(len(a) for a in train)),
            "val_tokens": int(sum(len(a) for a in val))}
    return Corpus(TokenArrays(train, "train"), TokenArrays(val, "val"), False, desc)


def _shards_corpus(cfg: DataConfig) -> Corpus:
    root = Path(cfg.path)
    man = read_manifest(root)
    tok = root / man.tokenizer_file
    if not tok.is_file() or file_sha256(tok) != man.tokenizer_sha256:
        raise ValueError(f"{tok}: missing or its sha256 differs from {MANIFEST_NAME}'s "
                         f"{man.tokenizer_sha256[:12]}...: the folder was changed after preparing")
    arrays = {}
    for split in SPLITS:
        arrays[split] = []
        for name, count in man.splits[split].shards:
            a = read_bin_shard(root / name)
            if len(a) != count:
                raise ValueError(f"{root / name}: {len(a)} tokens, {MANIFEST_NAME} says {count}")
            arrays[split].append(a)
    desc = {"kind": "shards", "path": cfg.path, "tokenizer": man.tokenizer_spec,
            "tokenizer_sha256": man.tokenizer_sha256, "vocab_size": man.vocab_size,
            "split": man.split_rule, "seed": man.seed,
            "train_tokens": man.splits["train"].tokens, "val_tokens": man.splits["val"].tokens}
    return Corpus(TokenArrays(arrays["train"], "train"), TokenArrays(arrays["val"], "val"), False,
                  desc)


def folder_files(folder: Path) -> list[Path]:
    """Every non-hidden regular file under ``folder``, sorted by relative path."""
    return sorted((f for f in folder.rglob("*") if f.is_file() and not any(
        part.startswith(".") for part in f.relative_to(folder).parts)),
        key=lambda f: f.relative_to(folder).as_posix())


@lru_cache(maxsize=8)
def _load_cached(cfg_key: tuple) -> Corpus:
    cfg = DataConfig(**dict(cfg_key))
    if cfg.format == "shards":
        return _shards_corpus(cfg)
    if cfg.is_bin:
        return _bin_corpus(cfg)
    if cfg.path is None:
        root, files = stdlib_files()
        return _bytes_corpus(root, files, cfg.val_fraction, "stdlib")
    p = Path(cfg.path)
    if not p.exists():
        raise FileNotFoundError(f"data path not found: {cfg.path}")
    if p.is_file():
        return _bytes_corpus(p.parent, [p], cfg.val_fraction, "text-file")
    files = folder_files(p)
    if not files:
        raise FileNotFoundError(f"no files under data folder: {cfg.path}")
    if cfg.format == "auto" and (p / MANIFEST_NAME).is_file():
        raise ValueError(f"data folder {cfg.path} was prepared by `delaybound data prepare`: "
                         "pass format='shards' (--data-format shards)")
    if cfg.format == "auto" and any(f.suffix == ".bin" for f in files):
        raise ValueError(f"data folder {cfg.path} contains .bin shards: pass format='bin' "
                         "(--data-format bin) or a '*.bin' glob to read them as tokens")
    return _bytes_corpus(p, files, cfg.val_fraction, "text-folder")


def load_corpus(cfg: DataConfig) -> Corpus:
    """Load (once per process) the corpus ``cfg`` describes; missing paths raise
    ``FileNotFoundError`` naming the path."""
    if not isinstance(cfg, DataConfig):
        raise TypeError(f"load_corpus needs a DataConfig, got {type(cfg).__name__}")
    key = (("path", cfg.path), ("format", cfg.format), ("val_path", cfg.val_path),
           ("val_fraction", cfg.val_fraction))
    return _load_cached(key)


def tiled_windows(split: TokenArrays, seq_len: int, n_tokens: int) -> Tensor:
    """The fixed evaluation set of ``n_tokens`` predicted tokens: windows of ``seq_len + 1``
    tokens tiling the split's arrays in order, without overlap (int64 ``[W, seq_len + 1]``,
    ``W = ceil(n_tokens / seq_len)``). It depends on the split and ``seq_len`` only, so every
    seed, batch size and model reads the same tokens; ``ValueError`` when the split is too
    short."""
    if n_tokens < 1 or seq_len < 1:
        raise ValueError(f"tiled_windows: n_tokens={n_tokens} and seq_len={seq_len} must be >= 1")
    need, span, rows = -(-n_tokens // seq_len), seq_len + 1, []
    for a in split.arrays:
        k = min(len(a) // span, need - len(rows))
        rows.extend(a[i * span:(i + 1) * span] for i in range(k))
        if len(rows) == need:
            return torch.from_numpy(np.stack(rows).astype(np.int64))
    raise ValueError(f"{split.name} split holds {len(rows)} whole windows of {span} tokens, "
                     f"fewer than the {need} that {n_tokens} evaluation tokens need")


class WindowSampler:
    """Batches of B windows of T + 1 tokens: x = w[:, :-1], y = w[:, 1:] (int64 [B, T]).

    ``batch(i)`` is a pure function of (seed, stream, i); ``next()`` returns ``batch(position)``
    and advances ``position``.
    """

    def __init__(self, split: TokenArrays, batch_size: int, seq_len: int, seed: int,
                 stream: int = STREAM_TRAIN, position: int = 0) -> None:
        self.split, self.batch_size, self.seq_len = split, batch_size, seq_len
        self.seed, self.stream, self.position = seed, stream, position
        self.windows_read = 0   # windows gathered so far (tests: per-rank read volume)
        counts = split.window_counts(seq_len)
        self.total = int(counts.sum())
        if self.total <= 0:
            raise ValueError(f"{split.name} split ({split.num_tokens} tokens) is shorter than "
                             f"one window of seq_len + 1 = {seq_len + 1} tokens")
        self._cum = np.cumsum(counts)

    def batch(self, index: int, batch_size: int | None = None,
              rows: tuple[int, int] | None = None) -> tuple[Tensor, Tensor]:
        """Batch ``index``; ``rows=(lo, hi)``: only its rows lo..hi-1, reading only those
        windows (a data-parallel replica's share; the same values as slicing the batch)."""
        b = self.batch_size if batch_size is None else batch_size
        rng = np.random.Generator(np.random.PCG64(
            np.random.SeedSequence([self.seed, self.stream, index])))
        u = rng.integers(0, self.total, size=b)                      # global window ids [B]
        if rows is not None:
            u = u[rows[0]:rows[1]]                                   # draws of every row kept
        self.windows_read += len(u)
        which = np.searchsorted(self._cum, u, side="right")          # array of each window
        offsets = u - np.concatenate(([0], self._cum[:-1]))[which]   # start inside the array
        span = np.arange(self.seq_len + 1)
        w = np.stack([self.split.arrays[a][o + span] for a, o in zip(which, offsets)])
        w = torch.from_numpy(w.astype(np.int64))                     # [B, T+1]
        return w[:, :-1], w[:, 1:]

    def next(self) -> tuple[Tensor, Tensor]:
        out = self.batch(self.position)
        self.position += 1
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "stream": self.stream, "position": self.position}

    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        if int(sd["seed"]) != self.seed or int(sd["stream"]) != self.stream:
            raise ValueError(f"WindowSampler: checkpoint seed/stream {sd['seed']}/{sd['stream']}"
                             f" != {self.seed}/{self.stream}")
        self.position = int(sd["position"])
