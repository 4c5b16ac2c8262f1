"""Per-device peak memory of a schedule: weight versions, gradients, optimizer state, activations.

Algorithm (a replay of each device's action list, plus the simulated times for gradients):
- activations: a forward of microbatch ``i`` on chunk ``c`` keeps its activations until the
  backward that frees them (``B``, or ``W`` after ``I`` for zero-bubble schedules, which need the
  layer inputs for the weight gradient); the peak count and the peak bytes over the run;
- weight copies: the optimizer's master weights ``W(master)`` plus the versions read by
  microbatches in flight. A synchronous schedule reads only the master: 1 copy. A schedule that
  stashes (2BW, PipeDream) holds ``max |versions in flight and master|`` (the default: the 2BW
  paper's 2 copies, which is what this repository's runtime holds since its master aliases one
  of the two versions, docs/pipeline.md; PipeDream's ``P - d``), or ``max |versions in flight|
  + 1`` when the master is kept apart from the stashes (``separate_master``: 3 copies for 2BW);
- gradient buffers: a step's buffer is live from the first backward that writes weight
  gradients (``B`` or ``W``) of its microbatches until its update ends; with an overlapped
  all-reduce the next batch's backward may start before, and a second buffer is counted;
- optimizer state: ``OPTIMIZER_STATES`` tensors per parameter (+1 for the Error Feedback
  buffer), float32.
Counts are always reported; bytes when a :class:`MemoryModel` (the model's shape) is given.
Not counted: framework workspace, communication buffers, fragmentation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_validation.simulation.costs import FP32_BYTES, optimizer_states
from llm_validation.simulation.engine import SimResult
from llm_validation.simulation.schedules import (
    BACKWARD,
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    FORWARD,
    STEP,
    Plan,
)
from llm_validation.simulation.shapes import StageShape

__all__ = ["MemoryModel", "memory_model", "peak_memory", "weight_copies", "one_device_memory"]

GIB = 2.0 ** 30


@dataclass(frozen=True, kw_only=True)
class MemoryModel:
    """Byte sizes per virtual stage (see the module docstring)."""

    params: tuple[float, ...]
    """Parameters per virtual stage."""
    matrix_params: tuple[float, ...]
    """Of those, hidden 2-D matrices (Muon-like optimizers keep one state tensor on them)."""
    activation_bytes: tuple[float, ...]
    """Activation bytes one microbatch keeps on each virtual stage until its backward."""
    optimizer: str = "adamw"
    """Optimizer name (its state tensors per parameter)."""
    ef: bool = False
    """Error Feedback on: one more float32 buffer per parameter."""
    separate_master: bool = False
    """The master weights are a copy of their own beside the stashed versions."""

    def __post_init__(self) -> None:
        for name in ("params", "matrix_params", "activation_bytes"):
            object.__setattr__(self, name, tuple(float(x) for x in getattr(self, name)))
        if not len(self.params) == len(self.matrix_params) == len(self.activation_bytes):
            raise ValueError("MemoryModel: params, matrix_params and activation_bytes need one "
                             "entry per virtual stage")
        optimizer_states(self.optimizer)


def memory_model(shapes: list[StageShape], microbatch_tokens: int, *, optimizer: str = "adamw",
                 ef: bool = False, separate_master: bool = False) -> MemoryModel:
    """The :class:`MemoryModel` of virtual stages ``shapes`` for microbatches of
    ``microbatch_tokens`` tokens."""
    return MemoryModel(params=[s.params for s in shapes],
                       matrix_params=[s.matrix_params for s in shapes],
                       activation_bytes=[s.activation_bytes_per_token * microbatch_tokens
                                         for s in shapes],
                       optimizer=optimizer, ef=ef, separate_master=separate_master)


def weight_copies(plan: Plan, device: int, separate_master: bool = False) -> int:
    """Weight copies ``device`` needs at its peak (see the module docstring)."""
    return _replay(plan, device, None, separate_master)["weight_copies"]


def _replay(plan: Plan, d: int, act_bytes: list[float] | None,
            separate_master: bool) -> dict[str, Any]:
    held: dict[tuple[int, int], int] = {}
    held_bytes = peak_bytes = 0.0
    peak_count = max_versions = max_union = 0
    master, stashes = 0, False
    for a in plan.actions[d]:
        key = (a.mb, a.chunk)
        size = act_bytes[plan.vstage(d, a.chunk)] if act_bytes is not None else 0.0
        if a.kind == FORWARD:
            held[key] = a.version
            held_bytes += size
        elif a.kind == BACKWARD or a.kind == BACKWARD_WEIGHT:
            del held[key]
            held_bytes -= size
        elif a.kind == STEP:
            master = a.version
        elif a.kind != BACKWARD_INPUT:  # pragma: no cover - build_plan makes no other kinds
            raise ValueError(f"unknown action kind {a.kind!r}")
        versions = set(held.values())
        stashes = stashes or any(v != master for v in versions)
        peak_count = max(peak_count, len(held))
        peak_bytes = max(peak_bytes, held_bytes)
        max_versions = max(max_versions, len(versions))
        max_union = max(max_union, len(versions | {master}))
    copies = 1 if not stashes else (max_versions + 1 if separate_master else max_union)
    return {"weight_copies": copies, "activations_in_flight": peak_count,
            "activation_bytes": peak_bytes}


def _grad_buffers(result: SimResult) -> list[int]:
    """Most gradient buffers live at once on each device (from the simulated times)."""
    first: dict[tuple[int, int], float] = {}
    for s in result.spans:
        if s.kind in (BACKWARD, BACKWARD_WEIGHT):
            key = (s.device, s.step)
            first[key] = min(first.get(key, s.start), s.start)
    out = []
    for d in range(result.plan.stages):
        events = []
        for t in range(result.plan.optimizer_steps):
            events.append((first[(d, t)], 1))
            events.append((result.version_ready[(d, t + 1)], -1))
        live = peak = 0
        for _, delta in sorted(events, key=lambda e: (e[0], e[1])):   # frees before allocs
            live += delta
            peak = max(peak, live)
        out.append(peak)
    return out


def _parts(model: MemoryModel, params: float, matrix: float, weight_copies: int,
           grad_buffers: int, activation_bytes: float) -> dict[str, float]:
    """The bytes of each part on a device holding ``params`` parameters (``matrix`` of them in
    hidden matrices): weight copies, gradient buffers, optimizer state (+ EF), activations."""
    on_matrix, other = optimizer_states(model.optimizer)
    states = (on_matrix + model.ef) * matrix + (other + model.ef) * (params - matrix)
    return {"weights_bytes": weight_copies * params * FP32_BYTES,
            "grads_bytes": grad_buffers * params * FP32_BYTES,
            "optimizer_bytes": states * FP32_BYTES, "activation_bytes": activation_bytes}


def one_device_memory(model: MemoryModel) -> dict[str, float]:
    """The whole model trained on one device without a pipeline: one weight copy, one gradient
    buffer, the optimizer state of every parameter and one microbatch's activations through all
    the (virtual) stages (gradient accumulation holds one microbatch at a time); the bytes of
    each part, their sum and ``total_gib``."""
    parts = _parts(model, sum(model.params), sum(model.matrix_params), 1, 1,
                   sum(model.activation_bytes))
    total = sum(parts.values())
    return {**parts, "total_bytes": total, "total_gib": total / GIB,
            "params": sum(model.params)}


def peak_memory(result: SimResult, model: MemoryModel | None = None) -> list[dict[str, Any]]:
    """Per device: weight copies, gradient buffers, peak activations in flight ((microbatch,
    chunk) pairs) and, with ``model``, the bytes of each part and their sum."""
    plan = result.plan
    if model is not None and len(model.params) != plan.vstages:
        raise ValueError(f"memory model for {len(model.params)} virtual stages, plan has "
                         f"{plan.vstages}")
    separate = model.separate_master if model is not None else False
    grads = _grad_buffers(result)
    rows = []
    for d in range(plan.stages):
        rep = _replay(plan, d, list(model.activation_bytes) if model else None, separate)
        row: dict[str, Any] = {"stage": d, "weight_copies": rep["weight_copies"],
                               "grad_buffers": grads[d],
                               "activations_in_flight": rep["activations_in_flight"]}
        if model is not None:
            ks = [plan.vstage(d, c) for c in range(plan.chunks)]
            params = sum(model.params[k] for k in ks)
            matrix = sum(model.matrix_params[k] for k in ks)
            parts = _parts(model, params, matrix, rep["weight_copies"], grads[d],
                           rep["activation_bytes"])
            row.update(parts)
            row["total_bytes"] = sum(parts.values())
            row["total_gib"] = row["total_bytes"] / GIB
        rows.append(row)
    return rows
