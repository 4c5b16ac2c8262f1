"""Delayed first-order methods, batched over configurations: one call runs B runs at once.

Algorithm (THEORY.md, "Algorithms"; every formula comes from :mod:`theory.update_rules`).
Step k = 0, 1, ..., K-1 of configuration b with parameters (tau, eta, alpha, beta, lam, sigma, seed):

1. read point ``y_k = x_{max(k - tau, 0)}`` (a per-configuration ring buffer of past iterates);
2. stochastic gradient ``g_k = grad f(y_k) + xi_k``, ``E||xi_k||_2^2 = sigma^2`` (A1), with
   ``xi_k`` drawn from the configuration's own generator seeded by ``seed`` (so a trajectory does
   not depend on the rest of the batch, and equal seeds share noise: common random numbers;
   :class:`numerics.noise.NoiseStream`);
3. gradient-level EF (``ef="grad"``) feeds ``(1 + lam) g_k - lam g_{k-1}`` instead of ``g_k``;
4. base update, with decoupled weight decay ``x_base = (1 - beta) x_k + u_k``:
   - ``lmo``: ``m_k = (1-alpha) m_{k-1} + alpha g_k`` (``m_0 = g_0``), ``u_k = eta d(m_k)``;
   - ``sgd``: ``u_k = -eta g_k`` (needs alpha = 1);
   - ``heavy_ball``: EMA momentum as for lmo, ``u_k = -eta m_k`` (torch SGD with
     ``lr = eta alpha``, ``momentum = 1 - alpha`` after the first step);
   - ``adam``: torch AdamW: ``m, v`` EMAs from 0 with weights alpha and ``1 - beta2``, bias
     corrected, ``u_k = -eta m_hat / (sqrt(v_hat) + eps)``;
5. update-level EF, ``v_k = x_base - x_k`` (``v_{-1} = 0``):
   - ``ef="update"`` (full update, weight decay included):
     ``x_{k+1} = x_k + v_k + lam (v_k - v_{k-1})``; virtual iterate ``z_k = x_k - lam v_{k-1}``
     obeys ``z_{k+1} = z_k + v_k``;
   - ``ef="update_nowd"`` (weight decay left out of the correction):
     ``x_{k+1} = x_base + lam (u_k - u_{k-1})``; ``z_k = x_k - lam u_{k-1} / (1 - beta)``.

Recorded per step (``Trajectory.series``, float64, shape ``(K or K+1, B)``): ``gap`` f(x_k) - f*,
``grad_norm`` ||grad f(x_k)||_*, ``xnorm`` ||x_k||, ``step`` ||x_{k+1} - x_k||, ``vnorm`` ||v_k||
(the base update; = ||z_{k+1} - z_k|| under full-update EF), ``mom_err``
||m_k - grad f(x_k)||_* (the method's gradient estimate: m for lmo/heavy_ball, g for sgd,
m_hat for adam), ``omega`` ||y_k - p_k|| / eta (read mismatch against the tracked point p_k: x_k,
or z_k under update-level EF; for EF at tau = 1 this is ``||v_{k-1} - lam v_{k-2}|| / eta``), and
under update-level EF also ``gap_z``, ``grad_norm_z``, ``mom_err_z`` (against grad f(z_k)),
``znorm``. ``noise_err`` ||nu_k||_* is the noise part of the momentum (the same EMA applied to
xi alone), so ``mom_err - noise_err`` isolates the deterministic part of the momentum-error lemma.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import Tensor

from numerics.noise import NoiseStream
from numerics.problems import Problem
from theory.update_rules import ef_correct, ema_momentum, grad_ef_mix, lmo_step

__all__ = [
    "MethodConfig",
    "Trajectory",
    "run",
    "run_naive",
    "METHODS",
    "EF_MODES",
    "ALL_SERIES",
    "STATES",
    "MAX_TAU",
    "ADAM_BETA2",
    "ADAM_EPS",
]

METHODS = ("lmo", "sgd", "heavy_ball", "adam")
EF_MODES = ("none", "update", "update_nowd", "grad")
#: Largest delay accepted (the ring buffer holds tau_max + 1 iterates per configuration).
MAX_TAU = 256
#: torch.optim.AdamW defaults for the second-moment weight and the denominator epsilon.
ADAM_BETA2 = 0.999
ADAM_EPS = 1e-8

_X_SERIES = ("gap", "grad_norm", "xnorm", "step", "vnorm", "mom_err", "noise_err", "omega")
_Z_SERIES = ("gap_z", "grad_norm_z", "mom_err_z", "znorm")
ALL_SERIES = _X_SERIES + _Z_SERIES
#: Full per-step states that ``run(..., states=...)`` can keep, each ``(K or K+1, B, *shape)``:
#: ``x`` iterates x_0..x_K, ``y`` read points, ``xi`` noise, ``g`` the stochastic gradient fed to
#: the method (after gradient-level EF), ``m`` the gradient estimate (momentum), ``d`` the direction
#: (LMO output for lmo), ``v`` the full base update x_base - x_k, ``z`` the EF virtual iterate.
STATES = ("x", "y", "xi", "g", "m", "d", "v", "z")


@dataclass(frozen=True, kw_only=True)
class MethodConfig:
    """The numeric parameters of one run (THEORY.md symbols)."""

    eta: float
    """Step length (LMO trust-region radius; the learning rate for sgd/heavy_ball/adam), > 0."""
    tau: int = 0
    """Gradient delay in steps, 0 <= tau <= MAX_TAU (0: synchronous; 1: PipeDream-2BW)."""
    alpha: float = 1.0
    """EMA momentum weight in (0, 1]: m = (1 - alpha) m + alpha g (torch momentum 1 - alpha)."""
    beta: float = 0.0
    """Decoupled weight-decay factor per step in [0, 1): x <- (1 - beta) x + ..."""
    lam: float = 0.0
    """Error Feedback coefficient in [0, 4] (0 = off)."""
    sigma: float = 0.0
    """Gradient-noise level, E||xi||_2^2 = sigma^2, in [0, 1e6]."""
    seed: int = 0
    """Seed of this run's noise stream, 0 <= seed < 2^63."""

    def __post_init__(self) -> None:
        def check(name: str, ok: bool, allowed: str) -> None:
            if not ok:
                raise ValueError(f"{name}={getattr(self, name)!r} is outside {allowed}")

        for name in ("eta", "alpha", "beta", "lam", "sigma"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise TypeError(f"{name}={v!r} must be a finite real number")
        for name in ("tau", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name}={v!r} must be an int")
        check("eta", 0 < self.eta <= 1e6, "(0, 1e6]")
        check("tau", 0 <= self.tau <= MAX_TAU, f"[0, {MAX_TAU}]")
        check("alpha", 0 < self.alpha <= 1, "(0, 1]")
        check("beta", 0 <= self.beta < 1, "[0, 1)")
        check("lam", 0 <= self.lam <= 4, "[0, 4]")
        check("sigma", 0 <= self.sigma <= 1e6, "[0, 1e6]")
        check("seed", 0 <= self.seed < 2**63, "[0, 2^63)")


@dataclass(frozen=True, eq=False)
class Trajectory:
    """The recorded series of one batched call (see the module docstring for the names)."""

    problem: Problem
    """The problem that was run."""
    configs: tuple[MethodConfig, ...]
    """The B configurations, in batch order."""
    method: str
    """Base method (one of METHODS)."""
    ef: str
    """Error Feedback mode (one of EF_MODES)."""
    steps: int
    """K, the number of steps taken."""
    series: dict[str, Tensor] = field(default_factory=dict)
    """name -> tensor (K+1, B) for point quantities, (K, B) for per-step quantities."""
    states: dict[str, Tensor] = field(default_factory=dict)
    """name -> tensor (K or K+1, B, *shape) for the requested STATES."""
    x_final: Tensor | None = None
    """x_K, shape (B, *shape)."""

    def __getitem__(self, name: str) -> Tensor:
        if name not in self.series:
            raise KeyError(f"series {name!r} was not recorded (have {sorted(self.series)})")
        return self.series[name]

    def column(self, name: str, b: int) -> Tensor:
        """Series ``name`` of configuration b."""
        return self[name][:, b]

    def one_step_slack(self, L: float) -> Tensor:
        """Slack of the pathwise star-convex recursion (THEORY.md result 3, 2 L eta^2 form),
        ``(1-beta) r_k + 2 eta ||m_k - grad f(x_k)||_* + 2 L eta^2 - r_{k+1}``, shape (K, B),
        from the recorded ``gap`` and ``mom_err`` (>= 0 when the recursion holds)."""
        r, e = self["gap"], self["mom_err"]
        eta = torch.tensor([c.eta for c in self.configs], dtype=torch.float64)
        beta = torch.tensor([c.beta for c in self.configs], dtype=torch.float64)
        return (1 - beta) * r[:-1] + 2 * eta * e + 2 * L * eta**2 - r[1:]


def _param(configs: Sequence[MethodConfig], name: str, event_ndim: int) -> Tensor:
    vals = torch.tensor([float(getattr(c, name)) for c in configs], dtype=torch.float64)
    return vals.view(-1, *([1] * event_ndim))  # (B, 1, ..., 1)


def run(
    problem: Problem,
    configs: Sequence[MethodConfig],
    steps: int,
    *,
    method: str = "lmo",
    ef: str = "none",
    x0: Tensor | None = None,
    record: Sequence[str] | None = None,
    states: Sequence[str] = (),
    lmo: Callable[[Tensor], Tensor] | None = None,
    adam_beta2: float = ADAM_BETA2,
    adam_eps: float = ADAM_EPS,
) -> Trajectory:
    """Run every configuration for ``steps`` steps at once (torch CPU float64).

    Args:
        problem: the objective (its geometry gives the norms and the LMO).
        configs: B run configurations.
        steps: K >= 1.
        method: one of METHODS; ef: one of EF_MODES.
        x0: start point (shape ``problem.shape`` or ``(B, *shape)``); default ``problem.x0``.
        record: series names to keep (default: all that apply); fewer names use less memory.
        states: names in STATES to keep as full tensors (memory K x B x size: small runs only).
        lmo: replacement LMO (e.g. Newton-Schulz); default the geometry's exact LMO.
    Returns:
        a :class:`Trajectory`.
    """
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not one of {METHODS}")
    if ef not in EF_MODES:
        raise ValueError(f"ef={ef!r} is not one of {EF_MODES}")
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 10**7:
        raise ValueError(f"steps={steps!r} must be an int in [1, 1e7]")
    configs = tuple(configs)
    if not configs or not all(isinstance(c, MethodConfig) for c in configs):
        raise TypeError("configs must be a non-empty sequence of MethodConfig")
    if method == "sgd" and any(c.alpha != 1.0 for c in configs):
        raise ValueError("method='sgd' has no momentum: alpha must be 1 (use 'heavy_ball')")
    z_mode = ef in ("update", "update_nowd")
    wanted = set(ALL_SERIES if record is None else record)
    unknown = wanted - set(ALL_SERIES)
    if unknown:
        raise ValueError(f"record={sorted(unknown)} not in {ALL_SERIES}")
    if not z_mode:
        wanted -= set(_Z_SERIES)
    bad_states = set(states) - set(STATES)
    if bad_states:
        raise ValueError(f"states={sorted(bad_states)} not in {STATES}")
    if method == "adam":  # Adam's estimate is not a linear filter of the noise
        wanted.discard("noise_err")

    geom, nd, shape = problem.geometry, problem.event_ndim, problem.shape
    lmo_fn = geom.lmo if lmo is None else lmo
    B, K = len(configs), steps
    eta = _param(configs, "eta", nd)
    alpha = _param(configs, "alpha", nd)
    beta = _param(configs, "beta", nd)
    lam = _param(configs, "lam", nd)
    taus = torch.tensor([c.tau for c in configs], dtype=torch.long)
    t_max = int(taus.max())
    rows = torch.arange(B)

    if x0 is None:
        x0 = problem.x0
    x = x0.to(torch.float64).expand(B, *shape).clone()  # (B, *shape)
    # ring[j % (T+1)] = x_j and grad f(x_j): the read point y_k = x_{k-tau} is a past iterate,
    # so its exact gradient was already computed when it was current (no second evaluation).
    ring = torch.empty(t_max + 1, B, *shape, dtype=torch.float64)
    gring = torch.empty(t_max + 1, B, *shape, dtype=torch.float64)
    noise = NoiseStream([c.seed for c in configs], [c.sigma for c in configs], shape)

    rec: dict[str, Tensor] = {}
    for name in wanted:
        point = name in ("gap", "grad_norm", "xnorm", "gap_z", "grad_norm_z", "znorm")
        rec[name] = torch.empty(K + 1 if point else K, B, dtype=torch.float64)

    st: dict[str, Tensor] = {
        name: torch.empty(K + 1 if name in ("x", "z") else K, B, *shape, dtype=torch.float64)
        for name in states
    }
    m = nu = v2 = g_prev = xi_prev = None
    u_prev = torch.zeros_like(x)  # u_{k-1} (update_nowd) / v_{k-1} (update)
    adam_b1 = (1.0 - alpha)  # (B, 1...) first-moment decay
    fx, gx = problem.value_and_grad(x)
    if t_max > 0:
        ring[0], gring[0] = x, gx
    for k in range(K + 1):
        if "gap" in rec:
            rec["gap"][k] = fx - problem.f_star
        if "grad_norm" in rec:
            rec["grad_norm"][k] = geom.dual_norm(gx)
        if "xnorm" in rec:
            rec["xnorm"][k] = geom.norm(x)
        if "x" in st:
            st["x"][k] = x
        if z_mode or "z" in st:
            scale = lam if ef == "update" else lam / (1.0 - beta)
            z = x - scale * u_prev if z_mode else x  # z_k (= x_k without update-level EF)
            if "z" in st:
                st["z"][k] = z
            if {"gap_z", "grad_norm_z", "mom_err_z"} & wanted:
                fz, gz = problem.value_and_grad(z)
                if "gap_z" in rec:
                    rec["gap_z"][k] = fz - problem.f_star
                if "grad_norm_z" in rec:
                    rec["grad_norm_z"][k] = geom.dual_norm(gz)
            if "znorm" in rec:
                rec["znorm"][k] = geom.norm(z)
        if k == K:
            break

        # 1-2. delayed read and stochastic gradient.
        if t_max == 0:
            y, gy = x, gx
        else:
            slot = torch.clamp(k - taus, min=0) % (t_max + 1)
            # index_select on the flattened ring: far faster than ring[slot, rows].
            flat = slot * B + rows
            y = ring.view(-1, *shape).index_select(0, flat)
            gy = gring.view(-1, *shape).index_select(0, flat)
        xi = noise.at(k)
        g = gy if xi is None else gy + xi
        # 3. gradient-level EF.
        gin = grad_ef_mix(g, g_prev, lam) if ef == "grad" else g
        g_prev = g
        # 4. base update.
        if method in ("lmo", "heavy_ball"):
            m = ema_momentum(m, gin, alpha)
            est = m
            d = lmo_fn(m) if method == "lmo" else -m
        elif method == "sgd":
            est = gin
            d = -gin
        else:  # adam (torch AdamW), EMAs from zero with bias correction
            m = ema_momentum(torch.zeros_like(x) if m is None else m, gin, alpha)
            v2 = ema_momentum(torch.zeros_like(x) if v2 is None else v2, gin * gin, 1.0 - adam_beta2)
            est = m / (1.0 - adam_b1 ** (k + 1))
            v_hat = v2 / (1.0 - adam_beta2 ** (k + 1))
            d = -est / (torch.sqrt(v_hat) + adam_eps)
        x_base = lmo_step(x, d, eta, beta)
        # 5. update-level EF.
        if ef == "update":
            v = x_base - x
            x_new = ef_correct(x_base, v, u_prev, lam)
            u_next = v
        elif ef == "update_nowd":
            u = eta * d
            x_new = ef_correct(x_base, u, u_prev, lam)
            u_next = u
        else:
            x_new = x_base
            u_next = u_prev

        if "mom_err" in rec:
            rec["mom_err"][k] = geom.dual_norm(est - gx)
        if "noise_err" in rec:  # the same linear filter applied to the noise alone
            if xi is None:
                rec["noise_err"][k] = 0.0
            else:
                xin = grad_ef_mix(xi, xi_prev, lam) if ef == "grad" else xi
                nu = xin if method == "sgd" else ema_momentum(nu, xin, alpha)
                rec["noise_err"][k] = geom.dual_norm(nu)
                xi_prev = xi
        if z_mode and "mom_err_z" in rec:
            rec["mom_err_z"][k] = geom.dual_norm(est - gz)
        if "omega" in rec:
            p = z if z_mode else x
            rec["omega"][k] = geom.norm(y - p) / eta.flatten()
        if "step" in rec:
            rec["step"][k] = geom.norm(x_new - x)
        if "vnorm" in rec:
            rec["vnorm"][k] = geom.norm(x_base - x)
        for name, value in (("y", y), ("g", gin), ("m", est), ("d", d)):
            if name in st:
                st[name][k] = value
        if "xi" in st:
            st["xi"][k] = 0.0 if xi is None else xi
        if "v" in st:
            st["v"][k] = x_base - x

        x, u_prev = x_new, u_next
        fx, gx = problem.value_and_grad(x)
        if t_max > 0:
            ring[(k + 1) % (t_max + 1)] = x
            gring[(k + 1) % (t_max + 1)] = gx

    return Trajectory(problem, configs, method, ef, K, rec, st, x)


def run_naive(problem: Problem, configs: Sequence[MethodConfig], steps: int, **kwargs) -> list[Trajectory]:
    """The reference per-configuration Python loop (one ``run`` call per configuration); used by
    the benchmark and by the batch-independence tests."""
    return [run(problem, [c], steps, **kwargs) for c in configs]
