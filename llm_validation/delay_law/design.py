"""The delay-law design: which sizes, step counts and lrs are trained, and which are held out.

The size ladder trained every size at one batch (1024 tokens a step), so at 20 tokens per
parameter its step count grew with the model and its "size" trend could not be told from a
step-count trend. This design crosses the two: every size at a step count shared by all sizes
(N measured at fixed steps), at the step count the paper's cited batch law gives at that size
(the paper's own path), and the smaller sizes at a long step count (steps measured at fixed N).
The lr enters as a measured variable through a per-size lr profile and one size at 0.5x and
2x its tuned lr.

Algorithm
    A cell is (size, steps, lr multiple); at 20 tokens per parameter its batch is ``20 N /
    steps`` tokens, rounded to whole sequences of :data:`SEQ_LEN` bytes
    (:func:`batch_sequences`). Each cell trains its arms (optimizer x {sync, 2BW, 2BW + EF})
    at :data:`SEEDS`, and synchronous runs of the same seeds at the fractions
    :attr:`Cell.frontier` of its steps (each with its own warmup and cosine schedule): the
    compute frontier the envelope lag reads (:mod:`llm_validation.validation.envelope`).
    Held-out cells (:attr:`Cell.held_out`) are chosen here, before any run, and predicted by
    every candidate law (:mod:`llm_validation.delay_law.laws`) from the other cells.
    :func:`cost` estimates process-seconds from the FLOPs (``6 N`` per training token, ``2 N``
    per evaluation token) at :data:`FLOP_RATE` plus :data:`STEP_OVERHEAD` per step.

Assumptions
    The four presets share one architecture (4 blocks, head width 8, one KV head, ``d_ff = 4
    d``, byte vocabulary), so ``N`` moves only the width. The default corpus holds 27.7M
    training bytes: the largest run (485k parameters, 9.7M tokens) reads it once.

Guarantee
    The structural rules the issue sets are checked by :func:`check_design` (and a test):
    at least 4 sizes spanning at least 10x, at least 2 step counts per size, one step count
    shared by every size, the paper's batch-law cell at every size, at least 4 seeds, lr
    profile seeds disjoint from the claim seeds, every cell of the largest size and one cell
    of every other size held out.

Reference
    The identification argument is the one of a factorial design: a main effect is estimable
    only if its factor moves while the others are held (Box, Hunter & Hunter, *Statistics for
    Experimenters*, 2nd ed., ch. 5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_validation.config import preset
from llm_validation.delay_law.batch_laws import DEEPSEEK, steps_at

__all__ = ["SIZES", "SEQ_LEN", "MICROBATCHES", "TOKENS_PER_PARAM", "SHARED_STEPS", "LONG_STEPS", "SEEDS",
           "LR_SEEDS", "LR_MULTIPLES", "LR_EFFECT", "ARMS", "ARMS_NO_EF", "FINAL_EVAL_TOKENS",
           "FLOP_RATE", "STEP_OVERHEAD", "Cell", "LrProfile", "batch_sequences", "cells",
           "lr_profiles", "cost", "check_design"]

#: The ladder's sizes, smallest first: three presets of the size ladder and one ~10x the smallest.
SIZES = ("n46k", "n113k", "n267k", "n485k")
#: Bytes per sequence (the ladder's).
SEQ_LEN = 64
#: Microbatches of every run (the ladder's: the gradient-noise variance needs two).
MICROBATCHES = 2
#: The paper's ratio (Chinchilla's 20:1), all parameters counted.
TOKENS_PER_PARAM = 20.0
#: The step count every size trains at: the smallest size's at the ladder's 1024-token batch.
SHARED_STEPS = 904
#: A long step count at the sizes where it is affordable (4x the shared one).
LONG_STEPS = 4 * SHARED_STEPS
#: Seeds of every claim arm (4: the issue's minimum; 5 did not fit the budget).
SEEDS = (0, 1, 2, 3)
#: Seeds of the lr profiles, never used by an arm (the lr is chosen on other data).
LR_SEEDS = (100, 101)
#: Points of each size's lr profile, as multiples of the ladder's tuned lr (factor 2 grid).
LR_MULTIPLES = (0.25, 0.5, 1.0, 2.0)
#: The lr's effect on the lag, measured at one size (the middle of the ladder).
LR_EFFECT = ("n113k", (0.5, 2.0))
#: Arms of a full cell.
ARMS = tuple(f"{o}/{m}" for o in ("adamw", "muon") for m in ("sync", "2bw", "2bw+ef"))
#: Arms of a cell that only carries the law (EF's share is read at the shared step count).
ARMS_NO_EF = tuple(a for a in ARMS if not a.endswith("+ef"))
#: The fixed closing evaluation set of every run (``run.final_eval_tokens``).
FINAL_EVAL_TOKENS = 1_000_000
#: Training FLOP/s (6 N per token) of one single-threaded process on this CPU at the design's
#: large batches: measured eager, statistics every 100 steps, 20-30 steps including start-up:
#: n267k at 92 x 64 tokens 30 GFLOP/s, n485k at 168 x 64 36 GFLOP/s (n46k at 16 x 64: 11, the
#: rest being per-step overhead, :data:`STEP_OVERHEAD`). An estimate for the budget only.
FLOP_RATE = 3.0e10
#: Seconds of per-step overhead beyond the FLOPs (Python, optimizer, logging), from the n46k
#: runs (27 s for 904 steps, of which ~13 s is FLOPs).
STEP_OVERHEAD = 0.01


def batch_sequences(size: str, steps: int) -> int:
    """Sequences per step that train ``size`` on 20 tokens per parameter in ``steps`` steps,
    a multiple of :data:`MICROBATCHES`."""
    n = preset(size).n_params()
    return MICROBATCHES * max(1, round(TOKENS_PER_PARAM * n / (steps * SEQ_LEN * MICROBATCHES)))


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One training setting of the design."""

    size: str
    """Model preset."""
    steps: int
    """Optimizer steps (the batch follows: :func:`batch_sequences`)."""
    role: str
    """``shared`` (the step count of every size), ``paper`` (the cited batch law's), ``long``
    or ``lr`` (the lr's effect)."""
    lr_multiple: float = 1.0
    """Peak lr as a multiple of the size's tuned lr."""
    arms: tuple[str, ...] = ARMS
    """Optimizer/mode arms trained at :data:`SEEDS`."""
    frontier: tuple[tuple[str, float], ...] = (("adamw", 0.5), ("adamw", 0.25), ("muon", 0.5))
    """(optimizer, fraction of ``steps``) of the synchronous runs (own schedules) that place
    the frontier. AdamW's lag approaches a half (46-70% measured on the ladder), so its
    frontier reaches a quarter of the run; Muon's (17-22%) needs only the half."""
    held_out: bool = False
    """Predicted by every law before it trains; never used to choose a law's coefficients."""

    @property
    def name(self) -> str:
        lr = "" if self.lr_multiple == 1.0 else f"/lr{self.lr_multiple:g}x"
        return f"{self.size}/s{self.steps}{lr}"

    @property
    def batch(self) -> int:
        return batch_sequences(self.size, self.steps)

    @property
    def n_params(self) -> int:
        return preset(self.size).n_params()


@dataclass(frozen=True, kw_only=True)
class LrProfile:
    """The synchronous lr profile of one size and optimizer."""

    size: str
    optimizer: str
    steps: int = SHARED_STEPS
    multiples: tuple[float, ...] = LR_MULTIPLES
    seeds: tuple[int, ...] = LR_SEEDS


def cells() -> tuple[Cell, ...]:
    """Every cell of the design, smallest size first (see the module docstring). EF arms run
    at the shared step count of every size but the largest (EF's share is read there; the
    largest size carries the law's held-out test, which needs sync and 2BW only)."""
    out = []
    for i, size in enumerate(SIZES):
        n = preset(size).n_params()
        paper, _ = steps_at(DEEPSEEK, n, TOKENS_PER_PARAM, SEQ_LEN)
        largest = i == len(SIZES) - 1
        out.append(Cell(size=size, steps=SHARED_STEPS, role="shared", held_out=largest,
                        arms=ARMS_NO_EF if largest else ARMS))
        out.append(Cell(size=size, steps=paper, role="paper", arms=ARMS_NO_EF,
                        held_out=largest or i % 2 == 1))
        if not largest:
            out.append(Cell(size=size, steps=LONG_STEPS, role="long", arms=ARMS_NO_EF,
                            held_out=i % 2 == 0))
    size, multiples = LR_EFFECT
    out += [Cell(size=size, steps=SHARED_STEPS, role="lr", lr_multiple=m, arms=ARMS_NO_EF)
            for m in multiples]
    return tuple(out)


def lr_profiles() -> tuple[LrProfile, ...]:
    """One synchronous lr profile per size and optimizer, at the shared step count."""
    return tuple(LrProfile(size=s, optimizer=o) for s in SIZES for o in ("adamw", "muon"))


def _run_seconds(size: str, steps: int, fraction: float = 1.0) -> float:
    """Estimated process-seconds of one run of ``size`` (all its tokens times ``fraction``)."""
    n = preset(size).n_params()
    train = 6.0 * n * TOKENS_PER_PARAM * n * fraction / FLOP_RATE
    return train + STEP_OVERHEAD * steps * fraction + 2.0 * n * FINAL_EVAL_TOKENS / FLOP_RATE


def cost() -> dict[str, float]:
    """Estimated process-seconds per size (arms, frontier runs and lr profiles) and in all."""
    out = {s: 0.0 for s in SIZES}
    for c in cells():
        per_seed = len(c.arms) * _run_seconds(c.size, c.steps) + sum(
            _run_seconds(c.size, c.steps, f) for _, f in c.frontier)
        out[c.size] += per_seed * len(SEEDS)
    for p in lr_profiles():
        out[p.size] += len(p.multiples) * len(p.seeds) * _run_seconds(p.size, p.steps)
    out["total"] = sum(out.values())
    return out


def check_design() -> list[str]:
    """The issue's structural rules that the design breaks (empty: none)."""
    problems = []
    ns = [preset(s).n_params() for s in SIZES]
    if len(SIZES) < 4 or max(ns) < 10 * min(ns):
        problems.append(f"sizes {SIZES} ({min(ns)}-{max(ns)}) do not span 10x over 4 sizes")
    cs = cells()
    for s in SIZES:
        steps = {c.steps for c in cs if c.size == s and c.lr_multiple == 1.0}
        if len(steps) < 2:
            problems.append(f"{s} has {len(steps)} step count(s)")
        if not any(c.size == s and c.role == "paper" for c in cs):
            problems.append(f"{s} has no cell on the paper's batch law")
        if not any(c.size == s and c.held_out for c in cs):
            problems.append(f"{s} has no held-out cell")
    if not all(any(c.size == s and c.steps == SHARED_STEPS for c in cs) for s in SIZES):
        problems.append(f"the shared step count {SHARED_STEPS} is missing at some size")
    if not all(c.held_out for c in cs if c.size == SIZES[-1]):
        problems.append("the largest size is not held out (every cell of it)")
    if len(SEEDS) < 4 or set(SEEDS) & set(LR_SEEDS):
        problems.append(f"seeds {SEEDS} (need >= 4) overlap the lr seeds {LR_SEEDS}")
    if any(len(p.multiples) < 4 or len(p.seeds) < 2 for p in lr_profiles()):
        problems.append("an lr profile has fewer than 4 points or 2 seeds")
    if any(not math.isclose(c.batch * SEQ_LEN * c.steps, TOKENS_PER_PARAM *
                            preset(c.size).n_params(), rel_tol=0.05) for c in cs):
        problems.append("a cell's batch x steps is more than 5% off 20 tokens per parameter")
    return problems
