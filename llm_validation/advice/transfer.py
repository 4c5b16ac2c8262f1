"""Candidate transfer laws: how a pilot's delay cost carries over to another model size and horizon.

Algorithm
    Every law predicts the gap fraction ``g`` (the gap as a share of the synchronous loss
    decrease, :class:`~llm_validation.validation.lag.Lag`) of a run with ``N`` parameters,
    ``T`` optimizer steps and ``D = T x tokens per step`` tokens, from the pilot's pairs of one
    optimizer and mode (2BW, 2BW + EF):

    - ``steps`` (:func:`law_steps`): ``log g = a + b log T``, the horizon law of
      :func:`~llm_validation.advice.horizon.fit_horizon` (the model size does not enter);
    - ``tokens_per_param`` (:func:`law_tokens_per_param`): ``log g = a + b log(D/N)``, the same
      fit against tokens per parameter (the Chinchilla clock: a 10x larger model needs 10x the
      tokens to reach the same ``g``);
    - ``joint`` (:func:`law_joint`): ``log g = a + b log N + c log(D/N)``, a power law in the size
      and the tokens per parameter (with a fixed batch, the same span as ``log N`` and ``log
      T``); identified only with at least two sizes and two tokens-per-parameter values;
    - ``theory`` (:func:`law_theory`): the PL gap law of :mod:`~llm_validation.advice.delay_term`
      (``g = c_F Z`` from a synchronous run's statistics; no size or horizon term);
    - ``size_steps_lr`` (:func:`law_size_steps_lr`, one of :data:`EXPLICIT_LAWS`):
      ``log g = a + b log N + c log T + d log(lr/lr_0)``, the step count ``T`` (tokens over the
      batch's tokens), the peak lr relative to the pilot's tuned ``lr_0`` and the size each an
      explicit input; a regressor that does not vary in the pilot is dropped when the target
      sits at the pilot's one value, and the law is not identified when it does not. It reads
      only what the user states (``--batch-tokens``, ``--lr``, the size) and refuses a target
      without them (:class:`MissingInput`, naming the flag). It is not among the candidates
      chosen on held-out sizes (:data:`LAWS`); it is used when requested.

    The log-linear laws are ordinary least squares with the t prediction interval of one more
    pair on the log scale (``exp(l* +- t_{n-p} s sqrt(1 + x*' (X'X)^-1 x*))``); a law whose
    regressors do not vary in the pilot (one size, one horizon) is *not identified* and raises
    :class:`NotIdentified` with the reason.

Assumptions
    Each law's own: the cost is a power of its clock beyond the pilot's range (none of them can
    be checked outside it); ``steps`` and ``tokens_per_param`` coincide on a pilot of one size,
    and part only when the target's size differs (docs/advise.md, "Transfer across sizes").

Guarantee
    Exact on data that follow the law (zero residual, zero-width interval); otherwise the
    interval covers the residual scatter of the fit, not the choice of law
    (:mod:`~llm_validation.advice.transfer_choice` measures that on held-out sizes).

Reference
    Hoffmann et al. (2022) for tokens per parameter; OLS prediction intervals (Seber & Lee,
    Linear Regression Analysis, ch. 5); docs/advise.md.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from llm_validation.advice.delay_term import calibrate, predict_theory
from llm_validation.advice.horizon import LEVEL, GapPrediction, fit_horizon, ols_predict

__all__ = ["LAWS", "EXPLICIT_LAWS", "ALL_LAWS", "LAW_TEXT", "ASSUMPTION", "NotIdentified",
           "MissingInput", "Target", "law_steps", "law_tokens_per_param", "law_joint",
           "law_theory", "law_size_steps_lr", "predict_law"]

#: The candidate laws chosen on held-out sizes, in the order ties are broken.
LAWS = ("steps", "tokens_per_param", "joint", "theory")
#: Laws in the explicit step count, lr ratio and size: fitted beside :data:`LAWS` and used when
#: requested (their choice on held-out batch, size, lr and horizon cells is not made here).
EXPLICIT_LAWS = ("size_steps_lr",)
#: Every law advise can fit.
ALL_LAWS = LAWS + EXPLICIT_LAWS
#: Relative tolerance under which a regressor's pilot values count as one value (and the
#: target as sitting at it): float noise of a ratio of two lrs or of tokens / batch tokens.
SAME_VALUE_RTOL = 1e-9
#: Each law's formula, as printed.
LAW_TEXT = {"steps": "log g = a + b log T", "tokens_per_param": "log g = a + b log(D/N)",
            "joint": "log g = a + b log N + c log(D/N)",
            "theory": "g = c_F K(tau, alpha) L eta^2 / (v_0 - v_T)",
            "size_steps_lr": "log g = a + b log N + c log T + d log(lr/lr_0)"}
#: What each law assumes when it is read far beyond the pilot (the "extrapolation" sentence).
ASSUMPTION = {
    "steps": "the gap share falls as the same power of the step count at every model size",
    "tokens_per_param": "the gap share falls as the same power of tokens per parameter at every "
                        "model size",
    "joint": "the power law in model size and tokens per parameter holds beyond the pilot's sizes",
    "theory": "the PL law's calibration constant is the same at every size and horizon",
    "size_steps_lr": "the gap share is the same power of the model size, the step count and the "
                     "lr ratio beyond the pilot's range of each"}


class NotIdentified(ValueError):
    """A law that the pilot's pairs cannot fit (the message says why)."""


class MissingInput(NotIdentified):
    """A law whose inputs the user did not give (the message names the flag)."""


@dataclass(frozen=True, kw_only=True)
class Target:
    """The run a law predicts."""

    steps: float
    """Optimizer steps T (> 0)."""
    tokens_per_step: float
    """Tokens per optimizer step (> 0)."""
    n_params: float | None = None
    """Parameters N, all counted; None when unknown (size-aware laws are then not applicable)."""
    steps_stated: bool = True
    """True when ``steps`` is the user's own (tokens over ``--batch-tokens``, or a pilot pair's);
    False when it is the simulator's default batch, which :data:`EXPLICIT_LAWS` refuse."""
    lr_ratio: float | None = None
    """The run's peak lr over the pilot's tuned lr (``--lr`` / :attr:`pilot_lr`); None when the
    user did not give ``--lr`` (:data:`EXPLICIT_LAWS` then refuse)."""
    pilot_lr: float | None = None
    """The pilot's tuned peak lr, the reference of :attr:`lr_ratio` and of the pilot pairs'
    own ratios (None: no lr stated)."""

    def __post_init__(self) -> None:
        if not (self.steps > 0 and self.tokens_per_step > 0):
            raise ValueError(f"Target needs positive steps and tokens per step, got {self}")
        for name in ("n_params", "lr_ratio", "pilot_lr"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ValueError(f"Target.{name} must be a positive number, got {v}")
        if (self.lr_ratio is None) != (self.pilot_lr is None):
            raise ValueError("Target.lr_ratio and Target.pilot_lr are given together")

    @property
    def tokens_per_param(self) -> float | None:
        """``D / N`` (None without ``n_params``)."""
        return None if self.n_params is None else self.steps * self.tokens_per_step / self.n_params


def _positive(pairs: Sequence[Any], law: str) -> list[Any]:
    use = [p for p in pairs if math.isfinite(p.gap_fraction)]
    if not use:
        raise NotIdentified(f"{law}: no pilot pair")
    if any(p.gap_fraction <= 0 for p in use) and law != "steps":
        raise NotIdentified(f"{law}: a pilot pair has g <= 0 (no power law)")
    return use


def _relabel(pred: GapPrediction, law: str, **extra: Any) -> GapPrediction:
    """``pred`` as ``law``'s; its formula is the law's own only when that is the fit made (the
    log-scale line); a one-horizon or additive fallback prints what was fitted instead."""
    trend = str(pred.detail.get("trend", ""))
    fitted = pred.detail.get("scale", "log") == "log" and not trend.startswith("none")
    formula = LAW_TEXT[law] if fitted or "trend" not in pred.detail else trend
    return dataclasses.replace(pred, method=law, detail={**pred.detail, "law": law,
                                                         "formula": formula, **extra})


def law_steps(pairs: Sequence[Any], target: Target, level: float = LEVEL) -> GapPrediction:
    """``log g = a + b log T`` over ``pairs`` (:class:`~llm_validation.advice.pilot.DelayPair`)
    read at ``target.steps`` (:func:`~llm_validation.advice.horizon.fit_horizon`: a line in
    ``g`` when a pair has ``g <= 0``, constant with one horizon)."""
    use = _positive(pairs, "steps")
    pred = fit_horizon([p.horizon for p in use], [p.gap_fraction for p in use], target.steps,
                       level)
    return _relabel(pred, "steps")


def law_tokens_per_param(pairs: Sequence[Any], target: Target,
                         level: float = LEVEL) -> GapPrediction:
    """``log g = a + b log(D/N)`` over ``pairs`` read at ``target``'s tokens per parameter
    (:class:`NotIdentified` when a size is unknown or a gap is <= 0)."""
    use = _positive(pairs, "tokens_per_param")
    if target.tokens_per_param is None or any(p.tokens_per_param is None for p in use):
        raise NotIdentified("tokens_per_param: the model size of the target or of a pilot run "
                            "is unknown")
    pred = fit_horizon([p.tokens_per_param for p in use], [p.gap_fraction for p in use],
                       target.tokens_per_param, level)
    return _relabel(pred, "tokens_per_param", clock_values=pred.detail["horizons"],
                    clock_target=target.tokens_per_param)


def law_joint(pairs: Sequence[Any], target: Target, level: float = LEVEL) -> GapPrediction:
    """``log g = a + b log N + c log(D/N)`` over ``pairs`` read at ``target``
    (:class:`NotIdentified` with one size, one tokens-per-parameter value, an unknown size or a
    gap <= 0)."""
    use = _positive(pairs, "joint")
    if target.tokens_per_param is None or any(p.tokens_per_param is None for p in use):
        raise NotIdentified("joint: the model size of the target or of a pilot run is unknown")
    N = np.array([float(p.n_params) for p in use])
    r = np.array([p.tokens_per_param for p in use])
    if np.unique(N).size < 2:
        raise NotIdentified("joint: one model size in the pilot (the size exponent is not "
                            "identified)")
    X = np.column_stack([np.ones(N.size), np.log(N), np.log(r)])
    if np.linalg.matrix_rank(X) < 3:
        raise NotIdentified("joint: size and tokens per parameter move together in the pilot "
                            "(their exponents are not separable)")
    y = np.log([p.gap_fraction for p in use])
    xs = np.array([1.0, math.log(target.n_params), math.log(target.tokens_per_param)])
    est, lo, hi, beta = ols_predict(X, y, xs, level)
    return GapPrediction(estimate=math.exp(est), lo=math.exp(lo), hi=math.exp(hi), n=len(use),
                         method="joint", detail={
                             "law": "joint", "formula": LAW_TEXT["joint"],
                             "trend": LAW_TEXT["joint"],
                             "a": float(beta[0]), "size_exponent": float(beta[1]),
                             "tokens_per_param_exponent": float(beta[2]),
                             "sizes": sorted(set(N.tolist()))})


def law_theory(calibration_pairs: Sequence[Any], syncs: Sequence[Any], optimizer: str,
               mode: str, level: float = LEVEL) -> GapPrediction:
    """The PL gap law (:func:`~llm_validation.advice.delay_term.predict_theory`), calibrated on
    ``calibration_pairs`` of ``optimizer``'s family and ``mode``, applied to the synchronous runs
    ``syncs`` (:class:`NotIdentified` without a calibration pair or logged statistics)."""
    cal = calibrate(calibration_pairs, optimizer, mode)
    if not cal.n:
        raise NotIdentified(f"theory: no calibration pair of the {cal.family} family in mode "
                            f"{mode!r}")
    try:
        pred = predict_theory(syncs, cal, level=level)
    except ValueError as exc:
        raise NotIdentified(f"theory: {exc}") from None
    return _relabel(pred, "theory")


def _explicit_columns(pairs: Sequence[Any], target: Target) -> list[tuple[str, np.ndarray, float]]:
    """(name, the pairs' log values, the target's log value) of log N, log T and log lr ratio,
    a column that does not vary in the pilot dropped when the target sits at its one value."""
    cols = [("log N", "the model size", [float(p.n_params) for p in pairs],
             float(target.n_params)),
            ("log T", "the step count", [float(p.horizon) for p in pairs], float(target.steps)),
            ("log(lr/lr_0)", "the lr ratio", [p.delayed.lr / target.pilot_lr for p in pairs],
             target.lr_ratio)]
    kept = []
    for name, what, vals, at in cols:
        x, xs = np.log(vals), math.log(at)
        if np.ptp(x) > SAME_VALUE_RTOL:
            kept.append((name, x, xs))
        elif abs(xs - x[0]) > SAME_VALUE_RTOL:
            raise NotIdentified(f"size_steps_lr: {what} has one value in the pilot "
                                f"({math.exp(x[0]):.4g}) and another at the target ({at:.4g}): "
                                "its exponent is not identified")
    return kept


def law_size_steps_lr(pairs: Sequence[Any], target: Target,
                      level: float = LEVEL) -> GapPrediction:
    """``log g = a + b log N + c log T + d log(lr/lr_0)`` over ``pairs`` read at ``target``.

    :class:`MissingInput` naming the flag when the target's step count is not the user's
    (``--batch-tokens``) or its lr ratio is unknown (``--lr``); :class:`NotIdentified` when a
    size is unknown, a gap is <= 0, a regressor the target moves does not vary in the pilot, or
    the regressors move together. The prediction says what it was read at (``read_at``)."""
    if not target.steps_stated:
        raise MissingInput("size_steps_lr needs --batch-tokens (the run's tokens per optimizer "
                           "step: its step count is tokens / batch tokens)")
    if target.lr_ratio is None:
        raise MissingInput("size_steps_lr needs --lr (the run's peak learning rate, read "
                           "against the pilot's tuned lr)")
    use = _positive(pairs, "size_steps_lr")
    if target.n_params is None or any(p.n_params is None for p in use):
        raise NotIdentified("size_steps_lr: the model size of the target (--model or --params) "
                            "or of a pilot run is unknown")
    cols = _explicit_columns(use, target)
    X = np.column_stack([np.ones(len(use))] + [x for _, x, _ in cols])
    if np.linalg.matrix_rank(X) < X.shape[1]:
        raise NotIdentified("size_steps_lr: " + ", ".join(n for n, _, _ in cols) + " move "
                            "together in the pilot (their exponents are not separable)")
    xs = np.array([1.0] + [v for _, _, v in cols])
    est, lo, hi, beta = ols_predict(X, np.log([p.gap_fraction for p in use]), xs, level)
    return GapPrediction(estimate=math.exp(est), lo=math.exp(lo), hi=math.exp(hi), n=len(use),
                         method="size_steps_lr", detail={
                             "law": "size_steps_lr", "formula": LAW_TEXT["size_steps_lr"],
                             "trend": LAW_TEXT["size_steps_lr"], "a": float(beta[0]),
                             "exponents": {n: float(b) for (n, _, _), b in zip(cols, beta[1:])},
                             "read_at": {"steps": target.steps, "lr_ratio": target.lr_ratio,
                                         "n_params": target.n_params}})


def predict_law(law: str, pairs: Sequence[Any], target: Target, *,
                calibration_pairs: Sequence[Any] = (), syncs: Sequence[Any] = (),
                optimizer: str = "", mode: str = "", level: float = LEVEL) -> GapPrediction:
    """Dispatch to one law of :data:`LAWS`: ``pairs`` are the pilot's pairs of the optimizer and
    mode (the log-linear laws), ``calibration_pairs``/``syncs``/``optimizer``/``mode`` feed
    ``theory``. Raises :class:`NotIdentified` when the law cannot be fitted."""
    if law == "theory":
        return law_theory(calibration_pairs, syncs, optimizer, mode, level)
    fit = {"steps": law_steps, "tokens_per_param": law_tokens_per_param,
           "joint": law_joint, "size_steps_lr": law_size_steps_lr}.get(law)
    if fit is None:
        raise ValueError(f"unknown transfer law {law!r}; choose from {', '.join(ALL_LAWS)}")
    return fit(pairs, target, level)
