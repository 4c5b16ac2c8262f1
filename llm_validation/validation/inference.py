"""Statistical inference for validation verdicts: intervals over seeds and fits with intervals.

Everything here is a pure function of numbers (no torch, no run directories):

- :func:`t_interval` — Student-t interval for a mean from n >= 2 independent samples (seeds).
- :func:`welch_interval` — t interval (Welch-Satterthwaite) for a difference of two means.
- :func:`bootstrap_interval` — percentile bootstrap of any statistic of the rows of a sample
  (rows are resampled together, so paired columns stay paired); explicit ``seed``.
- :func:`fit_power_law` — ``y = A x^p`` by nonlinear least squares on all points (additive
  noise, so noisy non-positive y are allowed); t interval of the exponent from the covariance.
- :func:`fit_linear` — ordinary least squares ``y = X b`` with t intervals per coefficient.
- :func:`fit_pl_tau_shape` — the PL gap law ``gap = A tau (tau + k + c)`` with
  ``k = 2 (1 - alpha) / alpha`` (docs/theory.md result 6: c = 1/2): A with c fixed at theory's value,
  and the free fit ``gap = A tau (tau + k) + B tau`` with ``c = B / A`` and Fieller's interval.

An :class:`Interval` with ``n`` too small for any interval is ``(-inf, inf)``: it overlaps every
decision boundary, so a verdict built on it is inconclusive, never a pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from scipy import optimize

from llm_validation.validation.student import fieller_set, t_bounds, t_quantile

__all__ = ["DEFAULT_LEVEL", "level_text", "DEFAULT_BOOTSTRAP", "Interval", "t_interval",
           "welch_interval", "bootstrap_interval", "LinearFit", "fit_linear", "PowerLawFit",
           "fit_power_law", "PLShapeFit", "fit_pl_tau_shape", "pl_shape", "PL_SHAPE_C"]

#: Two-sided confidence level of every interval unless a caller asks otherwise.
DEFAULT_LEVEL = 0.95


def level_text(level: float) -> str:
    """An interval level as a percentage without rounding it away (``95%``, ``97.5%``)."""
    return f"{100 * level:.4g}%"


#: Bootstrap resamples: the percentile end points then move by well under 1% of the width
#: between seeds (Monte Carlo error of a 2.5% quantile from 4000 draws is ~0.25 percentage points).
DEFAULT_BOOTSTRAP = 4000
#: docs/theory.md result 6: the PL delay gap ~ 2 L^2 eta^2 tau (tau + 2(1-alpha)/alpha + 1/2) / mu.
PL_SHAPE_C = 0.5

_INF = float("inf")


@dataclass(frozen=True, kw_only=True)
class Interval:
    """A point estimate with a two-sided confidence interval."""

    estimate: float
    """Point estimate (mean, fitted coefficient, ...); NaN when there are no data."""
    lo: float
    """Lower end (-inf when the data cannot bound it)."""
    hi: float
    """Upper end (+inf when the data cannot bound it)."""
    level: float = DEFAULT_LEVEL
    """Confidence level in (0, 1)."""
    n: int = 0
    """Number of independent samples (seeds, points) behind it."""
    method: str = "t"
    """``t``, ``welch``, ``bootstrap``, ``fit`` (t from a least-squares covariance),
    ``fieller`` (ratio of fitted coefficients) or ``none`` (too few samples)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"Interval.level={self.level!r} must be in (0, 1)")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 0:
            raise ValueError(f"Interval.n={self.n!r} must be an int >= 0")
        if not (math.isnan(self.lo) or math.isnan(self.hi)) and self.lo > self.hi:
            raise ValueError(f"Interval.lo={self.lo} must not exceed hi={self.hi}")

    @classmethod
    def unbounded(cls, estimate: float = float("nan"), n: int = 0,
                  level: float = DEFAULT_LEVEL) -> "Interval":
        """The interval of too little data: (-inf, inf)."""
        return cls(estimate=float(estimate), lo=-_INF, hi=_INF, level=level, n=n, method="none")

    @property
    def bounded(self) -> bool:
        """True when both ends are finite."""
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    def above(self, boundary: float) -> bool:
        """The whole interval lies strictly above ``boundary``."""
        return self.lo > boundary

    def below(self, boundary: float) -> bool:
        """The whole interval lies strictly below ``boundary``."""
        return self.hi < boundary

    def contains(self, value: float) -> bool:
        return self.lo <= value <= self.hi

    def scaled(self, factor: float) -> "Interval":
        """The interval of ``factor * estimate`` (factor > 0)."""
        if not factor > 0:
            raise ValueError(f"scaled: factor={factor!r} must be > 0")
        return Interval(estimate=self.estimate * factor, lo=self.lo * factor,
                        hi=self.hi * factor, level=self.level, n=self.n, method=self.method)

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "lo": self.lo, "hi": self.hi, "level": self.level,
                "n": self.n, "method": self.method}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Interval":
        def f(x: Any, default: float) -> float:
            return default if x is None else float(x)
        return cls(estimate=f(d.get("estimate"), float("nan")), lo=f(d.get("lo"), -_INF),
                   hi=f(d.get("hi"), _INF), level=float(d.get("level", DEFAULT_LEVEL)),
                   n=int(d.get("n", 0)), method=str(d.get("method", "t")))

    def fmt(self, digits: int = 3) -> str:
        """``0.123 [0.100, 0.150]`` (significant digits), or ``0.123 [n=1: no interval]``."""
        def g(x: float) -> str:
            return "nan" if math.isnan(x) else f"{x:.{digits}g}"
        if not self.bounded:
            if self.method == "none":
                return f"{g(self.estimate)} [n={self.n}: no interval]"
            return f"{g(self.estimate)} [{g(self.lo)}, {g(self.hi)}]"
        return f"{g(self.estimate)} [{g(self.lo)}, {g(self.hi)}]"


def _clean(samples: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(samples, dtype=np.float64).ravel()
    if not np.all(np.isfinite(x)):
        raise ValueError(f"samples must be finite, got {x.tolist()}")
    return x


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level!r} must be in (0, 1)")


def t_interval(samples: Sequence[float], level: float = DEFAULT_LEVEL) -> Interval:
    """Student-t interval ``mean +- t_{n-1} s / sqrt(n)`` (:func:`student.t_bounds`);
    unbounded for n < 2."""
    _check_level(level)
    x = _clean(samples)
    n = int(x.size)
    if n == 0:
        return Interval.unbounded(n=0, level=level)
    mean, lo, hi = (float(v) for v in t_bounds(x, level))
    if n < 2:
        return Interval.unbounded(mean, n=n, level=level)
    return Interval(estimate=mean, lo=lo, hi=hi, level=level, n=n, method="t")


def welch_interval(a: Sequence[float], b: Sequence[float],
                   level: float = DEFAULT_LEVEL) -> Interval:
    """Interval for ``mean(a) - mean(b)`` of two independent samples (Welch's t)."""
    _check_level(level)
    xa, xb = _clean(a), _clean(b)
    na, nb = int(xa.size), int(xb.size)
    n = min(na, nb)
    if na == 0 or nb == 0:
        return Interval.unbounded(n=n, level=level)
    diff = float(xa.mean() - xb.mean())
    if na < 2 or nb < 2:
        return Interval.unbounded(diff, n=n, level=level)
    va, vb = float(xa.var(ddof=1)) / na, float(xb.var(ddof=1)) / nb
    se2 = va + vb
    if se2 == 0.0:
        return Interval(estimate=diff, lo=diff, hi=diff, level=level, n=n, method="welch")
    dof = se2 ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))
    half = float(t_quantile(level, dof)) * math.sqrt(se2)
    return Interval(estimate=diff, lo=diff - half, hi=diff + half, level=level, n=n,
                    method="welch")


def bootstrap_interval(data: Sequence[Any] | np.ndarray,
                       statistic: Callable[[np.ndarray], float] | None = None, *,
                       seed: int, level: float = DEFAULT_LEVEL,
                       n_boot: int = DEFAULT_BOOTSTRAP) -> Interval:
    """Percentile bootstrap of ``statistic(rows)`` (default: the mean of a 1-D sample).

    ``data`` is 1-D (one value per seed) or 2-D (one row per seed, columns resampled together,
    e.g. paired sync/delayed losses). Resamples whose statistic is not finite (a ratio with a
    zero denominator) are dropped; if more than half are, the interval is unbounded.
    Deterministic for a given ``seed`` (numpy ``default_rng``).
    """
    _check_level(level)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"bootstrap_interval: seed={seed!r} must be an int")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 100:
        raise ValueError(f"bootstrap_interval: n_boot={n_boot!r} must be an int >= 100")
    x = np.asarray(data, dtype=np.float64)
    if x.ndim not in (1, 2) or not np.all(np.isfinite(x)):
        raise ValueError(f"bootstrap_interval: data must be finite, 1-D or 2-D, got shape "
                         f"{x.shape}")
    stat = statistic if statistic is not None else (lambda rows: float(np.mean(rows)))
    n = int(x.shape[0])
    if n == 0:
        return Interval.unbounded(n=0, level=level)
    estimate = float(stat(x))
    if n < 2:
        return Interval.unbounded(estimate, n=n, level=level)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))           # [n_boot, n] row indices
    if statistic is None and x.ndim == 1:               # the mean, vectorised
        values = x[idx].mean(axis=1)
    else:
        values = np.array([stat(x[i]) for i in idx], dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size < n_boot / 2:
        return Interval.unbounded(estimate, n=n, level=level)
    lo, hi = np.quantile(values, [0.5 - level / 2, 0.5 + level / 2])
    return Interval(estimate=estimate, lo=float(min(lo, estimate)), hi=float(max(hi, estimate)),
                    level=level, n=n, method="bootstrap")


# ------------------------------------------------------------------------------------ fits
@dataclass(frozen=True, kw_only=True)
class LinearFit:
    """Least squares ``y = X b`` (no implicit intercept)."""

    coef: tuple[Interval, ...]
    """One interval per column of X (t with n - p degrees of freedom)."""
    cov: tuple[tuple[float, ...], ...]
    """Covariance matrix of the coefficients."""
    dof: int
    """Residual degrees of freedom n - p."""
    r2: float
    """Uncentered R^2 = 1 - RSS / sum(y^2) (no intercept in general)."""


def fit_linear(X: Sequence[Sequence[float]] | np.ndarray, y: Sequence[float],
               level: float = DEFAULT_LEVEL) -> LinearFit:
    """Ordinary least squares with t intervals; unbounded intervals when n <= p."""
    _check_level(level)
    A = np.asarray(X, dtype=np.float64)
    b = _clean(y)
    if A.ndim == 1:
        A = A[:, None]
    n, p = A.shape
    if n != b.size or p == 0 or not np.all(np.isfinite(A)):
        raise ValueError(f"fit_linear: X has shape {A.shape}, y has {b.size} values")
    coef, *_ = np.linalg.lstsq(A, b, rcond=None)
    resid = b - A @ coef
    rss = float(resid @ resid)
    tss = float(b @ b)
    r2 = 1.0 - rss / tss if tss > 0 else float("nan")
    dof = n - p
    if dof <= 0 or np.linalg.matrix_rank(A) < p:
        return LinearFit(coef=tuple(Interval.unbounded(float(c), n=n, level=level) for c in coef),
                         cov=tuple(tuple(float("inf") for _ in range(p)) for _ in range(p)),
                         dof=max(dof, 0), r2=r2)
    s2 = rss / dof
    cov = s2 * np.linalg.inv(A.T @ A)
    tq = float(t_quantile(level, dof))
    ints = tuple(Interval(estimate=float(c), lo=float(c - tq * math.sqrt(cov[i, i])),
                          hi=float(c + tq * math.sqrt(cov[i, i])), level=level, n=n,
                          method="fit") for i, c in enumerate(coef))
    return LinearFit(coef=ints, cov=tuple(tuple(float(v) for v in row) for row in cov),
                     dof=dof, r2=r2)


@dataclass(frozen=True, kw_only=True)
class PowerLawFit:
    """``y = A x^p`` fitted by nonlinear least squares."""

    exponent: Interval
    """The exponent p with its t interval (n - 2 degrees of freedom)."""
    prefactor: float
    """A."""
    n: int
    """Number of points."""

    def predict(self, x: Sequence[float] | np.ndarray) -> np.ndarray:
        return self.prefactor * np.asarray(x, dtype=np.float64) ** self.exponent.estimate


def fit_power_law(x: Sequence[float], y: Sequence[float],
                  level: float = DEFAULT_LEVEL) -> PowerLawFit:
    """Fit ``y = A x^p`` to all points (x > 0; y may be <= 0 from noise).

    Start: log-log least squares on the per-x means that are positive (else p = 1). Interval:
    ``p +- t_{n-2} se(p)`` from the least-squares covariance. Fewer than 3 points, fewer than
    2 distinct x, or a failed fit give an unbounded exponent.
    """
    _check_level(level)
    xs, ys = _clean(x), _clean(y)
    if xs.size != ys.size:
        raise ValueError(f"fit_power_law: {xs.size} x values but {ys.size} y values")
    if np.any(xs <= 0):
        raise ValueError(f"fit_power_law: x must be > 0, got {xs.tolist()}")
    n = int(xs.size)
    ux = np.unique(xs)
    means = np.array([ys[xs == u].mean() for u in ux])
    pos = means > 0
    if pos.sum() >= 2:
        p0, logA0 = np.polyfit(np.log(ux[pos]), np.log(means[pos]), 1)
        a0 = math.exp(logA0)
    else:
        p0, a0 = 1.0, float(np.mean(ys) / np.mean(xs)) or 1.0
    if n < 3 or ux.size < 2:
        return PowerLawFit(exponent=Interval.unbounded(float(p0), n=n, level=level),
                           prefactor=float(a0), n=n)
    scale = float(np.max(np.abs(ys))) or 1.0       # fit in units of max|y| for conditioning
    x_ref = float(np.exp(np.mean(np.log(xs))))     # and x in units of its geometric mean

    def model(xv: np.ndarray, a: float, p: float) -> np.ndarray:
        return a * (xv / x_ref) ** p

    try:
        (a, p), cov = optimize.curve_fit(model, xs, ys / scale,
                                         p0=(a0 * x_ref ** p0 / scale, p0), maxfev=20000)
    except (RuntimeError, optimize.OptimizeWarning, ValueError):
        return PowerLawFit(exponent=Interval.unbounded(float(p0), n=n, level=level),
                           prefactor=float(a0), n=n)
    se = math.sqrt(cov[1, 1]) if np.isfinite(cov[1, 1]) and cov[1, 1] >= 0 else float("inf")
    tq = float(t_quantile(level, n - 2))
    prefactor = float(a * scale / x_ref ** p)
    if not math.isfinite(se):
        return PowerLawFit(exponent=Interval.unbounded(float(p), n=n, level=level),
                           prefactor=prefactor, n=n)
    return PowerLawFit(exponent=Interval(estimate=float(p), lo=float(p - tq * se),
                                         hi=float(p + tq * se), level=level, n=n, method="fit"),
                       prefactor=prefactor, n=n)


def pl_shape(tau: Sequence[float] | np.ndarray, alpha: float,
             c: float = PL_SHAPE_C) -> np.ndarray:
    """``tau (tau + 2 (1 - alpha) / alpha + c)``, the tau-dependence of the PL delay gap."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"pl_shape: alpha={alpha!r} must be in (0, 1]")
    t = np.asarray(tau, dtype=np.float64)
    return t * (t + 2.0 * (1.0 - alpha) / alpha + c)


@dataclass(frozen=True, kw_only=True)
class PLShapeFit:
    """The PL gap law ``gap = A tau (tau + 2(1-alpha)/alpha + c)`` fitted to (tau, gap) points."""

    alpha: float
    """Momentum weight alpha used in the shape."""
    scale_fixed_c: Interval
    """A with c fixed at theory's 1/2 (one-parameter least squares, t interval)."""
    scale_free: Interval
    """A of the two-parameter fit ``A tau (tau + k) + B tau``."""
    c: Interval
    """c = B / A of the free fit (Fieller interval; unbounded when A is not significant)."""
    r2_fixed_c: float
    """Uncentered R^2 of the fixed-c fit."""
    n: int

    def predict(self, tau: Sequence[float] | np.ndarray) -> np.ndarray:
        """The fixed-c law with the fitted A."""
        return self.scale_fixed_c.estimate * pl_shape(tau, self.alpha, PL_SHAPE_C)


def _fieller(a: float, b: float, vaa: float, vbb: float, vab: float, tq: float,
             level: float, n: int) -> Interval:
    """Fieller interval for b / a (:func:`student.fieller_set`)."""
    est = b / a if a != 0 else float("nan")
    lo, hi = (float(v) for v in fieller_set(a, b, vaa, vbb, vab, tq))
    if not math.isfinite(lo):        # a not significantly nonzero: the set is unbounded
        return Interval.unbounded(est, n=n, level=level)
    return Interval(estimate=est, lo=min(lo, est), hi=max(hi, est), level=level, n=n,
                    method="fieller")


def fit_pl_tau_shape(tau: Sequence[float], gap: Sequence[float], alpha: float,
                     level: float = DEFAULT_LEVEL) -> PLShapeFit:
    """Fit the PL tau-shape (see :class:`PLShapeFit`); tau = 0 points (gap 0) are allowed."""
    t, g = _clean(tau), _clean(gap)
    if t.size != g.size:
        raise ValueError(f"fit_pl_tau_shape: {t.size} tau values but {g.size} gaps")
    if np.any(t < 0):
        raise ValueError(f"fit_pl_tau_shape: tau must be >= 0, got {t.tolist()}")
    k = 2.0 * (1.0 - alpha) / alpha
    fixed = fit_linear(pl_shape(t, alpha, PL_SHAPE_C)[:, None], g, level)
    free = fit_linear(np.stack([t * (t + k), t], axis=1), g, level)
    a_int, b_int = free.coef
    if free.dof > 0 and all(math.isfinite(v) for row in free.cov for v in row):
        tq = float(t_quantile(level, free.dof))
        c = _fieller(a_int.estimate, b_int.estimate, free.cov[0][0], free.cov[1][1],
                     free.cov[0][1], tq, level, int(t.size))
    else:
        est = b_int.estimate / a_int.estimate if a_int.estimate != 0 else float("nan")
        c = Interval.unbounded(est, n=int(t.size), level=level)
    return PLShapeFit(alpha=float(alpha), scale_fixed_c=fixed.coef[0], scale_free=a_int, c=c,
                      r2_fixed_c=fixed.r2, n=int(t.size))
