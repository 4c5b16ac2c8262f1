"""Devices, backends and host staging: the rules as functions, and the staging path forced on
CPU (real host copies of every activation and gradient) giving the same run bitwise."""

from __future__ import annotations

import pytest
import torch

from llm_validation.pipeline import devices
from llm_validation.pipeline.comm import StageLink
from llm_validation.run import run as launch
from tests.llm_validation.pipeline.support import (assert_same_run, assert_staged_bytes, emulate,
                                                   pipe_cfg, small_corpus)


@pytest.fixture(autouse=True)
def _no_staging_override(pipeline_env, monkeypatch):
    monkeypatch.delenv(devices.STAGING_ENV, raising=False)


def test_ranks_sharing_a_gpu_run_over_gloo_with_staging(monkeypatch):
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert devices.pipeline_backend(cuda, 2) == "gloo"          # two stages, one H100
    assert devices.pipeline_backend(cuda, 1) == "nccl"
    assert devices.pipeline_backend(cpu, 2) == "gloo"
    assert [devices.rank_device(cuda, r) for r in range(3)] == [torch.device("cuda", 0)] * 3
    assert devices.host_staging("gloo", cuda) and not devices.host_staging("nccl", cuda)
    assert not devices.host_staging("gloo", cpu)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert devices.pipeline_backend(cuda, 4) == "nccl"
    assert [devices.rank_device(cuda, r).index for r in range(4)] == [0, 1, 2, 3]
    monkeypatch.setenv(devices.STAGING_ENV, "1")
    assert devices.host_staging("gloo", cpu)
    monkeypatch.setenv(devices.STAGING_ENV, "yes")
    with pytest.raises(ValueError, match=devices.STAGING_ENV):
        devices.host_staging("gloo", cpu)


def test_gloo_across_nodes_is_refused_unless_asked_for(monkeypatch):
    """Guards issue 31, point 4: CUDA ranks that would share GPUs in a multi-node run (a
    cluster job seeing fewer GPUs than ranks per node) are refused with one line, unless
    ``DELAYBOUND_PIPE_ALLOW_GLOO=1``; on one machine the fallback stays (one H100, P = 2)."""
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.delenv(devices.ALLOW_GLOO_ENV, raising=False)
    with pytest.raises(ValueError, match=devices.ALLOW_GLOO_ENV) as info:
        devices.pipeline_backend(cuda, 4, across_nodes=True)
    assert "\n" not in str(info.value)
    assert devices.pipeline_backend(cuda, 4) == "gloo"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert devices.pipeline_backend(cuda, 4, across_nodes=True) == "nccl"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv(devices.ALLOW_GLOO_ENV, "1")
    assert devices.pipeline_backend(cuda, 4, across_nodes=True) == "gloo"


def test_staging_copies_into_fresh_host_buffers():
    link = StageLink(stage=0, stages=2, device=torch.device("cpu"), act_shape=(2, 3),
                     act_dtype=torch.bfloat16, timeout_s=1.0, staging=True)
    h = torch.randn(2, 3).to(torch.bfloat16)
    host = link._stage(h)
    assert host.device.type == "cpu" and host.dtype == torch.bfloat16
    assert torch.equal(host, h) and host.data_ptr() != h.data_ptr()
    back = link._unstage(host)
    assert torch.equal(back, h) and back.data_ptr() != host.data_ptr()
    assert link.staged == {"tensors": 2, "bytes": 2 * 6 * 2}
    assert link.host_waits                    # host tensors: bounded waits on the host


def test_forced_host_staging_gives_the_same_run(tmp_path, monkeypatch):
    """2BW under bf16 autocast with every activation / gradient staged through host copies."""
    monkeypatch.setenv(devices.STAGING_ENV, "1")
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, M=2, steps=4,
                   dtype="bfloat16")
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", M=2, steps=4,
                           dtype="bfloat16"))
    got = launch(cfg)
    assert_same_run(got.run_dir, ref.run_dir, cfg)
    # float32 boundaries (the default): 4 bytes per value (bf16 ones: test_twobw.py)
    assert_staged_bytes(got.run_dir, cfg, 4)


@pytest.mark.parametrize("pipeline", ["1f1b", "gpipe"])
def test_torch_schedules_behind_host_io_give_the_same_run(tmp_path, monkeypatch, pipeline):
    """Torch's 1F1B / GPipe with host staging: the stage lives on the host and ``_HostIO``
    runs the module on the compute device (on a GPU, gloo's send of a CUDA tensor failed with
    "Bad address"; the copies there are checked by ``test_gpu.py``). Forced on CPU the wrapper
    is in the path and the run is the emulator's bitwise, under bf16 autocast."""
    monkeypatch.setenv(devices.STAGING_ENV, "1")
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline=pipeline, P=2, M=2, steps=4,
                   dtype="bfloat16")
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-sync", M=2, steps=4,
                           dtype="bfloat16"))
    got = launch(cfg)
    assert_same_run(got.run_dir, ref.run_dir, cfg)
    logs = "".join(p.read_text() for p in (tmp_path / "pipe" / "logs").glob("stage*.log"))
    assert logs.count("host I/O") == 2, logs          # both stages ran behind the wrapper
