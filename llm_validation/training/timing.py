"""Wall time of a short real run, step by step: what the cost model and the benchmarks measure.

:func:`time_run` trains ``cfg`` through :func:`llm_validation.training.loop.train` in a
temporary directory and stamps the clock after every step (the loop's ``callback``), so a step's
time is everything the loop does for it: the evaluation due before it, data, forward/backward,
the statistics of an active step, the optimizer step and the metrics row. The closing
evaluation and checkpoint are the *tail* (from the last step's stamp to ``train``'s return).
Setup (corpus, model, optimizer) is not counted.

:meth:`StepTimes.sec_per_step` turns these into the seconds per step of a run of the same
kind at other intervals::

    plain + (active - plain) / stats_interval + eval / eval_interval + tail / steps

where ``plain`` and ``active`` are medians over the steps without and with statistics (the
first step, which pays one-off allocations, is left out), and ``eval`` is the tail (one
evaluation of ``eval_batches`` batches plus the final checkpoint, an upper bound for one
evaluation).
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from llm_validation.config import TrainConfig

__all__ = ["StepTimes", "time_run"]

@dataclass(frozen=True, kw_only=True)
class StepTimes:
    """Per-step wall seconds of one short run."""

    seconds: tuple[float, ...]
    """Wall seconds of steps 1..N-1 (step 0 is left out)."""
    active: tuple[bool, ...]
    """Whether each of those steps recorded the statistics."""
    tail_s: float
    """Closing evaluation plus final checkpoint."""
    tokens_per_step: int
    """Training tokens of one step."""

    def _median(self, want: bool) -> float | None:
        xs = [s for s, a in zip(self.seconds, self.active) if a == want]
        return statistics.median(xs) if xs else None

    @property
    def plain_s(self) -> float:
        """Median seconds of a step without statistics (of any step when all were active)."""
        m = self._median(False)
        return m if m is not None else statistics.median(self.seconds)

    @property
    def active_s(self) -> float:
        """Median seconds of a step with statistics (``plain_s`` when none was active)."""
        m = self._median(True)
        return m if m is not None else self.plain_s

    @property
    def wall_s(self) -> float:
        """Timed wall seconds: the counted steps and the tail."""
        return sum(self.seconds) + self.tail_s

    @property
    def tokens_per_s(self) -> float:
        """Training tokens per timed wall second (counted steps and tail)."""
        return len(self.seconds) * self.tokens_per_step / self.wall_s

    def sec_per_step(self, *, steps: int, stats_interval: int, eval_interval: int) -> float:
        """Seconds per step of a ``steps``-step run of this kind at these intervals (module
        docstring)."""
        if steps < 1:
            raise ValueError(f"steps={steps} must be >= 1")
        s = self.plain_s
        if stats_interval > 0:
            s += (self.active_s - self.plain_s) / stats_interval
        if eval_interval > 0:
            s += self.tail_s / eval_interval
        return s + self.tail_s / steps

    def to_dict(self) -> dict[str, float]:
        return {"plain_s": self.plain_s, "active_s": self.active_s, "tail_s": self.tail_s,
                "steps_timed": len(self.seconds), "tokens_per_s": self.tokens_per_s}


def time_run(cfg: TrainConfig, *, steps: int | None = None, stats_interval: int | None = None,
             eval_interval: int | None = None, threads: int | None = None) -> StepTimes:
    """Train ``cfg`` (optionally shortened, with other intervals) in a temporary directory and
    return its per-step wall times (module docstring). ``threads`` sets torch's intra-op
    threads for the call (restored afterwards)."""
    from llm_validation.training.loop import train  # the loop imports this package's modules

    run = cfg.run
    steps = run.steps if steps is None else steps
    if steps < 2:
        raise ValueError(f"time_run needs steps >= 2 (step 0 is not counted), got {steps}")
    before = torch.get_num_threads()
    stamps: list[float] = []
    with tempfile.TemporaryDirectory(prefix="delaybound-timing-") as tmp:
        new_run = dataclasses.replace(
            run, steps=steps, out_dir=str(Path(tmp) / "run"), resume=False,
            checkpoint_interval=0,
            stats_interval=run.stats_interval if stats_interval is None else stats_interval,
            eval_interval=run.eval_interval if eval_interval is None else eval_interval)
        timed = cfg.replace(run=new_run)
        try:
            if threads is not None:
                torch.set_num_threads(threads)
            train(timed, progress=False, callback=lambda step, row: stamps.append(
                time.perf_counter()))
            end = time.perf_counter()
        finally:
            torch.set_num_threads(before)
    if len(stamps) < 2:
        raise ValueError(f"time_run: the run stopped after {len(stamps)} step(s) (diverged?)")
    k = new_run.stats_interval
    seconds = tuple(b - a for a, b in zip(stamps, stamps[1:]))
    active = tuple(k > 0 and s % k == 0 for s in range(1, len(stamps)))
    return StepTimes(seconds=seconds, active=active, tail_s=end - stamps[-1],
                     tokens_per_step=timed.tokens_per_step)
