"""Check theory's bounds on simulated trajectories: ``verify(theorem, problem, config, steps)``.

For each theorem of ``theory.THEOREMS`` that has a simulation spec (:data:`SPECS`), a run of the
method the theorem is about is compared with the theorem's bound at EVERY step (anytime bounds),
evaluating theory's own sympy expression (vectorised with ``sympy.lambdify`` and cross-checked
against ``Theorem.evaluate`` at the worst step):

- deterministic runs (sigma = 0): the observed quantity must be <= bound (+ :data:`ABS_TOL`);
- stochastic runs (sigma > 0): the bounds are on expectations; the observed value is the mean
  over ``seeds`` independent runs; a step is flagged when ``mean - Z_MARGIN * standard_error >
  bound`` (a screening z-test at every step), and a flag becomes a violation only when a
  confirmation on CONFIRM_SEEDS fresh seeds still exceeds the bound by a Bonferroni-corrected
  z at that step (:func:`_confirm`);
- pathwise statements (the one-step recursions, the geometry lemma, the PL invariant, the
  deterministic part of the momentum error) are checked per path with no statistical margin.

``ratio`` is ``max_k observed_k / bound_k`` (with the plain mean), the tightness figure.
:func:`verify_batch` runs many configurations of one problem in one batched call;
:func:`sweep` groups instances by problem and calls it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Sequence

import numpy as np
import sympy
import torch

from numerics.methods import MethodConfig, Trajectory, run
from numerics.problems import Problem
from numerics.specs import SPECS, Spec
import theory

__all__ = [
    "BoundCheck",
    "verify",
    "verify_batch",
    "sweep",
    "Z_MARGIN",
    "ABS_TOL",
    "REL_TOL",
    "DEFAULT_SEEDS",
    "CONFIRM_SEEDS",
]

#: One-sided statistical margin for expectation bounds: the seed mean may exceed the bound by
#: at most Z_MARGIN standard errors (4 sigma: a false alarm probability ~3e-5 per step under a
#: normal approximation, and the steps are strongly correlated).
Z_MARGIN = 4.0
#: Absolute round-off allowance on O(1)-scaled float64 quantities accumulated over <= 1e4 steps.
ABS_TOL = 1e-9
#: Relative round-off allowance (the bound side), for quantities far from 1.
REL_TOL = 1e-9
#: Seeds per configuration for sigma > 0.
DEFAULT_SEEDS = 8
#: Screening flags (seed mean - Z_MARGIN se > bound with few seeds, at any of many steps) are
#: re-tested on this many fresh seeds: with few seeds the sample se is itself noisy (a t-test with
#: S - 1 degrees of freedom) and the max over hundreds of steps, or a search that targets the
#: ratio, finds outliers; an independent large sample separates those from real violations.
CONFIRM_SEEDS = 256
#: Offset of the confirmation seeds (disjoint from any screening seed range used here).
CONFIRM_SEED_OFFSET = 1_000_003
#: Family-wise false-alarm probability of one confirmation (Bonferroni over the flagged steps).
CONFIRM_FALSE_ALARM = 1e-6


@dataclass(frozen=True, kw_only=True)
class BoundCheck:
    """Outcome of checking one theorem on one (problem, configuration)."""

    theorem: str
    """Theorem name."""
    problem: str
    """Problem name."""
    config: MethodConfig
    """The configuration (its seed is the first of ``seeds`` consecutive seeds)."""
    bound: float
    """The bound at the step where observed/bound is largest."""
    observed: float
    """The observed value (seed mean) at that step."""
    ratio: float
    """max over steps of observed / bound (observed: seed mean; with sigma > 0 this includes
    sampling noise and can exceed 1 without a violation)."""
    ratio_lower: float
    """max over steps of (observed - Z_MARGIN * standard error) / bound: the statistically
    supported ratio (the bound holds when this is <= 1)."""
    ratio_tail: float
    """max of observed / bound over the second half of the steps (the floor's tightness; early
    steps of anytime bounds are nearly tight by construction, e.g. r_1 vs (1-beta) r_0 + ...)."""
    ratio_tail_lower: float
    """ratio_tail with observed - Z_MARGIN * standard error (equal to ratio_tail when sigma = 0)."""
    holds: bool
    """True when the bound (with the statistical margin) and every pathwise check hold."""
    step: int
    """The step index (K or k) of the worst ratio."""
    seeds: int
    """Number of seeds averaged (1 when sigma = 0)."""
    pathwise: dict[str, float] = field(default_factory=dict)
    """Pathwise check name -> smallest slack over steps and seeds (>= -tolerance: holds)."""
    params: dict[str, float] = field(default_factory=dict)
    """The theorem's parameter values at the worst step."""
    reason: str = ""
    """Empty when it holds; otherwise what failed, with numbers."""
    evaluate_error: str = ""
    """Non-empty when ``Theorem.evaluate`` raised at the worst step although the parameters are
    in its domain (a theory-side evaluation bug); the cross-check then used sympy's exact value."""
    confirmed_steps: int = 0
    """Steps the screening flagged and the confirmation re-tested (0: none flagged)."""
    confirm_seeds: int = 0
    """Fresh seeds used by the confirmation (0: not needed). After a confirmation the ratio
    fields, observed, bound, step and seeds describe the confirmation sample."""

    def as_dict(self) -> dict:
        return {"theorem": self.theorem, "problem": self.problem, "config": vars(self.config),
                "bound": self.bound, "observed": self.observed, "ratio": self.ratio,
                "ratio_lower": self.ratio_lower, "ratio_tail": self.ratio_tail,
                "ratio_tail_lower": self.ratio_tail_lower,
                "holds": self.holds, "step": self.step, "seeds": self.seeds,
                "pathwise": self.pathwise, "params": self.params, "reason": self.reason,
                "confirmed_steps": self.confirmed_steps, "confirm_seeds": self.confirm_seeds,
                "evaluate_error": self.evaluate_error}


_LAMBDA_CACHE: dict[tuple[str, str], object] = {}


def _vector_bound(thm, values: dict[str, np.ndarray | float]) -> np.ndarray:
    key = (thm.name, sympy.srepr(thm.bound))
    fn = _LAMBDA_CACHE.get(key)
    if fn is None:
        fn = sympy.lambdify(list(thm.parameters.values()), thm.bound, modules="numpy")
        _LAMBDA_CACHE[key] = fn
    args = []
    for name in thm.parameters:
        if name in values:
            args.append(values[name])
        else:
            fixed = thm.domains[name].fixed_value
            if fixed is None:
                raise ValueError(f"{thm.name}: no value for parameter {name!r}")
            args.append(fixed)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        out = np.asarray(fn(*args), dtype=np.float64)
    return out


def _at(values: dict, j: int) -> dict:
    return {n: (float(v[j]) if isinstance(v, np.ndarray) and v.ndim else
                (int(v) if isinstance(v, (int, np.integer)) else float(v)))
            for n, v in values.items()}


def verify_batch(
    theorem: theory.Theorem | str, problem: Problem, configs: Sequence[MethodConfig], steps: int, *,
    seeds: int = DEFAULT_SEEDS,
) -> list[BoundCheck]:
    """Verdicts for several configurations of one problem, simulated in one batched run.

    ``theorem`` is a :class:`theory.Theorem` or its name in ``theory.THEOREMS``. A configuration
    with sigma > 0 is run with seeds ``seed, seed+1, ..., seed+seeds-1``.
    Raises ``ValueError`` when the theorem has no simulation spec or a configuration does not
    satisfy the theorem's assumptions (the message says which).
    """
    thm = theorem if isinstance(theorem, theory.Theorem) else theory.get_theorem(theorem)
    spec: Spec | None = SPECS.get(thm.name)
    if spec is None:
        raise ValueError(f"theorem {thm.name!r} has no simulation spec (have {sorted(SPECS)})")
    if not isinstance(steps, int) or steps < 2:
        raise ValueError(f"steps={steps!r} must be an int >= 2")
    for c in configs:
        why = spec.applies(problem, c)
        if why:
            raise ValueError(f"{thm.name} does not apply to {problem.name} with {c}: {why}")
    runs, owner = [], []
    for i, c in enumerate(configs):
        n = seeds if c.sigma > 0 else 1
        for s in range(n):
            runs.append(MethodConfig(**{**vars(c), "seed": c.seed + s}))
            owner.append(i)
    traj = run(problem, runs, steps, method=spec.method, ef=spec.ef, record=spec.record)
    owner_t = torch.tensor(owner)
    out = []
    for i, c in enumerate(configs):
        cols = (owner_t == i).nonzero().flatten()
        verdict, flagged = _judge(thm, spec, problem, c, traj, cols)
        if len(flagged):
            verdict = _confirm(thm, spec, problem, c, steps, verdict, flagged)
        out.append(verdict)
    return out


def _confirm(thm, spec: Spec, problem: Problem, c: MethodConfig, steps: int, verdict: "BoundCheck",
             flagged: np.ndarray) -> "BoundCheck":
    """Re-test the steps the screening flagged with CONFIRM_SEEDS fresh seeds (independent of
    the screening sample, so its outliers cannot confirm themselves): a violation stands only if
    ``mean - z * se > bound`` at a flagged step, z Bonferroni-corrected over the flagged steps."""
    runs = [MethodConfig(**{**vars(c), "seed": c.seed + CONFIRM_SEED_OFFSET + s}) for s in range(CONFIRM_SEEDS)]
    traj = run(problem, runs, steps, method=spec.method, ef=spec.ef, record=spec.record)
    cols = torch.arange(len(runs))
    obs_paths, ks = spec.observed(traj, cols)
    obs_all = obs_paths.mean(dim=1).numpy()
    se_all = (obs_paths.std(dim=1) / math.sqrt(len(runs))).numpy()
    values = spec.values(problem, c, traj, cols, ks)
    bound_all = np.broadcast_to(_vector_bound(thm, values), (len(ks),))
    if spec.bound_of is not None:
        bound_all = np.broadcast_to(spec.bound_of(bound_all, values), (len(ks),))
    obs, se, bound = obs_all[flagged], se_all[flagged], bound_all[flagged]
    z = float(NormalDist().inv_cdf(1.0 - CONFIRM_FALSE_ALARM / len(flagged)))
    excess = obs - z * se - bound * (1 + REL_TOL) - ABS_TOL
    others = [r for r in verdict.reason.split("; ") if r and not r.startswith("bound violated")]
    reasons = list(others)
    if (excess > 0).any():
        jb = int(np.argmax(excess))
        reasons.insert(0, f"bound violated at step {int(ks[flagged[jb]])}, confirmed with "
                          f"{len(runs)} fresh seeds: observed {obs[jb]:.6g} (se {se[jb]:.3g}, "
                          f"z {z:.2f}) > bound {bound[jb]:.6g}")
    # The large sample is the better estimate of the tightness figures: report those.
    finite = np.isfinite(obs_all) & np.isfinite(bound_all)
    ratio = _ratio(obs_all, bound_all, finite)
    j = int(np.argmax(ratio))
    tail = ks >= ks[0] + (ks[-1] - ks[0]) / 2
    lower = _ratio(obs_all - Z_MARGIN * se_all, bound_all, finite)
    return dataclasses.replace(
        verdict, holds=not reasons, reason="; ".join(reasons), confirmed_steps=len(flagged),
        confirm_seeds=len(runs), ratio=float(ratio[j]), step=int(ks[j]), observed=float(obs_all[j]),
        bound=float(bound_all[j]), seeds=len(runs),
        ratio_lower=float(lower.max()), ratio_tail=float(ratio[tail].max()),
        ratio_tail_lower=float(lower[tail].max()))


def _sympy_value(thm, params: dict) -> float:
    """The bound at ``params`` by exact sympy substitution (fixed-domain parameters included)."""
    subs = {}
    for name, sym in thm.parameters.items():
        v = params.get(name, thm.domains[name].fixed_value)
        subs[sym] = sympy.Integer(v) if isinstance(v, int) else sympy.Float(v, 30)
    return float(thm.bound.subs(subs).evalf(30))


def _ratio(obs: np.ndarray, bound: np.ndarray, finite: np.ndarray) -> np.ndarray:
    """observed / bound; where the bound is 0 the ratio is 0 if observed <= ABS_TOL, else inf."""
    safe = np.where(bound > 0, bound, 1.0)
    r = np.where(bound > 0, obs / safe, np.where(obs <= ABS_TOL, 0.0, np.inf))
    return np.where(finite, r, np.inf)


def _judge(thm, spec: Spec, problem: Problem, c: MethodConfig, traj: Trajectory, cols: torch.Tensor) -> BoundCheck:
    obs_paths, ks = spec.observed(traj, cols)  # (n_k, S), (n_k,)
    s_count = obs_paths.shape[1]
    if spec.expectation:
        obs = obs_paths.mean(dim=1).numpy()
        se = (obs_paths.std(dim=1) / math.sqrt(s_count)).numpy() if s_count > 1 else np.zeros_like(obs)
    else:  # a pathwise statement: every path, no statistical margin
        obs = obs_paths.max(dim=1).values.numpy()
        se = np.zeros_like(obs)
    values = spec.values(problem, c, traj, cols, ks)
    bound = np.broadcast_to(_vector_bound(thm, values), obs.shape)
    if spec.bound_of is not None:
        bound = np.broadcast_to(spec.bound_of(bound, values), obs.shape)
    finite = np.isfinite(obs) & np.isfinite(bound)
    ratio = _ratio(obs, bound, finite)
    ratio_lower_all = _ratio(obs - Z_MARGIN * se, bound, finite)
    ratio_lower = ratio_lower_all
    j = int(np.argmax(ratio))
    tail = ks >= ks[0] + (ks[-1] - ks[0]) / 2
    excess = obs - Z_MARGIN * se - bound * (1 + REL_TOL) - ABS_TOL
    bad = ~finite | (excess > 0)
    reasons = []
    flagged = np.zeros(0, dtype=np.int64)
    if bad.any():
        jb = int(np.argmax(np.where(bad, np.where(np.isfinite(excess), excess, np.inf), -np.inf)))
        reasons.append(f"bound violated at step {int(ks[jb])}: observed {obs[jb]:.6g} "
                       f"(se {se[jb]:.3g}) > bound {bound[jb]:.6g}")
        if s_count > 1 and spec.expectation and finite.all():
            flagged = np.flatnonzero(bad)  # statistical flags only: confirm with fresh seeds
    # Cross-check the vectorised bound against Theorem.evaluate at the worst step.
    params = _at(values, j)
    params = {n: v for n, v in params.items() if n in thm.parameters}
    evaluate_error = ""
    try:
        ref = thm.evaluate(**params)
    except ValueError as exc:  # theory's float evaluation failed inside its own domain:
        # report it, and cross-check with sympy's exact evaluation of the same expression.
        evaluate_error = str(exc)
        ref = _sympy_value(thm, params)
    if spec.bound_of is not None:
        ref = float(spec.bound_of(np.asarray(ref), values))
    if not math.isclose(ref, float(bound[j]), rel_tol=1e-9, abs_tol=1e-12):
        raise RuntimeError(f"{thm.name}: lambdified bound {bound[j]!r} != evaluate() {ref!r} at {params}")
    pathwise = spec.pathwise(problem, c, traj, cols)
    for name, slack in pathwise.items():
        if not slack >= -ABS_TOL:
            reasons.append(f"pathwise check {name} fails: min slack {slack:.3g}")
    return BoundCheck(
        theorem=thm.name, problem=problem.name, config=c, bound=float(bound[j]),
        observed=float(obs[j]), ratio=float(ratio[j]), ratio_lower=float(ratio_lower.max()),
        ratio_tail=float(ratio[tail].max()), ratio_tail_lower=float(ratio_lower_all[tail].max()),
        holds=not reasons, step=int(ks[j]),
        seeds=s_count, pathwise=pathwise, params=params, reason="; ".join(reasons),
        evaluate_error=evaluate_error,
    ), flagged


def verify(theorem: theory.Theorem | str, problem: Problem, config: MethodConfig, steps: int, *,
           seeds: int = DEFAULT_SEEDS) -> BoundCheck:
    """Check ``theorem`` on one configuration (see :func:`verify_batch`)."""
    return verify_batch(theorem, problem, [config], steps, seeds=seeds)[0]


def sweep(theorem: theory.Theorem | str, instances: Sequence[tuple[Problem, MethodConfig]],
          steps: int, *, seeds: int = DEFAULT_SEEDS, batch: int = 256, progress=None) -> list[BoundCheck]:
    """Verdicts for many (problem, configuration) instances, batched per problem (at most
    ``batch`` configurations per call); ``progress(done, total)`` is called after each batch.
    Verdicts come back in instance order."""
    groups: dict[int, list[int]] = {}
    problems: dict[int, Problem] = {}
    for i, (p, _) in enumerate(instances):
        groups.setdefault(id(p), []).append(i)
        problems[id(p)] = p
    out: list[BoundCheck | None] = [None] * len(instances)
    done = 0
    for key, idx in groups.items():
        for start in range(0, len(idx), batch):
            chunk = idx[start:start + batch]
            verdicts = verify_batch(theorem, problems[key], [instances[i][1] for i in chunk], steps, seeds=seeds)
            for i, v in zip(chunk, verdicts):
                out[i] = v
            done += len(chunk)
            if progress is not None:
                progress(done, len(instances))
    return out  # type: ignore[return-value]
