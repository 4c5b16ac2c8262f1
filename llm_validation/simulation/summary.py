"""One simulated configuration, summarised: the numbers ``delaybound simulate`` prints and writes.

Definitions (``T`` batches of ``M`` microbatches on ``P`` devices, ``D`` replicas):
- ``makespan``: time until every device has finished the T batches (fill and drain included);
- ``step_time = makespan / T`` (per batch, so per optimizer step except for PipeDream, which
  steps after every microbatch);
- ``steady_step_time``: ``(makespan(T') - makespan(T)) / (T' - T)`` with
  ``T' = max(T + K, MEMORY_BATCHES)``, ``K`` the flush interval (1 above
  :data:`STEADY_FLUSH_WINDOW`): what one more batch costs in a long run (the fill and drain
  cancel; ``K`` more batches hold exactly one more flush);
- ``bubble_fraction``: share of the devices' time not occupied by any action
  (:attr:`.engine.SimResult.bubble_fraction`); with unit costs 1F1B gives ``(P-1)/(M+P-1)``;
- ``tokens_per_s = D T M tokens_per_microbatch / makespan`` (and ``steady_tokens_per_s`` from
  the steady step time), only when the costs are in seconds;
- ``delay``: per device, the gradient delay in optimizer steps its weights see (0 synchronous,
  1 for 2BW, ``P-1-d`` for PipeDream);
- ``peak_memory``: per device, :func:`.memory.peak_memory` of the ``T'``-batch run (a run of
  fewer than :data:`MEMORY_BATCHES` batches never holds 2BW's two versions at once).
"""

from __future__ import annotations

from typing import Any, Callable

from llm_validation.simulation.costs import Costs
from llm_validation.simulation.engine import SimResult, simulate
from llm_validation.simulation.memory import MemoryModel, peak_memory
from llm_validation.simulation.schedules import Plan, build_plan, stage_delays

__all__ = ["summarize", "steady_step_time", "MEMORY_BATCHES", "STEADY_FLUSH_WINDOW"]

#: Shortest run in which every schedule shows its peak memory: 2BW's batch 1 still reads W(0),
#: so two weight versions are first in flight together in batch 2.
MEMORY_BATCHES = 3


#: Flush intervals up to this many steps are averaged into the steady step time (the longer
#: run adds K batches, exactly one more flush); a longer interval counts as no flush in the
#: steady state (its cost, amortised over K steps, is left out).
STEADY_FLUSH_WINDOW = 16


def _window(costs: Costs) -> int:
    """Batches the longer run adds: the flush interval K (<= STEADY_FLUSH_WINDOW), else 1."""
    K = costs.flush_interval
    return K if K <= STEADY_FLUSH_WINDOW else 1


def _longer(schedule: str, stages: int, microbatches: int, batches: int, chunks: int,
            make_costs: Callable[[Plan], Costs], step_after: str = "backward",
            window: int = 1) -> SimResult:
    more = build_plan(schedule, stages, microbatches, max(batches + window, MEMORY_BATCHES),
                      chunks, step_after)
    return simulate(more, make_costs(more))


def steady_step_time(schedule: str, stages: int, microbatches: int, batches: int, chunks: int,
                     make_costs: Callable[[Plan], Costs],
                     result: SimResult | None = None, longer: SimResult | None = None,
                     step_after: str = "backward") -> float:
    """``(makespan(T') - makespan(T)) / (T' - T)`` (module docstring); ``result`` and ``longer``:
    the T- and T'-batch runs when already simulated; ``step_after``: 2BW's step placement."""
    if result is None:
        plan = build_plan(schedule, stages, microbatches, batches, chunks, step_after)
        result = simulate(plan, make_costs(plan))
    if longer is None:
        longer = _longer(schedule, stages, microbatches, batches, chunks, make_costs, step_after,
                         _window(result.costs))
    return (longer.makespan - result.makespan) / (longer.plan.batches - batches)


def summarize(schedule: str, stages: int, microbatches: int, batches: int, *, chunks: int = 2,
              make_costs: Callable[[Plan], Costs], memory: MemoryModel | None = None,
              memory_for: Callable[[Plan], MemoryModel | None] | None = None,
              step_after: str = "backward") -> tuple[dict[str, Any], SimResult]:
    """Simulate one configuration; return the JSON-ready summary (module docstring) and the
    T-batch result (for the timeline). ``make_costs(plan)`` builds the costs of a plan;
    ``memory`` or ``memory_for(plan)`` gives byte sizes (None: counts only); ``step_after``:
    2BW's step placement (``forward`` with clipping, as the runtime)."""
    plan = build_plan(schedule, stages, microbatches, batches, chunks, step_after)
    costs = make_costs(plan)
    result = simulate(plan, costs)
    longer = _longer(schedule, stages, microbatches, batches, chunks, make_costs, step_after,
                     _window(costs))
    steady = steady_step_time(schedule, stages, microbatches, batches, chunks, make_costs,
                              result, longer)
    mem_model = memory_for(longer.plan) if memory_for is not None else memory
    makespan = result.makespan
    out: dict[str, Any] = {
        "schedule": schedule, "stages": stages, "chunks": plan.chunks,
        "microbatches": microbatches, "batches": batches, "data_parallel": costs.data_parallel,
        "optimizer_steps": plan.optimizer_steps, "time_unit": costs.time_unit,
        "makespan": makespan, "step_time": makespan / batches, "steady_step_time": steady,
        "bubble_fraction": result.bubble_fraction,
        "tokens_per_batch": None, "tokens_per_s": None, "steady_tokens_per_s": None,
        "delay": stage_delays(plan),
        "overlap_p2p": costs.overlap_p2p, "overlap_allreduce": costs.overlap_allreduce,
        "step_after": plan.step_after, "flush_interval": costs.flush_interval,
        "clip": costs.clip,
        "per_stage": result.per_device(),
        "peak_memory": peak_memory(longer, mem_model),
    }
    if costs.microbatch_tokens is not None and costs.time_unit == "s":
        tokens = costs.data_parallel * microbatches * costs.microbatch_tokens
        out["tokens_per_batch"] = tokens
        out["tokens_per_s"] = tokens * batches / makespan
        out["steady_tokens_per_s"] = tokens / steady
    return out, result
