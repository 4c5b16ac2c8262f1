"""The ledger's front door: :func:`reproduce` runs its phases in order, as ``run(cfg)`` runs a run.

``delaybound reproduce`` parses its flags into :class:`Options` and calls :func:`reproduce`
(or :func:`plan_for` for ``--list``, :func:`protocol_doc` for ``--protocol``); everything
between (the protocol's check, the plan and its cost model, the phases, the assembly and the
written ledger) happens here, so a script or a notebook runs the same ledger the command does.

Algorithm
    1. Record the protocol (or check it against the recorded one,
       :func:`~llm_validation.claims.report.protocol.check_protocol`) before anything trains.
    2. ``assemble_only``: re-assemble from the finished runs, training nothing (the lrs of
       ``lr_sweep.json``, the seeds the recorded extra-seeds phase chose), and stop.
    3. Phase 1, the lr sweep (:func:`~llm_validation.claims.phases.sweep_phase`); the plan is
       rebuilt on the tuned scale (``stop_after="sweep"`` stops here). ``reuse_sweep``: the
       lrs of the recorded ``lr_sweep.json`` instead, training nothing in this phase (a ledger
       swept under older rules keeps its sweep when a run the current rules name is added).
    4. Phase 2, the claims' runs over the first look's seeds; every check is analysed.
    5. Phase 3, extra seeds where the measured spread says they decide, within the budget
       (:func:`~llm_validation.claims.phases.extension_seeds`,
       :func:`~llm_validation.claims.phases.within_budget`); the first look's ledger is written
       before they train, so a stop leaves a readable ledger.
    6. The ledger: ``claims.md``, ``claims.json``, figures (:mod:`llm_validation.claims.report.ledger`).

Every phase trains into the same ``out/runs`` (named by config), so an interrupted ledger
resumes where it stopped and a finished one trains nothing.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from llm_validation.claims.catalogue.registry import get_claims
from llm_validation.claims.decide.sequential import SeedPolicy
from llm_validation.claims.phases import extension_seeds, sweep_phase, within_budget
from llm_validation.claims.plan.calibration import load_or_calibrate
from llm_validation.claims.plan.lr_sweep import FIRST_SWEEP_SEED, read_sweep
from llm_validation.claims.plan.plan import ExecutionSummary, Plan, build_plan, execute
from llm_validation.claims.plan.scales import Scale, get_scale
from llm_validation.claims.report.ledger import RUNS_DIR, analyse_ledger, assemble, write_ledger
from llm_validation.claims.report.markdown import FIGURES_DIR
from llm_validation.claims.report.protocol import check_protocol, protocol
from llm_validation.records.atomic_io import read_json

__all__ = ["Options", "Outcome", "policy_of", "plan_for", "protocol_doc", "reproduce"]


@dataclass(frozen=True, kw_only=True)
class Options:
    """What a ledger is asked for (the flags of ``delaybound reproduce``)."""

    scale: str = "tiny"
    """The scale (:data:`~llm_validation.claims.plan.scales.SCALES`)."""
    claims: tuple[str, ...] | None = None
    """Claim ids (None: the scale's default selection)."""
    seeds: int | None = None
    """Seeds per setting at the first look (None: 3; 1 with ``quick``)."""
    quick: bool = False
    """Half-length runs, one seed: a first look, every status inconclusive."""
    device: str | None = None
    """Device of every run (None: the scale's)."""
    overrides: tuple[str, ...] = ()
    """``[OPT:]SEC.FIELD=VALUE`` overrides of every claim's base run."""
    jobs: int = 2
    """Parallel training processes (0: inline)."""
    threads: int | None = None
    """Torch threads per process (None: cores / jobs)."""
    max_seeds: int = 8
    """Seeds policy: most seeds an undecided check's arms are run to (>= 3)."""
    extra_budget_min: float = 60.0
    """Seeds policy: process-minutes the extra seeds may add."""
    keep_checkpoints: bool = False
    """Keep every run's final checkpoint."""
    reanalyse: bool = False
    """Assemble under this checkout's rules although ``out`` records another protocol."""
    assemble_only: bool = False
    """Re-assemble from the finished runs, training nothing."""
    stop_after: str | None = None
    """``"sweep"``: stop after the lr sweep."""
    reuse_sweep: bool = False
    """Phase 1 reads the lrs of ``out/lr_sweep.json`` and trains nothing (the ledger keeps the
    sweep it recorded, e.g. one on seeds the current rules no longer use); the other phases
    train what is missing."""
    progress: bool = True
    """Progress lines on stderr."""

    def __post_init__(self) -> None:
        if self.seeds is not None and self.seeds < 1:
            raise ValueError(f"--seeds {self.seeds}: needs at least 1 seed (3 for a verdict)")
        if self.max_seeds < 3:
            raise ValueError(f"--max-seeds {self.max_seeds}: must be >= 3 (the first look's "
                             "seeds)")
        if self.max_seeds > FIRST_SWEEP_SEED:
            raise ValueError(f"--max-seeds {self.max_seeds}: must be <= {FIRST_SWEEP_SEED} "
                             "(the lr sweep's seeds start there; no claim may reuse them)")
        if self.jobs < 0:
            raise ValueError(f"--jobs {self.jobs}: must be >= 0")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"--threads {self.threads}: must be >= 1")
        if self.stop_after not in (None, "sweep"):
            raise ValueError(f"stop_after={self.stop_after!r}: only 'sweep'")
        if self.reuse_sweep and self.stop_after == "sweep":
            raise ValueError("--reuse-sweep with --stop-after sweep: nothing would run")

    @property
    def n_seeds(self) -> int:
        return self.seeds if self.seeds is not None else (1 if self.quick else 3)

    @property
    def n_threads(self) -> int:
        return self.threads or max(1, (os.cpu_count() or 1) // max(self.jobs, 1))


@dataclass(frozen=True)
class Outcome:
    """What :func:`reproduce` did."""

    plan: Plan
    """The final plan (extended claims at their second look's seeds)."""
    doc: dict[str, Any] | None
    """The ledger as written to ``claims.json`` (None: stopped after the sweep)."""
    results: list[Any] = field(default_factory=list)
    """One result per claim of the plan."""
    trained: int = 0
    """Runs trained by this invocation, every phase."""
    summary: ExecutionSummary | None = None
    """The claims' runs' execution (None: assemble-only or stopped)."""
    errors: list[str] = field(default_factory=list)
    """One line per run that raised."""


def policy_of(options: Options) -> SeedPolicy:
    """The seeds policy of ``options``."""
    return SeedPolicy(max_seeds=options.max_seeds, budget_min=options.extra_budget_min)


def _log(options: Options, text: str) -> None:
    if options.progress:
        print(f"[reproduce] {text}", file=sys.stderr, flush=True)


def plan_for(options: Options, out: str | Path | None = None, *, measure: bool = False,
             scale: Scale | None = None, claim_seeds: Mapping[str, tuple[int, ...]] | None = None,
             cost_model: Any = None) -> Plan:
    """The plan at ``scale`` (default ``options.scale``; ``claim_seeds``: the second look's
    seeds), its costs from ``cost_model``, else ``out``'s cached calibration (measured now when
    ``measure`` and there is none), else the scale's constants."""
    scale = scale or get_scale(options.scale)
    claims = get_claims(options.claims or scale.claims)
    kw = dict(seeds=tuple(range(options.n_seeds)), quick=options.quick, device=options.device,
              overrides=options.overrides, claim_seeds=claim_seeds)
    if cost_model is not None:
        return build_plan(claims, scale, cost_model=cost_model, **kw)
    plan = build_plan(claims, scale, **kw)
    if not out or not plan.available():
        return plan
    if measure:
        _log(options, "calibrating the cost model on this machine (cached in "
                      f"{os.path.join(out, 'calibration.json')})")
    costs = load_or_calibrate(out, scale, [r.cfg.optim.name for r in plan.available()],
                              quick=options.quick, device=options.device,
                              overrides=options.overrides, threads=options.n_threads,
                              measure=measure)
    return plan if costs is None else build_plan(claims, scale, cost_model=costs, **kw)


def protocol_doc(options: Options) -> dict[str, Any]:
    """The rules a ledger of ``options`` is decided by (before any run)."""
    plan = plan_for(options)
    return protocol(plan.claims, plan.scale, policy_of(options), plan.seeds, plan.overrides)


def _recorded_phases(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """A recorded claims.json's phases (``phases``; ledgers written before the key was named
    so hold them under ``stages``, e.g. docs/claims_tiny/issue16/claims.json)."""
    return doc.get("phases", doc.get("stages", {}))


def _recorded_scale(out: Path, scale: Any, flag: str) -> Any:
    """``scale`` at the lrs ``out/lr_sweep.json`` recorded; ``ValueError`` naming ``flag``
    when there is none."""
    sweep = read_sweep(out)
    if sweep is None:
        raise ValueError(f"{flag}: {out} has no lr_sweep.json")
    return dataclasses.replace(scale, lrs={**scale.lrs, **{
        o: float(c["lr"]) for o, c in sweep["optimizers"].items()}})


def _assemble_only(options: Options, out: Path, plan: Plan, record: dict) -> Outcome:
    """Re-assemble from the finished runs: the lrs of ``lr_sweep.json`` and the seeds the
    recorded extra-seeds phase ran each claim to."""
    scale = _recorded_scale(out, plan.scale, "--assemble-only")
    old = out / "claims.json"
    exts = _recorded_phases(read_json(old)).get("seeds_policy", {}).get("extensions", []) \
        if old.exists() else []
    chosen = {e["claim"]: tuple(range(e["seeds"])) for e in exts if e.get("seeds")}
    plan = plan_for(options, out, scale=scale, cost_model=plan.cost_model, claim_seeds=chosen)
    policy = policy_of(options)
    results = assemble(plan, out, policy=policy)
    doc = write_ledger(plan, results, out, None,
                       seeds_policy={**policy.to_dict(), "extensions": exts}, protocol=record)
    return Outcome(plan, doc, list(results))


def reproduce(options: Options, out: str | Path,
              check_device: Callable[[str], None] | None = None) -> Outcome:
    """Run the ledger of ``options`` in ``out`` (module docstring): the protocol, the phases,
    the ledger. ``check_device(device)`` raises when the plan's device is unusable here.
    Raises :class:`~llm_validation.claims.report.protocol.ProtocolMismatch` when ``out``
    records other rules (unless ``options.reanalyse``)."""
    out = Path(out)
    policy = policy_of(options)
    record = check_protocol(out, protocol_doc(options), reanalyse=options.reanalyse)
    plan = plan_for(options, out, measure=not options.assemble_only)
    if check_device is not None:
        check_device(plan.device)
    if options.assemble_only:
        return _assemble_only(options, out, plan, record)
    errors: list[str] = []
    trained = [0]              # every phase's runs, the lr sweep's included

    def train(p: Plan) -> ExecutionSummary:
        s = execute(p, out / RUNS_DIR, jobs=options.jobs, threads=options.n_threads,
                    progress=options.progress, keep_checkpoints=options.keep_checkpoints)
        errors.extend(s.errors)
        trained[0] += s.ran
        return s

    if options.reuse_sweep:
        scale = _recorded_scale(out, plan.scale, "--reuse-sweep")
        _log(options, "phase 1/3: lr sweep: the recorded lr_sweep.json's lrs (nothing trains)")
    else:
        _log(options, "phase 1/3: lr sweep")
        scale, _ = sweep_phase(plan.scale, plan.claims, out, quick=plan.quick,
                               device=options.device, overrides=plan.overrides, train=train,
                               runs_dir=RUNS_DIR, figures_dir=FIGURES_DIR,
                               cost_model=plan.cost_model)
    plan = plan_for(options, out, scale=scale, cost_model=plan.cost_model)
    if options.stop_after == "sweep":
        _log(options, f"stopped after the lr sweep ({out / 'lr_sweep.json'})")
        return Outcome(plan, None, trained=trained[0], errors=errors)
    _log(options, "phase 2/3: the claims' runs")
    summary = train(plan)
    # the seeds policy is per check (each check's look at 97.5%, as the protocol states): which
    # claims get extra seeds is read off the per-check decisions, not the family's
    analysed = analyse_ledger(plan, out, policy)
    results = assemble(plan, out, policy=policy, analysed=analysed)
    exts = [] if plan.quick else extension_seeds(analysed[0], policy, len(plan.seeds))
    base = plan
    exts = within_budget(exts, base, lambda chosen: plan_for(
        options, out, scale=scale, cost_model=base.cost_model, claim_seeds=chosen),
        policy.budget_min * 60)
    policy_doc = {**policy.to_dict(), "extensions": [e.to_dict() for e in exts]}
    if any(e.seeds for e in exts):
        # the first look's ledger, so that a stop during phase 3 leaves a readable ledger
        write_ledger(plan, results, out, summary, seeds_policy={**policy_doc, "pending": True},
                     protocol=record)
        _log(options, f"first look written to {out / 'claims.md'}; phase 3/3: extra seeds")
        plan = plan_for(options, out, scale=scale, cost_model=plan.cost_model,
                        claim_seeds={e.claim_id: tuple(range(e.seeds)) for e in exts if e.seeds})
        summary = summary.followed_by(train(plan))
        results = assemble(plan, out, policy=policy)
    doc = write_ledger(plan, results, out, summary, seeds_policy=policy_doc, protocol=record)
    return Outcome(plan, doc, list(results), trained[0], summary, errors)
