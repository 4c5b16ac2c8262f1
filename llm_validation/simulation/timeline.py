"""Timelines of a simulated run: an ASCII chart for integer ticks and a PNG figure.

The ASCII chart uses the notation of ``docs/pipeline.md`` (one row per device, one column per
tick; ``a3`` the forward of microbatch 3 of batch a, ``A3`` its backward, ``|`` the optimizer step,
``.`` idle). The figure draws one row
per device with a box per action (colour by kind, shade by batch), the all-reduce and update, and
the transfers' arrival marks are left out for legibility. Spans beside the compute stream
(an overlapped all-reduce and update) are drawn as a thin lane under the device's row.
"""

from __future__ import annotations

from pathlib import Path

from llm_validation.records.figure_file import save_figure
from llm_validation.simulation.engine import ALLREDUCE, SEND, UPDATE, SimResult
from llm_validation.simulation.schedules import (
    BACKWARD,
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    FORWARD,
)

__all__ = ["ascii_timeline", "plot_timeline", "KIND_LABELS"]

#: Legend text of each span kind.
KIND_LABELS = {FORWARD: "forward F", BACKWARD: "backward B", BACKWARD_INPUT: "backward, input I",
               BACKWARD_WEIGHT: "backward, weights W", UPDATE: "optimizer step",
               ALLREDUCE: "gradient all-reduce", SEND: "blocked in send"}
_COLORS = {FORWARD: "#4C78A8", BACKWARD: "#F58518", BACKWARD_INPUT: "#E45756",
           BACKWARD_WEIGHT: "#72B7B2", UPDATE: "#222222", ALLREDUCE: "#9D755D", SEND: "#BAB0AC"}
#: Above this many spans the boxes get no text labels (they would not be legible).
MAX_LABELLED_SPANS = 400


def _batch_letter(result: SimResult, mb: int) -> str:
    return chr(ord("a") + (mb // result.plan.microbatches) % 26)


def ascii_timeline(result: SimResult) -> str:
    """The chart described in the module docstring; needs whole-tick start times (unit costs
    without chunks); raises ``ValueError`` otherwise."""
    plan = result.plan
    compute = [s for s in result.spans if s.kind in KIND_LABELS and s.kind not in
               (UPDATE, ALLREDUCE, SEND)]
    if plan.chunks != 1 or any(s.start != int(s.start) or s.end - s.start != 1.0
                               for s in compute):
        raise ValueError("the ASCII timeline needs unit costs without interleaving")
    width = int(result.makespan + 0.5)
    rows = []
    for d in range(plan.stages):
        cells = [" . "] * width
        for s in result.spans:
            if s.device != d:
                continue
            if s.kind == UPDATE:
                t = max(int(s.start) - 1, 0) if s.start == int(s.start) else int(s.start)
                cells[t] = cells[t][:2] + "|"
                continue
            if s.kind not in (FORWARD, BACKWARD):
                continue
            letter = _batch_letter(result, s.mb)
            j = s.mb % plan.microbatches
            text = f"{letter}{j}" if s.kind == FORWARD else f"{letter.upper()}{j}"
            cells[int(s.start)] = f"{text} "
        rows.append(f"stage {d}: " + "".join(cells).rstrip())
    return "\n".join(rows)


def plot_timeline(result: SimResult, path: str | Path, *, title: str | None = None) -> Path:
    """Write the timeline figure to ``path`` (PNG) and return the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    plan, costs = result.plan, result.costs
    scale, unit = (1.0, "ticks") if costs.time_unit == "tick" else (1e3, "ms")
    P = plan.stages
    fig, ax = plt.subplots(figsize=(min(18, 6 + 0.05 * len(result.spans) ** 0.5 * 6),
                                    1.2 + 0.45 * P))
    labelled = len(result.spans) <= MAX_LABELLED_SPANS
    seen = set()
    for s in result.spans:
        if s.end <= s.start:
            continue
        y = P - 1 - s.device
        # the compute stream on top, the side stream (overlapped all-reduce, update) below it
        h, y0 = (0.2, y - 0.45) if s.side else (0.6, y - 0.2)
        alpha = 1.0 if s.mb < 0 or (s.mb // plan.microbatches) % 2 == 0 else 0.6
        ax.broken_barh([(s.start * scale, (s.end - s.start) * scale)], (y0, h),
                       facecolors=_COLORS[s.kind], edgecolors="white", linewidth=0.4,
                       alpha=alpha)
        seen.add(s.kind)
        if labelled and s.mb >= 0 and s.kind != SEND:
            txt = f"{s.mb % plan.microbatches}"
            ax.text((s.start + s.end) / 2 * scale, y + 0.1, txt, ha="center", va="center",
                    fontsize=7, color="white")
    ax.set_yticks(range(P))
    ax.set_yticklabels([f"stage {P - 1 - i}" for i in range(P)])
    ax.set_xlim(0, result.makespan * scale * 1.01)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("device")
    order = [FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, ALLREDUCE, UPDATE, SEND]
    ax.legend(handles=[Patch(color=_COLORS[k], label=KIND_LABELS[k]) for k in order if k in seen],
              loc="upper center", bbox_to_anchor=(0.5, -0.18 - 0.02 * (8 / max(P, 2))),
              ncol=4, fontsize=8, frameon=False)
    chunks = f", v={plan.chunks}" if plan.chunks > 1 else ""
    ax.set_title(title or (f"{plan.schedule}: P={P}, M={plan.microbatches}, T={plan.batches}"
                           f"{chunks}; makespan {result.makespan * scale:.4g} {unit}, bubble "
                           f"{result.bubble_fraction:.1%} (numbers: microbatch in its batch; "
                           f"shade alternates by batch)"), fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=130, bbox_inches="tight")
