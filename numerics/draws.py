"""Random parameter choices, mapped onto configurations that satisfy a theorem's assumptions.

:class:`Draws` holds raw choices (what Hypothesis strategies or a numpy generator produce);
:func:`config_for` turns them into a :class:`~numerics.methods.MethodConfig` for a *kind* of
instance, enforcing the assumptions in numbers:

| kind       | used by                                   | forced                                   |
|------------|-------------------------------------------|------------------------------------------|
| ``wd``     | star_convex_delayed, geometry lemma, lmo_wd | beta = eta / (radius * max(||x0||,||x*||)) (A5) |
| ``wd_sync``| star_convex_sync                          | as wd, tau = 0                           |
| ``momentum``| momentum_error                           | weight decay iff ``wd``                  |
| ``nowd``   | nonconvex_delayed, lmo                    | beta = 0                                 |
| ``pl``     | pl_delay_gap                              | beta = 0, sigma = 0                      |
| ``ef_wd``  | star_convex_delayed_ef, lmo_ef_wd         | tau = 1, weight decay as wd (2 beta lam <= 0.9) |
| ``ef``     | nonconvex_delayed_ef, lmo_ef              | tau = 1, beta = 0                        |
| ``gd``     | nonconvex_delayed_gd, gd                  | alpha = 1, sigma = beta = 0, gamma = frac * (largest gamma with L gamma + L^2 gamma^2 tau^2 <= 1) |
| ``gd_ef``  | nonconvex_delayed_gd_ef, gd_ef            | as gd with (1 + lam)^2 for tau^2, tau = 1 |

Both limits keep a relative float64 margin (:data:`A5_MARGIN`, :data:`GD_LIMIT_MARGIN`), so a
draw at the edge of its range still satisfies the condition after round-off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from numerics.methods import MethodConfig
from numerics.problems import Problem

__all__ = ["Draws", "random_draws", "config_for", "KINDS", "ETA_RANGE", "ALPHA_RANGE",
           "SIGMA_RANGE", "LAM_RANGE", "A5_MARGIN", "RADIUS_RANGE", "FRAC_RANGE", "TAU_MAX", "gd_step_limit",
           "GD_LIMIT_MARGIN"]

ETA_RANGE = (1e-3, 0.3)
ALPHA_RANGE = (0.01, 1.0)
SIGMA_RANGE = (0.01, 1.0)
LAM_RANGE = (0.0, 1.5)
RADIUS_RANGE = (1.0, 3.0)
FRAC_RANGE = (0.05, 1.0)
TAU_MAX = 8
#: Relative room left in A5 so that round-off in eta/beta cannot put D below the radius.
A5_MARGIN = 1e-12
#: Relative room left below the delayed-GD step-size limit: at frac = 1 the float64 root of
#: ``L g + L^2 g^2 w = 1`` can evaluate the condition to 1 + 2e-16 (seen: lam = 0.375, L = 1).
GD_LIMIT_MARGIN = 1e-12
KINDS = ("wd", "wd_sync", "momentum", "nowd", "pl", "ef_wd", "ef", "gd", "gd_ef")


@dataclass(frozen=True, kw_only=True)
class Draws:
    """Raw random choices (each kind uses the ones that apply)."""

    tau: int = 0
    """Delay, 0..TAU_MAX."""
    eta: float = 0.01
    """Step length in ETA_RANGE (for gd kinds replaced by frac * step limit)."""
    alpha: float = 1.0
    """Momentum weight in (0, 1]."""
    radius: float = 2.0
    """D / max(||x0||, ||x*||) in RADIUS_RANGE (A5 with room)."""
    sigma: float = 0.0
    """Noise level (0 or in SIGMA_RANGE)."""
    lam: float = 0.0
    """EF coefficient in LAM_RANGE."""
    frac: float = 0.5
    """Fraction of the delayed-GD step-size limit, in FRAC_RANGE."""
    wd: bool = False
    """Weight decay on/off (kind momentum)."""
    seed: int = 0
    """Noise seed."""

    def __post_init__(self) -> None:
        checks = (("tau", 0 <= self.tau <= TAU_MAX), ("eta", ETA_RANGE[0] <= self.eta <= ETA_RANGE[1]),
                  ("alpha", 0 < self.alpha <= 1), ("radius", RADIUS_RANGE[0] <= self.radius <= RADIUS_RANGE[1]),
                  ("sigma", self.sigma >= 0), ("lam", LAM_RANGE[0] <= self.lam <= LAM_RANGE[1]),
                  ("frac", FRAC_RANGE[0] <= self.frac <= FRAC_RANGE[1]), ("seed", self.seed >= 0))
        for name, ok in checks:
            if not ok:
                raise ValueError(f"Draws.{name}={getattr(self, name)!r} is out of range")


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def random_draws(rng: np.random.Generator) -> Draws:
    """Independent draws: eta, alpha, sigma log-uniform (alpha = 1 w.p. 0.15, sigma = 0 w.p. 0.5)."""
    return Draws(
        tau=int(rng.integers(0, TAU_MAX + 1)),
        eta=_log_uniform(rng, *ETA_RANGE),
        alpha=1.0 if rng.uniform() < 0.15 else _log_uniform(rng, *ALPHA_RANGE),
        radius=float(rng.uniform(*RADIUS_RANGE)),
        sigma=0.0 if rng.uniform() < 0.5 else _log_uniform(rng, *SIGMA_RANGE),
        lam=float(rng.uniform(*LAM_RANGE)),
        frac=float(rng.uniform(*FRAC_RANGE)),
        wd=bool(rng.uniform() < 0.5),
        seed=int(rng.integers(0, 2**31)),
    )


def gd_step_limit(L: float, w: float) -> float:
    """Largest gamma with ``L gamma + L^2 gamma^2 w <= 1`` (w = tau^2, or (1 + lam)^2 for EF)."""
    if w == 0:
        return 1.0 / L
    return (-1.0 + math.sqrt(1.0 + 4.0 * w)) / (2.0 * w * L)


def config_for(kind: str, p: Problem, d: Draws) -> MethodConfig:
    """The configuration of ``kind`` (module table) built from the draws on problem ``p``."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not one of {KINDS}")
    tau, lam, sigma, alpha, eta = d.tau, 0.0, d.sigma, d.alpha, d.eta
    wd = kind in ("wd", "wd_sync", "ef_wd") or (kind == "momentum" and d.wd)
    if kind == "wd_sync":
        tau = 0
    if kind in ("ef_wd", "ef", "gd_ef"):
        tau, lam = 1, d.lam
    if kind == "pl":
        sigma = 0.0
    if kind in ("gd", "gd_ef"):
        sigma, alpha = 0.0, 1.0
        limit = gd_step_limit(p.L, (1 + lam) ** 2 if kind == "gd_ef" else tau**2)
        eta = d.frac * limit * (1 - GD_LIMIT_MARGIN)
    # A5: D = eta/beta >= max(||x0||, ||x*||) >= 1, so beta <= eta <= 0.3 and 2 beta lam <= 0.9.
    # (1 + A5_MARGIN) keeps D >= max(...) after the float division at radius = 1.
    beta = eta / (d.radius * (1 + A5_MARGIN) * max(p.x0_norm, p.x_star_norm)) if wd else 0.0
    return MethodConfig(tau=tau, eta=eta, alpha=alpha, beta=beta, lam=lam, sigma=sigma, seed=d.seed)
