"""Simulation specs: how each theorem of ``theory.THEOREMS`` is checked on trajectories.

A :class:`Spec` says which method to run (method, EF mode, series to record), when the theorem
applies to a (problem, configuration) (its assumptions, in numbers), which observed quantity its
bound is about (per step, per seed), the values of the theorem's parameters (arrays over the
step index for anytime bounds), the pathwise statements of its proof checked on every path
(series-based, so they test the simulation's actual x_{k+1}, not a recomputed one), and how to
sample random instances satisfying its assumptions.

| theorem                  | method / EF     | observed (per K or k)                              |
|--------------------------|-----------------|----------------------------------------------------|
| geometry_weight_decay    | lmo             | ||x_{k+1} - x_k|| (pathwise: max over seeds)      |
| momentum_error           | lmo             | ||m_k - grad f(x_k)||_*                            |
| star_convex_sync/delayed | lmo, beta > 0   | f(x_K) - f*                                        |
| nonconvex_delayed        | lmo, beta = 0   | (1/K) sum_{k<K} ||grad f(x_k)||_*                  |
| pl_delay_gap             | lmo, sigma = 0  | f(x_k) - f* <= max(r0, floor) (pathwise)           |
| nonconvex_delayed_gd     | sgd (l2)        | (1/K) sum_{k<K} ||grad f(x_k)||_2^2 (pathwise)     |
| nonconvex_delayed_gd_ef  | sgd + EF, tau=1 | (1/K) sum_{k<K} ||grad f(z_k)||_2^2 (pathwise)     |
| *_ef (LMO)               | lmo + EF        | the same quantities at z_k, omega_bar measured     |
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from numerics.draws import Draws, config_for, random_draws
from numerics.methods import MethodConfig, Trajectory
from numerics.problems import Problem
import theory
from theory.predicates import PREDICATES

__all__ = ["Spec", "SPECS", "STAR_CONVEX_FAMILIES", "ALL_FAMILIES", "Z_OMEGA"]

STAR_CONVEX_FAMILIES = ("quadratic_l2", "quadratic_linf", "matrix_ls", "angular")
ALL_FAMILIES = STAR_CONVEX_FAMILIES + ("pl_sine",)
#: Standard errors added to the seed-mean drift when it stands for the expectation omega_bar
#: (an upper confidence value, so sampling error cannot shrink the bound); same z as the bound.
Z_OMEGA = 4.0


@dataclass(frozen=True, kw_only=True)
class Spec:
    """How one theorem is simulated and judged (see the module table)."""

    name: str
    """Theorem name."""
    method: str
    """Method run (numerics.methods.METHODS)."""
    ef: str
    """EF mode (numerics.methods.EF_MODES)."""
    record: tuple[str, ...]
    """Series to record."""
    families: tuple[str, ...]
    """Problem families the sampler draws from."""
    expectation: bool
    """True: the bound is on an expectation (seed mean, z-margin); False: pathwise (seed max)."""
    applies: Callable[[Problem, MethodConfig], str]
    """'' when the theorem's assumptions hold for (problem, config), else the reason."""
    observed: Callable[[Trajectory, torch.Tensor], tuple[torch.Tensor, np.ndarray]]
    """(traj, columns) -> (values (n_steps, S), step indices (n_steps,))."""
    values: Callable[..., dict]
    """(problem, config, traj, columns, steps) -> theorem parameter values."""
    pathwise: Callable[..., dict[str, float]]
    """(problem, config, traj, columns) -> check name -> min slack."""
    kind: str
    """Instance kind of :func:`numerics.draws.config_for` (how draws become a configuration)."""
    bound_of: Callable[[np.ndarray, dict], np.ndarray] | None = None
    """Map theory's bound (array over steps) to the per-step bound checked, or None for the
    bound itself (pl_delay_gap: the anytime statement ``r_k <= max(r0, floor)``)."""

    def sample(self, rng: np.random.Generator, p: Problem) -> MethodConfig:
        """Random configuration satisfying the assumptions on this problem."""
        return config_for(self.kind, p, random_draws(rng))

    def build(self, p: Problem, draws: Draws) -> MethodConfig:
        """The configuration for given draws (Hypothesis strategies use this)."""
        return config_for(self.kind, p, draws)


# ------------------------------------------------------------------------------ helpers
def _cols(traj: Trajectory, name: str, cols: torch.Tensor) -> torch.Tensor:
    return traj[name][:, cols]


def _radius_needed(p: Problem) -> float:
    return max(p.x0_norm, p.x_star_norm)


def _common(p: Problem, c: MethodConfig, traj: Trajectory, cols: torch.Tensor) -> dict:
    r0 = float(traj["gap"][0, cols[0]]) if "gap" in traj.series else p.delta0()
    return {"L": p.L, "eta": c.eta, "gamma": c.eta, "alpha": c.alpha, "beta": c.beta,
            "sigma": c.sigma, "rho": p.rho, "tau": c.tau, "lam": c.lam, "mu": p.mu,
            "r0": r0, "Delta0": r0}


def _wd_ok(p: Problem, c: MethodConfig) -> str:
    if c.beta <= 0:
        return f"needs weight decay beta > 0 (beta={c.beta})"
    d = c.eta / c.beta
    if d < _radius_needed(p):
        return f"A5 fails: D = eta/beta = {d:.4g} < max(||x0||, ||x*||) = {_radius_needed(p):.4g}"
    return ""


def _star_ok(p: Problem) -> str:
    return "" if p.star_convex else f"{p.name} is not star-convex (A4)"


def _running_mean(x: torch.Tensor) -> torch.Tensor:
    """(n, S) -> (n, S) with row K-1 = mean of rows 0..K-1."""
    k = torch.arange(1, x.shape[0] + 1, dtype=x.dtype).unsqueeze(1)
    return torch.cumsum(x, dim=0) / k


def _min(x: torch.Tensor) -> float:
    x = x[torch.isfinite(x)] if torch.isfinite(x).any() else x
    return float(x.min()) if x.numel() else math.inf


def _omega_bar(traj: Trajectory, cols: torch.Tensor, n_steps: int) -> np.ndarray:
    """Running sup over k < K of the seed-mean drift E omega_k (+ Z_OMEGA standard errors),
    for K = 1..n_steps."""
    om = _cols(traj, "omega", cols)  # (K, S)
    mean = om.mean(dim=1)
    if om.shape[1] > 1:
        mean = mean + Z_OMEGA * om.std(dim=1, unbiased=True) / math.sqrt(om.shape[1])
    return torch.cummax(mean, dim=0).values[:n_steps].numpy()


# --------------------------------------------------------------------------- geometry lemma
def _geometry_spec() -> Spec:
    def applies(p, c):
        return _wd_ok(p, c) or ("" if c.lam == 0 else "no EF")

    def observed(traj, cols):
        s = _cols(traj, "step", cols)
        return s, np.arange(s.shape[0])

    def values(p, c, traj, cols, ks):
        return _common(p, c, traj, cols)

    def pathwise(p, c, traj, cols):
        d = c.eta / c.beta
        return {"norm_within_radius": d - float(_cols(traj, "xnorm", cols).max())}

    return Spec(name="geometry_weight_decay", method="lmo", ef="none", record=("step", "xnorm", "gap"),
                families=ALL_FAMILIES, expectation=False, applies=applies, observed=observed,
                values=values, pathwise=pathwise,
                kind="wd")


# ----------------------------------------------------------------------- momentum-error lemma
def _momentum_spec() -> Spec:
    def applies(p, c):
        if c.lam != 0:
            return "no EF"
        return _wd_ok(p, c) if c.beta > 0 else ""

    def observed(traj, cols):
        e = _cols(traj, "mom_err", cols)
        return e, np.arange(e.shape[0])

    def values(p, c, traj, cols, ks):
        v = _common(p, c, traj, cols)
        s = 2.0 if c.beta > 0 else 1.0
        return {**v, "k": ks, "s": s, "omega_bar": s * c.tau}

    def pathwise(p, c, traj, cols):
        s = 2.0 if c.beta > 0 else 1.0
        det = _cols(traj, "mom_err", cols) - _cols(traj, "noise_err", cols)
        limit = p.L * c.eta * s * ((1 - c.alpha) / c.alpha + c.tau)
        k = torch.arange(traj.steps, dtype=torch.float64).unsqueeze(1)
        drift_limit = s * torch.clamp(k, max=c.tau)
        om = _cols(traj, "omega", cols)
        return {"deterministic_part": limit - float(det.max()),
                "delay_drift": _min(drift_limit - om)}

    return Spec(name="momentum_error", method="lmo", ef="none",
                record=("mom_err", "noise_err", "omega", "gap"), families=ALL_FAMILIES,
                expectation=True, applies=applies, observed=observed, values=values,
                pathwise=pathwise,
                kind="momentum")


# -------------------------------------------------------------------------- star-convex
def _star_spec(name: str, sync: bool) -> Spec:
    def applies(p, c):
        if sync and c.tau != 0:
            return f"synchronous theorem needs tau = 0 (tau={c.tau})"
        return _star_ok(p) or _wd_ok(p, c) or ("" if c.lam == 0 else "no EF")

    def observed(traj, cols):
        g = _cols(traj, "gap", cols)[1:]
        return g, np.arange(1, g.shape[0] + 1)

    def values(p, c, traj, cols, ks):
        return {**_common(p, c, traj, cols), "K": ks}

    def pathwise(p, c, traj, cols):
        rec = traj.one_step_slack(p.L)[:, cols]
        d = c.eta / c.beta
        return {"one_step_recursion": _min(rec),
                "norm_within_radius": d - float(_cols(traj, "xnorm", cols).max()),
                "step_within_2eta": 2 * c.eta - float(_cols(traj, "step", cols).max())}

    return Spec(name=name, method="lmo", ef="none", record=("gap", "mom_err", "xnorm", "step"),
                families=STAR_CONVEX_FAMILIES, expectation=True, applies=applies,
                observed=observed, values=values, pathwise=pathwise,
                kind="wd_sync" if sync else "wd")


# -------------------------------------------------------------------------------- nonconvex
def _nonconvex_spec() -> Spec:
    def applies(p, c):
        if c.beta != 0:
            return f"nonconvex theorem has no weight decay (beta={c.beta})"
        return "" if c.lam == 0 else "no EF"

    def observed(traj, cols):
        g = _running_mean(_cols(traj, "grad_norm", cols)[:-1])
        return g, np.arange(1, g.shape[0] + 1)

    def values(p, c, traj, cols, ks):
        return {**_common(p, c, traj, cols), "K": ks}

    def pathwise(p, c, traj, cols):
        r, gn, e = (_cols(traj, n, cols) for n in ("gap", "grad_norm", "mom_err"))
        one = r[:-1] - c.eta * gn[:-1] + 2 * c.eta * e + p.L * c.eta**2 / 2 - r[1:]
        return {"one_step_descent": _min(one)}

    return Spec(name="nonconvex_delayed", method="lmo", ef="none",
                record=("gap", "grad_norm", "mom_err"), families=ALL_FAMILIES, expectation=True,
                applies=applies, observed=observed, values=values, pathwise=pathwise,
                kind="nowd")


# --------------------------------------------------------------------------------------- PL
def _pl_spec() -> Spec:
    def applies(p, c):
        if p.mu is None:
            return f"{p.name} has no PL constant"
        if c.sigma != 0 or c.beta != 0 or c.lam != 0:
            return "PL result is deterministic, without weight decay or EF"
        return ""

    def observed(traj, cols):
        g = _cols(traj, "gap", cols)
        return g, np.arange(g.shape[0])

    def values(p, c, traj, cols, ks):
        return {**_common(p, c, traj, cols), "k": ks, "K": np.maximum(ks, 1)}

    def pathwise(p, c, traj, cols):
        r = _cols(traj, "gap", cols).T  # (S, K+1)
        n = torch.ones(r.shape[0], dtype=torch.float64)  # per-path parameters as (S,) tensors
        slack = PREDICATES["pl_invariant"](r=r, r0=r[:, 0].clone(), L=p.L, eta=c.eta * n,
                                           alpha=c.alpha * n, tau=c.tau * n, mu=p.mu)
        return {"pl_invariant": _min(slack)}

    return Spec(name="pl_delay_gap", method="lmo", ef="none", record=("gap",),
                families=ALL_FAMILIES, expectation=False, applies=applies, observed=observed,
                values=values, pathwise=pathwise, kind="pl",
                bound_of=lambda floor, v: np.maximum(floor, v["r0"]))


# -------------------------------------------------------------------- delayed GD (Euclidean)
def _gd_spec(name: str, ef: bool) -> Spec:
    def applies(p, c):
        if p.geometry.name != "l2":
            return "delayed GD theorem is Euclidean (l2 problems)"
        if c.sigma != 0 or c.beta != 0 or c.alpha != 1:
            return "deterministic GD: sigma = 0, beta = 0, alpha = 1"
        if ef and c.tau != 1:
            return f"EF theorem has tau = 1 (tau={c.tau})"
        if not ef and c.lam != 0:
            return "no EF"
        thm = theory.get_theorem(name)
        vals = {"L": p.L, "gamma": c.eta, "tau": c.tau, "lam": c.lam, "K": 1, "Delta0": 1.0}
        clean = {n: vals[n] for n in thm.parameters if n in vals}
        try:
            thm.validate(clean)
        except ValueError as exc:
            return str(exc)
        return ""

    series = "grad_norm_z" if ef else "grad_norm"

    def observed(traj, cols):
        g = _running_mean(_cols(traj, series, cols)[:-1] ** 2)
        return g, np.arange(1, g.shape[0] + 1)

    def values(p, c, traj, cols, ks):
        return {**_common(p, c, traj, cols), "K": ks}

    def pathwise(p, c, traj, cols):
        return {}

    return Spec(name=name, method="sgd", ef="update" if ef else "none",
                record=("gap", "grad_norm") + (("gap_z", "grad_norm_z") if ef else ()),
                families=("quadratic_l2", "angular", "pl_sine"), expectation=False,
                applies=applies, observed=observed, values=values, pathwise=pathwise,
                kind="gd_ef" if ef else "gd")


# --------------------------------------------------------------------------- Error Feedback
def _ef_spec(name: str, wd: bool) -> Spec:
    def applies(p, c):
        if c.tau != 1:
            return f"EF theorems have tau = 1 (tau={c.tau})"
        if wd:
            if 2 * c.beta * c.lam >= 1:
                return f"needs 2 beta lam < 1 (beta={c.beta}, lam={c.lam})"
            return _star_ok(p) or _wd_ok(p, c)
        return "" if c.beta == 0 else f"nonconvex EF theorem has no weight decay (beta={c.beta})"

    def observed(traj, cols):
        if wd:
            g = _cols(traj, "gap_z", cols)[1:]
        else:
            g = _running_mean(_cols(traj, "grad_norm_z", cols)[:-1])
        return g, np.arange(1, g.shape[0] + 1)

    def values(p, c, traj, cols, ks):
        return {**_common(p, c, traj, cols), "K": ks, "omega_bar": _omega_bar(traj, cols, len(ks))}

    def pathwise(p, c, traj, cols):
        r, e = _cols(traj, "gap_z", cols), _cols(traj, "mom_err_z", cols)
        if not wd:
            gn = _cols(traj, "grad_norm_z", cols)
            one = r[:-1] - c.eta * gn[:-1] + 2 * c.eta * e + p.L * c.eta**2 / 2 - r[1:]
            return {"one_step_descent_z": _min(one)}
        q = 1.0 / (1.0 - 2.0 * c.beta * c.lam)
        big_b, d = 2.0 * c.eta * q, c.eta / c.beta
        rec = ((1 - c.beta) * r[:-1] + 2 * c.eta * e
               + c.beta * c.lam * big_b * p.L * (2 * d + c.lam * big_b) + p.L * big_b**2 / 2 - r[1:])
        return {"one_step_recursion_z": _min(rec),
                "z_within_D_plus_lam_B": d + c.lam * big_b - float(_cols(traj, "znorm", cols).max()),
                "update_within_B": big_b - float(_cols(traj, "vnorm", cols).max())}

    record = ("gap", "gap_z", "mom_err_z", "omega") + (("znorm", "vnorm") if wd else ("grad_norm_z",))
    return Spec(name=name, method="lmo", ef="update", record=record,
                families=STAR_CONVEX_FAMILIES if wd else ALL_FAMILIES, expectation=True,
                applies=applies, observed=observed, values=values, pathwise=pathwise,
                kind="ef_wd" if wd else "ef")


SPECS: dict[str, Spec] = {
    s.name: s
    for s in (
        _geometry_spec(),
        _momentum_spec(),
        _star_spec("star_convex_sync", sync=True),
        _star_spec("star_convex_delayed", sync=False),
        _nonconvex_spec(),
        _pl_spec(),
        _gd_spec("nonconvex_delayed_gd", ef=False),
        _gd_spec("nonconvex_delayed_gd_ef", ef=True),
        _ef_spec("star_convex_delayed_ef", wd=True),
        _ef_spec("nonconvex_delayed_ef", wd=False),
    )
}
