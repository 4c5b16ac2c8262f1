"""Several machines: the same entry point under ``torchrun``, two "nodes" on this machine.

Two torchrun invocations (``--nnodes 2 --node-rank 0|1 --nproc-per-node 2``, static rendezvous
on 127.0.0.1) run ``python -m delaybound train --pipeline 2bw --stages 2 --data-parallel 2``:
node 0 holds replica 0 (ranks 0, 1), node 1 replica 1 (ranks 2, 3), so the gradient
all-reduce crosses the nodes. Its metrics are the same, bitwise, as the one-node run that the
launcher starts itself (same mesh, same reductions in the same order).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from delaybound.cli import main
from llm_validation.rundir import read_metrics
from llm_validation.records.atomic_io import read_json
from tests.llm_validation.pipeline.support import small_corpus

#: Wall-clock limit of the two torchrun invocations (4 ranks + 2 agents on 2 cores: ~15 s).
TORCHRUN_TIMEOUT_S = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _args(corpus: str, out: Path) -> list[str]:
    return ["train", "--pipeline", "2bw", "--stages", "2", "--data-parallel", "2",
            "--microbatches", "2", "--batch-size", "8", "--steps", "4", "--seq-len", "16",
            "--optimizer", "muon", "--lr", "0.02", "--data", corpus, "--eval-interval", "2",
            "--eval-batches", "1", "--stats-interval", "2", "--checkpoint-interval", "2",
            "--quiet", "--out", str(out)]


def test_two_torchrun_nodes_give_the_one_node_metrics(tmp_path, monkeypatch):
    corpus = small_corpus(tmp_path)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DELAYBOUND_") and k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                             "MASTER_PORT", "LOCAL_RANK")}
    env["DELAYBOUND_PIPE_THREADS"] = "1"
    port = _free_port()
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                "--nproc-per-node", "2", "--rdzv-backend", "static", "--master-addr",
                "127.0.0.1", "--master-port", str(port)]
    two = tmp_path / "two_nodes"
    nodes = [subprocess.Popen([*torchrun, "--node-rank", str(r), "-m", "delaybound",
                               *_args(corpus, two)], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in (0, 1)]
    outs = [p.communicate(timeout=TORCHRUN_TIMEOUT_S)[0] for p in nodes]
    assert [p.returncode for p in nodes] == [0, 0], "\n".join(o[-3000:] for o in outs)

    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    for k in ("DELAYBOUND_DP_REDUCE", "DELAYBOUND_PIPE_FAULT"):
        monkeypatch.delenv(k, raising=False)
    one = tmp_path / "one_node"
    assert main(_args(corpus, one)) == 0

    rows_two, rows_one = read_metrics(two), read_metrics(one)
    assert len(rows_one) == 5 and rows_two == rows_one          # every metric, bitwise
    meta = read_json(two / "config.json")["meta"]["pipeline"]
    assert meta["mesh"] == {"dp": 2, "pp": 2} and meta["world"] == 4
    assert read_json(two / "summary.json")["final_val_loss"] == \
        read_json(one / "summary.json")["final_val_loss"]
