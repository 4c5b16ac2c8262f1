"""The GPU code path: ``--device cuda`` with NCCL, one GPU per rank, bf16 autocast over float32
master weights; and on ONE GPU, the emulated delay on CUDA against the same run on CPU, and
pipeline ranks sharing the GPU (gloo with host staging) against the CUDA emulator. The same
runtime as on CPU (only the backend and the device differ); these tests need CUDA devices and
are skipped, with the reason, everywhere else.

What ran where is in docs/pipeline.md ("What ran on a GPU"): the one-GPU tests ran on an H200;
the tests needing two or four GPUs have not run (the lent machine had one).
"""

from __future__ import annotations

import pytest
import torch

from llm_validation.run import run as launch
from tests.llm_validation.pipeline.support import (assert_staged_bytes, dp_cfgs, emulate,
                                                   loss_gaps, pipe_cfg, pipeline_weights,
                                                   small_corpus)

pytestmark = pytest.mark.gpu

#: bf16 autocast rounds every matmul input to 8 significant bits (relative 2^-9 = 2e-3 per
#: rounding); a pipeline on several GPUs runs the same kernels on the same shapes as the
#: single-GPU emulator, but cuBLAS/SDPA may pick other algorithms per device, and the
#: differences then grow over the steps. 2e-2 on the losses of a 6-step run is a "same
#: computation" check, not a bitwise one.
GPU_BF16_RTOL = 2e-2
#: float32 on CUDA multiplies in TF32 (``training/determinism.py``): inputs rounded to 10
#: mantissa bits (relative 2^-11 = 5e-4 per rounding) where the CPU keeps 23; over a 6-step
#: run the losses stay within 10x one rounding.
GPU_TF32_RTOL = 5e-3


def _gpus(n: int):
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return pytest.mark.skipif(have < n, reason=f"needs {n} CUDA device{'s' if n > 1 else ''}"
                                               f" (one per rank), {have} visible")


def _on(cfg, device: str = "cuda", dtype: str = "bfloat16", **run):
    """``cfg`` on ``device`` in ``dtype`` (and any other ``RunConfig`` fields, e.g. out_dir)."""
    import dataclasses

    return cfg.replace(run=dataclasses.replace(cfg.run, device=device, dtype=dtype, **run))


def _check(tmp_path, pipeline: str, P: int, D: int, **kw) -> None:
    corpus = small_corpus(tmp_path)
    cfg, ref_cfg = dp_cfgs(tmp_path, corpus, pipeline=pipeline, P=P, D=D, **kw)
    cfg, ref_cfg = _on(cfg), _on(ref_cfg)
    ref = emulate(ref_cfg)
    got = launch(cfg)
    assert got.status == "completed"
    gaps = loss_gaps(got.run_dir, ref.run_dir, ("loss", "val_loss"))
    assert max(gaps.values()) <= GPU_BF16_RTOL, gaps
    masters = pipeline_weights(cfg, got.run_dir)
    assert all(w.dtype == torch.float32 for w in masters.values())   # fp32 masters


@_gpus(2)
def test_2bw_on_two_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    _check(tmp_path, "2bw", P=2, D=1)


@_gpus(2)
def test_1f1b_on_two_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    _check(tmp_path, "1f1b", P=2, D=1)


@_gpus(2)
def test_data_parallel_emulation_on_two_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    _check(tmp_path, "none", P=1, D=2, tau=1, lam=1.0)


@_gpus(4)
def test_2bw_pipeline_x_data_parallel_on_four_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    _check(tmp_path, "2bw", P=2, D=2)


# ---------------------------------------------------------------------- one GPU
@_gpus(1)
@pytest.mark.parametrize("dtype,rtol", [("bfloat16", GPU_BF16_RTOL), ("float32", GPU_TF32_RTOL)])
def test_emulated_delay_with_ef_on_cuda_matches_cpu(tmp_path, dtype, rtol):
    """The exact delay emulation (2BW + update-level EF) on CUDA: the same run as on CPU up to
    the device's arithmetic (bf16 autocast on both; TF32 against float32)."""
    cfg = pipe_cfg(tmp_path / "x", small_corpus(tmp_path), pipeline="emulate-2bw", M=2,
                   steps=6, lam=1.0)
    gpu = emulate(_on(cfg, "cuda", dtype, out_dir=str(tmp_path / "gpu")))
    cpu = emulate(_on(cfg, "cpu", dtype, out_dir=str(tmp_path / "cpu")))
    assert gpu.status == cpu.status == "completed"
    gaps = loss_gaps(gpu.run_dir, cpu.run_dir)
    print(f"cuda vs cpu ({dtype}):", gaps)
    assert max(gaps["loss"], gaps["val_loss"]) <= rtol, gaps


@_gpus(1)
@pytest.mark.parametrize("pipeline,reference", [("2bw", "emulate-2bw"), ("1f1b", "emulate-sync")])
def test_ranks_sharing_one_gpu_match_the_cuda_emulator(tmp_path, monkeypatch, pipeline, reference):
    """P = 2 on one GPU: gloo with every activation and gradient staged through the host
    (``pipeline/devices.py``), bf16 autocast, float32 masters; against the emulator on the same
    GPU. Staged bytes are counted (4 per value: float32 boundaries)."""
    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline=pipeline, P=2, M=2, steps=6,
                   device="cuda", dtype="bfloat16")
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline=reference, M=2, steps=6,
                           device="cuda", dtype="bfloat16"))
    got = launch(cfg)
    assert got.status == ref.status == "completed"
    gaps = loss_gaps(got.run_dir, ref.run_dir, ("loss", "val_loss"))
    print(f"{pipeline} on one GPU vs the CUDA emulator:", gaps)
    assert max(gaps.values()) <= GPU_BF16_RTOL, gaps
    assert all(w.dtype == torch.float32 for w in pipeline_weights(cfg, got.run_dir).values())
    if pipeline == "2bw":                  # our executor counts what it stages
        assert_staged_bytes(got.run_dir, cfg, 4)


@_gpus(1)
def test_compute_dtype_boundaries_on_one_gpu(tmp_path, monkeypatch):
    """``--boundary-dtype compute`` on CUDA: the P = 2 pipeline sends bf16 (2 bytes per
    staged value) and matches the CUDA emulator rounding at the same split."""
    import dataclasses

    from tests.llm_validation.helpers import MICRO

    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    corpus = small_corpus(tmp_path)
    compute = dataclasses.replace(MICRO, boundary_dtype="compute", boundary_stages=2)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline="2bw", P=2, M=2, steps=6,
                   device="cuda", dtype="bfloat16").replace(model=compute)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline="emulate-2bw", M=2, steps=6,
                           device="cuda", dtype="bfloat16").replace(model=compute))
    got = launch(cfg)
    gaps = loss_gaps(got.run_dir, ref.run_dir, ("loss", "val_loss"))
    print("bf16 boundaries on one GPU vs the CUDA emulator:", gaps)
    assert max(gaps.values()) <= GPU_BF16_RTOL, gaps
    assert_staged_bytes(got.run_dir, cfg, 2)


@_gpus(1)
def test_deterministic_cuda_runs_repeat_bitwise(tmp_path):
    """``--deterministic`` on CUDA: the same config twice gives the same metrics bitwise
    (losses, and every statistic), as CPU runs do without the flag."""
    from llm_validation.rundir import read_metrics

    cfg = pipe_cfg(tmp_path / "x", small_corpus(tmp_path), pipeline="emulate-2bw", M=2,
                   steps=6, lam=1.0)
    a = emulate(_on(cfg, out_dir=str(tmp_path / "a"), deterministic=True))
    b = emulate(_on(cfg, out_dir=str(tmp_path / "b"), deterministic=True))
    assert read_metrics(a.run_dir) == read_metrics(b.run_dir)


@_gpus(1)
@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.device_count() >= 4,
                    reason="four GPUs: the NCCL test above runs P = 2 x D = 2 instead")
@pytest.mark.parametrize("pipeline", ["2bw", "1f1b"])
def test_pipeline_x_data_parallel_sharing_gpus(tmp_path, monkeypatch, pipeline):
    """P = 2 x D = 2: four ranks on fewer GPUs (gloo, host staging; the data-parallel
    all-reduces on gloo with CUDA gradients) against the single-GPU emulated run."""
    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    _check(tmp_path, pipeline, P=2, D=2)
