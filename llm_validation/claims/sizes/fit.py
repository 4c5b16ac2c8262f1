"""The size ladder: how the delay's scale-free cost scales with the model size at 20:1.

Runs of AdamW and Muon x {sync, 2BW, 2BW + EF} at 20 tokens per parameter for several model
sizes ``N`` (all parameters counted, as Chinchilla), each delayed run paired by seed with the
synchronous run of its size, give per arm, size and seed two scale-free numbers
(:mod:`llm_validation.validation.lag`): ``gap_fraction`` (the gap as a share of the synchronous
loss decrease) and ``lag_fraction`` (the share of the synchronous run's steps the delayed run is
behind). This module fits how both scale across the ladder's sizes; it can extrapolate the fit
and compare it with the paper's statements, which the ladder's report no longer does
(:data:`CONFOUND`: the ladder's runs at a fixed batch grow in step count with ``N``, so its
exponents are step-count-and-size exponents, and an extrapolation in ``N`` alone reads a
step-count effect as a size effect; the delay-law design, docs/delay_law.md, measures ``N`` at
fixed steps).

Algorithm
    Step-and-size exponent: for each seed separately, least squares of ``log value`` on ``log N`` over
    the sizes that seed has (:func:`llm_validation.claims.decide.ladder.fit_slope`; a seed with a
    non-positive value at some size has no logarithm and is left out and counted): the
    per-seed slope ``b_s`` and intercept ``a_s``; the exponent is the mean of the ``b_s`` with
    a Student-t interval over seeds. Extrapolation to ``N*`` (SmolLM-135M, SmolLM-360M at 20:1):
    per seed ``y_s = a_s + b_s log N*``, then the t interval over seeds of the ``y_s``,
    exponentiated (a geometric-mean value with its interval). Agreement with the paper
    (:data:`AGREEMENT_RULES`): a ``side`` check (:func:`llm_validation.claims.decide.checks.make`) on
    a per-seed contrast of the extrapolated log lag fractions at SmolLM-135M.

Assumptions
    Seeds are independent replicates (own initialisation and data order) and the per-seed
    slopes and log values are approximately normal; the sizes of one seed share its seed and
    are *not* independent, so they are reduced to one fit per seed before any interval. The
    extrapolation further assumes that the power law in ``N`` holds over the 2-3 decades from
    the largest measured size to 135M-362M parameters, and that a byte-level vocabulary (256
    symbols, a large embedding share at these sizes) stands for the paper's 49,152-token one.
    Neither is tested here: every text about it says "extrapolation".

Guarantee
    Under those assumptions the exponent's interval covers the mean per-seed slope, and the
    extrapolated interval the mean per-seed log value at ``N*``, with their nominal level (one-
    sample t intervals of independent normal values). A check agrees / disagrees only when the
    whole interval lies on one side of its boundary (:func:`llm_validation.validation.verdict.
    decide`), so an interval wider than the tolerance band leaves it undetermined.

Reference
    Hoffmann et al. (2022), the 20 tokens per parameter regime; the per-seed fit is the horizon
    ladder's (docs/reproduce.md, "The horizon ladder"); the scale-free unit and the paper's lag
    fraction are the verdict protocol's (:mod:`llm_validation.claims.decide.regime`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from llm_validation.claims.decide import regime
from llm_validation.claims.decide.checks import Check, make, not_measured, seeds_of
from llm_validation.claims.decide.ladder import SlopeFit, fit_slope
from llm_validation.config import optimizer_label, preset
from llm_validation.validation.inference import Interval, t_interval
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, PASS

__all__ = ["ARMS", "MODES", "QUANTITIES", "QUANTITY_TEXT", "TARGETS", "TOLERANCE", "VERDICT",
           "AGREEMENT_TARGET", "EXPONENT_NAME", "CONFOUND", "SizeLadderData", "Extrapolation",
           "SizeFit", "AgreementRule",
           "AGREEMENT_RULES", "arm_label", "paper_lag_fraction", "extrapolate", "size_fits",
           "agreement_checks", "rules_text"]

#: The delayed modes of the ladder; an arm key is ``"<optimizer>/<mode>"``.
MODES = ("2bw", "2bw+ef")
#: The ladder's delayed arms, in display order.
ARMS = ("adamw/2bw", "adamw/2bw+ef", "muon/2bw", "muon/2bw+ef")
#: The scale-free quantities measured per arm, size and seed (validation/lag.py).
QUANTITIES = ("gap_fraction", "lag_fraction")
#: What each quantity is, in words (tables, figure axes).
QUANTITY_TEXT = {"gap_fraction": "gap as a share of the synchronous loss decrease",
                 "lag_fraction": "lag as a share of the synchronous run's steps"}
#: The paper's model sizes the fits are extrapolated to (all parameters, the presets' counts).
TARGETS: Mapping[str, int] = {"SmolLM-135M": preset("smollm-135m").n_params(),
                              "SmolLM-360M": preset("smollm-360m").n_params()}
#: Factor-2 agreement tolerance on the paper's lag fraction: the paper's "about 0.01 nats" is a
#: one-significant-figure reading of curves, and its conversion to a lag fraction
#: (regime.PAPER_LAG_FRACTION) rests on an estimated loss slope, so a value within a factor 2
#: of it is read as agreeing; fixed before the runs (the verdict protocol).
TOLERANCE = 2.0
#: The paper's size the agreement rules are decided at (one of TARGETS).
AGREEMENT_TARGET = "SmolLM-135M"
#: What the ladder's exponents are: every size at one batch (16 x 64 tokens) and 20 tokens per
#: parameter, so the step count grows in proportion to N; the fit cannot tell them apart.
EXPONENT_NAME = "step-and-size exponent"
CONFOUND = ("every size of the ladder trains at one batch for 20 tokens per parameter, so its "
            "step count grows in proportion to the model: the exponents fitted across it are "
            "step-count-and-size exponents, confounded, not size exponents; read at matched "
            "step counts (claim 4's half-length runs, the n46k horizon ladder) the committed "
            "runs show no size effect. The ladder is therefore not extrapolated in N to "
            "SmolLM-135M/360M: the delay-law design (docs/delay_law.md) measures N at fixed "
            "steps, the step count and the lr")
#: A check's status as an agreement verdict.
VERDICT = {PASS: "agrees", FAIL: "disagrees", INCONCLUSIVE: "undetermined"}


def arm_label(arm: str) -> str:
    """``"muon/2bw+ef"`` -> ``"Muon 2BW + EF"``."""
    opt, mode = arm.split("/", 1)
    return f"{optimizer_label(opt)} {mode.upper().replace('+EF', ' + EF')}"


def paper_lag_fraction() -> float:
    """The paper's Muon gap as a compute-equivalent lag fraction: the protocol's
    ``regime.PAPER_LAG_FRACTION`` (one definition; ValueError while it is not defined)."""
    value = getattr(regime, "PAPER_LAG_FRACTION", None)
    if value is None:
        raise ValueError("llm_validation.claims.decide.regime.PAPER_LAG_FRACTION is not defined: pass "
                         "paper_lag_fraction explicitly")
    return float(value)


def _real(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True, kw_only=True)
class SizeLadderData:
    """The ladder's per-seed measurements: arm -> size -> seed -> value, per quantity."""

    gap_fraction: Mapping[str, Mapping[int, Mapping[int, float]]]
    """arm (``"muon/2bw"``) -> N (total parameters) -> seed -> the gap as a share of the
    same-seed synchronous run's loss decrease (non-positive values are kept: fits count them)."""
    lag_fraction: Mapping[str, Mapping[int, Mapping[int, float]]]
    """arm -> N -> seed -> the lag as a share of the synchronous run's steps."""
    non_embedding: Mapping[int, int]
    """N (total parameters, embeddings and head included) -> its non-embedding parameter
    count; its keys are the ladder's sizes."""
    tokens_per_param: float = regime.PAPER_TOKENS_PER_PARAM
    """Training tokens per parameter of every run (all parameters counted)."""

    def __post_init__(self) -> None:
        if not self.non_embedding:
            raise ValueError("SizeLadderData.non_embedding: needs at least one size")
        for n, ne in self.non_embedding.items():
            if not (_int(n) and _int(ne) and n > 0 and 0 < ne <= n):
                raise ValueError(f"SizeLadderData.non_embedding: {n!r} -> {ne!r} needs ints "
                                 "with 0 < non-embedding <= total")
        if not (_real(self.tokens_per_param) and self.tokens_per_param > 0):
            raise ValueError(f"SizeLadderData.tokens_per_param={self.tokens_per_param!r} "
                             "must be > 0")
        for q in QUANTITIES:
            for arm, by_n in getattr(self, q).items():
                opt, _, mode = str(arm).partition("/")
                if not opt or mode not in MODES:
                    raise ValueError(f"SizeLadderData.{q}: arm {arm!r} is not "
                                     f"'<optimizer>/<mode>' with mode in {list(MODES)}")
                for n, by_seed in by_n.items():
                    if n not in self.non_embedding:
                        raise ValueError(f"SizeLadderData.{q}[{arm!r}]: size {n!r} is not "
                                         f"one of {self.sizes}")
                    for s, v in by_seed.items():
                        if not (_int(s) and _real(v)):
                            raise ValueError(f"SizeLadderData.{q}[{arm!r}][{n}]: seed {s!r} "
                                             f"-> {v!r} needs an int seed and a number")

    @property
    def sizes(self) -> tuple[int, ...]:
        """The sizes N, ascending."""
        return tuple(sorted(self.non_embedding))

    @property
    def arms(self) -> tuple[str, ...]:
        """The arms with data, :data:`ARMS` order first."""
        have = set(self.gap_fraction) | set(self.lag_fraction)
        return tuple(a for a in ARMS if a in have) + tuple(sorted(have - set(ARMS)))

    def values(self, arm: str, quantity: str) -> Mapping[int, Mapping[int, float]]:
        """N -> seed -> value of one arm and quantity (empty when not measured)."""
        if quantity not in QUANTITIES:
            raise ValueError(f"quantity={quantity!r} is not one of {list(QUANTITIES)}")
        return getattr(self, quantity).get(arm, {})

    def embedding_share(self, n: int) -> float:
        """The share of size ``n``'s parameters in the embeddings and head."""
        return 1.0 - self.non_embedding[n] / n

    def to_dict(self) -> dict[str, Any]:
        def arms(m: Mapping[str, Mapping[int, Mapping[int, float]]]) -> dict[str, Any]:
            return {a: {str(n): seeds_of(v) for n, v in by_n.items()} for a, by_n in m.items()}
        return {"gap_fraction": arms(self.gap_fraction), "lag_fraction": arms(self.lag_fraction),
                "non_embedding": {str(n): ne for n, ne in self.non_embedding.items()},
                "tokens_per_param": self.tokens_per_param}


@dataclass(frozen=True, kw_only=True)
class Extrapolation:
    """A fitted power law in N evaluated beyond the measured sizes (an extrapolation)."""

    name: str
    """The target (``"SmolLM-135M"``)."""
    n_params: int
    """Its parameter count N* (all parameters)."""
    log_values: Mapping[int, float]
    """seed -> that seed's fitted ``log value`` at N*: ``a_s + b_s log N*``."""
    interval: Interval
    """``exp`` of the t interval over seeds of ``log_values`` (estimate: the geometric mean)."""
    note: str
    """How it was computed and what it assumes, with the word 'extrapolation'."""

    def fmt(self) -> str:
        return f"{self.interval.fmt()} at {self.name} (extrapolation)"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "n_params": self.n_params,
                "log_values": seeds_of(self.log_values),
                "interval": self.interval.to_dict(), "note": self.note}


@dataclass(frozen=True, kw_only=True)
class SizeFit:
    """One arm's and quantity's size exponent and its extrapolations."""

    arm: str
    """The arm (``"muon/2bw"``)."""
    quantity: str
    """One of :data:`QUANTITIES`."""
    fit: SlopeFit
    """Per-seed slopes of log(value) on log(N) (its ``horizons`` are the sizes N)."""
    extrapolations: Mapping[str, Extrapolation] = field(default_factory=dict)
    """target name -> the fit evaluated there (empty when no seed has a slope)."""

    @property
    def exponent(self) -> Interval:
        """The size exponent: the mean per-seed slope with its t interval."""
        return self.fit.interval

    @property
    def excluded(self) -> dict[int, str]:
        """seed -> why it has no slope (worded for sizes)."""
        return {s: why.replace("horizon", "size") for s, why in self.fit.excluded.items()}

    def text(self) -> str:
        """``N^-0.5 [-0.7, -0.3] over 5 seeds; left out: ...``."""
        iv = self.exponent
        out = f"exponent {iv.fmt()} over {iv.n} seed(s), sizes {list(self.fit.horizons)}"
        if self.excluded:
            out += f"; left out: {len(self.excluded)} seed(s) {self.excluded}"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "quantity": self.quantity, "fit": self.fit.to_dict(),
                "excluded": {str(s): w for s, w in self.excluded.items()},
                "extrapolations": {k: e.to_dict() for k, e in self.extrapolations.items()}}


def _exp_interval(iv: Interval) -> Interval:
    return Interval(estimate=math.exp(iv.estimate), lo=math.exp(iv.lo), hi=math.exp(iv.hi),
                    level=iv.level, n=iv.n, method=iv.method)


def extrapolate(fit: SlopeFit, name: str, n_params: int,
                data: SizeLadderData | None = None) -> Extrapolation:
    """The per-seed power laws of ``fit`` evaluated at ``n_params`` (see the module docstring);
    ``data`` (optional) adds the measured sizes' embedding shares to the note."""
    if not (_int(n_params) and n_params > 0):
        raise ValueError(f"extrapolate: n_params={n_params!r} must be a positive int")
    logs = {s: fit.intercepts[s] + b * math.log(n_params) for s, b in fit.slopes.items()}
    iv = _exp_interval(t_interval(list(logs.values())))
    top = max(fit.horizons) if fit.horizons else 0
    decades = math.log10(n_params / top) if top else math.nan
    shares = ""
    if data is not None:
        shares = ("; embeddings and head "
                  + ", ".join(f"{data.embedding_share(n):.0%}" for n in data.sizes)
                  + " of the measured sizes' parameters")
    note = (f"extrapolation to {name} (N = {n_params:,}): per seed the power law value = "
            f"exp(a_s) N^b_s fitted on N = {', '.join(f'{n:,}' for n in fit.horizons)}, "
            f"evaluated at N, then a t interval over seeds of the log value; it "
            f"assumes the power law in N holds over the {decades:.1f} decades past the largest "
            f"measured size and that the byte-level vocabulary (256 symbols{shares}) stands for "
            "the paper's 49,152-token one")
    return Extrapolation(name=name, n_params=n_params, log_values=logs, interval=iv, note=note)


def size_fits(data: SizeLadderData, targets: Mapping[str, int] = TARGETS
              ) -> dict[str, dict[str, SizeFit]]:
    """arm -> quantity -> :class:`SizeFit` for every arm and quantity with data, extrapolated
    to ``targets`` (name -> N) when some seed has a slope."""
    out: dict[str, dict[str, SizeFit]] = {}
    for arm in data.arms:
        for q in QUANTITIES:
            values = data.values(arm, q)
            if not values:
                continue
            fit = fit_slope(values)
            ex = ({k: extrapolate(fit, k, n, data) for k, n in targets.items()}
                  if fit.slopes else {})
            out.setdefault(arm, {})[q] = SizeFit(arm=arm, quantity=q, fit=fit,
                                                 extrapolations=ex)
    return out


@dataclass(frozen=True, kw_only=True)
class AgreementRule:
    """One comparison of the extrapolated ladder with a statement of the paper, as data."""

    key: str
    """Short identifier (JSON, tables)."""
    paper: str
    """The paper's statement, in its words."""
    reading: str
    """What it says in the scale-free unit (the lag fraction at the paper's size)."""
    weights: Mapping[str, float]
    """arm -> weight of its per-seed extrapolated log lag fraction in the contrast decided."""
    boundary: str
    """``"tolerance x paper"`` (log of TOLERANCE x the paper's lag fraction) or ``"one"``
    (log 1 = 0: a ratio of 1)."""
    predicted: str
    """The side of the boundary the paper's statement predicts (``above`` / ``below``)."""

    def __post_init__(self) -> None:
        if self.boundary not in ("tolerance x paper", "one"):
            raise ValueError(f"AgreementRule.boundary={self.boundary!r}")
        if self.predicted not in ("above", "below"):
            raise ValueError(f"AgreementRule.predicted={self.predicted!r}")

    def boundary_log(self, paper_lag: float, tolerance: float = TOLERANCE) -> float:
        """The boundary on the log scale the check decides on."""
        return math.log(tolerance * paper_lag) if self.boundary == "tolerance x paper" else 0.0

    def text(self, paper_lag: float, tolerance: float = TOLERANCE,
             target: str = AGREEMENT_TARGET) -> str:
        """The rule in words, with its numbers (printed by the protocol before the runs)."""
        b = math.exp(self.boundary_log(paper_lag, tolerance))
        bound = (f"{tolerance:g} x {paper_lag:g} = {b:.3g}" if self.boundary != "one" else "1")
        other = "above" if self.predicted == "below" else "below"
        return (f"{self.key}: the paper's \"{self.paper}\" reads as {self.reading}. Agrees when "
                f"the extrapolated interval at {target} (t over seeds) lies {self.predicted} "
                f"{bound}, disagrees when it lies entirely {other}, undetermined otherwise "
                "(an extrapolation of the size ladder at 20 tokens per parameter)")


#: The protocol's agreement rules for the size ladder (SmolLM-135M at 20:1).
AGREEMENT_RULES = (
    AgreementRule(key="muon-within-0.01",
                  paper="Muon stays within about 0.01 nats of synchronous training",
                  reading="Muon 2BW's lag fraction at most the paper's compute-equivalent lag "
                          "fraction, within the factor-2 tolerance",
                  weights={"muon/2bw": 1.0}, boundary="tolerance x paper", predicted="below"),
    AgreementRule(key="adamw-over-muon",
                  paper="AdamW degrades substantially; its gap is much larger than Muon's",
                  reading="the ratio of AdamW 2BW's to Muon 2BW's lag fraction above 1",
                  weights={"adamw/2bw": 1.0, "muon/2bw": -1.0}, boundary="one",
                  predicted="above"))


def rules_text(paper_lag: float | None = None, tolerance: float = TOLERANCE,
               rules: tuple[AgreementRule, ...] = AGREEMENT_RULES,
               target: str = AGREEMENT_TARGET) -> list[str]:
    """Every rule in words (``paper_lag`` None: :func:`paper_lag_fraction`)."""
    lag = paper_lag_fraction() if paper_lag is None else paper_lag
    return [r.text(lag, tolerance, target) for r in rules]


def agreement_checks(fits: Mapping[str, Mapping[str, SizeFit]], *,
                     paper_lag: float | None = None, tolerance: float = TOLERANCE,
                     target: str = AGREEMENT_TARGET,
                     rules: tuple[AgreementRule, ...] = AGREEMENT_RULES
                     ) -> tuple[list[Check], dict[str, Any]]:
    """(one ``side`` check per rule, the measured numbers) on the extrapolated per-seed log lag
    fractions at ``target``. ``paper_lag`` None: :func:`paper_lag_fraction`. A check passes
    when the paper's statement agrees (:data:`VERDICT`); its label says "EXTRAPOLATION"."""
    if not (_real(tolerance) and tolerance >= 1):
        raise ValueError(f"agreement_checks: tolerance={tolerance!r} must be >= 1")
    lag = paper_lag_fraction() if paper_lag is None else float(paper_lag)
    if not lag > 0:
        raise ValueError(f"agreement_checks: paper_lag={lag!r} must be > 0")
    measured: dict[str, Any] = {
        "paper's lag fraction (regime.PAPER_LAG_FRACTION)": lag,
        "agreement tolerance (factor)": float(tolerance),
        f"agreement bound on Muon 2BW's lag fraction at {target}": tolerance * lag}
    for arm, by_q in fits.items():
        for q, f in by_q.items():
            measured[f"{arm} {q}: size exponent (per seed, t over seeds)"] = f.text()
            for name, e in f.extrapolations.items():
                measured[f"{arm} {q} at {name} (EXTRAPOLATION)"] = e.interval
    checks = []
    for rule in rules:
        label = (f"{rule.key}: {rule.reading} at {target} (EXTRAPOLATION of the size ladder; "
                 f"{'ratio of ' if len(rule.weights) > 1 else ''}log lag fraction)")
        inputs, missing = {}, []
        for arm in rule.weights:
            ex = fits.get(arm, {}).get("lag_fraction")
            e = ex.extrapolations.get(target) if ex is not None else None
            if e is None:
                missing.append(arm)
            else:
                inputs[f"{arm} log lag fraction at {target} (extrapolation)"] = dict(e.log_values)
        if missing:
            checks.append(not_measured(label, f"no size fit of the lag fraction for {missing}"))
            continue
        weights = dict(zip(inputs, rule.weights.values()))
        c = make(label, "side", inputs, weights, boundary=rule.boundary_log(lag, tolerance),
                 predicted=rule.predicted, rule=rule.key, target=target,
                 tolerance=float(tolerance), paper_lag_fraction=lag)
        if c.interval is not None:
            shown = _exp_interval(c.interval)
            what = "AdamW/Muon lag ratio" if len(inputs) > 1 else "lag fraction"
            measured[f"{rule.key}: {what} at {target} (EXTRAPOLATION)"] = shown
            c = c.with_reason(f"{VERDICT[c.status]}: extrapolated {what} {shown.fmt()} "
                              f"(log scale: {c.reason})")
        checks.append(c)
    return checks, measured
