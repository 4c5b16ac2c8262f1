"""Gradient buckets: the data-parallel all-reduce overlapped with the backward pass.

Algorithm (one stage, D replicas, the leaves ``w_0 .. w_{n-1}`` whose ``.grad`` accumulates
this replica's ``S_d = sum_j g_j / M`` over its M microbatches)::

    buckets = consecutive runs of the leaves in backward order (module registration order
                reversed: the last layers' gradients are final first), each <= cap bytes
    arm(k)      before the backward(s) that finish the step's gradient: each leaf's gradient
                is final after k more accumulations (2BW: k = 1, armed before the LAST
                microbatch's backward; torch's schedules and the data-parallel emulation:
                k = M, armed before the first)
    hook(w_i)   post-accumulate-grad hook: after w_i's k-th accumulation the leaf is ready;
                when every leaf of bucket b is ready and buckets 0 .. b-1 are launched:
                    flat_b = cat(grads of bucket b)                      # a fresh buffer
                    work_b = all_reduce(flat_b, SUM, async)              # runs during backward
    finish()    before the optimizer step: wait for every work_b, flat_b /= D, and return the
                averaged gradients as views of the flat buffers (no copy back); each leaf's
                ``.grad`` still holds its local S_d (the microbatch-variance statistic needs it)

Assumptions: every replica runs the same graph, so the buckets (planned from shapes) and the
order of launches are the same on every replica; launching strictly in bucket order makes
the collectives' order independent of the order in which autograd finishes the leaves.
Guarantee: each element is ``(S_0 + ... + S_{D-1}) / D`` as in the flat all-reduce of
:meth:`llm_validation.pipeline.replicas.Replicas.reduce` (one sum of the same terms, then one
division): bitwise equal to it for D = 2 (a + b = b + a exactly); for D > 2 the order in which
a ring all-reduce adds an element's D terms depends on the element's offset in the buffer, so
another bucketing can move the last bits, as any change of buffer layout can. Why hooks rather
than ``DistributedDataParallel``: 2BW runs each microbatch with a stashed weight version
(``functional_call`` on detached leaves, one set per version), so the gradients accumulate in
those leaves, never in the stage module's parameters on which DDP would hook; hooks on the
version leaves themselves are what composes with the weight versions.

Reference: Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
Training", VLDB 2020 (gradient bucketing, in-order launch, 25 MiB buckets).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ["BUCKET_BYTES", "BUCKET_ENV", "bucket_bytes", "plan_buckets", "launch_sum",
           "finish_mean", "GradBuckets"]

#: Bucket capacity: torch DDP's default ``bucket_cap_mb = 25``. Large enough that the fixed
#: cost of a collective is amortised over many gradients, small enough that the first bucket
#: (the last layers) is launched early in the backward and the rest overlaps with compute.
BUCKET_BYTES = 25 * 2**20
#: Environment override of the capacity in bytes; ``0`` turns the overlap off (one flat
#: all-reduce after the backward, the reduction before buckets; tests compare the two).
BUCKET_ENV = "DELAYBOUND_DP_BUCKET_BYTES"


def bucket_bytes() -> int:
    """The capacity from ``DELAYBOUND_DP_BUCKET_BYTES`` (default :data:`BUCKET_BYTES`; 0: no
    overlap); a value that is not an integer >= 0 raises ``ValueError`` naming the variable."""
    raw = os.environ.get(BUCKET_ENV, "")
    if raw == "":
        return BUCKET_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{BUCKET_ENV}={raw!r} must be an integer >= 0 (bytes; 0 = no overlap)")
    return value


def plan_buckets(nbytes: Sequence[int], order: Sequence[int], cap: int) -> list[list[int]]:
    """Buckets as lists of leaf indices: the leaves taken in ``order`` (backward order), cut
    into consecutive runs of at most ``cap`` bytes (a leaf larger than ``cap`` alone)."""
    if sorted(order) != list(range(len(nbytes))):
        raise ValueError(f"order {list(order)} is not a permutation of {len(nbytes)} leaves")
    if cap <= 0:
        raise ValueError(f"bucket capacity {cap} must be > 0")
    buckets: list[list[int]] = []
    size = 0
    for i in order:
        if buckets and size + nbytes[i] <= cap:
            buckets[-1].append(i)
            size += nbytes[i]
        else:
            buckets.append([i])
            size = nbytes[i]
    return buckets


def _grad(t: Tensor) -> Tensor:
    return t.grad if t.grad is not None else torch.zeros_like(t)


def launch_sum(grads: Sequence[Tensor], group: Any) -> tuple[Tensor, Any]:
    """(a fresh flat buffer holding ``grads``, the asynchronous SUM all-reduce of it)."""
    flat = torch.cat([g.reshape(-1) for g in grads])
    return flat, dist.all_reduce(flat, group=group, async_op=True)


def finish_mean(flat: Tensor, work: Any, replicas: int, like: Sequence[Tensor]) -> list[Tensor]:
    """Wait for ``work``, divide the sum by the number of replicas in place, and return the
    averages as views of ``flat`` shaped like ``like``."""
    work.wait()
    flat.div_(replicas)
    out, offset = [], 0
    for t in like:
        out.append(flat[offset:offset + t.numel()].view_as(t))
        offset += t.numel()
    return out


class GradBuckets:
    """The buckets of one set of leaves (see the module docstring). ``order``: the leaves'
    backward order (indices into ``tensors``); ``on_launch(b)``: called as bucket ``b`` is
    launched (tests record it)."""

    def __init__(self, tensors: Sequence[Tensor], order: Sequence[int], group: Any,
                 replicas: int, cap: int, on_launch: Callable[[int], None] | None = None
                 ) -> None:
        self.tensors, self.group, self.D, self.on_launch = list(tensors), group, replicas, on_launch
        sizes = [t.numel() * t.element_size() for t in self.tensors]
        self.buckets = plan_buckets(sizes, order, cap)
        self.bucket_of = {i: b for b, idx in enumerate(self.buckets) for i in idx}
        self.armed = False
        self._left: list[int] = []
        self._missing: list[int] = []
        self._next = 0
        self._inflight: list[tuple[Tensor, Any]] = []
        self.handles = [t.register_post_accumulate_grad_hook(self._hook_for(i))
                        for i, t in enumerate(self.tensors)]

    def _hook_for(self, i: int) -> Callable[[Tensor], None]:
        return lambda _t: self._ready(i)

    def arm(self, accumulations: int = 1) -> None:
        """The next ``accumulations`` accumulations of every leaf finish its gradient."""
        if self._inflight:
            raise RuntimeError("GradBuckets.arm: the previous step's buckets were not finished")
        self.armed = True
        self._left = [accumulations] * len(self.tensors)
        self._missing = [len(idx) for idx in self.buckets]
        self._next = 0

    def _ready(self, i: int) -> None:
        if not self.armed:
            return
        self._left[i] -= 1
        if self._left[i] == 0:
            self._missing[self.bucket_of[i]] -= 1
            while self._next < len(self.buckets) and self._missing[self._next] == 0:
                self._launch(self._next)

    def _launch(self, b: int) -> None:
        grads = [_grad(self.tensors[i]) for i in self.buckets[b]]
        self._inflight.append(launch_sum(grads, self.group))
        self._next = b + 1
        if self.on_launch is not None:
            self.on_launch(b)

    @torch.no_grad()
    def finish(self) -> list[Tensor]:
        """The replicas' average gradient of every leaf (``tensors`` order): launches the
        buckets not launched yet (a leaf without a gradient counts as zeros), waits for all."""
        if not self.armed:
            raise RuntimeError("GradBuckets.finish without arm()")
        while self._next < len(self.buckets):
            self._launch(self._next)
        out: list[Tensor | None] = [None] * len(self.tensors)
        for idx, (flat, work) in zip(self.buckets, self._inflight):
            for i, avg in zip(idx, finish_mean(flat, work, self.D,
                                               [self.tensors[i] for i in idx])):
                out[i] = avg
        self._inflight.clear()
        self.armed = False
        return out      # type: ignore[return-value]

    def discard(self) -> None:
        """A stopped step (divergence): wait for what was launched, drop it, disarm."""
        for _, work in self._inflight:
            work.wait()
        self._inflight.clear()
        self.armed = False
