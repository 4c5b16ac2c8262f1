"""The property checks as a plain function (what ``delaybound verify`` runs, no pytest needed).

:func:`verify_suite` draws, per theorem with a simulation spec, ``examples`` random instances
(problem family, size, tau in 0..8, eta, alpha, beta, sigma, lam, seed; each satisfying the
theorem's assumptions, see :mod:`numerics.specs`), checks every one with
:func:`numerics.verify.sweep` (anytime bound at every step + pathwise statements) and
summarises: instances, violations, the worst ratios with their parameters. It also evaluates
every proof predicate of ``theory.predicates`` on real trajectories
(:mod:`numerics.trajectory_checks`). Deterministic for a given ``seed``.
"""

from __future__ import annotations

import zlib
from typing import Callable

import numpy as np

from numerics.problems import make_problem
from numerics.specs import SPECS
from numerics.trajectory_checks import SCENARIOS, scenario_slacks
from numerics.verify import DEFAULT_SEEDS, sweep
import theory
from theory.proof import TOL

__all__ = ["verify_suite", "sample_instances", "predicate_suite", "SIZES"]

#: Problem sizes drawn per family (dimension; for matrix_ls the matrix is (n+2) x n).
SIZES = {"quadratic_l2": (2, 12), "quadratic_linf": (2, 10), "matrix_ls": (2, 3),
         "angular": (2, 10), "pl_sine": (1, 12)}


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def sample_instances(name: str, examples: int, seed: int, *, problems_per_family: int = 1) -> list:
    """``examples`` (problem, config) pairs for theorem ``name``, spread round-robin over a pool
    of ``problems_per_family`` random problems per family of its spec (one batch each)."""
    spec = SPECS[name]
    rng = _rng(seed, name)
    pool = []
    for fam in spec.families:
        lo, hi = SIZES[fam]
        for _ in range(problems_per_family):
            pool.append(make_problem(fam, int(rng.integers(lo, hi + 1)), int(rng.integers(0, 10**6))))
    out = []
    for i in range(examples):
        p = pool[i % len(pool)]
        c = spec.sample(rng, p)
        if spec.applies(p, c):  # samplers satisfy the assumptions; guard against drift
            raise RuntimeError(f"sampler for {name} produced an invalid instance: {spec.applies(p, c)}")
        out.append((p, c))
    return out


def _summary(name: str, verdicts: list) -> dict:
    def brief(v):
        return {"ratio": v.ratio, "ratio_lower": v.ratio_lower, "ratio_tail": v.ratio_tail,
                "ratio_tail_lower": v.ratio_tail_lower,
                "problem": v.problem, "config": vars(v.config), "step": v.step,
                "bound": v.bound, "observed": v.observed, "seeds": v.seeds}

    bad = [v for v in verdicts if not v.holds]
    pathwise: dict[str, float] = {}
    for v in verdicts:
        for k, s in v.pathwise.items():
            pathwise[k] = min(pathwise.get(k, float("inf")), s)
    return {
        "theorem": name,
        "instances": len(verdicts),
        "violations": len(bad),
        "worst": brief(max(verdicts, key=lambda v: v.ratio_lower)),
        "worst_tail": brief(max(verdicts, key=lambda v: v.ratio_tail_lower)),
        "min_pathwise_slack": pathwise,
        "failures": [v.as_dict() for v in bad[:5]],
        "evaluate_errors": sum(bool(v.evaluate_error) for v in verdicts),
        "evaluate_error_example": next((v.evaluate_error for v in verdicts if v.evaluate_error), ""),
    }


def predicate_suite(examples: int, seed: int, steps: int = 60, seeds: int = 6,
                    progress: Callable[[str], None] | None = None) -> dict:
    """Every scenario on one random problem per eligible family with ``examples`` configurations:
    predicate -> {"instances", "min_slack", "violations"}."""
    out: dict[str, dict] = {}
    for name, sc in SCENARIOS.items():
        rng = _rng(seed, "predicates/" + name)
        for fam in SIZES:
            lo, hi = SIZES[fam]
            p = make_problem(fam, int(rng.integers(lo, min(hi, 6) + 1)), int(rng.integers(0, 10**6)))
            if p.geometry.name not in sc.geometries:
                continue
            cfgs = [sc.sample(rng, p) for _ in range(examples)]
            slacks = scenario_slacks(name, p, cfgs, steps, seeds=seeds)
            for pred, s in slacks.items():
                row = out.setdefault(pred, {"instances": 0, "min_slack": float("inf"), "violations": 0})
                row["instances"] += len(cfgs)
                row["min_slack"] = min(row["min_slack"], s)
                row["violations"] += int(not s >= -TOL)  # TOL: slack round-off allowance
            if progress:
                progress(f"predicates {name} on {p.name}")
    return out


def verify_suite(theorems: list[str] | None = None, *, examples: int = 100, seed: int = 0,
                 steps: int = 200, seeds: int = DEFAULT_SEEDS, predicates: bool = True,
                 progress: Callable[[str], None] | None = None) -> dict:
    """Run the checks; returns ``{"theorems": [...], "skipped": [...], "predicates": {...},
    "violations": total}`` (see ``docs/numerics.md`` for the fields)."""
    registry = theory.THEOREMS  # read at call time: a replaced registry (a planted bound) counts
    names = sorted(registry) if theorems is None else list(theorems)
    for n in names:
        if n not in registry:
            raise ValueError(f"theorem={n!r} is not one of {sorted(registry)}")
    results, skipped = [], []
    for n in names:
        if n not in SPECS:
            skipped.append(n)
            continue
        inst = sample_instances(n, examples, seed)

        def tick(done, total, n=n):
            if progress:
                progress(f"{n}: {done}/{total}")

        verdicts = sweep(registry[n], inst, steps, seeds=seeds, progress=tick)
        results.append(_summary(n, verdicts))
    preds = predicate_suite(max(2, examples // 50), seed, seeds=seeds, progress=progress) if predicates else {}
    total = sum(r["violations"] for r in results) + sum(r["violations"] for r in preds.values())
    return {"theorems": results, "skipped": skipped, "predicates": preds, "violations": total,
            "settings": {"examples": examples, "seed": seed, "steps": steps, "seeds": seeds}}
