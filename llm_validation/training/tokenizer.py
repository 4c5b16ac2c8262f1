"""Tokenizers for prepared token folders: byte, byte-level BPE (trained offline), or a local file.

Specs (:func:`parse_spec`, the ``--tokenizer`` of ``delaybound data prepare``):
- ``bytes``: token id = byte value (vocabulary 256, no separator); the same tokens as the
  byte-level corpora of :mod:`llm_validation.training.data`.
- ``bpe:VOCAB``: byte-level BPE trained with the ``tokenizers`` library (GPT-2 style: the
  ``ByteLevel`` pre-tokenizer maps every byte of the UTF-8 text to one of 256 printable
  characters, splits with the GPT-2 regex, merges are learned up to ``VOCAB`` ids), with the
  special token ``<|endoftext|>`` at id 0 written before every document.
- ``PATH`` (a ``tokenizer.json`` file): loaded with ``tokenizers.Tokenizer.from_file``; its
  ``<|endoftext|>`` token, when it has one, separates documents.

Guarantee (byte-level tokenizers: ``bytes`` and ``bpe:VOCAB``): ``decode(encode(x)) == x``
exactly for every str ``x``: there is no normalizer; the initial alphabet is all 256 byte
characters, so every byte of the UTF-8 encoding has a token and nothing is unknown; the
``ByteLevel`` decoder inverts the byte-to-character map. Special tokens are encoded as plain
text (``encode_special_tokens``), so a literal ``<|endoftext|>`` inside a document is not a
document boundary. A loaded file gives whatever guarantee that tokenizer gives.

Determinism: training BPE on the same texts gives byte-identical ``tokenizer.json`` (the
trainer breaks count ties by the pair itself; checked in the tests).

Reference: Sennrich et al., "Neural Machine Translation of Rare Words with Subword Units"
(2016); Radford et al., GPT-2 (2019) for the byte-level alphabet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from llm_validation.config import BYTE_VOCAB
from llm_validation.training.manifest import UINT16_VOCAB

__all__ = [
    "TokenizerSpec",
    "parse_spec",
    "byte_alphabet",
    "bytes_tokenizer",
    "train_bpe",
    "load_tokenizer",
    "tokenizer_vocab_size",
    "tokenizer_json",
    "EOT_TOKEN",
    "LIBRARY",
]

#: The document separator (GPT-2's end-of-text token).
EOT_TOKEN = "<|endoftext|>"
#: The library and version that tokenizes, recorded in manifests.
LIBRARY = f"tokenizers {tokenizers.__version__}"
#: Smallest BPE vocabulary: the 256 byte characters and the end-of-text token.
_MIN_BPE_VOCAB = BYTE_VOCAB + 1


@dataclass(frozen=True, kw_only=True)
class TokenizerSpec:
    """A parsed ``--tokenizer`` value."""

    kind: str
    """``bytes``, ``bpe`` or ``file``."""
    vocab_size: int | None = None
    """``bpe``: the vocabulary to train up to (including the end-of-text token)."""
    path: str | None = None
    """``file``: the tokenizer.json to load."""

    def __post_init__(self) -> None:
        if self.kind not in ("bytes", "bpe", "file"):
            raise ValueError(f"TokenizerSpec.kind={self.kind!r} must be bytes, bpe or file")
        if self.kind == "bpe":
            v = self.vocab_size
            if isinstance(v, bool) or not isinstance(v, int) or not \
                    _MIN_BPE_VOCAB <= v <= UINT16_VOCAB:
                raise ValueError(f"bpe vocabulary {v!r} must be an int in [{_MIN_BPE_VOCAB}, "
                                 f"{UINT16_VOCAB}] (256 byte tokens + <|endoftext|>; uint16 "
                                 "shards)")
        if self.kind == "file" and not self.path:
            raise ValueError("TokenizerSpec: kind='file' needs a path")

    def __str__(self) -> str:
        return {"bytes": "bytes", "bpe": f"bpe:{self.vocab_size}"}.get(self.kind, str(self.path))


def parse_spec(text: str) -> TokenizerSpec:
    """``bytes`` | ``bpe:VOCAB`` | a path to a tokenizer.json (see the module docstring)."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"tokenizer spec {text!r} must be bytes, bpe:VOCAB or a tokenizer.json")
    if text == "bytes":
        return TokenizerSpec(kind="bytes")
    if text.startswith("bpe:"):
        try:
            vocab = int(text[4:])
        except ValueError:
            raise ValueError(f"tokenizer spec {text!r}: VOCAB must be an integer, e.g. "
                             "bpe:8192") from None
        return TokenizerSpec(kind="bpe", vocab_size=vocab)
    return TokenizerSpec(kind="file", path=text)


def byte_alphabet() -> dict[int, str]:
    """GPT-2's byte -> printable character map (the ``ByteLevel`` pre-tokenizer's alphabet)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1),
                 *range(ord("\xae"), ord("\xff") + 1)]
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(BYTE_VOCAB):
        if b not in chars:
            chars[b] = chr(BYTE_VOCAB + extra)
            extra += 1
    return dict(sorted(chars.items()))


def _byte_level(tok: Tokenizer) -> Tokenizer:
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    return tok


def bytes_tokenizer() -> Tokenizer:
    """Token id = byte value: a BPE model with no merges over the 256 byte characters."""
    vocab = {ch: b for b, ch in byte_alphabet().items()}
    return _byte_level(Tokenizer(models.BPE(vocab=vocab, merges=[])))


def train_bpe(texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2,
              length: int | None = None) -> Tokenizer:
    """Byte-level BPE trained on ``texts`` up to ``vocab_size`` ids (``<|endoftext|>`` = 0).

    ``min_frequency``: a pair must occur at least this often to be merged (the vocabulary can
    stay below ``vocab_size`` on a small sample; :func:`tokenizer_vocab_size` says what it got).
    (The library's own progress bar is off: it writes blank lines to stdout.)
    """
    TokenizerSpec(kind="bpe", vocab_size=vocab_size)  # validates the range
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 1:
        raise ValueError(f"min_frequency={min_frequency!r} must be an int >= 1")
    tok = _byte_level(Tokenizer(models.BPE()))
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=[EOT_TOKEN], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer, length=length)
    return tok


def load_tokenizer(path: str | Path) -> Tokenizer:
    """A ``tokenizer.json`` file; ``FileNotFoundError`` if missing, ``ValueError`` (one line)
    if it is not a tokenizer or its ids do not fit uint16 shards."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer file not found: {path}")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for any parse error
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"{path} is not a tokenizers tokenizer.json ({msg})") from None
    vocab = tokenizer_vocab_size(tok)
    if vocab > UINT16_VOCAB:
        raise ValueError(f"{path}: vocabulary {vocab} exceeds the {UINT16_VOCAB} ids uint16 "
                         "shards can hold")
    return tok


def tokenizer_vocab_size(tok: Tokenizer) -> int:
    """Largest token id + 1 (added tokens included): the embedding size the data needs."""
    ids = tok.get_vocab(with_added_tokens=True).values()
    if not ids:
        raise ValueError("tokenizer has an empty vocabulary")
    return max(ids) + 1


def tokenizer_json(tok: Tokenizer) -> bytes:
    """The bytes of the tokenizer's JSON (what is written to a prepared folder and hashed)."""
    return (tok.to_str(pretty=True) + "\n").encode("utf-8")
