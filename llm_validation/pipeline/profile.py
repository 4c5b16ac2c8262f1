"""Per-action timings of a pipeline run (``--profile``): what the simulator replays.

With ``RunConfig.profile`` every stage times its own work and writes
``logs/profile_stage<s>.json`` when it finishes; the launcher merges them into
``RUN_DIR/profile.json`` (:func:`write_profile`), which ``delaybound simulate --from RUN_DIR``
reads. What is timed, per stage:

- ``forward_s`` / ``backward_s``: compute of one microbatch's forward (autocast and loss on the
  last stage included) and backward, mean over the training microbatches;
- ``recv_wait_s``: time blocked on receiving an activation or a gradient, per microbatch;
- ``send_s``: time spent posting sends and flushing them, per microbatch;
- ``step_s``: the optimizer step of one batch with its statistics and bookkeeping (everything in
  the STEP action but the metrics flush and checkpoint saves; 2BW's slot copy and a clipping
  wait included), mean per step;
- ``flush_s``: what a step ending a metrics flush costs more (the host read, the verdict, the
  rows message, stage 0's rows), mean per flush, the wait for another stage's verdict
  excluded (the simulator models it); ``flushes``: how many;
- ``side_s``: side passes (validation, statistics gradients) per step; zero when they are off;
- ``overhead_s``: the rest of the training loop's wall time (data sampling, hooks, Python
  between actions) per microbatch; it occupies the stage like compute, so half of it is added
  to ``forward_s`` and half to ``backward_s`` (the pure compute stays in ``forward_compute_s``
  and ``backward_compute_s``).

Clocks (:func:`clock_for`): on CPU the host clock (``time.perf_counter``), which is the
compute's clock there. On CUDA the host clock would time kernel launches, not kernels (the
device runs asynchronously), so each interval is a pair of ``torch.cuda.Event(enable_timing=
True)`` recorded on the current stream, and their ``elapsed_time`` is read once, after ONE
``torch.cuda.synchronize()`` when the stage's profile is written at the end of the run (and
every :data:`MAX_PENDING_INTERVALS` intervals of a long run, to bound the events held): no
host synchronisation in ordinary steps. The row records which clock (``clock``).

2BW times its own executor (:mod:`llm_validation.pipeline.executor`). The synchronous baselines
run inside ``torch.distributed.pipelining``: forward via module hooks, backward from the
module's backward pre-hook to the last parameter's post-accumulate-grad hook of that microbatch,
and ``recv_wait_s`` + ``send_s`` as the rest of ``schedule.step()`` (timed as the window
``schedule``; its time outside forward and backward is reported as ``recv_wait_s``). The run-level numbers are measured on stage 0: ``step_time_s`` is the mean
interval between consecutive optimizer steps after ``WARMUP_STEPS`` steps, and
``tokens_per_s`` follows from it.

The file's layout (``schema`` :data:`PROFILE_SCHEMA`, ``version`` :data:`PROFILE_VERSION`) is
documented with its reader, :mod:`llm_validation.simulation.profile`; per stage the writer
gives ``forward_s``, ``backward_s``, ``step_s``, ``send_wait_s``, ``recv_wait_s``,
``activation_bytes`` and ``samples`` (microbatches timed), plus ``side_s``; at the top level
the measured ``step_time_s``, ``tokens_per_s`` and ``steps_timed`` of the run, which the
simulator's prediction is compared with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from llm_validation.records.atomic_io import read_json, write_json
from llm_validation.training.model import stage_activation_dtype
from llm_validation.simulation.profile import PROFILE_FILE, PROFILE_SCHEMA, PROFILE_VERSION

__all__ = ["ActionTimer", "HostClock", "CudaEventClock", "clock_for", "WARMUP_STEPS",
           "MAX_PENDING_INTERVALS", "PROFILE_FILE", "PROFILE_SCHEMA", "PROFILE_VERSION",
           "write_stage_profile", "merge_stage_profiles", "steady_step_time"]

#: Steps left out of the measured step time: the first steps include the pipeline fill, lazy
#: allocations and the forkserver's first imports, none of which recur in steady state.
WARMUP_STEPS = 3
#: Intervals kept as clock marks before they are converted to seconds: on CUDA each is two
#: events, and a long profiled run would hold millions; converting costs one device
#: synchronisation, so it happens once per this many intervals (a few hundred steps of a
#: typical stage) and at the end, never inside every step.
MAX_PENDING_INTERVALS = 4096

_KINDS = ("forward", "backward", "recv_wait", "send", "step", "side", "wall", "schedule",
          "flush", "checkpoint", "verdict_wait")
#: The kinds that partition a stage's time; ``wall`` (the whole training loop) minus their sum is
#: the stage's bookkeeping (data sampling, hooks, Python between actions).
_PARTS = ("forward", "backward", "recv_wait", "send", "step", "side")


class HostClock:
    """Marks are ``time.perf_counter()`` readings; an interval is their difference."""

    name = "host"

    def mark(self) -> float:
        return time.perf_counter()

    def seconds(self, intervals: Sequence[tuple[Any, Any]]) -> list[float]:
        return [b - a for a, b in intervals]


class CudaEventClock:
    """Marks are CUDA events recorded on the current stream; :meth:`seconds` synchronises the
    device once and reads every interval's ``elapsed_time`` (milliseconds)."""

    name = "cuda_events"

    def mark(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, intervals: Sequence[tuple[Any, Any]]) -> list[float]:
        if not intervals:
            return []
        torch.cuda.synchronize()
        return [a.elapsed_time(b) / 1000.0 for a, b in intervals]


def clock_for(device: torch.device) -> HostClock | CudaEventClock:
    """CUDA events for a CUDA device, the host clock otherwise (module docstring)."""
    return CudaEventClock() if torch.device(device).type == "cuda" else HostClock()


@dataclass
class ActionTimer:
    """Accumulated seconds per kind of work on one stage (see the module docstring).
    Intervals between :meth:`start` and :meth:`stop` are kept as clock marks and converted to
    seconds when the totals are read (:meth:`means`); :meth:`add` books host seconds."""

    clock: HostClock | CudaEventClock = field(default_factory=HostClock)
    _totals: dict[str, float] = field(default_factory=lambda: {k: 0.0 for k in _KINDS})
    counts: dict[str, int] = field(default_factory=lambda: {k: 0 for k in _KINDS})
    _open: dict[str, Any] = field(default_factory=dict)
    _marks: list[tuple[str, Any, Any]] = field(default_factory=list)

    @classmethod
    def for_device(cls, device: torch.device) -> "ActionTimer":
        """A timer with :func:`clock_for` ``device``."""
        return cls(clock=clock_for(device))

    def add(self, kind: str, seconds: float, count: int = 1) -> None:
        self._totals[kind] += seconds
        self.counts[kind] += count

    def start(self, kind: str) -> None:
        self._open[kind] = self.clock.mark()

    def stop(self, kind: str, count: int = 1) -> None:
        """Book the interval since :meth:`start` of ``kind`` (nothing if none was open)."""
        t0 = self._open.pop(kind, None)
        if t0 is None:
            return
        self._marks.append((kind, t0, self.clock.mark()))
        self.counts[kind] += count
        if len(self._marks) >= MAX_PENDING_INTERVALS:
            self._convert()

    def cancel(self, kind: str) -> None:
        """Forget an open interval of ``kind``."""
        self._open.pop(kind, None)

    def _convert(self) -> None:
        """Book the pending intervals in seconds (on CUDA: one synchronisation)."""
        if self._marks:
            secs = self.clock.seconds([(a, b) for _, a, b in self._marks])
            for (kind, _, _), dt in zip(self._marks, secs):
                self._totals[kind] += dt
            self._marks.clear()

    @property
    def totals(self) -> dict[str, float]:
        """Seconds per kind (the pending intervals converted first)."""
        self._convert()
        return self._totals

    def means(self) -> dict[str, float]:
        """Seconds per microbatch (forward, backward, recv_wait, send) and per step (step,
        side). The stage's bookkeeping (``wall`` minus the timed parts, ``overhead_s`` per
        microbatch) occupies the stage like compute, so ``forward_s`` and ``backward_s`` each
        carry half of it (the pure compute is kept as ``forward_compute_s`` and
        ``backward_compute_s``); without ``wall`` there is no overhead term."""
        totals = dict(self.totals)
        if totals["schedule"] > 0:    # torch's schedule.step(): the rest of it is communication
            # (its window is booked with count=0: a test on its count never fired, and the
            # waits inside torch's schedule landed in overhead_s, i.e. in forward_s and
            # backward_s, which made 1F1B simulate ~30% slow)
            totals["recv_wait"] += max(totals["schedule"] - totals["forward"]
                                       - totals["backward"], 0.0)
        per_mb = max(self.counts["forward"], 1)
        per_step = max(self.counts["step"], 1)
        fwd = totals["forward"] / max(self.counts["forward"], 1)
        bwd = totals["backward"] / max(self.counts["backward"], 1)
        over = 0.0
        if self.counts["wall"]:
            over = max(totals["wall"] - sum(totals[k] for k in _PARTS), 0.0) / per_mb
        # inside the step: the flush (apart, for the simulator's flush interval), the
        # checkpoint saves and the wait for another stage's verdict (neither a step's cost)
        inner = totals["flush"] + totals["checkpoint"]
        flushes = max(self.counts["flush"], 1)
        return {"forward_s": fwd + over / 2, "backward_s": bwd + over / 2,
                "recv_wait_s": totals["recv_wait"] / per_mb,
                "send_wait_s": totals["send"] / per_mb,
                "step_s": max(totals["step"] - inner, 0.0) / per_step,
                "flush_s": max(totals["flush"] - totals["verdict_wait"], 0.0) / flushes,
                "flushes": self.counts["flush"],
                "side_s": totals["side"] / per_step,
                "overhead_s": over, "forward_compute_s": fwd, "backward_compute_s": bwd}


def steady_step_time(step_clock: Sequence[float]) -> tuple[float | None, int]:
    """(mean seconds between consecutive steps after :data:`WARMUP_STEPS`, intervals used)."""
    clock = list(step_clock)[WARMUP_STEPS:]
    if len(clock) < 2:
        return None, 0
    return (clock[-1] - clock[0]) / (len(clock) - 1), len(clock) - 1


def write_stage_profile(run_dir: str | Path, stage: int, timer: ActionTimer) -> None:
    """``logs/profile_stage<s>.json``: this stage's means (called once, at the end)."""
    row = {"stage": stage, **timer.means(), "samples": timer.counts["forward"],
           "steps_timed": timer.counts["step"], "clock": timer.clock.name}
    write_json(Path(run_dir) / "logs" / f"profile_stage{stage}.json", row)


def merge_stage_profiles(run_dir: str | Path, cfg: Any, step_clock: Sequence[float]
                         ) -> dict[str, Any]:
    """Merge the stages' files into ``RUN_DIR/profile.json`` (stage 0's step clock gives the
    measured step time); returns the merged profile."""
    run_dir = Path(run_dir)
    run = cfg.run
    per_stage = []
    for s in range(run.stages):
        row = read_json(run_dir / "logs" / f"profile_stage{s}.json")
        row["activation_bytes"] = 0 if s == run.stages - 1 else act_bytes(cfg)
        per_stage.append(row)
    step_time, n = steady_step_time(step_clock)
    prof = {"schema": PROFILE_SCHEMA, "version": PROFILE_VERSION, "schedule": run.pipeline,
            "stages": run.stages, "microbatches": run.microbatches,
            "microbatch_tokens": run.batch_size * cfg.data.seq_len // run.microbatches,
            "batch_size": run.batch_size, "seq_len": cfg.data.seq_len, "steps_timed": n,
            "log_interval": run.log_interval, "grad_clip": cfg.optim.grad_clip,
            "step_time_s": step_time,
            "tokens_per_s": (run.batch_size * cfg.data.seq_len / step_time) if step_time else None,
            "per_stage": per_stage}
    write_json(run_dir / PROFILE_FILE, prof)
    return prof


def act_bytes(cfg: Any) -> int:
    """Bytes of one activation ``h[B/M, T, C]`` sent between stages: float32 (the residual
    stream), or bf16 with compute boundaries under bf16 autocast (``ModelConfig.boundary_dtype``)."""
    run = cfg.run
    dtype = stage_activation_dtype(cfg.model, run.dtype, torch.float32)
    return run.batch_size // run.microbatches * cfg.data.seq_len * cfg.model.d_model \
        * dtype.itemsize
