"""Projection: 2BW against the synchronous schedules over a grid of stages, microbatches, replicas.

Algorithm. For each grid point (P, M, D) and schedule, build the plan, take FLOP-based costs
(:func:`.costs.model_costs`) and simulate ``T = 1`` and ``T = 3`` batches; the steady step time is
half the difference of the two makespans (what one more batch costs once the pipeline is
running: the fill and drain cancel), so it is the throughput of a long run; peak memory comes
from the ``T = 3`` run (:data:`.summary.MEMORY_BATCHES`: 2BW's two versions first coexist in
batch 2). 2BW's speed-up over a synchronous schedule is the ratio of their steady step times
(equivalently of their tokens/s, the tokens per batch being equal); its extra memory is the
difference of the largest per-device totals.

Assumptions (stated again in ``docs/simulation.md``): the costs of :mod:`.costs` and
:mod:`.shapes` (FLOPs at a sustained rate, ring all-reduce, point-to-point as latency +
bytes / bandwidth), stages cut as the runtime cuts them (embedding on the first, head on the
last, the blocks as even as possible; never finer than one block per stage: such points are
skipped, they would need tensor parallelism), all replicas
identical, no activation recomputation, no tensor or sequence parallelism. ``balance="uniform"``
replaces the runtime's cut by an ideal one (every stage 1/K of the model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from llm_validation.config import ModelConfig
from llm_validation.records.figure_file import save_figure
from llm_validation.simulation.costs import Hardware, model_costs
from llm_validation.simulation.engine import simulate
from llm_validation.simulation.memory import memory_model, peak_memory
from llm_validation.simulation.schedules import SCHEDULES, build_plan
from llm_validation.simulation.shapes import stage_shapes
from llm_validation.simulation.summary import MEMORY_BATCHES

__all__ = ["ProjectionSpec", "resolve_microbatches", "project", "speedups", "plot_projection"]


def resolve_microbatches(spec: str | int, stages: int) -> int:
    """``"4x"`` -> ``4 * stages``; ``16`` or ``"16"`` -> 16."""
    text = str(spec).strip()
    try:
        if text.endswith("x"):
            n = int(text[:-1]) * stages
        else:
            n = int(text)
    except ValueError:
        raise ValueError(f"microbatches {spec!r} must be an integer or a multiple of the stages "
                         f"like 4x") from None
    if n < 1:
        raise ValueError(f"microbatches {spec!r} must be >= 1")
    return n


@dataclass(frozen=True, kw_only=True)
class ProjectionSpec:
    """The grid and the machine of a projection."""

    model: ModelConfig
    """Model shape (a preset)."""
    hardware: Hardware
    """GPU rate, links, memory bandwidth."""
    stages: tuple[int, ...]
    """Pipeline depths P."""
    microbatches: tuple[str, ...] = ("4x",)
    """Microbatches per batch: integers, or ``Nx`` for N * P."""
    data_parallel: tuple[int, ...] = (1,)
    """Replica counts D."""
    schedules: tuple[str, ...] = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "2bw")
    """Schedules to simulate (2BW is compared with each synchronous one)."""
    seq_len: int = 2048
    """Tokens per sequence."""
    microbatch_size: int = 1
    """Sequences per microbatch."""
    chunks: int = 2
    """Model chunks per device of interleaved 1F1B."""
    optimizer: str = "adamw"
    """Optimizer (state memory and step time)."""
    activation_bytes: int = 2
    """Bytes per activation element (2: bf16)."""
    overlap_p2p: bool = True
    """Asynchronous point-to-point sends."""
    overlap_allreduce: bool = False
    """All-reduce and update beside the compute."""
    separate_master: bool = False
    """Count 2BW's master copy apart from its two stashed versions (3 copies; the runtime holds
    2, its master aliasing one version)."""
    balance: str = "layers"
    """Stage cut: ``layers`` (the runtime's) or ``uniform`` (1/K of the model per stage)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """Free text carried into the output."""

    def __post_init__(self) -> None:
        for name in ("stages", "microbatches", "data_parallel", "schedules"):
            value = tuple(getattr(self, name))
            if not value:
                raise ValueError(f"projection: {name} must not be empty")
            object.__setattr__(self, name, value)
        for p in self.stages:
            if isinstance(p, bool) or not isinstance(p, int) or p < 2:
                raise ValueError(f"projection: stages {p!r} must be integers >= 2")
        for d in self.data_parallel:
            if isinstance(d, bool) or not isinstance(d, int) or d < 1:
                raise ValueError(f"projection: data_parallel {d!r} must be integers >= 1")
        bad = [s for s in self.schedules if s not in SCHEDULES]
        if bad:
            raise ValueError(f"unknown schedule(s) {bad}; choose from {list(SCHEDULES)}")
        if "2bw" not in self.schedules:
            raise ValueError("a projection compares 2bw with the others: include 2bw")
        for m in self.microbatches:
            resolve_microbatches(m, 2)

    @property
    def microbatch_tokens(self) -> int:
        return self.seq_len * self.microbatch_size


def _point(spec: ProjectionSpec, schedule: str, P: int, M: int, D: int) -> dict[str, Any]:
    plans = [build_plan(schedule, P, M, T, spec.chunks) for T in (1, MEMORY_BATCHES)]
    shapes = stage_shapes(spec.model, plans[0].vstages, seq_len=spec.seq_len,
                          activation_bytes=spec.activation_bytes, balance=spec.balance)
    results = []
    for plan in plans:
        costs = model_costs(plan, shapes, spec.hardware, microbatch_tokens=spec.microbatch_tokens,
                            data_parallel=D, optimizer=spec.optimizer,
                            overlap_p2p=spec.overlap_p2p, overlap_allreduce=spec.overlap_allreduce)
        results.append(simulate(plan, costs))
    extra = MEMORY_BATCHES - 1
    step = (results[1].makespan - results[0].makespan) / extra
    busy = sum(results[1].busy(d) - results[0].busy(d) for d in range(P)) / extra
    mem = peak_memory(results[1], memory_model(shapes, spec.microbatch_tokens,
                                               optimizer=spec.optimizer,
                                               separate_master=spec.separate_master))
    top = max(mem, key=lambda r: r["total_bytes"])
    tokens = D * M * spec.microbatch_tokens
    return {"schedule": schedule, "stages": P, "microbatches": M, "data_parallel": D,
            "steady_step_time_s": step, "tokens_per_s": tokens / step,
            "bubble_fraction": 1.0 - busy / (P * step),
            "peak_memory_gib": top["total_gib"], "peak_memory_stage": top["stage"],
            "weight_copies": max(r["weight_copies"] for r in mem),
            "activations_in_flight": max(r["activations_in_flight"] for r in mem),
            "fractional_layers": shapes[0].fractional}


def project(spec: ProjectionSpec,
            progress: Callable[[int, int, str], None] | None = None) -> list[dict[str, Any]]:
    """One row per (P, M, D, schedule) that applies; a schedule that does not apply to a point
    (2BW with M < P - 1, interleaved with M not a multiple of P) gets a row with ``skipped``."""
    points = [(P, resolve_microbatches(m, P), D) for P in spec.stages
              for m in spec.microbatches for D in spec.data_parallel]
    total, rows = len(points) * len(spec.schedules), []
    for i, (P, M, D) in enumerate(points):
        for j, sch in enumerate(spec.schedules):
            label = f"{sch} P={P} M={M} D={D}"
            try:
                rows.append(_point(spec, sch, P, M, D))
            except ValueError as exc:
                rows.append({"schedule": sch, "stages": P, "microbatches": M,
                             "data_parallel": D, "skipped": str(exc)})
            if progress is not None:
                progress(i * len(spec.schedules) + j + 1, total, label)
    return rows


def speedups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """2BW against every synchronous schedule at each grid point: speed-up (ratio of steady
    step times) and extra peak memory (GiB, largest device)."""
    by = {(r["stages"], r["microbatches"], r["data_parallel"], r["schedule"]): r
          for r in rows if "skipped" not in r}
    out = []
    for (P, M, D, sch), base in sorted(by.items()):
        two = by.get((P, M, D, "2bw"))
        if sch in ("2bw", "pipedream") or two is None:
            continue
        out.append({"stages": P, "microbatches": M, "data_parallel": D, "baseline": sch,
                    "speedup_2bw": base["steady_step_time_s"] / two["steady_step_time_s"],
                    "extra_memory_gib": two["peak_memory_gib"] - base["peak_memory_gib"],
                    "memory_ratio": two["peak_memory_gib"] / base["peak_memory_gib"]})
    return out


def plot_projection(comparison: list[dict[str, Any]], path: str | Path, *, title: str) -> Path:
    """Two panels against P (log scale): 2BW's speed-up over each synchronous schedule and its
    extra peak memory; one line per (baseline, M, D)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in comparison:
        ratio = r["microbatches"] / r["stages"]
        mlabel = f"M={ratio:g}P" if ratio == int(ratio) else f"M={r['microbatches']}"
        groups.setdefault((r["baseline"], mlabel, r["data_parallel"]), []).append(r)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6))
    colors = {"gpipe": "#4C78A8", "1f1b": "#F58518", "interleaved-1f1b": "#54A24B",
              "zb-h1": "#E45756"}
    # distinct markers and sizes keep coinciding lines visible
    markers = {"gpipe": ("o", 8), "1f1b": ("s", 7), "interleaved-1f1b": ("^", 6),
               "zb-h1": ("D", 4)}
    styles = ["-", "--", ":", "-."]
    variants = sorted({(m, d) for _, m, d in groups})
    for (base, m, d), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: r["stages"])
        xs = [r["stages"] for r in rs]
        ls = styles[variants.index((m, d)) % len(styles)]
        label = f"vs {base} ({m}, D={d})" if len(variants) > 1 else f"vs {base}"
        mk, size = markers.get(base, ("o", 6))
        style = dict(marker=mk, markersize=size, color=colors.get(base))
        a1.plot(xs, [r["speedup_2bw"] for r in rs], ls, label=label, **style)
        a2.plot(xs, [r["extra_memory_gib"] for r in rs], ls, **style)
    for ax in (a1, a2):
        ax.set_xscale("log", base=2)
        ticks = sorted({r["stages"] for r in comparison})
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_xlabel("pipeline stages P")
        ax.grid(alpha=0.3)
    a1.axhline(1.0, color="gray", lw=0.8)
    a1.set_ylabel("2BW speed-up (steady tokens/s ratio)")
    a1.set_title("throughput: 2BW over each synchronous schedule", fontsize=10)
    a2.axhline(0.0, color="gray", lw=0.8)
    a2.set_ylabel("2BW extra peak memory (GiB, largest stage)")
    a2.set_title("memory: 2BW minus each synchronous schedule", fontsize=10)
    handles, labels = a1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8,
               frameon=False)
    fig.suptitle(title, fontsize=10)
    rows = (len(labels) + 3) // 4
    fig.tight_layout(rect=(0, 0.04 + 0.045 * rows, 1, 1))
    return save_figure(fig, path, dpi=130)
