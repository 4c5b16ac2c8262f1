"""Running a stage's action list: forwards, backwards and optimizer steps over the p2p links.

:class:`StageExecutor` executes the actions of :func:`pipeline_schedule.schedule_2bw` for one
stage. The weights of each forward/backward are given per batch (``weights(t) -> {name:
tensor}``) and applied with ``torch.func.functional_call``, so several weight versions can be in
flight at once while the stage module's own parameters stay the optimizer's master copy.
Per microbatch it does exactly what ``train.forward_backward`` does for the whole model:
forward (under the run's autocast), ``lm_loss`` on the last stage, ``(loss / scale).backward()``
with ``scale`` the number of microbatches of the batch, gradients accumulated in microbatch
order. On a stage boundary the received activation is a leaf whose ``.grad`` is sent back.

Side passes (:meth:`StageExecutor.gradient_pass`, :meth:`StageExecutor.forward_pass`) run one
batch through the whole pipeline with given weights, 1F1B with a flush, on their own process
group: the gradient of the statistics at another point and the validation loss.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Sequence

import torch
from torch import Tensor
from torch.func import functional_call

from llm_validation.pipeline.comm import StageLink
from llm_validation.pipeline.profile import ActionTimer
from llm_validation.pipeline.schedule import (
    BACKWARD,
    FORWARD,
    STEP,
    Action,
    schedule_2bw,
)
from llm_validation.pipeline.stage import StageSetup

__all__ = ["StageExecutor", "detached_leaves"]

Weights = dict[str, Tensor]


def detached_leaves(params: dict[str, Tensor]) -> Weights:
    """Leaves sharing storage with ``params`` (no copy) whose ``.grad`` collects a side pass."""
    return {n: p.detach().requires_grad_(True) for n, p in params.items()}


#: Receives posted ahead of their use, per direction: the next activation/gradient can arrive
#: while this stage computes (two cover the 1F1B alternation; more only hold more buffers).
PREFETCH_DEPTH = 2


class _Prefetch:
    """Posts the receives of one direction in the order they will be consumed, ``depth`` ahead
    (messages between two ranks in one direction are matched in order)."""

    def __init__(self, post: Callable, wait: Callable, mbs: list[int],
                 depth: int = PREFETCH_DEPTH) -> None:
        self.post, self.wait, self.mbs, self.depth = post, wait, mbs, depth
        self.posted: deque = deque()
        self.next = 0

    def _post_next(self) -> None:
        m = self.mbs[self.next]
        self.posted.append((m, self.post(m)))
        self.next += 1

    def prepost(self) -> None:
        """Make sure the next receive is posted (without waiting for it)."""
        if not self.posted and self.next < len(self.mbs):
            self._post_next()

    def take(self, mb: int) -> Tensor:
        while len(self.posted) < self.depth and self.next < len(self.mbs):
            self._post_next()
        m, pending = self.posted.popleft()
        if m != mb:
            raise RuntimeError(f"receive order broken: expected microbatch {m}, need {mb}")
        return self.wait(pending)


class StageExecutor:
    """Executes action lists for one stage (see the module docstring).

    ``link``: the training stream's link; ``side``: the side passes' link (another group).
    ``heartbeat``: called once per action (watchdog). ``timer``: per-action timings of the
    training stream (``--profile``, :mod:`llm_validation.pipeline.profile`); side passes are
    timed as a whole by the caller.
    """

    def __init__(self, setup: StageSetup, link: StageLink, side: StageLink,
                 heartbeat: Callable[[], None], timer: ActionTimer | None = None) -> None:
        self.setup, self.link, self.side, self.heartbeat = setup, link, side, heartbeat
        self.timer = timer

    def _timed(self, link: StageLink) -> ActionTimer | None:
        return self.timer if link is self.link else None

    def _forward(self, link: StageLink, weights: Weights, mb: int, x: Tensor,
                 target: Tensor | None, grad: bool) -> tuple[Tensor, Tensor]:
        """Forward of microbatch ``mb`` on input ``x`` (the data on stage 0, else the received
        activation); returns (stage input, output or loss)."""
        s, timer = self.setup, self._timed(link)
        if timer:
            timer.start("forward")
        if grad and not s.is_first:
            x.requires_grad_(True)
        with s.autocast():
            out = functional_call(s.module, weights, (x,))
        if s.is_last:
            loss = s.loss(out, target)
            if timer:
                timer.stop("forward")
            return x, loss
        if timer:
            timer.stop("forward")
            timer.start("send")
        link.send_activation(out, mb)
        if timer:
            timer.stop("send", count=0)
        return x, out

    def run(self, acts: Sequence[Action], *, weights: Callable[[int], Weights],
            inputs: Callable[[int], Tensor | None], targets: Callable[[int], Tensor | None],
            scale: int, link: StageLink | None = None,
            on_loss: Callable[[int, Tensor], None] | None = None,
            before_backward: Callable[[Action], None] | None = None,
            on_backward: Callable[[Action], None] | None = None,
            on_step: Callable[[Action], bool] | None = None,
            after_step: Callable[[Action], None] | None = None) -> bool:
        """Execute ``acts``. ``inputs(mb)`` / ``targets(mb)``: microbatch data of the first / last
        stage; ``on_loss(mb, loss)`` on the last stage after each forward; ``before_backward(a)``
        before each backward, ``on_backward(a)`` after it, once its input gradient is on its
        way to the previous stage (nothing a neighbour waits for is held back);
        ``on_step(a)`` at each step action, returning False to stop the run there;
        ``after_step(a)`` after it (side passes). Returns False if stopped."""
        link = self.link if link is None else link
        s, timer = self.setup, self._timed(link)
        stash: dict[int, tuple[Tensor, Tensor]] = {}
        depth = 1 if link.grouped else PREFETCH_DEPTH   # grouped: post each receive at its use
        acts_in = _Prefetch(link.post_recv_activation, link.wait,
                            [a.mb for a in acts if a.kind == FORWARD] if not s.is_first else [],
                            depth)
        grads_in = _Prefetch(link.post_recv_gradient, link.wait,
                             [a.mb for a in acts if a.kind == BACKWARD] if not s.is_last else [],
                             depth)
        if timer:
            timer.start("wall")   # the whole loop: its untimed rest is bookkeeping
        try:
            for n, a in enumerate(acts):
                self.heartbeat()
                if a.kind == FORWARD:
                    if timer and not s.is_first:
                        timer.start("recv_wait")
                    x = inputs(a.mb) if s.is_first else acts_in.take(a.mb)
                    if timer and not s.is_first:
                        timer.stop("recv_wait", count=0)
                    x, y = self._forward(link, weights(a.batch), a.mb, x,
                                         targets(a.mb) if s.is_last else None, grad=True)
                    if s.is_last and on_loss is not None:
                        on_loss(a.mb, y)
                    stash[a.mb] = (x, y)
                elif a.kind == BACKWARD:
                    x, y = stash.pop(a.mb)
                    if s.is_last:
                        g_out = None
                    else:
                        if timer:
                            timer.start("recv_wait")
                        g_out = grads_in.take(a.mb)
                        if timer:
                            timer.stop("recv_wait", count=0)
                    if before_backward is not None:
                        before_backward(a)
                    if timer:
                        timer.start("backward")
                    if g_out is None:
                        (y / scale).backward()
                    else:
                        torch.autograd.backward(y, g_out)
                    if timer:
                        timer.stop("backward")
                    if not s.is_first:
                        if timer:
                            timer.start("send")
                        link.send_gradient(x.grad, a.mb)
                        if timer:
                            timer.stop("send", count=0)
                    if on_backward is not None:
                        on_backward(a)
                elif a.kind == STEP:
                    if timer:
                        timer.start("send")
                    link.flush()                  # nothing may wait on a send held back here
                    if timer:
                        timer.stop("send", count=0)
                        timer.start("step")
                    go = True if on_step is None else on_step(a)
                    if timer:
                        timer.stop("step")
                    if not go:
                        return False
                    # The neighbour feeding this stage's next action sent its message before
                    # its own step (a step after a backward: the previous stage, one forward
                    # ahead; a step after a forward, ``step_after="forward"``: the next stage's
                    # gradient); post that receive before the side passes, so that a send it
                    # waits on (grouped mode, NCCL) never depends on what this stage does after
                    # them.
                    if n + 1 < len(acts) and acts[n + 1].kind == BACKWARD:
                        grads_in.prepost()
                    else:
                        acts_in.prepost()
                    if after_step is not None:
                        after_step(a)
            link.flush()
            return True
        finally:
            if timer:
                timer.stop("wall")

    # ----------------------------------------------------------------------- side passes
    def _count(self, count: int, data: list[Tensor] | None) -> None:
        s = self.setup
        if (s.is_first or s.is_last) and (data is None or len(data) != count):
            raise ValueError(f"stage {s.stage}: side pass of {count} microbatches got "
                             f"{None if data is None else len(data)}")

    def gradient_pass(self, weights: Weights, count: int, data: list[Tensor] | None
                      ) -> tuple[list[Tensor], list[Tensor] | None]:
        """One batch of ``count`` microbatches (>= P) through the pipeline with ``weights``
        (``detached_leaves``: their ``.grad`` receive the gradient), as
        ``train.forward_backward`` does; ``data``: the inputs on stage 0, the targets on the
        last stage, else None. Returns (this stage's gradients in ``setup.names`` order, the
        microbatch losses on the last stage else None)."""
        s = self.setup
        self._count(count, data)
        losses: list[Tensor] = []
        acts = [a for a in schedule_2bw(s.stage, s.stages, count, 1) if a.kind != STEP]
        self.run(acts, weights=lambda t: weights, scale=count, link=self.side,
                 inputs=lambda mb: data[mb], targets=lambda mb: data[mb],
                 on_loss=lambda mb, loss: losses.append(loss.detach()))
        self.side.drain()
        grads = []
        for n in s.names:
            w = weights[n]
            grads.append(w.grad if w.grad is not None else torch.zeros_like(w))
            w.grad = None
        return grads, (losses if s.is_last else None)

    @torch.no_grad()
    def forward_pass(self, weights: Weights, count: int, data: list[Tensor] | None
                     ) -> list[Tensor] | None:
        """Forward only (validation): the microbatch losses on the last stage, else None."""
        s = self.setup
        self._count(count, data)
        losses = []
        for mb in range(count):
            self.heartbeat()
            x = data[mb] if s.is_first else self.side.wait(self.side.post_recv_activation(mb))
            _, y = self._forward(self.side, weights, mb, x, data[mb] if s.is_last else None,
                                 grad=False)
            if s.is_last:
                losses.append(y.detach())
        self.side.drain()
        return losses if s.is_last else None
