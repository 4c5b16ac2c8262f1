"""The update rules of THEORY.md as pure torch functions: written once, used by
:mod:`theory.instances` (the trajectories of the analytic proof steps), ``numerics.methods``
(batched synthetic runs) and ``llm_validation.training.delay`` (the torch wrapper).

Indexing (THEORY.md, "Algorithms"), step k = 0, 1, ...:
- EMA momentum: ``m_0 = g(y_0)``, ``m_k = (1 - alpha) m_{k-1} + alpha g(y_k)``.
- read point of a tau-delayed method: ``y_k = x_{max(k - tau, 0)}``.
- LMO step with decoupled weight decay: ``x_{k+1} = (1 - beta) x_k + eta d(m_k)``.
- update-level Error Feedback on the full base update ``v_k`` (``v_{-1} = 0``):
  ``x_{k+1} = x_k + v_k + lam (v_k - v_{k-1})``; in the paper's notation with ``u = -v``,
  ``x_{t+1} = x_t - u_{t-1} - lam (u_{t-1} - u_{t-2})`` (its t is our k + 1).
- gradient-level EF (for comparison): the base method is fed ``(1 + lam) g_k - lam g_{k-1}``.
"""

from __future__ import annotations

from torch import Tensor

__all__ = [
    "read_index",
    "ema_momentum",
    "lmo_step",
    "ef_correct",
    "grad_ef_mix",
]


def read_index(k: int, tau: int) -> int:
    """Index of the iterate whose gradient step k uses: ``max(k - tau, 0)`` (``W(-j) = W(0)``)."""
    if k < 0 or tau < 0:
        raise ValueError(f"read_index needs k >= 0 and tau >= 0, got k={k}, tau={tau}")
    return max(k - tau, 0)


def ema_momentum(m: Tensor | None, g: Tensor, alpha: float | Tensor) -> Tensor:
    """EMA momentum ``m_k = (1 - alpha) m_{k-1} + alpha g``; ``m_0 = g`` when ``m`` is None."""
    if m is None:
        return g.clone()
    return m + alpha * (g - m)


def lmo_step(x: Tensor, d: Tensor, eta: float | Tensor, beta: float | Tensor) -> Tensor:
    """Decoupled-weight-decay LMO step ``x_{k+1} = (1 - beta) x_k + eta d``."""
    return (1 - beta) * x + eta * d


def ef_correct(x_base_next: Tensor, v: Tensor, v_prev: Tensor, lam: float | Tensor) -> Tensor:
    """Update-level EF: from the base step's result ``x_k + v_k`` return
    ``x_{k+1} = x_k + v_k + lam (v_k - v_{k-1})``."""
    return x_base_next + lam * (v - v_prev)


def grad_ef_mix(g: Tensor, g_prev: Tensor | None, lam: float | Tensor) -> Tensor:
    """Gradient-level EF input ``(1 + lam) g_k - lam g_{k-1}`` (``g_{-1} = g_0``: plain g at k=0)."""
    if g_prev is None:
        return g.clone()
    return g + lam * (g - g_prev)
