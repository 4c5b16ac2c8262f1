"""The ledger's phases in order: lr sweep -> the claims' runs -> extra seeds where they decide.

1. **lr sweep** (:mod:`llm_validation.claims.plan.lr_sweep`): each optimizer the selected claims use
   gets its peak lr from synchronous runs at the scale; the claims then run on the tuned scale
   (``lr_sweep.json``, ``figures/lr_sweep.png``).
2. **claims**: every claim's arms over the first look's seeds (3; ``--seeds``).
3. **extra seeds** (:mod:`llm_validation.claims.decide.sequential`): the claims with an inconclusive
   check that the measured spread says ``max_seeds`` seeds would decide get their arms run to
   that count, and are analysed again; the others report "needs N seeds". Every check decides
   at its look's level (``SeedPolicy.level_at``, through ``ledger.assemble``), so the stated
   error rate holds over both looks.

Every phase trains through :func:`llm_validation.claims.plan.plan.execute` into the same ``runs/``
(named by config), so an interrupted ledger resumes where it stopped and a finished one trains
nothing. :func:`phase_costs` gives ``reproduce --list`` each phase's cost. ("Stage" in this
package means a pipeline stage only; the ledger's steps are its phases, ``phases`` in
``claims.json`` and "Phases" in ``claims.md``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from llm_validation.claims.decide.checks import GROUP_KINDS, SEED_KINDS
from llm_validation.claims.record.claim import Claim
from llm_validation.claims.plan.lr_sweep import (FIRST_GRID, LR_RATIO, MAX_WIDEN, SWEEP_SEEDS,
                                            LrChoice, overridden, run_lr_sweep, sweep_cost,
                                            tuned_scale, write_sweep)
from llm_validation.claims.plan.plan import Plan, config_plan
from llm_validation.claims.plan.scales import AUX_OPTIMIZERS, Scale
from llm_validation.claims.decide.seeds import distances
from llm_validation.claims.decide.sequential import SeedPolicy, second_look
from llm_validation.validation.verdict import INCONCLUSIVE

__all__ = ["optimizers_of", "sweep_order", "sweep_phase", "phase_costs", "extension_seeds", "Extension",
           "within_budget"]


def optimizers_of(claims: Sequence[Claim]) -> tuple[str, ...]:
    """The optimizers the claims train, in first-use order."""
    return tuple(dict.fromkeys(o for c in claims for o in c.optimizers()))


def sweep_phase(scale: Scale, claims: Sequence[Claim], out: str | Path, *, quick: bool,
             device: str | None, overrides: Sequence[str], train: Callable[[Plan], Any],
             runs_dir: str = "runs", figures_dir: str = "figures", cost_model: Any = None
             ) -> tuple[Scale, dict[str, LrChoice]]:
    """Phase 1: sweep (runs in ``out/runs_dir``), store the table under ``out`` and the figure
    under ``out/figures_dir``, return the tuned scale. ``train(plan)`` trains a plan's
    missing runs. ``--quick`` sweeps one seed."""
    from llm_validation.claims.report.figures import plot_lr_sweep
    out = Path(out)

    def train_configs(todo):
        if todo:
            train(config_plan(scale, todo, quick=quick, device=device, overrides=overrides,
                              cost_model=cost_model))

    seeds = 1 if quick else SWEEP_SEEDS
    choices: dict[str, LrChoice] = {}
    for group in sweep_order(scale, optimizers_of(claims)):
        choices.update(run_lr_sweep(scale, group, out / runs_dir, train_configs, seeds=seeds,
                                    quick=quick, device=device, overrides=overrides))
        scale = tuned_scale(scale, choices)
    write_sweep(out, choices, {"scale": scale.name, "quick": quick, "seeds": seeds})
    plot_lr_sweep(choices, out / figures_dir,
                  title=f"lr sweep at scale {scale.name} (synchronous, {seeds} seed(s); "
                        "ringed: the lr used)")
    return tuned_scale(scale, choices), choices


def sweep_order(scale: Scale, optimizers: Sequence[str]) -> list[tuple[str, ...]]:
    """The sweep's rounds: one round of every optimizer, except at a scale whose Muon and
    NorMuon run their AdamW part at the AdamW lr (``Scale.aux_lr_from_adamw``): AdamW is swept
    first (added when only those optimizers need it), the others on its choice."""
    opts = tuple(optimizers)
    if not scale.aux_lr_from_adamw or not any(o in AUX_OPTIMIZERS for o in opts):
        return [opts]
    return [("adamw",), tuple(o for o in opts if o != "adamw")]


def phase_costs(claims: Sequence[Claim], scale: Scale, plan: Plan, *, quick: bool,
                overrides: Sequence[str], policy: SeedPolicy) -> list[dict[str, Any]]:
    """Each phase with its estimated process-seconds (``reproduce --list``)."""
    opts = [o for o in optimizers_of(claims) if overridden(o, overrides) is None]
    seeds = 1 if quick else SWEEP_SEEDS
    first = sweep_cost(scale, opts, quick=quick, seeds=seeds, step_s=plan.cost_model.step_s)
    per_seed = plan.cost() / max(len(plan.seeds), 1)
    extra = 0 if quick else max(policy.max_seeds - len(plan.seeds), 0)
    return [
        {"phase": "lr-sweep", "optimizers": opts,
         "grid": f"scale lr x {LR_RATIO:g}^k, k in {list(FIRST_GRID)}, widened by one point "
                 f"past an edge while the best sits there (at most {MAX_WIDEN})",
         "seeds": seeds, "runs": len(opts) * len(FIRST_GRID) * seeds,
         "estimated_process_s": round(first, 1),
         "estimated_process_s_max": round(first * (len(FIRST_GRID) + MAX_WIDEN)
                                          / len(FIRST_GRID), 1),
         "note": "the sweep's own seeds (from FIRST_SWEEP_SEED), none a claim uses; "
                 "--set OPT:optim.lr=X skips an optimizer"},
        {"phase": "claims", "seeds": list(plan.seeds), "runs": len(plan.runs),
         "estimated_process_s": round(plan.cost(), 1)},
        {"phase": "extra-seeds", "policy": policy.to_dict(),
         "estimated_process_s": 0.0,
         "estimated_process_s_max": round(min(per_seed * extra, policy.budget_min * 60), 1),
         "note": "only the arms of inconclusive checks that max_seeds would decide at the "
                 "measured spread, cheapest claims first within the extra-seeds budget "
                 f"({policy.budget_min:g} process-minutes; every arm to max_seeds would be "
                 f"~{per_seed * extra / 60:.0f})" +
                 ("; not run under --quick" if quick else "")},
    ]


class Extension:
    """What the seeds policy does with one claim after the first look."""

    def __init__(self, claim_id: str, seeds: int | None, needs: Mapping[str, int | None],
                 over_budget: int | None = None, cost_s: float = 0.0):
        self.claim_id = claim_id
        self.seeds = seeds
        """Seeds to run the claim's arms to (None: not extended)."""
        self.needs = dict(needs)
        """check label -> seeds it needs at the second look's level (None: no finite count)."""
        self.over_budget = over_budget
        """The seeds it would have run to, when the extra-seeds budget left it out."""
        self.cost_s = cost_s
        """Estimated process-seconds of the runs its extension adds."""

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim_id, "seeds": self.seeds, "needs": self.needs,
                "over_budget": self.over_budget, "added_process_s": round(self.cost_s, 1)}


def _seed_checks(checks: Sequence[Any]) -> list[Any]:
    """Inconclusive checks (parts of aggregates included, the aggregates themselves not) that
    a seed count can decide: every seed kind and the group kinds but ``divergence`` (which
    counts outcomes)."""
    out = []
    for c in checks:
        out += _seed_checks(getattr(c, "parts", ()) or ())
        if c.status == INCONCLUSIVE and (c.kind in SEED_KINDS and len(c.samples) >= 2 or
                                         c.kind in GROUP_KINDS and c.kind != "divergence"
                                         and any(c.inputs.values())):
            out.append(c)
    return out


def _look(c: Any, policy: SeedPolicy) -> tuple[int | None, int | None]:
    """(seeds to run the check's arms to, seeds it needs) after an undecided look 1, by
    :func:`~llm_validation.claims.decide.sequential.second_look` on the distance each outcome the
    estimate points to must clear (:func:`~llm_validation.claims.decide.seeds.distances`, the rule of
    the ledger's seeds-needed column): the nearest outcome for a seed kind; every group's
    interval must exclude 0 for a group kind (the largest count)."""
    if c.kind in GROUP_KINDS:
        looks = [second_look([float(x) for x in v.values()], 0.0, policy)
                 for v in c.inputs.values() if v]
        ns, needs = [n for n, _ in looks], [need for _, need in looks]
        return (None if None in ns else max(ns)), (None if None in needs else max(needs))
    vals = [float(v) for v in c.samples.values()]
    m = sum(vals) / len(vals)
    looks = [second_look(vals, m - d, policy) for d in distances(c.kind, m, c.params) if d > 0]
    looks = [lk for lk in looks if lk[1] is not None]
    return min(looks, key=lambda lk: lk[1]) if looks else (None, None)


def extension_seeds(results: Sequence[Any], policy: SeedPolicy,
                    seeds_now: int) -> list[Extension]:
    """Per inconclusive claim: the seeds its arms go to (the largest second look among its
    deciding checks, at most ``policy.max_seeds``) and every open check's need."""
    out = []
    for r in results:
        if r.status != INCONCLUSIVE:
            continue
        needs, go = {}, []
        for c in _seed_checks(tuple(r.checks) + tuple(getattr(r, "details", ()))):
            n, need = _look(c, policy)
            needs[c.label] = need
            if n is not None and n > seeds_now:
                go.append(n)
        out.append(Extension(r.id, max(go) if go else None, needs))
    return out


def within_budget(extensions: Sequence[Extension], base: Plan,
                  plan_for: Callable[[Mapping[str, tuple[int, ...]]], Plan],
                  budget_s: float) -> list[Extension]:
    """The extensions with those that do not fit ``budget_s`` estimated process-seconds of
    added runs left out (``seeds`` None, ``over_budget`` set). Cheapest first (runs shared
    between claims count once); ``plan_for(claim_seeds)`` builds the plan of a choice."""
    have = {r.name for r in base.available()}

    def added(chosen: Mapping[str, tuple[int, ...]]) -> float:
        return sum(r.cost_s for r in plan_for(chosen).available() if r.name not in have)

    alone = {e.claim_id: added({e.claim_id: tuple(range(e.seeds))}) for e in extensions
             if e.seeds}
    chosen: dict[str, tuple[int, ...]] = {}
    spent, out = 0.0, {}
    for e in sorted((e for e in extensions if e.seeds), key=lambda e: alone[e.claim_id]):
        trial = {**chosen, e.claim_id: tuple(range(e.seeds))}
        cost = added(trial)
        if cost <= budget_s:
            chosen, out[e.claim_id] = trial, Extension(e.claim_id, e.seeds, e.needs,
                                                        cost_s=cost - spent)
            spent = cost
        else:
            out[e.claim_id] = Extension(e.claim_id, None, e.needs, over_budget=e.seeds,
                                        cost_s=alone[e.claim_id])
    return [out.get(e.claim_id, e) for e in extensions]
