"""Measured trends of THEORY.md ("Predicted trends to confirm"), each a pure function of a run grid.

- :func:`floor`: the loss floor of a run, the mean of f(x_k) - f* over the last ``tail`` fraction.
- :func:`delay_gap_grid`: floor(tau, eta) - floor(0, eta) over a (tau, eta) grid (trend 2-3).
- :func:`pl_law_table`: measured gap next to a gap law ``law(tau, eta, alpha)`` (result 6).
- :func:`ef_gain_table`: EF gain ``1 - gap(lam) / gap(0)`` at tau = 1 and the measured drift
  omega_bar over the tail (result 5, trend 6).
- :func:`sgd_stability_threshold`: the largest step size at which delayed SGD still contracts,
  by bisection on batched runs (trend 1), next to the exact linear-stability limit
  :func:`delayed_gd_stability_limit` for quadratics.
- :func:`lmo_radius`: max ||x_k|| and max ||x_{k+1} - x_k|| of the delayed LMO method with weight
  decay (trend 1: within D = eta/beta = 1/wd, steps <= 2 eta, at any tau).

All runs are deterministic (sigma = 0 unless a caller passes noise) and batched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from numerics.methods import MethodConfig, Trajectory, run
from numerics.problems import Problem
import theory

__all__ = [
    "TAIL",
    "floor",
    "delay_gap_grid",
    "GapLawRow",
    "pl_law_table",
    "EfRow",
    "ef_gain_table",
    "delayed_gd_stability_limit",
    "sgd_stability_threshold",
    "lmo_radius",
    "gap_law",
]

#: Fraction of the run (at the end) whose mean gap defines the floor: the first half is the
#: transient (at the step sizes used, the runs reach their oscillation regime in < K/4 steps).
TAIL = 0.5


def floor(traj: Trajectory, tail: float = TAIL, series: str = "gap") -> torch.Tensor:
    """Mean of ``series`` over the last ``tail`` fraction of the steps, per configuration (B,)."""
    if not 0 < tail <= 1:
        raise ValueError(f"tail={tail!r} must be in (0, 1]")
    s = traj[series]
    start = int(round(s.shape[0] * (1 - tail)))
    return s[start:].mean(dim=0)


def delay_gap_grid(
    problem: Problem, taus: Sequence[int], etas: Sequence[float], *, alpha: float, steps: int,
    beta: float = 0.0, method: str = "lmo",
) -> dict:
    """Floors and gaps ``floor(tau, eta) - floor(0, eta)`` on a (tau, eta) grid (one batched run).

    Returns ``{"taus", "etas", "floor": (T, E) tensor, "gap": (T, E) tensor}``; tau = 0 is added
    to the runs when missing (it is the reference)."""
    all_taus = sorted(set(taus) | {0})
    cfgs = [MethodConfig(tau=t, eta=e, alpha=alpha, beta=beta) for t in all_taus for e in etas]
    traj = run(problem, cfgs, steps, method=method, record=("gap",))
    fl = floor(traj).view(len(all_taus), len(etas))
    rows = [all_taus.index(t) for t in taus]
    return {"taus": list(taus), "etas": list(etas), "floor": fl[rows], "gap": fl[rows] - fl[0]}


@dataclass(frozen=True, kw_only=True)
class GapLawRow:
    """One (tau, eta, alpha) point of the PL gap-law comparison."""

    tau: int
    """Delay."""
    eta: float
    """Step length."""
    alpha: float
    """Momentum weight."""
    gap: float
    """Measured floor(tau) - floor(0)."""
    law: float
    """The law's prediction."""

    @property
    def ratio(self) -> float:
        """gap / law."""
        return self.gap / self.law


def pl_law_table(
    problem: Problem, law: Callable[[int, float, float], float], *, taus: Sequence[int],
    etas: Sequence[float], alphas: Sequence[float], steps: int,
) -> list[GapLawRow]:
    """Measured delay gaps (deterministic, beta = 0) next to ``law(tau, eta, alpha)``; tau = 0 is
    the reference and is not listed."""
    out = []
    for alpha in alphas:
        grid = delay_gap_grid(problem, taus, etas, alpha=alpha, steps=steps)
        for i, t in enumerate(grid["taus"]):
            if t == 0:
                continue
            for j, e in enumerate(etas):
                out.append(GapLawRow(tau=t, eta=e, alpha=alpha, gap=float(grid["gap"][i, j]),
                                     law=law(t, e, alpha)))
    return out


@dataclass(frozen=True, kw_only=True)
class EfRow:
    """EF at tau = 1 for one (alpha, lam)."""

    alpha: float
    """Momentum weight."""
    lam: float
    """EF coefficient."""
    gap: float
    """floor(tau=1, lam) - floor(tau=0)."""
    gap_no_ef: float
    """floor(tau=1, lam=0) - floor(tau=0)."""
    omega_bar: float
    """sup over the tail of the drift omega_k = ||y_k - z_k|| / eta (what replaces tau in the
    EF theorems; it includes rare spikes up to 1 + lam)."""
    omega_mean: float
    """mean over the tail of omega_k (the typical drift)."""

    @property
    def gain(self) -> float:
        """Fraction of the delay gap EF removes (negative: EF makes it worse)."""
        return 1.0 - self.gap / self.gap_no_ef


def ef_gain_table(
    problem: Problem, *, alphas: Sequence[float], lams: Sequence[float], eta: float, steps: int,
    ef: str = "update",
) -> list[EfRow]:
    """EF gain over an (alpha, lam) grid at tau = 1 (deterministic, beta = 0)."""
    cfgs = []
    for a in alphas:
        cfgs.append(MethodConfig(tau=0, eta=eta, alpha=a))
        cfgs.extend(MethodConfig(tau=1, eta=eta, alpha=a, lam=lam) for lam in [0.0, *lams])
    traj = run(problem, cfgs, steps, ef=ef, record=("gap", "omega"))
    fl = floor(traj)
    om = traj["omega"][int(round(traj["omega"].shape[0] * (1 - TAIL))):]
    om_tail, om_mean = om.max(dim=0).values, om.mean(dim=0)
    out, i = [], 0
    width = len(lams) + 2
    for a in alphas:
        sync, no_ef = float(fl[i]), float(fl[i + 1])
        for j, lam in enumerate(lams):
            out.append(EfRow(alpha=a, lam=lam, gap=float(fl[i + 2 + j]) - sync,
                             gap_no_ef=no_ef - sync, omega_bar=float(om_tail[i + 2 + j]),
                             omega_mean=float(om_mean[i + 2 + j])))
        i += width
    return out


def delayed_gd_stability_limit(tau: int, L: float) -> float:
    """Exact step-size limit of ``x_{k+1} = x_k - gamma lambda x_{k-tau}`` for lambda in (0, L]:
    ``gamma L < 2 sin(pi / (2 (2 tau + 1)))`` (roots of ``z^{tau+1} - z^tau + gamma lambda`` in
    the unit disc; 2 at tau = 0, 1 at tau = 1)."""
    if tau < 0 or L <= 0:
        raise ValueError(f"tau={tau!r} must be >= 0 and L={L!r} > 0")
    return 2.0 * math.sin(math.pi / (2 * (2 * tau + 1))) / L


def sgd_stability_threshold(
    problem: Problem, taus: Sequence[int], *, steps: int = 1500, lo: float = 1e-3,
    hi: float = 4.0, rounds: int = 3, width: int = 24,
) -> list[float]:
    """Per tau, the largest gamma (to ~(hi-lo)/width^rounds) at which deterministic delayed SGD
    still contracts, ``f(x_K) - f* < f(x_0) - f*``: ``rounds`` of batched grid refinement (all
    taus in one run per round)."""
    bounds = {t: (lo, hi) for t in taus}
    for _ in range(rounds):
        grids = {t: torch.linspace(*bounds[t], width, dtype=torch.float64).tolist() for t in taus}
        cfgs = [MethodConfig(tau=t, eta=g) for t in taus for g in grids[t]]
        gap = run(problem, cfgs, steps, method="sgd", record=("gap",))["gap"]
        ok = ((gap[-1] < gap[0]) & torch.isfinite(gap[-1])).view(len(taus), width)
        for i, t in enumerate(taus):
            bad = [j for j, good in enumerate(ok[i].tolist()) if not good]
            if not bad:
                bounds[t] = (grids[t][-1], grids[t][-1])
            elif bad[0] == 0:
                bounds[t] = (grids[t][0], grids[t][0])
            else:
                bounds[t] = (grids[t][bad[0] - 1], grids[t][bad[0]])
    return [bounds[t][0] for t in taus]


def lmo_radius(
    problem: Problem, taus: Sequence[int], *, eta: float, wd: float, alpha: float, steps: int,
    sigma: float = 0.0,
) -> dict:
    """Delayed LMO with decoupled weight decay ``beta = eta * wd`` (radius D = 1/wd) from x_0:
    per tau the max of ||x_k|| and of ||x_{k+1} - x_k|| / eta."""
    beta = eta * wd
    cfgs = [MethodConfig(tau=t, eta=eta, alpha=alpha, beta=beta, sigma=sigma, seed=t) for t in taus]
    traj = run(problem, cfgs, steps, record=("xnorm", "step"))
    return {"taus": list(taus), "D": 1.0 / wd,
            "max_norm": traj["xnorm"].max(dim=0).values.tolist(),
            "max_step_over_eta": (traj["step"].max(dim=0).values / eta).tolist()}


def gap_law(problem: Problem) -> Callable[[int, float, float], float]:
    """THEORY.md's PL gap law on ``problem`` as ``law(tau, eta, alpha)``: the extra
    ``gap_leading`` of ``theory.THEOREMS['pl_delay_gap']``,
    ``2 L^2 eta^2 tau (tau + 2(1-alpha)/alpha + 1/2) / mu`` (the leading term of the difference
    of the limsup bounds at tau and at 0)."""
    thm = theory.THEOREMS["pl_delay_gap"]

    def law(tau: int, eta: float, alpha: float) -> float:
        return thm.evaluate_extra("gap_leading", L=problem.L, eta=eta, alpha=alpha, tau=tau, mu=problem.mu)

    return law
