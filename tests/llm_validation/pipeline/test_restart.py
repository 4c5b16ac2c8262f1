"""Fault tolerance by the engine: ``torchrun --max-restarts 1`` restarts a P = 2 pipeline whose
rank was killed mid-run, ``--resume auto`` continues it from its latest complete checkpoint,
and the finished metrics equal an uninterrupted run's bitwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from delaybound.cli import main
from llm_validation.pipeline.checkpoint import latest_complete
from llm_validation.rundir import RunPaths, read_metrics
from llm_validation.records.atomic_io import read_json
from tests.llm_validation.pipeline.support import small_corpus

#: Wall-clock limit of the torchrun invocation (2 ranks started twice + the agent on 2 shared
#: cores: ~30 s measured alone; generous for a loaded machine).
TORCHRUN_TIMEOUT_S = 400
#: Steps of the run; rank 1 dies after its step KILL_AFTER (0-based), so the latest complete
#: checkpoint is 2. Stage 0 writes a checkpoint's COMPLETE marker at its next flush: rank 1
#: cannot finish step 3 before stage 0 has sent it batch 3, after its flush of step 2 (marker
#: of checkpoint 2 written), and checkpoint 4, whose shard rank 1 saves at step 3, would be
#: marked only at stage 0's flush of step 4, which needs rank 1's gradients of batch 4. Dying
#: after step 2 instead left stage 0's marker of checkpoint 2 racing the agent's kill (the run
#: then restarted from scratch; seen once under load).
STEPS, KILL_AFTER = 6, 3


def _args(corpus: str, out: Path) -> list[str]:
    return ["train", "--pipeline", "2bw", "--stages", "2", "--microbatches", "2",
            "--batch-size", "4", "--steps", str(STEPS), "--seq-len", "16", "--optimizer", "muon",
            "--lr", "0.02", "--data", corpus, "--eval-interval", "3", "--eval-batches", "1",
            "--stats-interval", "2", "--checkpoint-interval", "2", "--quiet", "--out", str(out)]


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DELAYBOUND_", "TORCHELASTIC_")) and k not in (
               "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK",
               "LOCAL_WORLD_SIZE")}
    env["DELAYBOUND_PIPE_THREADS"] = "1"
    return env


def test_torchrun_restart_with_resume_auto_is_bitwise(tmp_path, monkeypatch):
    corpus = small_corpus(tmp_path)
    out = tmp_path / "restarted"
    env = {**_clean_env(), "DELAYBOUND_PIPE_FAULT": f"stage=1,step={KILL_AFTER},kind=die"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
           "--nproc-per-node", "2", "--max-restarts", "1", "-m", "delaybound",
           *_args(corpus, out), "--resume", "auto"]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=TORCHRUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-4000:]
    # the fault really fired and the agent really restarted the ranks from checkpoint 2
    injected = json.loads((out / "logs" / "fault_injected.json").read_text())
    assert (injected["stage"], injected["step"]) == (1, KILL_AFTER)
    assert read_json(out / "config.json")["meta"]["resumed_from_step"] == 2
    assert read_json(out / "summary.json")["status"] == "completed"
    assert latest_complete(RunPaths(out))[0] == STEPS

    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    monkeypatch.delenv("DELAYBOUND_PIPE_FAULT", raising=False)
    straight = tmp_path / "straight"
    assert main(_args(corpus, straight)) == 0
    rows = read_metrics(out)
    assert len(rows) == STEPS + 1 and rows == read_metrics(straight)      # every metric, bitwise
    assert read_json(out / "summary.json")["final_val_loss"] == \
        read_json(straight / "summary.json")["final_val_loss"]
