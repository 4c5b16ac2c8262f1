"""Which device each rank computes on, which backend carries its messages, and whether its
activations cross through host memory.

Rules (one machine, ``ranks`` processes on it; several machines apply them per node):

- CPU: gloo, host tensors, bounded host waits.
- one GPU per rank (``torch.cuda.device_count() >= ranks``): NCCL, rank ``r`` on ``cuda:r``
  (local rank), activations and gradients device to device.
- ranks sharing GPUs (fewer GPUs than ranks, e.g. a 2-stage pipeline on one H100): NCCL cannot
  put two ranks of one communicator on one device, so the pipeline runs over gloo and every
  activation / gradient is staged through the host: the sender copies it into a fresh host
  buffer, gloo carries that, the receiver copies it onto its device
  (:class:`llm_validation.pipeline.comm.StageLink` with ``staging=True``). Rank ``r`` computes
  on ``cuda:(r mod count)``. Speed is not the point: the 2BW executor's CUDA path (bf16
  autocast, CUDA weights, CUDA optimizer state) runs on one GPU.

Across nodes (torchrun with WORLD_SIZE > LOCAL_WORLD_SIZE) that gloo fallback is refused
unless ``DELAYBOUND_PIPE_ALLOW_GLOO=1``. ``DELAYBOUND_PIPE_STAGING=1`` forces the staging path on CPU (tests: the copies are real, the
numbers must not change).
"""

from __future__ import annotations

import os

import torch

__all__ = ["STAGING_ENV", "ALLOW_GLOO_ENV", "pipeline_backend", "rank_device", "host_staging"]

#: Allows CUDA ranks sharing GPUs over gloo in a run across nodes (refused otherwise).
ALLOW_GLOO_ENV = "DELAYBOUND_PIPE_ALLOW_GLOO"
#: Forces host staging of the pipeline's tensors (tests on CPU).
STAGING_ENV = "DELAYBOUND_PIPE_STAGING"


def pipeline_backend(device: torch.device, ranks_here: int, across_nodes: bool = False) -> str:
    """``nccl`` when every rank on this machine has its own GPU, else ``gloo``. CUDA ranks
    sharing GPUs in a run across nodes (``across_nodes``) are refused with one line unless
    ``DELAYBOUND_PIPE_ALLOW_GLOO=1``: host-staged gloo between nodes is a misconfigured
    cluster job (fewer GPUs visible than ranks per node), not a way to train."""
    if device.type != "cuda":
        return "gloo"
    count = torch.cuda.device_count()
    if count >= ranks_here:
        return "nccl"
    if across_nodes and os.environ.get(ALLOW_GLOO_ENV, "") != "1":
        raise ValueError(f"{ranks_here} ranks per node but {count} GPUs visible: a multi-node "
                         "CUDA run would fall back to gloo with host staging; give each rank "
                         f"its own GPU, or set {ALLOW_GLOO_ENV}=1 to run that way anyway")
    return "gloo"


def rank_device(device: torch.device, local_rank: int) -> torch.device:
    """The device of the rank with ``local_rank`` on this machine: CPU, or
    ``cuda:(local_rank mod count)`` (ranks share GPUs round-robin when there are fewer)."""
    if device.type != "cuda":
        return device
    return torch.device("cuda", local_rank % max(1, torch.cuda.device_count()))


def host_staging(backend: str, device: torch.device) -> bool:
    """Stage activations through the host: CUDA compute over gloo, or forced by
    ``DELAYBOUND_PIPE_STAGING=1``."""
    forced = os.environ.get(STAGING_ENV, "")
    if forced not in ("", "0", "1"):
        raise ValueError(f"{STAGING_ENV}={forced!r} must be 0 or 1")
    return forced == "1" or (device.type == "cuda" and backend == "gloo")
