"""The data-parallel dimension: averaging a stage's gradients over its D replicas, gathering
the microbatch losses, reducing the replica-local statistics.

Algorithm (stage s, replicas d = 0..D-1, M microbatches each; the global batch of B sequences
is cut into D*M microbatches, replica d holding ``k = d*M .. d*M + M - 1``; each replica runs
``(loss_k / M).backward()``, so its accumulated gradient is ``S_d = sum_j g_{dM+j} / M``)::

    allreduce (default):  G = (S_0 + S_1 + ... + S_{D-1}) / D     all-reduces per bucket,
                          launched during the backward (pipeline.grad_buckets)
    ordered:              G = (((g_0 / DM) + g_1 / DM) + ...) + g_{DM-1} / DM
                          every replica gathers the D*M microbatch gradients and adds them in
                          microbatch order, exactly as the single process does

Both are ``grad f`` of the global batch, the emulator's ``sum_k (loss_k / (DM)).backward()``.
``ordered`` reproduces the emulator's floating-point sum (bitwise, for D a power of two: then
``(g / M) / D`` is ``g / (DM)`` exactly) at the price of holding M microbatch gradients and
gathering D*M of them; it is the verification mode (``DELAYBOUND_DP_REDUCE=ordered``).
``allreduce`` adds the same terms grouped by replica: equal up to float32 rounding
(``tests/llm_validation/pipeline/test_data_parallel.py`` names the tolerance and its reason).
Either way all replicas hold the same bits afterwards (an all-reduce hands every rank the
same sum), so weights and optimizer states of the replicas never drift apart; checkpoints
check a checksum of that (:meth:`Replicas.check_identical`).

Statistics: everything computed from G, the weights and the updates is the same on every
replica; only the loss (microbatch losses, gathered in microbatch order and averaged as the
emulator does) and the microbatch-gradient variance are replica-local. The variance over the
D*M microbatches combines the replicas' sums of squares with Chan et al.'s parallel rule,
``SS = sum_d [SS_d + M ||S_d - G||^2]``, summed over replicas before any square root
(``ordered`` instead replays the emulator's own accumulation over all D*M microbatches).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from llm_validation.pipeline.grad_buckets import GradBuckets, bucket_bytes, finish_mean, launch_sum
from llm_validation.pipeline.mesh import Mesh
from llm_validation.pipeline.watchdog import published_wait
from llm_validation.training import stats

__all__ = ["Replicas", "REDUCTIONS", "dp_reduction", "pop_grads", "bit_checksum", "backward_order"]

#: Gradient averaging modes (module docstring).
REDUCTIONS = ("allreduce", "ordered")


def _collective(what: str) -> Callable:
    """Method decorator: while the collective runs, the rank's status publishes a wait on the
    other replicas (``Replicas.status``), so the watchdog diagnoses a hung replica as it does
    a hung pipeline neighbour (re-entrant: nested collectives restore the outer wait)."""
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def run(self: "Replicas", *args: Any, **kw: Any) -> Any:
            with published_wait(self.status if self.D > 1 else None, self.peers,
                                f"the other replicas of this stage ({what})"):
                return fn(self, *args, **kw)
        return run
    return wrap


def dp_reduction() -> str:
    """The mode from ``DELAYBOUND_DP_REDUCE`` (default ``allreduce``); bad values raise."""
    mode = os.environ.get("DELAYBOUND_DP_REDUCE", "allreduce") or "allreduce"
    if mode not in REDUCTIONS:
        raise ValueError(f"DELAYBOUND_DP_REDUCE={mode!r} is not one of {list(REDUCTIONS)}")
    return mode


def pop_grads(tensors: Sequence[Tensor]) -> list[Tensor]:
    """Take each tensor's ``.grad`` (zeros if None) and reset it to None: one microbatch's own
    gradient when called after every backward (``ordered`` mode)."""
    out = []
    for t in tensors:
        out.append(t.grad if t.grad is not None else torch.zeros_like(t))
        t.grad = None
    return out


def bit_checksum(tensors: Sequence[Tensor]) -> int:
    """Sum of the tensors' bit patterns as integers (exact): equal states give equal sums, and
    one element differing in any bit changes it."""
    total = 0
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    for t in tensors:
        flat = t.detach().contiguous().reshape(-1)
        total += int(flat.view(ints[flat.element_size()]).sum(dtype=torch.int64))
    return total


def _flat(tensors: Sequence[Tensor]) -> Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def backward_order(names: Sequence[str], module_names: Sequence[str]) -> list[int]:
    """Indices of ``names`` in the order a backward pass finishes their gradients: the module's
    registration order (``module_names``, input side first) reversed."""
    rank = {n: k for k, n in enumerate(module_names)}
    return sorted(range(len(names)), key=lambda i: -rank[names[i]])


class Replicas:
    """The D replicas of this rank's stage (see the module docstring). With D = 1 every method
    is the identity and no collective is issued."""

    def __init__(self, mesh: Mesh, mode: str = "allreduce") -> None:
        if mode not in REDUCTIONS:
            raise ValueError(f"data-parallel reduction {mode!r} is not one of {list(REDUCTIONS)}")
        self.D, self.d, self.mode = mesh.replicas, mesh.replica, mode
        self.group, self.control = mesh.dp_group, mesh.dp_control
        self.peers = [r for r in mesh.dp_ranks if r != mesh.rank]
        self.status: dict | None = None   # the rank's published status (set by the runtime)

    @property
    def ordered(self) -> bool:
        """True when per-microbatch gradients must be captured (``ordered`` and D > 1)."""
        return self.D > 1 and self.mode == "ordered"

    # --------------------------------------------------------------------------- gradients
    def buckets(self, tensors: Sequence[Tensor], order: Sequence[int]) -> GradBuckets | None:
        """The overlapped all-reduce of ``tensors``' gradients (``order``: their backward
        order), or None where there is none: D = 1, ``ordered``, or a capacity of 0
        (``DELAYBOUND_DP_BUCKET_BYTES=0``: :meth:`reduce` after the backward)."""
        cap = bucket_bytes()
        if self.D == 1 or self.mode != "allreduce" or cap == 0:
            return None
        return GradBuckets(tensors, order, self.group, self.D, cap)

    @torch.no_grad()
    @_collective('gradient all-reduce')
    def reduce(self, grads: Sequence[Tensor]) -> list[Tensor]:
        """``allreduce`` after the backward: the replicas' average of each of this replica's
        gradients ``S_d`` (one all-reduce of the concatenated gradients; views of its buffer);
        ``grads`` themselves are left as they are."""
        if self.D == 1:
            return list(grads)
        flat, work = launch_sum(grads, self.group)
        return finish_mean(flat, work, self.D, grads)

    @torch.no_grad()
    @_collective('gradient gather')
    def fold(self, captured: list[list[Tensor]], like: Sequence[Tensor],
             noise: stats.MicrobatchGradVariance | None = None) -> list[Tensor]:
        """``ordered``: the average gradient from every replica's microbatch gradients
        (``captured``: this replica's, one list per microbatch, ``like`` order), added in the
        global microbatch order; ``noise`` (over ``like``, D*M microbatches) observes each
        partial sum as the emulator's does. ``captured`` is emptied."""
        M = len(captured)
        mine = torch.stack([_flat(g) for g in captured])                     # [M, n]
        every = torch.empty((self.D * M, mine.shape[1]), dtype=mine.dtype, device=mine.device)
        dist.all_gather_into_tensor(every, mine, group=self.group)   # [D*M, n], row k = d*M + j
        captured.clear()
        sizes = [t.numel() for t in like]
        acc: list[Tensor] = []
        for k in range(self.D * M):          # microbatch order of the global batch
            parts = every[k].split(sizes)
            for i, (t, x) in enumerate(zip(like, parts)):
                x = x.view_as(t) / self.D                                    # g_k / (DM)
                if k == 0:
                    acc.append(x)
                else:
                    acc[i].add_(x)
            if noise is not None:
                for t, a in zip(like, acc):
                    t.grad = a
                noise.observe()
        return acc

    @_collective('gradient average')
    def average(self, tensors: Sequence[Tensor], M: int, *,
                captured: list[list[Tensor]] | None = None,
                noise: stats.MicrobatchGradVariance | None = None, want_noise: bool = False,
                buckets: GradBuckets | None = None) -> stats.MicrobatchGradVariance | None:
        """Set ``tensors[i].grad`` to the replicas' average gradient of the global batch and
        return the microbatch-variance accumulator of the step (None if not ``want_noise``).

        ``allreduce``: the grads hold this replica's ``S_d``; ``noise`` (this replica's, over M
        microbatches) gets the replicas' combined sum of squares. ``ordered``: ``captured``
        holds this replica's M microbatch gradients (``pop_grads`` after each backward); the
        accumulator is a replay over all D*M microbatches."""
        if self.D == 1:
            return noise
        if self.mode == "ordered":
            if captured is None or len(captured) != M:
                raise RuntimeError(f"ordered data-parallel reduction needs this replica's {M} "
                                   f"microbatch gradients, got {len(captured or [])}")
            replay = stats.MicrobatchGradVariance(list(tensors), self.D * M) if want_noise else None
            grads = self.fold(captured, tensors, replay)
            for t, g in zip(tensors, grads):
                t.grad = g
            return replay
        for t in tensors:
            if t.grad is None:
                t.grad = torch.zeros_like(t)
        local = [t.grad for t in tensors]                       # S_d, left untouched
        grads = buckets.finish() if buckets is not None else self.reduce(local)
        if noise is not None:
            spread = sum(torch.linalg.vector_norm(a - g, dtype=torch.float64).square()
                         for a, g in zip(local, grads))
            noise.ss = self.sum(noise.ss + M * spread)
        for t, g in zip(tensors, grads):
            t.grad = g
        return noise

    # ---------------------------------------------------------------------- losses, scalars
    @_collective('loss gather')
    def gather_losses(self, local: Sequence[Tensor], per_batch: int | None = None) -> list[Tensor]:
        """All replicas' microbatch losses in the global microbatch order: batch by batch
        (``per_batch`` of this replica's losses per batch; default all of them), replica by
        replica. Gathered on the device (data-parallel group: no host read); float32 bits are
        kept, so ``batch_loss`` of the result is the emulator's."""
        if self.D == 1:
            return list(local)
        mine = torch.stack([x.detach().float() for x in local])                  # [n]
        every = torch.empty(self.D * mine.numel(), dtype=mine.dtype, device=mine.device)
        dist.all_gather_into_tensor(every, mine, group=self.group)    # [D*n], k = d*n + j
        every = every.view(self.D, -1)
        per = len(local) if per_batch is None else per_batch
        out = []
        for start in range(0, len(local), per):
            for d in range(self.D):
                out.extend(every[d, start:start + per].unbind())
        return out

    @_collective('sum')
    def sum(self, x: float | Tensor) -> float | Tensor:
        """Sum of a float64 scalar over the replicas: a device tensor is reduced on the
        device (data-parallel group, no host read), a float on the control group."""
        if self.D == 1:
            return x
        if isinstance(x, Tensor):
            t = x.detach().double().reshape(1).clone()
            dist.all_reduce(t, group=self.group)
            return t[0]
        t = torch.tensor([x], dtype=torch.float64)
        dist.all_reduce(t, group=self.control)
        return float(t)

    @_collective('checksum')
    def check_identical(self, tensors: Sequence[Tensor], what: str) -> None:
        """Raise unless every replica holds the same bits (checksum of ``tensors``)."""
        if self.D == 1:
            return
        mine = torch.tensor([bit_checksum(tensors)], dtype=torch.int64)
        every = [torch.empty_like(mine) for _ in range(self.D)]
        dist.all_gather(every, mine, group=self.control)
        if len({int(e) for e in every}) != 1:
            raise RuntimeError(f"the data-parallel replicas hold different {what} (checksums "
                               f"{[int(e) for e in every]}); their gradients were not averaged "
                               "identically")
