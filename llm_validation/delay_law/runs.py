"""The delay-law design's runs: one resolved training config per arm, frontier run and lr
profile point, grouped into the phases that the protocol orders.

Phases (run in this order; each one's runs are named by their config, so a phase re-run trains
only what is missing, resuming unfinished runs from their checkpoints):

1. ``lr``: every size's synchronous lr profile (:data:`~llm_validation.delay_law.design.
   LR_MULTIPLES` of the centre :data:`LR_CENTRES`, seeds :data:`~llm_validation.delay_law.
   design.LR_SEEDS`). :func:`choose_lr` picks each size's lr from it.
2. ``train``: the cells that are not held out: their arms at the design's seeds and their
   frontier runs, at the chosen lrs.
3. ``held-out``: the held-out cells, trained only after every candidate law's prediction for
   them has been written and committed (:mod:`llm_validation.delay_law.laws`).

Every run is the ladder's 20:1 recipe at its cell's batch and step count: cosine schedule with a
2% linear warmup, weight decay 0.1, Muon's AdamW part (embeddings, head, norms) at the size's
AdamW lr, Newton-Schulz in float32, statistics every :data:`STATS_EVALS`-th of the run, the
closing loss on the fixed 1M-token set (``run.final_eval_tokens``), the step compiled
(``run.compile``: 1.4-1.5x the eager rate per core at n46k-n267k, ``docs/performance.md``; a
compiled run repeats bitwise on one thread, as every job of the ledger runs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from llm_validation.config import TrainConfig
from llm_validation.delay_law import design
from llm_validation.delay_law.design import Cell
from llm_validation.sweep.grid import default_base

__all__ = ["PHASES", "MODES", "LR_CENTRES", "WARMUP_FRACTION", "STATS_EVALS", "CURVE_EVALS",
           "CHECKPOINT_INTERVAL", "DesignRun", "run_config", "lr_runs", "cell_runs",
           "choose_lr", "phase_runs"]

#: The phases, in order.
PHASES = ("lr", "train", "held-out")
#: Delay settings by mode: (tau, EF lambda). EF at the paper's default lambda = 1.
MODES: Mapping[str, tuple[int, float]] = {"sync": (0, 0.0), "2bw": (1, 0.0), "2bw+ef": (1, 1.0)}
#: Centre of each size's lr profile per optimizer: the size ladder's tuned lr at that size (its
#: lr_sweep.json at 1024-token batches); n485k takes n267k's (the nearest size).
LR_CENTRES: Mapping[str, Mapping[str, float]] = {
    "n46k": {"adamw": 8e-3, "muon": 1e-2}, "n113k": {"adamw": 1.6e-2, "muon": 1e-2},
    "n267k": {"adamw": 8e-3, "muon": 5e-3}, "n485k": {"adamw": 8e-3, "muon": 5e-3}}
#: Linear warmup as a share of the steps (the ladder's 20:1 recipe).
WARMUP_FRACTION = 0.02
#: Statistics (gradient noise, alignment) about this many times per run.
STATS_EVALS = 20
#: Curve evaluations per run (for the figures; the verdicts read the closing fixed set).
CURVE_EVALS = 8
#: Checkpoint every this many steps, so an interrupted run loses at most that much.
CHECKPOINT_INTERVAL = 500


@dataclass(frozen=True, kw_only=True)
class DesignRun:
    """One run of the design."""

    phase: str
    """``lr``, ``train`` or ``held-out``."""
    cell: str
    """The cell's name (lr profiles: ``<size>/s<steps>``)."""
    kind: str
    """``arm``, ``frontier`` or ``lr``."""
    optimizer: str
    mode: str
    """``sync``, ``2bw`` or ``2bw+ef``."""
    fraction: float
    """Share of the cell's steps this run trains (frontier runs: 0.5 or 0.25; else 1)."""
    lr_multiple: float
    seed: int
    cfg: TrainConfig


def run_config(size: str, optimizer: str, mode: str, *, steps: int, batch: int, lr: float,
               aux_lr: float, seed: int) -> TrainConfig:
    """The resolved config of one run (see the module docstring)."""
    tau, lam = MODES[mode]
    d = default_base(optimizer, steps=steps, model=size).to_dict()
    d["optim"].update(lr=float(lr), ns_dtype="float32",
                      warmup_steps=max(1, round(WARMUP_FRACTION * steps)))
    if optimizer == "muon":
        d["optim"]["aux_lr"] = float(aux_lr)
    d["delay"].update(tau=tau, ef_lambda=lam)
    d["data"]["seq_len"] = design.SEQ_LEN
    d["run"].update(steps=steps, seed=seed, batch_size=batch, microbatches=design.MICROBATCHES,
                    eval_interval=max(1, steps // CURVE_EVALS), eval_batches=8,
                    stats_interval=max(1, steps // STATS_EVALS), momentum_error_interval=0,
                    final_eval_tokens=design.FINAL_EVAL_TOKENS,
                    checkpoint_interval=CHECKPOINT_INTERVAL, device="cpu", compile=True,
                    out_dir="runs/delay_law")
    return TrainConfig.from_dict(d)


def lr_runs() -> list[DesignRun]:
    """Phase ``lr``: every size's profile, both optimizers."""
    out = []
    for p in design.lr_profiles():
        batch = design.batch_sequences(p.size, p.steps)
        centre = LR_CENTRES[p.size]
        for m in p.multiples:
            lr = centre[p.optimizer] * m
            for seed in p.seeds:
                cfg = run_config(p.size, p.optimizer, "sync", steps=p.steps, batch=batch, lr=lr,
                                 aux_lr=centre["adamw"], seed=seed)
                out.append(DesignRun(phase="lr", cell=f"{p.size}/s{p.steps}", kind="lr",
                                     optimizer=p.optimizer, mode="sync", fraction=1.0,
                                     lr_multiple=m, seed=seed, cfg=cfg))
    return out


def cell_runs(cell: Cell, lrs: Mapping[str, Mapping[str, float]]) -> list[DesignRun]:
    """A cell's arms at the design's seeds and its frontier runs, at the chosen ``lrs``
    (size -> optimizer -> lr; the cell's ``lr_multiple`` scales both optimizers' lr)."""
    phase = "held-out" if cell.held_out else "train"
    out = []
    tuned = lrs[cell.size]
    for seed in design.SEEDS:
        for arm in cell.arms:
            opt, mode = arm.split("/")
            cfg = run_config(cell.size, opt, mode, steps=cell.steps, batch=cell.batch,
                             lr=tuned[opt] * cell.lr_multiple, aux_lr=tuned["adamw"], seed=seed)
            out.append(DesignRun(phase=phase, cell=cell.name, kind="arm", optimizer=opt,
                                 mode=mode, fraction=1.0, lr_multiple=cell.lr_multiple,
                                 seed=seed, cfg=cfg))
        for opt, f in cell.frontier:
            steps = max(1, round(cell.steps * f))
            cfg = run_config(cell.size, opt, "sync", steps=steps, batch=cell.batch,
                             lr=tuned[opt] * cell.lr_multiple, aux_lr=tuned["adamw"], seed=seed)
            out.append(DesignRun(phase=phase, cell=cell.name, kind="frontier", optimizer=opt,
                                 mode="sync", fraction=f, lr_multiple=cell.lr_multiple,
                                 seed=seed, cfg=cfg))
    return out


def choose_lr(losses: Mapping[float, Sequence[float]]) -> tuple[float, str]:
    """The profile point with the lowest mean final loss over its seeds, and a note when it
    lies at an end of the profile (the optimum may lie outside it: the protocol records it,
    the cell's lr is still this point). ``losses``: lr multiple -> final losses per seed."""
    finite = {m: sum(v) / len(v) for m, v in losses.items()
              if v and all(math.isfinite(x) for x in v)}
    if not finite:
        raise ValueError("choose_lr: no profile point has a finite loss on every seed")
    best = min(finite, key=lambda m: (finite[m], m))
    edge = best in (min(losses), max(losses))
    return best, ("at the profile's edge" if edge else "")


def phase_runs(phase: str, lrs: Mapping[str, Mapping[str, float]] | None = None
               ) -> list[DesignRun]:
    """The runs of ``phase`` (``train`` and ``held-out`` need the chosen ``lrs``)."""
    if phase not in PHASES:
        raise ValueError(f"phase {phase!r} is not one of {list(PHASES)}")
    if phase == "lr":
        return lr_runs()
    if lrs is None:
        raise ValueError(f"phase {phase!r} needs the lrs chosen by the lr phase")
    held = phase == "held-out"
    return [r for c in design.cells() if c.held_out == held for r in cell_runs(c, lrs)]
