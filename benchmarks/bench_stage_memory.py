"""Peak host memory and build time of one pipeline rank's model: the whole model built and split
(building the whole model first) against the meta-device build of only the rank's stage.

For each stage s of P (default 4) of a model with ``--layers`` blocks (default 8) the build runs
in a fresh Python process (one per stage and method, so peaks do not mix):

- ``full``: ``Transformer(cfg, seed).split(P)[s]`` with the other stages' blocks dropped
  afterwards (what every rank did before: the whole model is materialised first);
- ``meta``: ``pipeline.stage.build_stage_module`` (meta device, the stage's parameters only,
  the other stages' random draws made in 4 MiB chunks and dropped; bitwise the same weights,
  ``tests/llm_validation/pipeline/test_stage_build.py``).

Each process reports its resident memory after importing torch, its peak resident memory
(``ru_maxrss``) after the build, and the build time; ``build_peak_bytes`` is the difference
(what the build itself added at its peak). ``stage_param_bytes`` is the stage's own float32
parameter bytes, ``model_param_bytes`` the whole model's. Host memory per node grows as ranks per
node x ``build_peak_bytes``: the ratio ``full / meta`` is the saving.

``--save`` also times a DCP save (``no_dist``, local disk) of stage 0's checkpoint as 2BW
writes it (master, the previous version, AdamW's two moments: 16 bytes per parameter) and as
1F1B does (12 bytes per parameter).

Usage: ``python benchmarks/bench_stage_memory.py --json [--layers 8] [--stages 4] [--d-model 1024]
[--save]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

__all__ = ["main", "measure_one", "METHODS"]

METHODS = ("full", "meta")
#: Stage whose checkpoint save is timed (``--save``): the first, with the embedding.
SAVE_STAGE = 0

_CHILD = r"""
import json, resource, sys, time
import torch
from torch import nn
from llm_validation.config import ModelConfig
from llm_validation.training.model import Transformer
from llm_validation.pipeline.stage import build_stage_module

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()

method, stage, stages, cfg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
cfg = ModelConfig(**cfg)
torch.set_num_threads(1)
before = rss()
peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
if method == "full":
    model = Transformer(cfg, seed=0)
    module = model.split(stages)[stage]
    model.blocks = nn.ModuleList()
    if stage != 0:
        model.embed = None
else:
    module, _ = build_stage_module(cfg, 0, stage, stages)
took = time.perf_counter() - t0
if method == "save":          # one stage's DCP checkpoint: 2BW (two versions) vs 1F1B, AdamW
    import tempfile, warnings
    from pathlib import Path
    import torch.distributed.checkpoint as dcp
    out = {}
    for kind, fields in (("2bw", ("master", "previous", "exp_avg", "exp_avg_sq")),
                         ("1f1b", ("master", "exp_avg", "exp_avg_sq"))):
        state = {f"{n}/{f}": p.detach().clone() for n, p in module.named_parameters()
                 for f in fields}
        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t1 = time.perf_counter()
            dcp.save(state, storage_writer=dcp.FileSystemWriter(d), no_dist=True)
            out[f"{kind}_save_s"] = time.perf_counter() - t1
            out[f"{kind}_bytes"] = sum(f.stat().st_size for f in Path(d).iterdir())
        del state
    print(json.dumps(out))
    sys.exit(0)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
own = sum(p.numel() * p.element_size() for p in module.parameters())
print(json.dumps({"rss_after_import_bytes": before, "peak_bytes": peak,
                  "build_peak_bytes": peak - max(before, peak_before), "build_s": took,
                  "stage_param_bytes": own}))
"""


def measure_one(method: str, stage: int, stages: int, model: dict) -> dict:
    """One build in a fresh process (``method`` in :data:`METHODS`); its JSON record."""
    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-c", _CHILD, method, str(stage), str(stages),
                          json.dumps(model)], capture_output=True, text=True, cwd=root,
                         env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    """Parse ``argv``, measure every stage with both methods, print the report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--save", action="store_true",
                    help="also time one stage's DCP checkpoint save (2BW and 1F1B, AdamW)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    if args.layers < args.stages:
        ap.error(f"--layers {args.layers} must be >= --stages {args.stages}")
    d = args.d_model
    model = {"name": "bench", "n_layer": args.layers, "d_model": d, "n_head": d // 64,
             "n_kv_head": d // 64, "d_ff": (8 * d // 3 + 63) // 64 * 64, "max_seq_len": 1024,
             "tied": False}
    rows = []
    for s in range(args.stages):
        got = {m: measure_one(m, s, args.stages, model) for m in METHODS}
        rows.append({"stage": s, "stage_param_bytes": got["meta"]["stage_param_bytes"],
                     **{f"{m}_build_peak_bytes": got[m]["build_peak_bytes"] for m in METHODS},
                     **{f"{m}_build_s": round(got[m]["build_s"], 3) for m in METHODS},
                     "full_over_meta_peak": round(got["full"]["build_peak_bytes"]
                                                  / max(1, got["meta"]["build_peak_bytes"]), 2)})
    save = measure_one("save", SAVE_STAGE, args.stages, model) if args.save else None
    if save is not None:
        save = {"stage": SAVE_STAGE, **{k: round(v, 3) if k.endswith("_s") else v
                                        for k, v in save.items()}}
    from llm_validation.config import ModelConfig
    from llm_validation.training.model import Transformer
    import torch
    with torch.device("meta"):
        total = Transformer(ModelConfig(**model)).num_params() * 4
    report = {"benchmark": "stage_memory", "model": model, "stages": args.stages,
              "model_param_bytes": total, "rows": rows,
              "max_full_build_peak_bytes": max(r["full_build_peak_bytes"] for r in rows),
              "max_meta_build_peak_bytes": max(r["meta_build_peak_bytes"] for r in rows),
              "checkpoint": save}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for r in rows:
            print(f"stage {r['stage']}: full {r['full_build_peak_bytes'] / 2**20:.0f} MiB "
                  f"({r['full_build_s']} s), meta {r['meta_build_peak_bytes'] / 2**20:.0f} MiB "
                  f"({r['meta_build_s']} s), stage params {r['stage_param_bytes'] / 2**20:.0f} MiB")
    return report


if __name__ == "__main__":
    main()
