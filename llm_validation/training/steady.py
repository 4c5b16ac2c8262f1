"""The steady-state rate of a training invocation: what summary.json records beside the whole.

:class:`SteadyClock` is what the training loop records in ``summary.json`` as
``steady_tokens_per_s``: the tokens of the steps after the first :data:`STEADY_WARMUP_STEPS`
of the invocation over their wall time, the evaluations and checkpoints among them excluded
(the flushes of the metrics rows and the statistics steps are part of the rate: a run pays
them at its intervals). On a GPU it synchronises the device when its window opens and closes
and around each excluded span (at evaluation and checkpoint steps only, never on a plain
step), so queued kernels are counted in the span that launched them. The whole-invocation
``tokens_per_s`` (set-up, closing evaluation and checkpoint included) stays beside it.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

import torch

__all__ = ["SteadyClock", "STEADY_WARMUP_STEPS"]

#: Steps of an invocation left out of the steady-state rate: the first pays one-off
#: allocations (and, with ``run.compile``, the compilation), the second a compiled step's
#: recompilation for the delay's second weight version.
STEADY_WARMUP_STEPS = 2


class SteadyClock:
    """Wall time of an invocation's steady-state steps (module docstring).

    Call :meth:`step` at the top of every step, wrap evaluations and checkpoints in
    :meth:`excluded`, and :meth:`stop` after the last step; :meth:`tokens_per_s` is then the
    rate (None when no step was counted)."""

    def __init__(self, device: torch.device, first_step: int,
                 warmup: int = STEADY_WARMUP_STEPS) -> None:
        self.device, self.open_at = device, first_step + warmup
        self.t0: float | None = None
        self.end: float | None = None
        self.excluded_s, self.steps = 0.0, 0

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def step(self, step: int) -> None:
        """Step ``step`` starts: the window opens at the first step after the warm-up."""
        if step == self.open_at:
            self.t0 = self._now()
        if self.t0 is not None:
            self.steps += 1

    @contextmanager
    def excluded(self) -> Iterator[None]:
        """A span (evaluation, checkpoint) left out of the window's time."""
        if self.t0 is None or self.end is not None:
            yield
            return
        t = self._now()
        try:
            yield
        finally:
            self.excluded_s += self._now() - t

    def stop(self, steps_done: int | None = None) -> None:
        """The window closes after the last step; ``steps_done``: how many of the counted
        steps finished (a diverged run's last step is not one)."""
        if self.t0 is not None and self.end is None:
            self.end = self._now()
            if steps_done is not None:
                self.steps = max(0, min(self.steps, steps_done - self.open_at))

    def tokens_per_s(self, tokens_per_step: int) -> float | None:
        """Tokens per steady-state second (None before :meth:`stop` or with no counted step)."""
        if self.t0 is None or self.end is None or self.steps == 0:
            return None
        wall = self.end - self.t0 - self.excluded_s
        return self.steps * tokens_per_step / wall if wall > 0 else None
