"""``delaybound data``: prepare tokenized shards offline, and describe a prepared folder.

- ``data prepare --tokenizer {bytes,bpe:VOCAB,FILE.json} --out DIR [--input PATH] [--seed S]
  [--val-fraction F] [--shard-tokens N] [--tokenizer-sample BYTES] [--min-frequency K]
  [--overwrite] [--quiet] [--json]``: :func:`llm_validation.training.shards.prepare` (train or
  load the tokenizer, encode the input (default: this Python's stdlib sources) in parallel with
  a progress bar, write modded-nanogpt ``.bin`` shards and ``manifest.json``). Nothing is
  downloaded. ``delaybound train --data DIR`` then trains on it with the manifest's vocabulary.
- ``data info DIR [--json]``: the manifest of a prepared folder.

Exit codes: 0 done, 2 bad input (a missing input, a tokenizer file that is not a tokenizer, a
bad spec, a non-empty --out): one line on stderr, nothing written.
"""

from __future__ import annotations

import argparse
from typing import Any

from delaybound.output import print_json

__all__ = ["register", "cmd_prepare", "cmd_info"]


def _summary(manifest: Any, folder: str) -> str:
    tr, va = manifest.splits["train"], manifest.splits["val"]
    return (f"{folder}: tokenizer {manifest.tokenizer_spec} (vocab {manifest.vocab_size}, "
            f"sha256 {manifest.tokenizer_sha256[:12]}), split {manifest.split_rule}, seed "
            f"{manifest.seed}: train {tr.tokens} tokens / {tr.documents} documents in "
            f"{len(tr.shards)} shard(s), val {va.tokens} tokens / {va.documents} documents in "
            f"{len(va.shards)} shard(s)")


def cmd_prepare(args: argparse.Namespace) -> int:
    from llm_validation.training.shards import PrepareConfig, prepare

    cfg = PrepareConfig(tokenizer=args.tokenizer, out_dir=args.out, input=args.input,
                        seed=args.seed, val_fraction=args.val_fraction,
                        shard_tokens=args.shard_tokens,
                        tokenizer_sample_bytes=args.tokenizer_sample,
                        min_frequency=args.min_frequency, overwrite=args.overwrite)
    manifest = prepare(cfg, progress=not args.quiet)
    if args.json:
        print_json({"out_dir": args.out, **manifest.to_dict()})
    else:
        print(_summary(manifest, args.out))
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from llm_validation.training.manifest import read_manifest

    manifest = read_manifest(args.dir)
    if args.json:
        print_json({"out_dir": args.dir, **manifest.to_dict()})
    else:
        print(_summary(manifest, args.dir))
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "data", help="prepare tokenized .bin shards (BPE trained offline) for `train --data`",
        description="Tokenize a corpus offline into modded-nanogpt .bin shards with a "
                    "manifest; `delaybound train --data DIR` then trains on them.")
    sub = p.add_subparsers(dest="data_command", metavar="ACTION", parser_class=type(p))
    sub.required = True

    q = sub.add_parser(
        "prepare", help="train/load a tokenizer, encode the input, write shards + manifest.json",
        description="Encode the input (default: this Python's stdlib *.py sources) with a "
                    "byte tokenizer, a byte-level BPE trained here (bpe:VOCAB), or a local "
                    "tokenizer.json, into DIR/train_*.bin, DIR/val_*.bin (modded-nanogpt "
                    "layout), DIR/tokenizer.json and DIR/manifest.json. Same input and seed: "
                    "byte-identical files.")
    a = q.add_argument
    a("--tokenizer", required=True, metavar="{bytes,bpe:VOCAB,FILE.json}",
      help="bytes (ids = byte values), bpe:VOCAB (train byte-level BPE), or a tokenizer.json")
    a("--out", required=True, metavar="DIR", help="folder to write (empty or new)")
    a("--input", metavar="PATH", help="text file or folder (default: the stdlib sources)")
    a("--seed", type=int, default=0, help="seed of the document order (default 0)")
    a("--val-fraction", type=float, default=0.1, help="validation fraction (default 0.1)")
    a("--shard-tokens", type=int, default=100_000_000, help="tokens per shard (default 1e8)")
    a("--tokenizer-sample", type=int, default=16_000_000, metavar="BYTES",
      help="BPE: bytes of training text to learn merges from (default 16e6)")
    a("--min-frequency", type=int, default=2, help="BPE: least pair count to merge (default 2)")
    a("--overwrite", action="store_true", help="replace a prepared folder in --out")
    a("--quiet", action="store_true", help="no progress bars")
    a("--json", action="store_true", help="print the manifest as JSON")
    q.set_defaults(func=cmd_prepare)

    i = sub.add_parser("info", help="describe a prepared folder (its manifest)")
    i.add_argument("dir", metavar="DIR", help="a folder written by `data prepare`")
    i.add_argument("--json", action="store_true", help="print the manifest as JSON")
    i.set_defaults(func=cmd_info)
