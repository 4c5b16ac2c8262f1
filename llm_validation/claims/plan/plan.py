"""The runs a set of claims needs: distinct configs, their cost, and their execution.

:func:`build_plan` resolves every arm of every selected claim (and its synchronous partner)
against the scale's base run of its optimizer, for every seed, and keeps one :class:`PlannedRun`
per distinct config: claims that need the same run share it. A run is named by
:func:`~llm_validation.records.run_name.run_name` (``<sweep point name>-<8 hex digits of the
config>``), so two configs never share a directory and the same config always finds its
directory again. An arm that this checkout cannot configure (a config field or optimizer not
there yet), and a long-horizon arm (``Arm.long``) of a ``--quick`` plan, becomes an
*unavailable* run with the reason; the claims that need it come out inconclusive, saying why.

:func:`execute` trains what is missing through :func:`llm_validation.sweep.runner.run_sweep`
(resumable: finished runs are skipped, interrupted ones resumed; ``index.json`` next to the
runs) with a progress line per finished run on stderr whose ETA is weighted by the estimated
cost of the runs left. Checkpoints of finished runs are removed unless ``keep_checkpoints``
(the ledger reads only config, metrics and summary; a SmolLM-135M checkpoint is ~3 GB).

Cost model (:mod:`llm_validation.claims.plan.calibration`): ``sec_per_step[optimizer] x steps x
batch / base batch`` seconds of one process (one CPU core or one GPU), with ``sec_per_step``
measured on this machine when a calibration is passed, else the constants ``Scale.sec_per_step
x OPT_COST[optimizer]``; the wall time is about that over ``--jobs``.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Sequence, TextIO

from llm_validation.claims.record.arms import Unavailable, resolve
from llm_validation.claims.record.claim import Claim
from llm_validation.claims.plan.calibration import CostModel, constant_model
from llm_validation.claims.plan.scales import Scale, base_config
from llm_validation.config import OPTIMIZERS, TrainConfig
from llm_validation.records.run_name import run_name
from llm_validation.rundir import RunPaths
from llm_validation.sweep.grid import SweepPoint
from llm_validation.validation.runs import is_complete

#: Why a long-horizon arm has no run in a ``--quick`` plan.
QUICK_SKIP = "a long-horizon arm, not run under --quick (its cost would exceed the quick budget)"

#: ``run_name`` stays importable from here: the delay-law design names its runs with
#: ``claims.plan.plan.run_name`` (the one home is :mod:`llm_validation.records.run_name`).
__all__ = ["QUICK_SKIP", "config_plan", "PlannedRun", "Plan", "build_plan", "execute", "run_name",
           "ExecutionSummary"]


@dataclass(frozen=True, kw_only=True)
class PlannedRun:
    """One distinct run (or one that cannot be configured here)."""

    name: str
    """Run directory name (``unavailable:<arm>:s<seed>`` when ``cfg`` is None)."""
    cfg: TrainConfig | None
    """The resolved config; None when unavailable."""
    seed: int
    uses: tuple[tuple[str, str], ...]
    """(claim id, arm key) pairs that read this run."""
    cost_s: float
    """Estimated seconds of one process."""
    unavailable: str = ""
    """Why it cannot be configured (empty when it can)."""


@dataclass(frozen=True, kw_only=True)
class Plan:
    """All runs of the selected claims, deduplicated."""

    scale: Scale
    seeds: tuple[int, ...]
    quick: bool
    device: str
    overrides: tuple[str, ...]
    claims: tuple[Claim, ...]
    runs: tuple[PlannedRun, ...]
    """Distinct runs, in first-use order."""
    cost_model: CostModel
    """How the runs' ``cost_s`` were estimated (calibrated here, or the scale's constants)."""
    index: Mapping[str, Mapping[tuple[str, int], str]] = field(repr=False)
    """claim id -> (arm key, seed) -> run name."""
    claim_seeds: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """claim id -> its own seeds where they differ from ``seeds`` (the second look)."""

    def seeds_of(self, claim_id: str) -> tuple[int, ...]:
        """The seeds of one claim (the seeds policy's, else the ledger's extended to the
        claim's ``min_seeds``)."""
        if claim_id in self.claim_seeds:
            return self.claim_seeds[claim_id]
        claim = next((c for c in self.claims if c.id == claim_id), None)
        return self.seeds if claim is None else _claim_seeds(claim, self.seeds, self.quick)

    def run(self, name: str) -> PlannedRun:
        return self._by_name[name]

    @cached_property
    def _by_name(self) -> dict[str, PlannedRun]:
        return {r.name: r for r in self.runs}

    def claim_runs(self, claim_id: str) -> list[PlannedRun]:
        """The distinct runs one claim reads."""
        names = dict.fromkeys(self.index[claim_id].values())
        by = self._by_name
        return [by[n] for n in names]

    def cost(self, claim_id: str | None = None) -> float:
        """Estimated process-seconds of the available runs (of one claim, or all distinct)."""
        runs = self.claim_runs(claim_id) if claim_id else self.runs
        return sum(r.cost_s for r in runs if r.cfg is not None)

    def available(self) -> list[PlannedRun]:
        return [r for r in self.runs if r.cfg is not None]

    def unavailable(self) -> list[PlannedRun]:
        return [r for r in self.runs if r.cfg is None]


def _claim_seeds(claim: Claim, seeds: tuple[int, ...], quick: bool) -> tuple[int, ...]:
    """The ledger's seeds, extended to the claim's ``min_seeds`` (not under ``--quick``)."""
    if quick or claim.min_seeds <= len(seeds):
        return seeds
    return tuple(sorted(set(seeds) | set(range(claim.min_seeds))))


def build_plan(claims: Sequence[Claim], scale: Scale, *, seeds: Sequence[int],
               quick: bool = False, device: str | None = None,
               overrides: Sequence[str] = (), cost_model: CostModel | None = None,
               claim_seeds: Mapping[str, Sequence[int]] | None = None) -> Plan:
    """Resolve every arm (and partner) of ``claims`` for every seed (see the module docstring;
    ``cost_model``: the machine's calibration, else the scale's constants; ``claim_seeds``:
    claim id -> its own seeds, the seeds policy's second look, else ``seeds``)."""
    own = {k: tuple(v) for k, v in (claim_seeds or {}).items()}
    costs = cost_model or constant_model(scale, OPTIMIZERS)
    if not claims:
        raise ValueError("build_plan: no claims selected")
    seeds = tuple(seeds)
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
        raise ValueError(f"seeds={seeds!r} must be a non-empty list of ints >= 0")
    bases: dict[str, TrainConfig | Unavailable] = {}
    runs: dict[str, PlannedRun] = {}
    index: dict[str, dict[tuple[str, int], str]] = {}
    base_batch = None
    for claim in claims:
        index[claim.id] = {}
        for arm in claim.all_arms():
            if arm.optimizer not in bases:
                try:
                    bases[arm.optimizer] = base_config(scale, arm.optimizer, quick=quick,
                                                       device=device, overrides=overrides)
                except (ValueError, TypeError) as exc:
                    bases[arm.optimizer] = Unavailable(
                        f"optimizer {arm.optimizer!r} cannot be configured here: {exc}")
            base = bases[arm.optimizer]
            for seed in own.get(claim.id, _claim_seeds(claim, seeds, quick)):
                cfg, why = None, ""
                if isinstance(base, Unavailable):
                    why = str(base)
                elif quick and arm.long:
                    why = QUICK_SKIP
                else:
                    if base_batch is None:
                        base_batch = base.run.batch_size
                    try:
                        cfg = resolve(arm, base)
                        cfg = cfg.replace(run=_with_seed(cfg, seed))
                    except Unavailable as exc:
                        cfg, why = None, str(exc)
                name = run_name(cfg) if cfg is not None else f"unavailable:{arm.key}:s{seed}"
                index[claim.id][(arm.key, seed)] = name
                prev = runs.get(name)
                use = (claim.id, arm.key)
                if prev is None:
                    cost = costs.run_cost(cfg, base_batch) if cfg is not None else 0.0
                    runs[name] = PlannedRun(name=name, cfg=cfg, seed=seed, uses=(use,),
                                            cost_s=cost, unavailable=why)
                elif use not in prev.uses:
                    runs[name] = PlannedRun(name=name, cfg=prev.cfg, seed=seed,
                                            uses=prev.uses + (use,), cost_s=prev.cost_s,
                                            unavailable=prev.unavailable)
    return Plan(scale=scale, seeds=seeds, quick=quick,
                device=device or scale.device, overrides=tuple(overrides),
                claims=tuple(claims), runs=tuple(runs.values()), cost_model=costs, index=index,
                claim_seeds=own)


def config_plan(scale: Scale, configs: Sequence[tuple[str, TrainConfig]], *, quick: bool,
                device: str | None, overrides: Sequence[str] = (),
                cost_model: CostModel | None = None) -> Plan:
    """A plan of named configs outside any claim (the lr sweep's runs), for :func:`execute`."""
    costs = cost_model or constant_model(scale, OPTIMIZERS)
    base_batch = base_config(scale, "adamw", quick=quick).run.batch_size
    runs = {n: PlannedRun(name=n, cfg=c, seed=c.run.seed, uses=(),
                          cost_s=costs.run_cost(c, base_batch)) for n, c in configs}
    return Plan(scale=scale, seeds=tuple(sorted({c.run.seed for _, c in configs})) or (0,),
                quick=quick, device=device or scale.device, overrides=tuple(overrides),
                claims=(), runs=tuple(runs.values()), cost_model=costs, index={})


def _with_seed(cfg: TrainConfig, seed: int):
    return dataclasses.replace(cfg.run, seed=int(seed))


@dataclass(frozen=True, kw_only=True)
class ExecutionSummary:
    """What :func:`execute` did."""

    ran: int
    """Runs trained (started or resumed) by this invocation."""
    reused: int
    """Finished runs found and reused."""
    errors: tuple[str, ...]
    """``name: message`` of runs that raised."""
    unavailable: int
    """Runs that cannot be configured in this checkout."""
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"ran": self.ran, "reused": self.reused, "errors": list(self.errors),
                "unavailable": self.unavailable, "wall_s": round(self.wall_s, 1)}

    def followed_by(self, later: "ExecutionSummary") -> "ExecutionSummary":
        """One invocation's two trainings as one, where ``later`` ran a plan that holds this
        one's runs (the extra seeds after the claims' runs): what this one trained, ``later``
        counted as reused."""
        return ExecutionSummary(ran=self.ran + later.ran, reused=later.reused - self.ran,
                                errors=self.errors + later.errors,
                                unavailable=later.unavailable, wall_s=self.wall_s + later.wall_s)


class _CostProgress:
    """Progress lines on a stream with an ETA weighted by the estimated cost left."""

    WIDTH = 24

    def __init__(self, costs: Mapping[str, float], stream: TextIO, enabled: bool) -> None:
        self.costs, self.stream, self.enabled = dict(costs), stream, enabled
        self.total = sum(self.costs.values()) or 1.0
        self.done_cost, self.done = 0.0, 0
        self.t0 = time.perf_counter()

    def start(self, reused: int, unavailable: int) -> None:
        if self.enabled:
            print(f"[reproduce] {len(self.costs)} runs to train (estimated "
                  f"{self.total / 60:.0f} process-minutes), {reused} finished runs reused, "
                  f"{unavailable} unavailable", file=self.stream, flush=True)

    def update(self, o: Any) -> None:
        if o.name not in self.costs:
            return
        self.done += 1
        self.done_cost += self.costs[o.name]
        if not self.enabled:
            return
        el = time.perf_counter() - self.t0
        frac = self.done_cost / self.total
        eta = max(0.0, el * (1 - frac) / frac) if frac > 0 else float("nan")
        fill = int(self.WIDTH * frac)
        val = f" val {o.final_val_loss:.4f}" if o.final_val_loss is not None else ""
        print(f"[reproduce] [{'#' * fill}{'.' * (self.WIDTH - fill)}] {self.done}/"
              f"{len(self.costs)} runs {frac:.0%} | {o.name}: {o.status}{val} "
              f"({o.wall_time_s:.0f}s) | elapsed {el:.0f}s eta {eta:.0f}s",
              file=self.stream, flush=True)


def execute(plan: Plan, runs_dir: str | Path, *, jobs: int = 2, threads: int | None = None,
            progress: bool = True, keep_checkpoints: bool = False,
            stream: TextIO | None = None) -> ExecutionSummary:
    """Train the plan's missing runs into ``runs_dir`` (see the module docstring)."""
    from llm_validation.sweep.runner import plan as sweep_plan, run_sweep  # torch: load late
    runs_dir = Path(runs_dir)
    t0 = time.perf_counter()
    points = [SweepPoint(r.name, r.cfg) for r in plan.available()]
    actions = sweep_plan(points, runs_dir) if points else []
    todo = {p.name for p, a in actions if a != "skip"}
    reused = len(actions) - len(todo)
    bar = _CostProgress({n: plan.run(n).cost_s for n in todo}, stream or sys.stderr, progress)
    bar.start(reused, len(plan.unavailable()))

    def done(o: Any) -> None:
        bar.update(o)
        run_dir = runs_dir / o.name
        ck = RunPaths(run_dir).checkpoints
        if not keep_checkpoints and ck.is_dir() and is_complete(run_dir):
            shutil.rmtree(ck)

    outcomes = run_sweep(points, runs_dir, jobs=jobs, threads=threads, progress=False,
                         grid={"scale": plan.scale.name, "quick": plan.quick,
                               "seeds": list(plan.seeds), "overrides": list(plan.overrides),
                               "claims": [c.id for c in plan.claims]},
                         on_done=done) if points else []
    errors = tuple(f"{o.name}: {o.message}" for o in outcomes if o.status == "error")
    return ExecutionSummary(ran=len(todo), reused=reused, errors=errors,
                            unavailable=len(plan.unavailable()),
                            wall_s=time.perf_counter() - t0)
