"""The torch numerics settings of a run: TF32 matmuls on CUDA, and deterministic algorithms.

Called once per process by every runtime (the emulated loop, each pipeline stage) before the
model is built, so the emulator and a pipeline run under the same settings:

- CUDA, float32 runs: TF32 tensor cores for float32 matmuls and convolutions
  (``torch.backends.cuda.matmul.allow_tf32``, ``cudnn.allow_tf32``; the Ampere/Hopper
  default of every large-scale trainer). TF32 is deterministic; it changes float32 results
  in the last ~10 bits, which no CPU test sees.
- ``RunConfig.deterministic``: ``torch.use_deterministic_algorithms(True)`` (an error for an
  op without a deterministic kernel rather than silent non-determinism) and
  ``CUBLAS_WORKSPACE_CONFIG=:4096:8``, which cuBLAS needs for reproducible results; set before
  the first cuBLAS call of the process. On CPU every op used here is already deterministic: the
  emulator and the pipeline are bitwise equal there with or without it.
"""

from __future__ import annotations

import os

import torch

__all__ = ["CUBLAS_WORKSPACE", "configure_numerics"]

#: cuBLAS's documented workspace setting for deterministic results.
CUBLAS_WORKSPACE = ":4096:8"


def configure_numerics(device: torch.device, deterministic: bool) -> dict[str, object]:
    """Apply the settings (module docstring) for a run on ``device``; returns what was set
    (written to the run's config.json meta)."""
    done: dict[str, object] = {"deterministic": bool(deterministic)}
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
        torch.use_deterministic_algorithms(True)
        done["cublas_workspace"] = os.environ["CUBLAS_WORKSPACE_CONFIG"]
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        done["tf32"] = True
    return done
