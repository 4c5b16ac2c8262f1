"""The compiled training step (``RunConfig.compile``): what compiles, and how close it stays.

:func:`forward_of` returns the callable the training loop runs its forward passes through:
the model itself (eager), or ``torch.compile(model)`` (TorchDynamo + Inductor, the default
backend, on CPU and on CUDA). The compiled module shares the model's parameters, so the
delay's weight swaps (``DelayedOptimizer.delayed_weights``, the statistics' ``weights_as``)
act on it unchanged: they replace the parameters' data, which the compiled graph reads as
inputs, and no guard depends on it (no recompilation after the first steps).

What compiles (``run.compile = True``):

- the emulated single-process loop (:mod:`llm_validation.training.loop`): every forward and
  its backward, i.e. the training microbatches, the statistics' extra gradients (fresh,
  previous-point and large-batch, all in microbatches of the training shape) and the
  evaluations (no-grad: a second graph);
- every optimizer, delay, Error Feedback and correction setting, float32 or bfloat16 autocast.

What stays eager: the optimizer step and the delay's bookkeeping (torch.optim's own foreach
kernels), the statistics' partial sums, and every runtime other than that loop: the real
pipelines (2BW, GPipe, 1F1B) and the data-parallel emulation refuse ``compile`` (their
equality tests against the emulator compare eager runs bitwise), as does
:class:`llm_validation.recorder.StatsRecorder` (a user's loop compiles its own model).

Numbers: the same seed on the same machine repeats a compiled run bitwise on one torch thread
(how a ledger runs its jobs; Inductor's kernels are fixed once generated). With more CPU
threads it does not: two compiled runs on 2 threads were measured to part at step 6 to 12 of a
40-step run by ~1e-7 relative (eager runs stay bitwise at any thread count), so a compiled run
that must repeat bitwise runs on one thread per process. Against the eager run the
arithmetic is reassociated (fused kernels, other reduction orders), so the trajectories
drift apart by rounding: the tests bound the final loss's relative difference by
:data:`COMPILED_FINAL_LOSS_RTOL` and the sync/2BW gap's difference by the gap's seed noise.
"""

from __future__ import annotations

from typing import Callable

import torch

__all__ = ["COMPILED_FINAL_LOSS_RTOL", "forward_of"]

#: Relative difference allowed between the final validation loss of a compiled run and the
#: eager run of the same config and seed on CPU (tests/llm_validation/training/
#: test_compiled.py: 40 steps of n46k, one thread, where the two were measured bitwise equal;
#: benchmarks/bench_compile.py reports the difference of its longer runs). Fused kernels may
#: reassociate sums (~1e-7 per kernel) and the trajectories then drift apart by rounding, which
#: stays orders of magnitude below the final loss's seed-to-seed spread (~1e-2 relative).
COMPILED_FINAL_LOSS_RTOL = 1e-3


def forward_of(model: torch.nn.Module, compile: bool) -> Callable[..., torch.Tensor]:
    """The model's forward as the loop calls it: ``model`` itself, or ``torch.compile(model)``
    (sharing its parameters; the checkpoint is still written from ``model``)."""
    return torch.compile(model) if compile else model
