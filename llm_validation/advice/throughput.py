"""Throughput and memory of every schedule at the user's shape, from the schedule simulator.

Each schedule's steady step time, tokens/s, bubble and largest per-stage peak memory come from
:func:`llm_validation.simulation.summary.summarize` (the event-driven simulator behind
``delaybound simulate``) with the cost and memory builders the caller passes
(``delaybound.cost_flags.cost_setup``: ``--model`` FLOP costs or ``--from`` a profiled run).
2BW + EF is 2BW's action list with EF's buffers and step work (``ef=True`` builders).
Nothing here models time: it only tabulates the simulator's answers.
"""

from __future__ import annotations

from typing import Any, Callable

from llm_validation.simulation.memory import one_device_memory
from llm_validation.simulation.summary import summarize

__all__ = ["SYNC_ADVISED", "DELAYED_ADVISED", "schedule_table", "one_device"]

#: The synchronous schedules advise compares (same math, different bubbles and memory).
SYNC_ADVISED = ("1f1b", "gpipe", "interleaved-1f1b", "zb-h1")
#: The delayed schedules: 2BW and 2BW with update-level EF (lam = 1).
DELAYED_ADVISED = ("2bw", "2bw+ef")


def _row(summary: dict[str, Any]) -> dict[str, Any]:
    mem = [m.get("total_gib") for m in summary["peak_memory"]]
    mem = [m for m in mem if m is not None]
    return {"steady_step_time_s": summary["steady_step_time"],
            "tokens_per_step": summary["tokens_per_batch"],
            "tokens_per_s": summary["steady_tokens_per_s"],
            "bubble_fraction": summary["bubble_fraction"],
            "peak_memory_gib": max(mem) if mem else None,
            "peak_memory_per_stage_gib": mem or None}


def schedule_table(stages: int, microbatches: int, *, setup: dict[str, Any],
                   setup_ef: dict[str, Any], batches: int = 4, chunks: int = 2,
                   progress: Callable[[int, int, str], None] | None = None,
                   ) -> dict[str, dict[str, Any]]:
    """Schedule -> ``{steady_step_time_s, tokens_per_step, tokens_per_s, bubble_fraction,
    peak_memory_gib, peak_memory_per_stage_gib}`` (or ``{"skipped": reason}`` where the schedule
    does not apply, e.g. interleaved with M not a multiple of P), plus ``speedup_vs_1f1b``.
    ``setup`` / ``setup_ef``: dicts with ``make_costs(plan)`` and ``memory_for(plan)``, without
    and with EF. ``ValueError`` when 1F1B or 2BW does not apply (M < P) or costs are in ticks."""
    names = SYNC_ADVISED + DELAYED_ADVISED
    table: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names):
        s = setup_ef if name == "2bw+ef" else setup
        schedule = "2bw" if name == "2bw+ef" else name
        try:
            summary, _ = summarize(schedule, stages, microbatches, batches, chunks=chunks,
                                   make_costs=s["make_costs"], memory_for=s["memory_for"],
                                   step_after=s.get("step_after", "backward"))
        except ValueError as exc:
            if name in ("1f1b", "2bw"):
                raise ValueError(f"{name} does not apply to P={stages}, M={microbatches}: "
                                 f"{exc}") from None
            table[name] = {"skipped": str(exc)}
        else:
            if summary["time_unit"] != "s":
                raise ValueError("advise needs costs in seconds (--model or --from), not unit "
                                 "costs")
            table[name] = _row(summary)
        if progress is not None:
            progress(i + 1, len(names), name)
    ref = table["1f1b"]["steady_step_time_s"]
    for row in table.values():
        if "skipped" not in row:
            row["speedup_vs_1f1b"] = ref / row["steady_step_time_s"]
    return table


class _Unsplit:
    """The plan a cost source's ``memory_for(plan)`` reads for the unsplit model: one stage."""

    vstages = 1


def one_device(setup: dict[str, Any], device_gib: float) -> dict[str, Any] | None:
    """Whether the whole model trains on one device of ``device_gib`` GiB without a pipeline
    (:func:`~llm_validation.simulation.memory.one_device_memory` of the cost source's own
    memory model, unsplit): its parts in bytes, ``total_gib``, ``device_gib`` and ``fits``; None
    when the source has no memory model (unit costs, a profile without its run's config)."""
    memory_for = setup.get("memory_for")
    model = memory_for(_Unsplit()) if memory_for is not None else None
    if model is None:
        return None
    mem = one_device_memory(model)
    return {**mem, "device_gib": float(device_gib), "fits": mem["total_gib"] <= device_gib}
