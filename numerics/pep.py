"""PEPit cross-check: exact worst cases of delayed GD and EF-corrected GD on L-smooth functions.

Performance estimation problem (Euclidean, nonconvex L-smooth f, PEPit's ``SmoothFunction``):

- delayed GD: ``x_{k+1} = x_k - gamma grad f(x_{max(k - tau, 0)})``, k = 0..K-1;
  measure ``(1/K) sum_{k<K} ||grad f(x_k)||^2``;
- EF-corrected 1-delayed GD (full-update EF, THEORY.md result 5): ``v_k = -gamma grad f(x_{k-1})``
  (``x_{-1} = x_0``), ``x_{k+1} = x_k + v_k + lam (v_k - v_{k-1})``, ``v_{-1} = 0``; measure at the
  virtual iterate ``z_k = x_k - lam v_{k-1}``: ``(1/K) sum_{k<K} ||grad f(z_k)||^2``.

Initial condition: ``f(x_0) - f_low <= 1`` where ``f_low`` is a free scalar standing for inf f,
tied to every evaluated point by ``f(x_i) - f_low >= ||grad f(x_i)||^2 / (2L)`` (true for any
L-smooth f bounded below by f_low). This is a relaxation of ``Delta0 = f(x_0) - inf f <= 1``, so
PEPit's value is an upper bound on the true worst case (exact up to the relaxation and the SDP
solver's accuracy); theory's ``2 Delta0 / (gamma K)`` must be at least this value wherever its
step-size condition holds (a computer-checked certificate of the bound at that K).

The dual value returned by PEPit is used (a valid upper bound at solver accuracy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import theory

__all__ = [
    "worst_case_delayed_gd",
    "worst_case_ef_gd",
    "PepRow",
    "pep_table",
    "no_guarantee_regions",
    "PEP_RTOL",
    "PEP_ATOL",
]

#: Solver accuracy margin when comparing theory with PEPit's value: the SDP solvers reach
#: ~1e-7 relative primal/dual accuracy on these <= 15x15 Gram matrices; theory is allowed to be
#: below the PEP value by at most this (it is exactly tight at tau = 0, gamma L = 1).
PEP_RTOL = 1e-5
PEP_ATOL = 1e-7


def _problem(L: float):
    # PEPit is an optional dependency (extra ``pep``): imported only when a PEP is solved.
    from PEPit import PEP, Expression
    from PEPit.functions import SmoothFunction

    pb = PEP()
    func = pb.declare_function(SmoothFunction, L=L)
    return pb, func, Expression()


def _finish(pb, func, f_low, points_vals, metric, L: float) -> float:
    pb.set_performance_metric(metric)
    for g, fv in points_vals:
        pb.add_constraint(fv - f_low >= g**2 * (1.0 / (2.0 * L)))
    return float(pb.solve(verbose=0))


def worst_case_delayed_gd(L: float, gamma: float, K: int, tau: int) -> float:
    """PEPit worst case of ``(1/K) sum_{k<K} ||grad f(x_k)||^2`` for tau-delayed GD (Delta0 <= 1)."""
    _validate(L, gamma, K)
    if not isinstance(tau, int) or tau < 0:
        raise ValueError(f"tau={tau!r} must be an int >= 0")
    pb, func, f_low = _problem(L)
    x0 = pb.set_initial_point()
    xs, grads, vals = [x0], [], []
    for k in range(K):
        g, fv = func.oracle(xs[k])
        grads.append(g)
        vals.append(fv)
        xs.append(xs[k] - gamma * grads[max(k - tau, 0)])
    g_last, f_last = func.oracle(xs[K])
    pb.set_initial_condition(vals[0] - f_low <= 1)
    metric = sum(g**2 for g in grads) * (1.0 / K)
    return _finish(pb, func, f_low, list(zip(grads + [g_last], vals + [f_last])), metric, L)


def worst_case_ef_gd(L: float, gamma: float, K: int, lam: float) -> float:
    """PEPit worst case of ``(1/K) sum_{k<K} ||grad f(z_k)||^2`` for full-update EF on 1-delayed
    GD (Delta0 = f(z_0) - inf f <= 1, z_0 = x_0)."""
    _validate(L, gamma, K)
    if not (0 <= lam <= 4):
        raise ValueError(f"lam={lam!r} must be in [0, 4]")
    pb, func, f_low = _problem(L)
    x0 = pb.set_initial_point()
    xs, gx, evals = [x0], [], []
    v_prev = None  # v_{-1} = 0
    zgrads = []
    for k in range(K):
        g, fv = func.oracle(xs[k])
        gx.append(g)
        evals.append((g, fv))
        z = xs[k] if v_prev is None else xs[k] - lam * v_prev
        if v_prev is None:
            zgrads.append(g)
        else:
            gz, fz = func.oracle(z)
            zgrads.append(gz)
            evals.append((gz, fz))
        v = -gamma * gx[max(k - 1, 0)]
        x_next = xs[k] + v + lam * (v if v_prev is None else v - v_prev)
        xs.append(x_next)
        v_prev = v
    g_last, f_last = func.oracle(xs[K])
    evals.append((g_last, f_last))
    pb.set_initial_condition(evals[0][1] - f_low <= 1)
    metric = sum(g**2 for g in zgrads) * (1.0 / K)
    return _finish(pb, func, f_low, evals, metric, L)


def _validate(L: float, gamma: float, K: int) -> None:
    if not (isinstance(L, (int, float)) and math.isfinite(L) and L > 0):
        raise ValueError(f"L={L!r} must be a finite number > 0")
    if not (isinstance(gamma, (int, float)) and math.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma={gamma!r} must be a finite number > 0")
    if not isinstance(K, int) or not 1 <= K <= 12:
        raise ValueError(f"K={K!r} must be an int in [1, 12] (the SDP grows as K^2)")


@dataclass(frozen=True, kw_only=True)
class PepRow:
    """One cell of the PEPit table."""

    method: str
    """``delayed_gd`` or ``ef_gd``."""
    tau: int
    """Delay (1 for ef_gd)."""
    lam: float
    """EF coefficient (0 for delayed_gd)."""
    gamma: float
    """Step size (L = 1)."""
    K: int
    """Steps."""
    pep: float
    """PEPit worst case of the average squared gradient norm (Delta0 = 1)."""
    theory: float | None
    """Theory's bound 2 Delta0/(gamma K), or None where its step-size condition fails."""

    @property
    def ok(self) -> bool | None:
        """theory >= pep (within solver accuracy); None when theory gives no guarantee."""
        if self.theory is None:
            return None
        return self.theory >= self.pep * (1 - PEP_RTOL) - PEP_ATOL

    def as_dict(self) -> dict:
        return {"method": self.method, "tau": self.tau, "lam": self.lam, "gamma": self.gamma,
                "K": self.K, "pep": self.pep, "theory": self.theory, "ok": self.ok}


def _theory_value(name: str, **values) -> float | None:
    thm = theory.THEOREMS[name]
    clean = {n: values[n] for n in thm.parameters if n in values}
    try:
        return thm.evaluate(**clean)
    except ValueError as exc:
        if "condition" in str(exc):
            return None
        raise


def pep_table(
    *, taus: Sequence[int] = (0, 1, 2), gammas: Sequence[float] = (0.25, 0.5, 0.75, 1.0),
    lams: Sequence[float] = (0.5, 1.0), Ks: Sequence[int] = (2, 4, 6), L: float = 1.0,
) -> list[PepRow]:
    """Delayed GD over (tau, gamma, K) and EF-GD over (lam, gamma, K), with theory's bound
    (``theory.THEOREMS['nonconvex_delayed_gd']`` / ``['nonconvex_delayed_gd_ef']``)."""
    rows = []
    for K in Ks:
        for gamma in gammas:
            for tau in taus:
                pep = worst_case_delayed_gd(L, gamma, K, tau)
                th = _theory_value("nonconvex_delayed_gd", L=L, gamma=gamma, K=K, tau=tau, Delta0=1.0)
                rows.append(PepRow(method="delayed_gd", tau=tau, lam=0.0, gamma=gamma, K=K, pep=pep, theory=th))
            for lam in lams:
                pep = worst_case_ef_gd(L, gamma, K, lam)
                th = _theory_value("nonconvex_delayed_gd_ef", L=L, gamma=gamma, K=K, tau=1, lam=lam, Delta0=1.0)
                rows.append(PepRow(method="ef_gd", tau=1, lam=lam, gamma=gamma, K=K, pep=pep, theory=th))
    return rows


def no_guarantee_regions(rows: Sequence[PepRow]) -> list[dict]:
    """The (method, tau, lam, gamma) cells where theory's step-size condition fails, with PEPit's
    (finite) worst case per K and whether it decreases with K (evidence that the method still
    converges there, i.e. that theory's condition is conservative) or not."""
    cells: dict[tuple, dict[int, float]] = {}
    for r in rows:
        if r.theory is None:
            cells.setdefault((r.method, r.tau, r.lam, r.gamma), {})[r.K] = r.pep
    out = []
    for (method, tau, lam, gamma), by_k in sorted(cells.items()):
        ks = sorted(by_k)
        vals = [by_k[k] for k in ks]
        out.append({"method": method, "tau": tau, "lam": lam, "gamma": gamma,
                    "pep_by_K": {str(k): v for k, v in zip(ks, vals)},
                    "decreasing_in_K": len(vals) > 1 and all(b < a for a, b in zip(vals, vals[1:]))})
    return out

