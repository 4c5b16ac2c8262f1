"""The manifest of a prepared token folder (``delaybound data prepare``): one definition.

A prepared folder ``DIR`` holds
- ``DIR/tokenizer.json``: the tokenizer (a ``tokenizers`` JSON file), trained by ``prepare`` or
  copied byte for byte from the file the user gave;
- ``DIR/train_000000.bin``, ..., ``DIR/val_000000.bin``, ...: modded-nanogpt shards (a header of
  256 int32: magic 20240520, version 1, token count; then uint16 tokens), written with
  :func:`llm_validation.training.data.write_bin_shard`;
- ``DIR/manifest.json`` (written last, so its presence marks a complete folder): the JSON form of
  :class:`Manifest` (tokenizer file and its sha256, vocabulary, split rule, seed, per-split token
  counts and shard files).

:func:`read_manifest` validates the JSON (a hand-edited or truncated manifest is a one-line
``ValueError``); :func:`model_vocab` decides the model's vocabulary for the data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from llm_validation.config import TrainConfig

__all__ = [
    "Manifest",
    "SplitInfo",
    "MANIFEST_NAME",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "UINT16_VOCAB",
    "SPLITS",
    "file_sha256",
    "read_manifest",
    "write_manifest",
    "model_vocab",
    "is_prepared",
    "with_prepared_data",
]

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "delaybound-shards"
MANIFEST_VERSION = 1
#: Largest vocabulary whose ids fit the uint16 tokens of a shard (ids 0..65535).
UINT16_VOCAB = 65536
#: The splits of a prepared folder, in order.
SPLITS = ("train", "val")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SHARD_NAME = re.compile(r"^[A-Za-z0-9_.-]+\.bin$")


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes (the tokenizer hash of a manifest)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what}={value!r} must be an int >= 0")
    return value


@dataclass(frozen=True, kw_only=True)
class SplitInfo:
    """One split of a prepared folder: its documents, tokens and shard files (in order)."""

    documents: int
    """Documents (input files) in the split; with the ``tail`` rule, those the split touches."""
    tokens: int
    """Tokens in the split (the sum over its shards)."""
    shards: tuple[tuple[str, int], ...]
    """``(file name, token count)`` of each shard, in reading order (names only, no folders)."""

    def __post_init__(self) -> None:
        _count(self.documents, "SplitInfo.documents")
        _count(self.tokens, "SplitInfo.tokens")
        shards = tuple((str(n), c) for n, c in self.shards)
        object.__setattr__(self, "shards", shards)
        for name, count in shards:
            if not _SHARD_NAME.match(name):
                raise ValueError(f"SplitInfo: shard file {name!r} must be a plain *.bin name")
            _count(count, f"SplitInfo: shard {name} tokens")
        if sum(c for _, c in shards) != self.tokens:
            raise ValueError(f"SplitInfo.tokens={self.tokens} != the sum of its shards' tokens "
                             f"{sum(c for _, c in shards)}")


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """What ``delaybound data prepare`` wrote (JSON: :meth:`to_dict` / :meth:`from_dict`)."""

    tokenizer_file: str = "tokenizer.json"
    """The tokenizer's file name inside the folder."""
    tokenizer_sha256: str
    """sha256 of the bytes of ``tokenizer_file`` (checked when the folder is loaded)."""
    tokenizer_spec: str
    """How the tokenizer was made: ``bytes``, ``bpe:VOCAB`` or the path of the file given."""
    vocab_size: int
    """Vocabulary V (largest token id + 1), at most :data:`UINT16_VOCAB`."""
    eot_id: int | None
    """End-of-text token written before every document, or None (no separator)."""
    seed: int
    """Seed of the document order (and of the tokenizer's training sample)."""
    split_rule: str
    """``file-hash`` (crc32 of the relative path, as the byte corpora) or ``tail`` (the last
    ``val_fraction`` of the token stream, when a file-level split would leave a split empty)."""
    val_fraction: float
    """Validation fraction the split rule used."""
    source: Mapping[str, Any] = field(default_factory=dict)
    """The input: kind (``stdlib``, ``text-file``, ``text-folder``), path, files, bytes,
    files skipped as not UTF-8."""
    splits: Mapping[str, SplitInfo]
    """``train`` and ``val``."""
    shard_tokens: int
    """Most tokens per shard (a shard is cut there, across documents)."""
    library: str = ""
    """The tokenizer library and its version, for the record."""

    def __post_init__(self) -> None:
        if not isinstance(self.tokenizer_file, str) or "/" in self.tokenizer_file \
                or "\\" in self.tokenizer_file or self.tokenizer_file in ("", ".", ".."):
            raise ValueError(f"Manifest.tokenizer_file={self.tokenizer_file!r} must be a plain "
                             "file name")
        if not isinstance(self.tokenizer_sha256, str) or not _SHA256.match(self.tokenizer_sha256):
            raise ValueError(f"Manifest.tokenizer_sha256={self.tokenizer_sha256!r} is not a hex "
                             "sha256")
        v = self.vocab_size
        if isinstance(v, bool) or not isinstance(v, int) or not 2 <= v <= UINT16_VOCAB:
            raise ValueError(f"Manifest.vocab_size={v!r} must be an int in [2, {UINT16_VOCAB}] "
                             f"(uint16 shards hold token ids up to {UINT16_VOCAB - 1})")
        if self.eot_id is not None and (isinstance(self.eot_id, bool) or not isinstance(
                self.eot_id, int) or not 0 <= self.eot_id < v):
            raise ValueError(f"Manifest.eot_id={self.eot_id!r} must be None or in [0, {v})")
        _count(self.seed, "Manifest.seed")
        if self.split_rule not in ("file-hash", "tail"):
            raise ValueError(f"Manifest.split_rule={self.split_rule!r} must be 'file-hash' or "
                             "'tail'")
        if isinstance(self.val_fraction, bool) or not isinstance(self.val_fraction, (int, float)) \
                or not 0.0 < self.val_fraction <= 0.5:
            raise ValueError(f"Manifest.val_fraction={self.val_fraction!r} must be in (0, 0.5]")
        if not isinstance(self.splits, Mapping) or set(self.splits) != set(SPLITS):
            raise ValueError(f"Manifest.splits must have exactly the splits {list(SPLITS)}")
        for name in SPLITS:
            if not isinstance(self.splits[name], SplitInfo):
                raise TypeError(f"Manifest.splits[{name!r}] must be a SplitInfo")
            if self.splits[name].tokens == 0:
                raise ValueError(f"Manifest: the {name} split has no tokens")
        _count(self.shard_tokens, "Manifest.shard_tokens")
        if self.shard_tokens < 1:
            raise ValueError("Manifest.shard_tokens must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        """The manifest.json layout."""
        return {
            "format": MANIFEST_FORMAT, "version": MANIFEST_VERSION,
            "tokenizer": {"file": self.tokenizer_file, "sha256": self.tokenizer_sha256,
                          "spec": self.tokenizer_spec, "eot_id": self.eot_id,
                          "library": self.library},
            "vocab_size": self.vocab_size,
            "shards": {"layout": "modded-nanogpt", "dtype": "uint16",
                       "max_tokens": self.shard_tokens},
            "split": {"rule": self.split_rule, "val_fraction": self.val_fraction},
            "seed": self.seed,
            "source": dict(self.source),
            "splits": {name: {"documents": s.documents, "tokens": s.tokens,
                              "shards": [{"file": f, "tokens": c} for f, c in s.shards]}
                       for name, s in self.splits.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Manifest":
        """Inverse of :meth:`to_dict`; a wrong layout raises ``ValueError`` naming the key."""
        if not isinstance(d, Mapping):
            raise ValueError("manifest must be a JSON object")
        if d.get("format") != MANIFEST_FORMAT or d.get("version") != MANIFEST_VERSION:
            raise ValueError(f"not a {MANIFEST_FORMAT} manifest of version {MANIFEST_VERSION} "
                             f"(format={d.get('format')!r}, version={d.get('version')!r})")
        try:
            tok, split = d["tokenizer"], d["split"]
            splits = {name: SplitInfo(documents=s["documents"], tokens=s["tokens"],
                                      shards=tuple((x["file"], x["tokens"]) for x in s["shards"]))
                      for name, s in d["splits"].items()}
            return cls(tokenizer_file=tok["file"], tokenizer_sha256=tok["sha256"],
                       tokenizer_spec=tok["spec"], eot_id=tok["eot_id"],
                       library=tok.get("library", ""), vocab_size=d["vocab_size"],
                       shard_tokens=d["shards"]["max_tokens"], split_rule=split["rule"],
                       val_fraction=split["val_fraction"], seed=d["seed"],
                       source=d.get("source", {}), splits=splits)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"manifest is missing or mistypes {exc}") from None


def read_manifest(folder: str | Path) -> Manifest:
    """The validated manifest of a prepared folder (``FileNotFoundError`` when it has none)."""
    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no {MANIFEST_NAME} in {folder}: not a folder written by "
                                "`delaybound data prepare`")
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    try:
        return Manifest.from_dict(d)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def write_manifest(folder: str | Path, manifest: Manifest) -> Path:
    """Write ``folder/manifest.json`` (sorted keys, so the bytes depend on the content only)."""
    path = Path(folder) / MANIFEST_NAME
    path.write_text(json.dumps(manifest.to_dict(), indent=2, sort_keys=True) + "\n",
                    encoding="utf-8")
    return path


def model_vocab(data_vocab: int, requested: int | None = None) -> int:
    """The model's vocabulary for data of vocabulary ``data_vocab``: the data's, or an explicit
    ``requested`` one that is at least as large (a padded embedding); smaller is refused (the
    embedding could not take the data's token ids)."""
    if requested is None:
        return data_vocab
    if isinstance(requested, bool) or not isinstance(requested, int):
        raise TypeError(f"vocab size {requested!r} must be an int")
    if requested < data_vocab:
        raise ValueError(f"model vocab_size={requested} is smaller than the data's vocabulary "
                         f"{data_vocab} (token ids up to {data_vocab - 1} would not fit the "
                         "embedding)")
    return requested


def is_prepared(path: str | Path | None) -> bool:
    """True when ``path`` is a folder with a manifest.json (``delaybound data prepare``)."""
    return path is not None and (Path(path) / MANIFEST_NAME).is_file()


def with_prepared_data(cfg: TrainConfig, vocab_size: int | None = None) -> TrainConfig:
    """``cfg`` ready for a prepared folder: ``format="auto"`` on a folder with a manifest becomes
    ``shards``, and for ``shards`` the model's vocabulary becomes :func:`model_vocab` of the
    manifest's and ``vocab_size`` (an explicit request, None for the data's). Any other data is
    returned unchanged. Reads and validates the manifest, so a bad folder fails here, before
    anything starts."""
    data = cfg.data
    if data.format == "auto" and is_prepared(data.path):
        data = dataclasses.replace(data, format="shards")
    if data.format != "shards":
        return cfg
    vocab = model_vocab(read_manifest(data.path).vocab_size, vocab_size)
    return cfg.replace(data=data, model=dataclasses.replace(cfg.model, vocab_size=vocab))
