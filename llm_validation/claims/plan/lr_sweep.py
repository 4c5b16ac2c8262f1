"""The ledger's first phase: each optimizer's peak lr, swept on synchronous runs at the scale.

Algorithm
    Per optimizer, synchronous base runs of the scale (its steps, batch, schedule) at the lrs
    ``base * LR_RATIO^k`` for ``k`` in :data:`FIRST_GRID` (``base`` = the scale's lr), over
    :data:`SWEEP_SEEDS` seeds, numbered from :data:`FIRST_SWEEP_SEED` so that no claim uses
    them (the claims' seeds count from 0; the lr is not chosen on the runs it is then judged
    by). The score of an lr is the mean final validation loss over its
    seeds (a diverged or unfinished seed scores ``inf``: an lr that diverges for one seed is
    not chosen). When the best lr sits on an edge of the grid, the grid is widened by one
    point past that edge and the new runs are trained; this repeats until the best is interior
    or :data:`MAX_WIDEN` points were added (then the best edge lr is used and the table says
    "edge"). The best lr replaces the scale's for every claim; an arm's ``Times`` on
    ``optim.lr`` is a multiple of it.

Reuse
    The runs live in the ledger's ``runs/`` with every other run (named by their config, so a
    second invocation trains nothing); the sweep's seeds are its own, so its base-lr runs
    are not the claims' synchronous runs (ledgers swept before this rule, on seeds 0-1, keep
    their sweeps: an assembly reads ``lr_sweep.json``, it does not sweep again); the table is ``lr_sweep.json`` and the figure ``figures/lr_sweep.png``.
    ``--set OPT:optim.lr=X`` (or ``--set optim.lr=X``) skips the sweep for that optimizer and
    uses ``X``.

Assumptions
    The lr tuned at the scale's base horizon is used at every horizon of the ladder (the
    paper tunes once per setting; re-tuning per horizon would cost the sweep four times).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from llm_validation.claims.plan.scales import Scale, base_config
from llm_validation.records.atomic_io import read_json, write_json
from llm_validation.records.run_name import run_name
from llm_validation.sweep.grid import parse_override
from llm_validation.validation.runs import RunRecord, is_complete

__all__ = ["LR_RATIO", "FIRST_GRID", "SWEEP_SEEDS", "FIRST_SWEEP_SEED", "sweep_seeds",
           "MAX_WIDEN", "SWEEP_FILE", "LrChoice",
           "grid_lrs", "score", "choose", "widen", "overridden", "sweep_configs",
           "tuned_scale", "run_lr_sweep", "sweep_cost", "write_sweep", "read_sweep"]

#: Ratio of neighbouring lrs of the grid (a log grid, factor 2: the resolution the paper's
#: lr sweeps use; a finer grid costs more runs per optimizer for differences below the seeds'
#: spread at this scale).
LR_RATIO = 2.0
#: Exponents of the first grid around the scale's lr: 0.5x, 1x, 2x.
FIRST_GRID = (-1, 0, 1)
#: Seeds per lr (the issue's ">= 2": two seeds catch an lr that diverges for one of them).
SWEEP_SEEDS = 2
#: The sweep's first seed: above any seed a claim runs (the seeds policy stops at
#: ``max_seeds``, 8 by default; :class:`~llm_validation.claims.reproduce.Options` refuses a
#: ``max_seeds`` that reaches it).
FIRST_SWEEP_SEED = 1000


def sweep_seeds(n: int = SWEEP_SEEDS) -> tuple[int, ...]:
    """The sweep's ``n`` seeds: ``FIRST_SWEEP_SEED, FIRST_SWEEP_SEED + 1, ...``."""
    return tuple(range(FIRST_SWEEP_SEED, FIRST_SWEEP_SEED + n))
#: Points the grid may grow by past its edges before the edge lr is used as it is.
MAX_WIDEN = 4
#: The table, next to claims.json.
SWEEP_FILE = "lr_sweep.json"


@dataclass(frozen=True, kw_only=True)
class LrChoice:
    """One optimizer's sweep outcome."""

    optimizer: str
    base: float
    """The scale's lr the grid is centred on."""
    lr: float
    """The lr the ledger uses."""
    source: str
    """``sweep`` (chosen here), ``override`` (``--set``) or ``edge`` (the sweep's best lr
    stayed on an edge after :data:`MAX_WIDEN` widenings) or ``default`` (no sweep run
    finished: the scale's lr)."""
    exponents: tuple[int, ...] = ()
    """The grid: lr = base * LR_RATIO ** k for k in exponents."""
    table: Mapping[int, Mapping[int, float]] = dataclasses.field(default_factory=dict)
    """k -> seed -> final validation loss (``inf``: diverged)."""
    seeds: int = SWEEP_SEEDS
    """Seeds per lr (1 under ``--quick``)."""

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | str:
            return x if math.isfinite(x) else str(x)
        rows = [{"lr": grid_lrs(self.base, (k,))[0], "k": k,
                 "val_loss": {str(s): num(v) for s, v in sorted(self.table.get(k, {}).items())},
                 "mean": num(score(self.table.get(k, {}), self.seeds))} for k in self.exponents]
        return {"optimizer": self.optimizer, "base_lr": self.base, "lr": self.lr,
                "source": self.source, "ratio": LR_RATIO, "seeds": self.seeds, "grid": rows}


def grid_lrs(base: float, exponents: Sequence[int]) -> list[float]:
    """The lrs ``base * LR_RATIO ** k`` (rounded to 6 significant digits: stable names)."""
    return [float(f"{base * LR_RATIO ** k:.6g}") for k in exponents]


def score(by_seed: Mapping[int, float], seeds: int = SWEEP_SEEDS) -> float:
    """Mean final validation loss over ``seeds`` seeds; ``inf`` if any is missing or not
    finite."""
    vals = list(by_seed.values())
    if len(vals) < seeds or not all(math.isfinite(v) for v in vals):
        return math.inf
    return sum(vals) / len(vals)


def choose(table: Mapping[int, Mapping[int, float]], seeds: int = SWEEP_SEEDS
           ) -> tuple[int | None, bool]:
    """(best exponent, interior?) of a table k -> seed -> loss; (None, False) when nothing
    finished finite."""
    scores = {k: score(v, seeds) for k, v in table.items()}
    finite = {k: s for k, s in scores.items() if math.isfinite(s)}
    if not finite:
        return None, False
    best = min(finite, key=lambda k: (finite[k], k))
    return best, min(table) < best < max(table)


def widen(exponents: Sequence[int], best: int | None) -> tuple[int, ...] | None:
    """The grid with one more point past the edge the best sits on; None when interior or
    nothing finished (then the grid cannot be extended in a useful direction)."""
    ks = tuple(sorted(exponents))
    if best is None or ks[0] < best < ks[-1]:
        return None
    return (ks[0] - 1,) + ks if best == ks[0] else ks + (ks[-1] + 1,)


def overridden(optimizer: str, overrides: Sequence[str]) -> float | None:
    """The lr a ``--set [OPT:]optim.lr=X`` gives this optimizer (the last one wins)."""
    lr = None
    for text in overrides:
        opt, section, name, value = parse_override(text)
        if (opt is None or opt == optimizer) and (section, name) == ("optim", "lr"):
            lr = float(value)
    return lr


def sweep_configs(scale: Scale, optimizer: str, exponents: Sequence[int], *, seeds: int,
                  quick: bool, device: str | None, overrides: Sequence[str]):
    """[(k, seed, cfg)] of the synchronous sweep runs (``run_name(cfg)`` names each)."""
    out = []
    base = base_config(scale, optimizer, quick=quick, device=device, overrides=overrides)
    for k, lr in zip(exponents, grid_lrs(scale.lrs[optimizer], exponents)):
        for s in sweep_seeds(seeds):
            cfg = base.replace(optim=dataclasses.replace(base.optim, lr=lr))
            out.append((k, s, cfg.replace(run=dataclasses.replace(cfg.run, seed=s))))
    return out


def sweep_cost(scale: Scale, optimizers: Sequence[str], *, quick: bool, seeds: int,
               step_s: Callable[[str], float]) -> float:
    """Estimated process-seconds of the first grid of every optimizer (widening adds
    ``1 / len(FIRST_GRID)`` of it per point); ``step_s``: seconds per step of an optimizer's
    base run (the plan's cost model)."""
    steps = scale.quick_steps if quick else scale.steps
    return sum(step_s(o) * steps * len(FIRST_GRID) * seeds for o in optimizers)


def _read(runs_dir: Path, name: str) -> float | None:
    """Final validation loss of a finished run (``inf`` diverged), None when not finished."""
    if not is_complete(runs_dir / name):
        return None
    r = RunRecord.load(runs_dir / name)
    v = r.final_val
    return float(v) if v is not None and math.isfinite(float(v)) else math.inf


def run_lr_sweep(scale: Scale, optimizers: Sequence[str], runs_dir: str | Path,
                 train: Callable[[list[tuple[str, Any]]], None], *, seeds: int = SWEEP_SEEDS,
                 quick: bool = False, device: str | None = None,
                 overrides: Sequence[str] = ()) -> dict[str, LrChoice]:
    """Sweep every optimizer's lr (see the module docstring). ``train`` trains a list of
    (run name, config) into ``runs_dir`` (resumable; finished runs are skipped), so every
    round of widening trains only the new points, all optimizers together."""
    runs_dir = Path(runs_dir)
    grids: dict[str, tuple[int, ...]] = {}
    out: dict[str, LrChoice] = {}
    for o in optimizers:
        lr = overridden(o, overrides)
        if lr is not None:
            out[o] = LrChoice(optimizer=o, base=float(scale.lrs[o]), lr=lr, source="override")
        else:
            grids[o] = tuple(FIRST_GRID)
    for _ in range(MAX_WIDEN + 1):
        todo, names = [], {}
        for o, ks in grids.items():
            for k, s, cfg in sweep_configs(scale, o, ks, seeds=seeds, quick=quick,
                                           device=device, overrides=overrides):
                names[(o, k, s)] = run_name(cfg)
                todo.append((names[(o, k, s)], cfg))
        train(todo)
        grown = {}
        for o, ks in grids.items():
            table = {k: {s: v for s in sweep_seeds(seeds)
                         if (v := _read(runs_dir, names[(o, k, s)])) is not None} for k in ks}
            best, interior = choose(table, seeds)
            nxt = widen(ks, best) if len(ks) - len(FIRST_GRID) < MAX_WIDEN else None
            if nxt is not None and best is not None:
                grown[o] = nxt
                continue
            base = float(scale.lrs[o])
            lr = grid_lrs(base, (best,))[0] if best is not None else base
            source = "sweep" if interior else ("edge" if best is not None else "default")
            out[o] = LrChoice(optimizer=o, base=base, lr=lr, exponents=ks, table=table,
                              source=source, seeds=seeds)
        grids = grown
        if not grids:
            break
    return {o: out[o] for o in optimizers}


def tuned_scale(scale: Scale, choices: Mapping[str, LrChoice]) -> Scale:
    """The scale with the chosen lrs."""
    return dataclasses.replace(scale, lrs={**scale.lrs,
                                           **{o: c.lr for o, c in choices.items()}})


def write_sweep(out: str | Path, choices: Mapping[str, LrChoice], settings: Mapping[str, Any]
                ) -> dict[str, Any]:
    """Write ``lr_sweep.json`` (settings and one table per optimizer); returns it."""
    doc = {"settings": dict(settings), "ratio": LR_RATIO,
           "max_widen": MAX_WIDEN, "optimizers": {o: c.to_dict() for o, c in choices.items()}}
    write_json(Path(out) / SWEEP_FILE, doc)
    return doc


def read_sweep(out: str | Path) -> dict[str, Any] | None:
    """The stored table, or None."""
    p = Path(out) / SWEEP_FILE
    return read_json(p) if p.exists() else None
