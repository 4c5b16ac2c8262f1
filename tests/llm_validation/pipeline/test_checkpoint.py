"""Pipeline DCP checkpoints: a damaged newest checkpoint falls back to the newest intact one
(as ``rundir.newest_intact_checkpoint`` does for the emulator), the resumed run is bitwise
the uninterrupted one, and its ``process_s`` counts every invocation."""

from __future__ import annotations

import pytest

from llm_validation.config import OptimConfig
from llm_validation.pipeline.checkpoint import (ckpt_dir, damage, latest_complete, load_global,
                                                newest_intact, stage_dir)
from llm_validation.records.atomic_io import read_json
from llm_validation.rundir import RunPaths, process_seconds, read_metrics
from llm_validation.run import run as launch
from tests.llm_validation.pipeline.support import pipe_cfg, pipeline_weights, small_corpus

#: A constant lr, so that extending a run (steps 4 -> 6) keeps the first steps' schedule.
CONSTANT = OptimConfig(name="muon", lr=0.02, schedule="constant")


pytestmark = pytest.mark.usefixtures("pipeline_env")


def _shard(run_dir, step: int, stage: int):
    files = sorted(stage_dir(RunPaths(run_dir), step, stage).glob("*.distcp"))
    assert files, f"no shard in checkpoint {step} stage {stage}"
    return files[0]


def _truncate(path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garble_blob(path) -> None:
    """Overwrite replica 0's pickled state blob inside its shard with zeros of the same
    length (located by the DCP metadata): no size check can see it."""
    from torch.distributed.checkpoint import FileSystemReader

    storage = FileSystemReader(path.parent).read_metadata().storage_data
    (info,) = [v for k, v in storage.items() if k.fqn == "meta/replica0"]
    assert info.relative_path == path.name
    data = bytearray(path.read_bytes())
    data[info.offset:info.offset + info.length] = bytes(info.length)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("spoil", [_truncate, _garble_blob, "metadata"])
def test_a_damaged_newest_checkpoint_falls_back_and_resumes_bitwise(tmp_path, capsys, spoil):
    corpus = small_corpus(tmp_path)
    kw = dict(pipeline="2bw", P=2, M=2, optim=CONSTANT, checkpoint_interval=2)
    straight = launch(pipe_cfg(tmp_path / "straight", corpus, steps=6, **kw))
    out = tmp_path / "resumed"
    launch(pipe_cfg(out, corpus, steps=4, **kw))          # complete checkpoints 2 and 4
    paths = RunPaths(out)
    assert latest_complete(paths)[0] == 4 and damage(ckpt_dir(paths, 4)) is None
    if spoil == "metadata":
        (stage_dir(paths, 4, 1) / ".metadata").write_bytes(b"not a pickle")
    else:
        spoil(_shard(out, 4, 1))
    what = damage(ckpt_dir(paths, 4))
    assert what is not None and what.startswith("stage 1"), what
    capsys.readouterr()
    assert newest_intact(paths)[0] == 2
    assert "checkpoint" in capsys.readouterr().err   # the one warning line names it
    cfg = pipe_cfg(out, corpus, steps=6, resume=True, **kw)
    got = launch(cfg)
    assert got.status == "completed" and got.steps == 6
    assert read_metrics(out) == read_metrics(straight.run_dir)
    a, b = pipeline_weights(cfg, str(out)), pipeline_weights(cfg, straight.run_dir)
    assert all(a[n].equal(b[n]) for n in b)
    assert damage(ckpt_dir(paths, 6)) is None and damage(ckpt_dir(paths, 4)) is None


def test_no_intact_checkpoint_left_is_no_checkpoint(tmp_path):
    corpus = small_corpus(tmp_path)
    out = tmp_path / "run"
    launch(pipe_cfg(out, corpus, pipeline="2bw", P=2, M=2, steps=2, checkpoint_interval=0))
    _truncate(_shard(out, 2, 0))
    assert newest_intact(RunPaths(out)) is None
    with pytest.raises(ValueError, match="no checkpoint found"):
        launch(pipe_cfg(out, corpus, pipeline="2bw", P=2, M=2, steps=4, resume=True))


def test_a_resumed_pipeline_run_counts_every_invocation(tmp_path):
    """``process_s`` of a pipeline run continued from a checkpoint is the time its checkpoint
    recorded (stage 0's, of the invocations up to it) plus the resumed invocation's wall time;
    a run trained in one invocation records its wall time."""
    import torch

    corpus = small_corpus(tmp_path)
    kw = dict(pipeline="2bw", P=2, M=2, optim=CONSTANT, checkpoint_interval=2)
    out = tmp_path / "resumed"
    first = launch(pipe_cfg(out, corpus, steps=4, **kw))
    assert first.process_s == first.wall_time_s
    _, own = load_global(ckpt_dir(RunPaths(out), 4), [], 0, 0, torch.device("cpu"))
    before = own["process_s"]
    assert 0 < before <= first.wall_time_s
    got = launch(pipe_cfg(out, corpus, steps=6, resume=True, **kw))
    assert got.steps == 6 and got.process_s == before + got.wall_time_s
    assert process_seconds(read_json(RunPaths(out).summary)) == (got.process_s, True)
