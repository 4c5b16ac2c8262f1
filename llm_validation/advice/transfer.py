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
    - the *forms* (:func:`law_form`, :data:`FORMS`, listed in :data:`EXPLICIT_LAWS`): every
      candidate form of the delay-law design (:func:`~llm_validation.delay_law.laws.
      candidate_laws`) by advise's name, ``link(g) = a + b log N + c log T + d log(lr/lr_0)``
      with any subset of the three regressors (``const``, ``size``, ``size_steps``,
      ``size_steps_lr``; the power law in ``T`` alone is ``steps``) and the link ``log`` (a
      power law) or ``logit`` (its saturating twin, ``/saturating``). The step count ``T``
      (tokens over the batch's tokens), the peak lr relative to the tuned ``lr_0`` and the size
      are explicit inputs; a regressor that does not vary in the pilot (spans less than
      :data:`~llm_validation.advice.horizon.MIN_TREND_SPREAD`) is dropped when the target
      lies within its span, and the form is not identified when it does not. A
      form reads only what the user states (``--batch-tokens``, ``--lr``, the size) and refuses
      a target without them (:class:`MissingInput`, naming the flag). The delay-law ledger's
      chosen form is among them by construction.

    Every fitted law predicts either cost a pair carries (``quantity``,
    :data:`~llm_validation.advice.pilot.QUANTITIES`): the gap share ``g`` or the
    compute-equivalent lag (the pilot's shorter synchronous runs give it); ``theory`` predicts
    the gap share only.

    The fitted laws are ordinary least squares with the t prediction interval of one more pair
    on the link scale (``exp(l* +- t_{n-p} s sqrt(1 + x*' (X'X)^-1 x*))`` for the log link);
    a law whose
    regressors do not vary in the pilot (one size, one horizon, or a clock spanning less than
    :data:`~llm_validation.advice.horizon.MIN_TREND_SPREAD`, as tokens per parameter does on a
    pilot trained at one tokens-per-parameter ratio) is *not identified* and raises
    :class:`NotIdentified` with the reason (``steps`` and ``tokens_per_param`` instead carry
    the one horizon's cost unchanged, :func:`~llm_validation.advice.horizon.fit_horizon`).

Assumptions
    Each law's own: the cost is a power of its clock beyond the pilot's range (none of them can
    be checked outside it); ``steps`` and ``tokens_per_param`` coincide on a pilot of one size,
    and part only when the target's size differs (docs/advise.md, "Transfer across sizes").

Guarantee
    Exact on data that follow the law (zero residual, zero-width interval); otherwise the
    interval covers the residual scatter of the fit, not the choice of law
    (:mod:`~llm_validation.advice.transfer_choice` measures that on held-out sizes, and
    :mod:`~llm_validation.advice.cell_choice` on held-out batches, sizes, lrs and horizons).

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
from llm_validation.advice.horizon import (LEVEL, MIN_TREND_SPREAD, GapPrediction,
                                          carries_trend, fit_horizon, ols_predict)
from llm_validation.advice.pilot import QUANTITIES
from llm_validation.delay_law.laws import Law, candidate_laws

__all__ = ["LAWS", "FORMS", "EXPLICIT_LAWS", "ALL_LAWS", "LAW_TEXT", "ASSUMPTION",
           "NotIdentified", "MissingInput", "Target", "advise_name", "law_steps",
           "law_tokens_per_param", "law_joint", "law_theory", "law_form", "law_size_steps_lr",
           "predict_law"]

#: The candidate laws chosen on held-out sizes, in the order ties are broken.
LAWS = ("steps", "tokens_per_param", "joint", "theory")
#: The delay-law design's feature names as advise prints them.
_FEATURE_NAME = {"log_n": "size", "log_steps": "steps", "log_lr": "lr"}
#: The delay-law design's regressors: (column label, what it is, the flag that states it).
_COLUMNS = {"log_n": ("log N", "the model size", "--model or --params"),
            "log_steps": ("log T", "the step count", "--batch-tokens"),
            "log_lr": ("log(lr/lr_0)", "the lr ratio", "--lr-ratio or --lr")}


def advise_name(law: Law) -> str:
    """Advise's name of a delay-law form (:func:`~llm_validation.delay_law.laws.candidate_laws`):
    its features joined by ``_`` (``size_steps_lr``), ``const`` without any, ``/saturating`` for
    the logit link."""
    core = "_".join(_FEATURE_NAME[f] for f in law.features) or "const"
    return core if law.link == "log" else f"{core}/saturating"


#: The laws in explicit variables: every form of the delay-law design (power law and its
#: saturating twin in any of log N, log T, log lr ratio) by advise's name, except the power law
#: in the step count alone, which is :data:`LAWS`' ``steps``. Fitted beside :data:`LAWS`; the
#: choice among all of them on held-out cells is :mod:`~llm_validation.advice.cell_choice`'s.
FORMS = {advise_name(law): law for law in candidate_laws()
         if advise_name(law) != "steps"}
EXPLICIT_LAWS = tuple(FORMS)
#: Every law advise can fit.
ALL_LAWS = LAWS + EXPLICIT_LAWS
#: Relative tolerance under which a regressor's pilot values count as one value (and the
#: target as sitting at it): float noise of a ratio of two lrs or of tokens / batch tokens.
SAME_VALUE_RTOL = 1e-9


def _form_text(law: Law) -> str:
    lhs = "log g" if law.link == "log" else "logit g"
    terms = ["a"] + [f"{c} {_COLUMNS[f][0]}" for c, f in zip("bcd", law.features)]
    return f"{lhs} = " + " + ".join(terms)


#: Each law's formula, as printed.
LAW_TEXT = {"steps": "log g = a + b log T", "tokens_per_param": "log g = a + b log(D/N)",
            "joint": "log g = a + b log N + c log(D/N)",
            "theory": "g = c_F K(tau, alpha) L eta^2 / (v_0 - v_T)",
            **{name: _form_text(law) for name, law in FORMS.items()}}


def _form_assumption(law: Law) -> str:
    what = ", ".join(_COLUMNS[f][1] for f in law.features) or "nothing"
    shape = "power" if law.link == "log" else "saturating (logit) power"
    return f"the cost is the same {shape} law of {what} beyond the pilot's range of each"


#: What each law assumes when it is read far beyond the pilot (the "extrapolation" sentence).
ASSUMPTION = {
    "steps": "the gap share falls as the same power of the step count at every model size",
    "tokens_per_param": "the gap share falls as the same power of tokens per parameter at every "
                        "model size",
    "joint": "the power law in model size and tokens per parameter holds beyond the pilot's sizes",
    "theory": "the PL law's calibration constant is the same at every size and horizon",
    **{name: _form_assumption(law) for name, law in FORMS.items()}}


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


def _values(pairs: Sequence[Any], law: str, quantity: str = "share",
            link: str = "log") -> tuple[list[Any], list[float]]:
    """The pairs whose ``quantity`` the law can read, and those values.

    A value outside the law's link (``log``: ``<= 0``; ``logit``: outside ``(0, 1)``) is left
    out, as the delay-law fits do (:func:`~llm_validation.delay_law.laws.fit_law`): a small cost
    measured below zero on some seeds then counts only through its positive seeds, which
    biases the law toward a larger cost (the pessimistic side; the prediction's ``dropped``
    says how many). ``steps`` keeps every value (it fits a line in ``g`` instead when one is
    <= 0, :func:`~llm_validation.advice.horizon.fit_horizon`). :class:`NotIdentified` when
    nothing is left."""
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown quantity {quantity!r}; choose from {', '.join(QUANTITIES)}")
    use = [p for p in pairs if p.value(quantity) is not None and math.isfinite(p.value(quantity))]
    if not use:
        raise NotIdentified(f"{law}: no pilot pair with a {quantity}"
                            + (" (no shorter synchronous runs: no compute frontier)"
                               if quantity == "lag" else ""))
    if law != "steps":
        inside = (lambda v: 0 < v < 1) if link == "logit" else (lambda v: v > 0)
        use = [p for p in use if inside(float(p.value(quantity)))]
        if not use:
            raise NotIdentified(f"{law}: every pilot pair's {quantity} is outside the law's "
                                f"domain ({'(0, 1)' if link == 'logit' else '> 0'})")
    return use, [float(p.value(quantity)) for p in use]


def _relabel(pred: GapPrediction, law: str, **extra: Any) -> GapPrediction:
    """``pred`` as ``law``'s; its formula is the law's own only when that is the fit made (the
    log-scale line); a one-horizon or additive fallback prints what was fitted instead."""
    trend = str(pred.detail.get("trend", ""))
    fitted = pred.detail.get("scale", "log") == "log" and not trend.startswith("none")
    formula = LAW_TEXT[law] if fitted or "trend" not in pred.detail else trend
    return dataclasses.replace(pred, method=law, detail={**pred.detail, "law": law,
                                                         "formula": formula, **extra})


def law_steps(pairs: Sequence[Any], target: Target, level: float = LEVEL,
              quantity: str = "share") -> GapPrediction:
    """``log g = a + b log T`` over ``pairs`` (:class:`~llm_validation.advice.pilot.DelayPair`)
    read at ``target.steps`` (:func:`~llm_validation.advice.horizon.fit_horizon`: a line in
    ``g`` when a pair has ``g <= 0``, constant with one horizon); ``g`` is the pairs'
    ``quantity`` (:data:`~llm_validation.advice.pilot.QUANTITIES`)."""
    use, y = _values(pairs, "steps", quantity)
    pred = fit_horizon([p.horizon for p in use], y, target.steps, level)
    return _relabel(pred, "steps")


def law_tokens_per_param(pairs: Sequence[Any], target: Target, level: float = LEVEL,
                         quantity: str = "share") -> GapPrediction:
    """``log g = a + b log(D/N)`` over ``pairs`` read at ``target``'s tokens per parameter
    (:class:`NotIdentified` when a size is unknown or a value is <= 0)."""
    use, y = _values(pairs, "tokens_per_param", quantity)
    if target.tokens_per_param is None or any(p.tokens_per_param is None for p in use):
        raise NotIdentified("tokens_per_param: the model size of the target or of a pilot run "
                            "is unknown")
    pred = fit_horizon([p.tokens_per_param for p in use], y, target.tokens_per_param, level)
    return _relabel(pred, "tokens_per_param", clock_values=pred.detail["horizons"],
                    clock_target=target.tokens_per_param, dropped=len(pairs) - len(use))


def law_joint(pairs: Sequence[Any], target: Target, level: float = LEVEL,
              quantity: str = "share") -> GapPrediction:
    """``log g = a + b log N + c log(D/N)`` over ``pairs`` read at ``target``
    (:class:`NotIdentified` with one size, one tokens-per-parameter value, an unknown size or a
    value <= 0)."""
    use, y = _values(pairs, "joint", quantity)
    if target.tokens_per_param is None or any(p.tokens_per_param is None for p in use):
        raise NotIdentified("joint: the model size of the target or of a pilot run is unknown")
    N = np.array([float(p.n_params) for p in use])
    r = np.array([p.tokens_per_param for p in use])
    if np.unique(N).size < 2:
        raise NotIdentified("joint: one model size in the pilot (the size exponent is not "
                            "identified)")
    if not carries_trend(r):
        raise NotIdentified(f"joint: tokens per parameter spans only {r.max() / r.min():.3g}x "
                            f"in the pilot ({r.min():.4g} to {r.max():.4g}, under "
                            f"{MIN_TREND_SPREAD:g}x): its exponent is not identified")
    X = np.column_stack([np.ones(N.size), np.log(N), np.log(r)])
    if np.linalg.matrix_rank(X) < 3:
        raise NotIdentified("joint: size and tokens per parameter move together in the pilot "
                            "(their exponents are not separable)")
    xs = np.array([1.0, math.log(target.n_params), math.log(target.tokens_per_param)])
    est, lo, hi, beta = ols_predict(X, np.log(y), xs, level)
    return GapPrediction(estimate=math.exp(est), lo=math.exp(lo), hi=math.exp(hi), n=len(use),
                         method="joint", detail={
                             "law": "joint", "formula": LAW_TEXT["joint"],
                             "trend": LAW_TEXT["joint"],
                             "a": float(beta[0]), "size_exponent": float(beta[1]),
                             "tokens_per_param_exponent": float(beta[2]),
                             "sizes": sorted(set(N.tolist())), "dropped": len(pairs) - len(use)})


def law_theory(calibration_pairs: Sequence[Any], syncs: Sequence[Any], optimizer: str,
               mode: str, level: float = LEVEL, quantity: str = "share") -> GapPrediction:
    """The PL gap law (:func:`~llm_validation.advice.delay_term.predict_theory`), calibrated on
    ``calibration_pairs`` of ``optimizer``'s family and ``mode``, applied to the synchronous runs
    ``syncs`` (:class:`NotIdentified` without a calibration pair or logged statistics, and for
    the ``lag``: the PL law predicts the gap share only)."""
    if quantity != "share":
        raise NotIdentified(f"theory: the PL law predicts the gap share, not the {quantity}")
    cal = calibrate(calibration_pairs, optimizer, mode)
    if not cal.n:
        raise NotIdentified(f"theory: no calibration pair of the {cal.family} family in mode "
                            f"{mode!r}")
    try:
        pred = predict_theory(syncs, cal, level=level)
    except ValueError as exc:
        raise NotIdentified(f"theory: {exc}") from None
    return _relabel(pred, "theory")


def _pair_column(p: Any, feature: str, target: Target) -> float:
    if feature == "log_n":
        return float(p.n_params)
    if feature == "log_steps":
        return float(p.horizon)
    # the pair's lr over its own size's tuned lr when the pilot says which that is
    return p.lr_rel if p.lr_rel is not None else p.delayed.lr / target.pilot_lr


def _form_columns(name: str, law: Law, pairs: Sequence[Any], target: Target
                  ) -> list[tuple[str, np.ndarray, float]]:
    """(label, the pairs' log values, the target's log value) of the form's features, a column
    that does not vary in the pilot dropped when the target sits at its one value."""
    at = {"log_n": target.n_params, "log_steps": target.steps, "log_lr": target.lr_ratio}
    kept = []
    for f in law.features:
        label, what, _ = _COLUMNS[f]
        raw = np.array([_pair_column(p, f, target) for p in pairs])
        x, xs = np.log(raw), math.log(at[f])
        if carries_trend(raw):
            kept.append((label, x, xs))
        elif not x.min() - SAME_VALUE_RTOL <= xs <= x.max() + SAME_VALUE_RTOL:
            held = (f"one value in the pilot ({math.exp(x[0]):.4g})" if np.ptp(x) <= SAME_VALUE_RTOL
                    else f"values spanning only {math.exp(np.ptp(x)):.3g}x in the pilot "
                    f"({math.exp(x.min()):.4g} to {math.exp(x.max()):.4g}, under "
                    f"{MIN_TREND_SPREAD:g}x)")
            raise NotIdentified(f"{name}: {what} has {held} and another at the target "
                                f"({at[f]:.4g}): its exponent is not identified")
    return kept


def law_form(name: str, pairs: Sequence[Any], target: Target, level: float = LEVEL,
             quantity: str = "share") -> GapPrediction:
    """The form ``name`` of :data:`FORMS` (``link(g) = a + b log N + c log T + d log(lr/lr_0)``,
    the features the form has) over ``pairs`` read at ``target``: least squares on the link
    scale, the t prediction interval of one more pair mapped back through the link.

    :class:`MissingInput` naming the flag when the form reads the step count and the target's is
    not the user's (``--batch-tokens``), or reads the lr ratio and it is unknown (``--lr``);
    :class:`NotIdentified` when a size is unknown, a value lies outside the link, a regressor the
    target moves does not vary in the pilot, or the regressors move together. A pair's lr ratio
    is against its own size's tuned lr (:attr:`~llm_validation.advice.pilot.DelayPair.lr_rel`)
    when the pilot says which that is. The prediction says what it was read at (``read_at``)."""
    law = FORMS.get(name)
    if law is None:
        raise ValueError(f"unknown form {name!r}; choose from {', '.join(FORMS)}")
    if "log_steps" in law.features and not target.steps_stated:
        raise MissingInput(f"{name} needs --batch-tokens (the run's tokens per optimizer step: "
                           "its step count is tokens / batch tokens)")
    if "log_lr" in law.features and target.lr_ratio is None:
        raise MissingInput(f"{name} needs --lr-ratio (the run's peak lr over the lr tuned for "
                           "its size) or --lr (its peak lr, read against the pilot's tuned lr)")
    use, y = _values(pairs, name, quantity, law.link)
    if "log_n" in law.features and (target.n_params is None
                                    or any(p.n_params is None for p in use)):
        raise NotIdentified(f"{name}: the model size of the target (--model or --params) or of "
                            "a pilot run is unknown")
    cols = _form_columns(name, law, use, target)
    X = np.column_stack([np.ones(len(use))] + [x for _, x, _ in cols])
    if np.linalg.matrix_rank(X) < X.shape[1]:
        raise NotIdentified(f"{name}: " + ", ".join(n for n, _, _ in cols) + " move "
                            "together in the pilot (their exponents are not separable)")
    xs = np.array([1.0] + [v for _, _, v in cols])
    z = np.array([law.forward(v) for v in y])
    est, lo, hi, beta = ols_predict(X, z, xs, level)
    return GapPrediction(estimate=law.inverse(est), lo=law.inverse(lo), hi=law.inverse(hi),
                         n=len(use), method=name, detail={
                             "law": name, "formula": LAW_TEXT[name], "trend": LAW_TEXT[name],
                             "a": float(beta[0]), "quantity": quantity,
                             "dropped": len(pairs) - len(use),
                             "exponents": {n: float(b) for (n, _, _), b in zip(cols, beta[1:])},
                             "read_at": {"steps": target.steps, "lr_ratio": target.lr_ratio,
                                         "n_params": target.n_params}})


def law_size_steps_lr(pairs: Sequence[Any], target: Target, level: float = LEVEL,
                      quantity: str = "share") -> GapPrediction:
    """``log g = a + b log N + c log T + d log(lr/lr_0)`` (:func:`law_form` of
    ``size_steps_lr``)."""
    return law_form("size_steps_lr", pairs, target, level, quantity)


def predict_law(law: str, pairs: Sequence[Any], target: Target, *,
                calibration_pairs: Sequence[Any] = (), syncs: Sequence[Any] = (),
                optimizer: str = "", mode: str = "", level: float = LEVEL,
                quantity: str = "share") -> GapPrediction:
    """Dispatch to one law of :data:`ALL_LAWS`: ``pairs`` are the pilot's pairs of the optimizer
    and mode (the fitted laws), ``calibration_pairs``/``syncs``/``optimizer``/``mode`` feed
    ``theory``; ``quantity`` is the cost predicted (the gap ``share`` or the compute-equivalent
    ``lag``). Raises :class:`NotIdentified` when the law cannot be fitted."""
    if law == "theory":
        return law_theory(calibration_pairs, syncs, optimizer, mode, level, quantity)
    if law in FORMS:
        return law_form(law, pairs, target, level, quantity)
    fit = {"steps": law_steps, "tokens_per_param": law_tokens_per_param,
           "joint": law_joint}.get(law)
    if fit is None:
        raise ValueError(f"unknown transfer law {law!r}; choose from {', '.join(ALL_LAWS)}")
    return fit(pairs, target, level, quantity)
