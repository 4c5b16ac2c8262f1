"""Deciding a claim that an event happens (a run diverges) from a handful of runs.

"Gradient-level Error Feedback diverges" is a statement about how often an event occurs. Zero
divergences in a few runs contradict it only if those runs would very probably have shown a
divergence had the claim been true; otherwise the absence is no evidence. This module decides
such statements against a rate fixed in advance, with exact binomial bounds.

Algorithm
    The claim is "the event occurs in at least a share ``p_min`` of runs" (``p_min`` is part of
    the protocol: the plainest reading of "diverges" is "usually", ``p_min = 1/2``). With ``x``
    events in ``k`` independent runs, the one-sided Clopper-Pearson bounds at level ``1 -
    alpha`` are ``lo = Beta_alpha(x, k - x + 1)`` and ``hi = Beta_{1 - alpha}(x + 1, k - x)``
    (``lo = 0`` at ``x = 0``, ``hi = 1`` at ``x = k``). Verdict: **fail** when ``hi < p_min``
    (the rate is below the claim's), **pass** when ``lo >= p_min``, otherwise
    **inconclusive**. :func:`runs_to_refute` is the detection power of the design: the fewest
    runs for which zero events can fail the claim, ``(1 - p_min)^k <= alpha``.

Assumptions
    Runs are independent replicates with one common event probability (seeds differ; every
    other setting is the same).

Guarantee
    Exact, not asymptotic: if the true rate is ``>= p_min`` the verdict is ``fail`` with
    probability ``<= alpha``; if it is ``< p_min`` the verdict is ``pass`` with probability
    ``<= alpha`` (one-sided Clopper-Pearson bounds; a simulation test checks both).

Reference
    C. J. Clopper, E. S. Pearson (1934), "The use of confidence or fiducial limits illustrated
    in the case of the binomial", Biometrika 26; the "rule of three" for zero events (Hanley &
    Lippman-Hand 1983) is its ``alpha = 5%`` approximation ``hi ~ 3 / k``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, PASS

__all__ = ["EventRate", "event_rate", "runs_to_refute"]


@dataclass(frozen=True, kw_only=True)
class EventRate:
    """The decision on "the event occurs in at least ``p_min`` of the runs"."""

    events: int
    """Runs in which the event occurred."""
    runs: int
    """Runs observed."""
    p_min: float
    """The claim's rate (fixed in the protocol)."""
    alpha: float
    """One-sided error of each bound."""
    lo: float
    """Lower one-sided Clopper-Pearson bound of the rate."""
    hi: float
    """Upper one-sided Clopper-Pearson bound of the rate."""
    status: str
    """``pass``, ``fail`` or ``inconclusive``."""
    reason: str
    """One line: why."""


def runs_to_refute(p_min: float, alpha: float) -> int:
    """The fewest runs whose zero events can fail a claim of rate ``p_min`` at ``alpha``:
    the smallest ``k`` with ``(1 - p_min)^k <= alpha``."""
    if not 0 < p_min < 1 or not 0 < alpha < 1:
        raise ValueError(f"p_min={p_min!r} and alpha={alpha!r} must lie in (0, 1)")
    return max(1, math.ceil(math.log(alpha) / math.log1p(-p_min) - 1e-12))


def event_rate(events: int, runs: int, p_min: float, alpha: float) -> EventRate:
    """Decide "the event occurs in at least ``p_min`` of the runs" from ``events`` of ``runs``
    (see the module docstring)."""
    if runs < 1 or not 0 <= events <= runs:
        raise ValueError(f"need 0 <= events <= runs and runs >= 1, got {events}/{runs}")
    if not 0 < p_min < 1 or not 0 < alpha < 1:
        raise ValueError(f"p_min={p_min!r} and alpha={alpha!r} must lie in (0, 1)")
    lo = 0.0 if events == 0 else float(stats.beta.ppf(alpha, events, runs - events + 1))
    hi = 1.0 if events == runs else float(stats.beta.ppf(1 - alpha, events + 1, runs - events))
    need = runs_to_refute(p_min, alpha)
    if hi < p_min:
        status = FAIL
        reason = (f"{events} of {runs} runs: the rate is at most {hi:.2f} < {p_min:g} "
                  f"(one-sided {1 - alpha:.1%} bound)")
    elif lo >= p_min:
        status = PASS
        reason = (f"{events} of {runs} runs: the rate is at least {lo:.2f} >= {p_min:g} "
                  f"(one-sided {1 - alpha:.1%} bound)")
    else:
        status = INCONCLUSIVE
        reason = (f"{events} of {runs} runs: the rate lies in [{lo:.2f}, {hi:.2f}], which "
                  f"contains {p_min:g}" + (f"; {need} runs with no event would be needed to "
                                            f"refute it" if runs < need else ""))
    return EventRate(events=events, runs=runs, p_min=p_min, alpha=alpha, lo=lo, hi=hi,
                     status=status, reason=reason)
