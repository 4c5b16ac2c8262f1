"""The compute-equivalent lag: the share of its compute a delayed run loses, on the frontier.

The curve lag (:mod:`llm_validation.validation.lag`) places a delayed run's final loss on its
synchronous partner's own validation curve. That curve is not annealed until its last step: at
step ``T/2`` of a cosine schedule the loss is well above that of a run trained for ``T/2``
steps with its own schedule, so the curve lag understates what the delay costs in compute
(a true 50% loss of compute reads as 28-36% on the curve at the ladder's sizes). The paper's
unit (0.01 nats is ~3.7% of compute through Chinchilla's data term) is the *compute frontier*:
fully trained shorter runs. This module measures the lag there.

Algorithm
    Frontier points: synchronous runs of one seed at step counts ``s_1 < ... < s_K = T`` (same
    model, batch and peak lr, each with its own warmup and cosine schedule) with final losses
    ``L_k``. The frontier is the running minimum ``F_k = min_{j <= k} L_j`` (a longer run that
    ends higher than a shorter one does not move the frontier up), linear in ``log s`` between
    points. For the delayed run's final loss ``d`` (same seed, ``T`` steps):

    - ``F_1 >= d >= F_K``: ``s*`` is the smallest ``s`` with ``F(s) = d``; ``lag = 1 - s*/T``.
    - ``d > F_1`` (worse than the shortest run): the first segment's slope in ``log s``
      extrapolates below ``s_1``; flagged ``extrapolated = "short"``.
    - ``d < F_K`` (better than the synchronous run): the last segment's slope extrapolates past
      ``T``; the lag is negative, flagged ``extrapolated = "long"``. A flat segment gives
      ``s* = 0`` or ``inf`` (lag ``1`` or ``-inf``), flagged the same way.

    ``gap = d - F_K`` is the gap to the synchronous run in the loss's unit.

Assumptions
    The frontier runs differ from the synchronous run of length ``T`` only in their step count
    (and the schedule that follows it), so compute is proportional to steps; their losses are
    measured on the same fixed validation set as ``d``; the frontier is close to linear in
    ``log s`` between measured points (Chinchilla's data term is a power law in tokens, and
    over a factor 2 between points it is near linear in ``log s``).

Guarantee
    ``lag`` is non-decreasing in ``d``; ``lag = 0`` iff ``d = F_K``; exact on frontiers that are
    piecewise linear in ``log s`` (tests).

Reference
    Hoffmann et al. (2022), "Training compute-optimal large language models" (the frontier of
    fully trained runs and its data term); the paper's 0.01-nats conversion reads a gap on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["EnvelopeLag", "frontier", "envelope_lag"]


@dataclass(frozen=True, kw_only=True)
class EnvelopeLag:
    """A delayed run's place on the synchronous compute frontier."""

    fraction: float
    """``1 - s*/T``: the share of the synchronous run's compute the delayed run loses."""
    equivalent_steps: float
    """``s*``: the steps of a fully trained synchronous run that reaches the delayed loss."""
    gap: float
    """``d - F(T)`` in the loss's unit."""
    extrapolated: str | None = None
    """``"short"`` (below the shortest frontier run), ``"long"`` (past ``T``) or None."""

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | str:
            return x if math.isfinite(x) else str(x)
        return {"fraction": num(self.fraction), "equivalent_steps": num(self.equivalent_steps),
                "gap": self.gap, "extrapolated": self.extrapolated}


def frontier(steps: Sequence[float], losses: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The frontier ``(log s_k, F_k)``, sorted by steps, running minimum of the losses;
    ``ValueError`` on fewer than two points, repeated step counts or non-finite values."""
    s = np.asarray(steps, dtype=np.float64)
    v = np.asarray(losses, dtype=np.float64)
    if s.shape != v.shape or s.ndim != 1 or s.size < 2:
        raise ValueError(f"frontier needs >= 2 (steps, loss) pairs, got {s.shape} and {v.shape}")
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(v)) and np.all(s > 0)):
        raise ValueError(f"frontier: steps must be > 0 and losses finite: {s}, {v}")
    order = np.argsort(s)
    s, v = s[order], v[order]
    if np.any(np.diff(s) == 0):
        raise ValueError(f"frontier: repeated step counts {s.tolist()}")
    return np.log(s), np.minimum.accumulate(v)


def _solve(x0: float, y0: float, x1: float, y1: float, d: float) -> float:
    """``x`` where the line through (x0, y0), (x1, y1) takes the value ``d`` (``y0 != y1``)."""
    return x0 + (d - y0) * (x1 - x0) / (y1 - y0)


def envelope_lag(steps: Sequence[float], losses: Sequence[float], delayed: float,
                 total: float | None = None) -> EnvelopeLag:
    """The compute-equivalent lag of a delayed run with final loss ``delayed`` against the
    frontier of synchronous runs ``(steps, losses)`` (see the module docstring). ``total`` is
    the delayed run's step count ``T`` (default: the largest frontier step count, which must
    then be the synchronous partner of length ``T``)."""
    x, f = frontier(steps, losses)
    d = float(delayed)
    if not math.isfinite(d):
        raise ValueError(f"envelope_lag: delayed loss {delayed!r} is not finite")
    t = float(total) if total is not None else float(math.exp(x[-1]))
    if not t > 0:
        raise ValueError(f"envelope_lag: total={total!r} must be > 0")
    gap = d - float(f[-1])
    flag: str | None = None
    if d > f[0]:
        flag = "short"
        xs = _solve(x[0], f[0], x[1], f[1], d) if f[1] != f[0] else -math.inf
    elif d < f[-1]:
        flag = "long"
        xs = _solve(x[-2], f[-2], x[-1], f[-1], d) if f[-1] != f[-2] else math.inf
    else:
        # first k with F_k <= d; the crossing lies in [x_{k-1}, x_k] (F is non-increasing)
        k = int(np.argmax(f <= d))
        xs = x[0] if k == 0 else (x[k] if f[k] == f[k - 1] else
                                  _solve(x[k - 1], f[k - 1], x[k], f[k], d))
    s_star = math.exp(xs) if math.isfinite(xs) else (0.0 if xs < 0 else math.inf)
    frac = 1.0 - s_star / t if math.isfinite(s_star) else -math.inf
    return EnvelopeLag(fraction=frac, equivalent_steps=s_star, gap=gap, extrapolated=flag)
