"""Checks of the claims ledger: one measured condition, its kind, its per-seed numbers, its status.

A :class:`Check` keeps everything needed to decide it again without the runs: its ``kind``,
the per-seed ``samples`` it decides on, the named per-seed ``inputs`` and ``weights`` they were
built from (a linear contrast, :func:`llm_validation.validation.contrast.contrast`), its
``params`` (boundary, side, margin) and, for aggregates, its ``parts``. :func:`recheck`
decides a check from its JSON alone (``claims.json``), through the same decision functions.

Kinds (``KINDS``; a new kind is one decision function registered in ``_DECIDE``):

- ``side``: the paired t interval of the samples lies on the ``predicted`` side of
  ``boundary`` (pass), on the other side (fail), or overlaps it;
- ``equivalence``: pass when it lies inside ``(-width, width)``, fail when entirely outside;
- ``differs``: pass when it excludes 0, fail when it lies inside ``(-width, width)``;
- ``not_better``: for samples = val(X) - val(baseline): fail below 0, pass above ``-width``;
- ``same_sign`` (per-group ``inputs``): pass when every group's interval lies on one side of
  0, all the same side; fail when two lie on opposite sides;
- ``no_consistent_effect`` (per-group ``inputs``, ``widths``): pass when two groups' intervals
  lie on opposite sides of 0, or one excludes 0 while another lies inside its margin (one
  optimizer shows an effect, another none), or all lie inside their margins; fail when every
  interval lies on the same side of 0;
- ``divergence`` (``inputs`` grad / update: 1 = diverged): an event rate decided against a
  stated detection power (:func:`llm_validation.validation.event_rate.event_rate`, exact
  one-sided Clopper-Pearson bounds at ``1 - level``): "diverges" is read as "in at least
  ``params["rate"]`` of the runs" (:data:`DIVERGENCE_RATE`, "usually"). Pass when the
  gradient-level rate is shown to be at least that and the update-level rate below it; fail
  when the gradient-level rate is shown to be below it, which zero divergences can show
  only in as many runs as would have shown a divergence at that rate with probability ``1 -
  alpha`` (:func:`~llm_validation.validation.event_rate.runs_to_refute`); otherwise
  inconclusive, with the runs a refutation needs. Runs shorter than the paper's 20 tokens
  per parameter (``short_runs``) keep a fail inconclusive (too short to show a divergence);
- ``all`` / ``most`` (``parts``): all pass / a strict majority passes (fail: any part fails /
  a majority can no longer pass).

Every interval is taken at ``params["level"]`` (default 95%); :func:`at_level` decides a check
again at another level from its stored numbers (the ledger's seeds policy decides every check
at its look's level, :mod:`llm_validation.claims.decide.sequential`). Every status needs at least
``MIN_SEEDS`` seeds; with fewer it is inconclusive. The seeds an
inconclusive per-seed check would need (50% and 80% power at the measured spread) are in
:mod:`llm_validation.claims.decide.seeds`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from llm_validation.validation.contrast import contrast, contrast_interval
from llm_validation.validation.event_rate import event_rate, runs_to_refute
from llm_validation.validation.inference import DEFAULT_LEVEL, Interval, level_text
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, MIN_SEEDS, PASS, decide

__all__ = ["DIVERGENCE_RATE", "Check", "KINDS", "SEED_KINDS", "GROUP_KINDS", "PART_KINDS", "make", "diff", "aggregate",
           "not_measured", "recheck", "decide_samples", "number", "seeds_of", "level_of", "at_level",
           "with_missing"]

#: The rate "diverges" is read as (the share of runs that diverge, at least): "usually". The
#: ``divergence`` kind's default; a claim states its own in ``params["rate"]``.
DIVERGENCE_RATE = 0.5

#: Kinds decided on one per-seed sample, on per-group samples, and on parts.
SEED_KINDS = ("side", "equivalence", "differs", "not_better")
GROUP_KINDS = ("same_sign", "no_consistent_effect", "divergence")
PART_KINDS = ("all", "most")
KINDS = SEED_KINDS + GROUP_KINDS + PART_KINDS


def level_of(params: Mapping[str, Any]) -> float:
    """The interval level a check decides at (``params["level"]``, default 95%)."""
    return float(params.get("level", DEFAULT_LEVEL))


def number(x: float) -> float | str:
    """JSON-safe number: non-finite values as the strings ``nan``, ``inf``, ``-inf``."""
    x = float(x)
    return x if math.isfinite(x) else str(x)


def seeds_of(m: Mapping[Any, Any]) -> dict[str, Any]:
    """A per-seed mapping with string keys and JSON-safe values."""
    return {str(k): number(v) for k, v in m.items()}


@dataclass(frozen=True, kw_only=True)
class Check:
    """One measured condition of a claim (see the module docstring)."""

    label: str
    """What is measured and what is claimed, in words."""
    kind: str
    """One of :data:`KINDS`."""
    status: str
    """``pass``, ``fail`` or ``inconclusive``."""
    reason: str
    """The interval and the boundary it was compared with (or what is missing)."""
    interval: Interval | None = None
    """The paired t interval of ``samples`` (None for group and part kinds)."""
    n_seeds: int = 0
    """Independent seeds behind the decision."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """``boundary``/``predicted`` (side), ``width`` (margin kinds), ``widths`` per group."""
    samples: Mapping[int, float] = field(default_factory=dict)
    """seed -> the value decided on (seed kinds)."""
    inputs: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    """name -> seed -> value: the contrast's inputs (seed kinds) or the groups (group kinds)."""
    weights: Mapping[str, float] = field(default_factory=dict)
    """name -> weight: ``samples = contrast(inputs, weights)`` (empty: samples given)."""
    parts: tuple["Check", ...] = ()
    """The checks an ``all`` / ``most`` aggregate decides on."""
    seeds_needed: Mapping[str, int | None] | None = None
    """Inconclusive seed kinds: power (``50%``, ``80%``) -> seeds (None: more than the limit)."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Check.kind={self.kind!r} is not one of {list(KINDS)}")
        if self.status not in (PASS, FAIL, INCONCLUSIVE):
            raise ValueError(f"Check.status={self.status!r}")

    def with_reason(self, reason: str) -> "Check":
        return Check(**{**self.__dict__, "reason": reason})

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "kind": self.kind, "status": self.status,
                "reason": self.reason,
                "interval": self.interval.to_dict() if self.interval else None,
                "n_seeds": self.n_seeds, "params": dict(self.params),
                "samples": seeds_of(self.samples),
                "inputs": {k: seeds_of(v) for k, v in self.inputs.items()},
                "weights": dict(self.weights), "parts": [p.to_dict() for p in self.parts],
                "seeds_needed": dict(self.seeds_needed) if self.seeds_needed else None}


def not_measured(label: str, what: str, kind: str = "side") -> Check:
    return Check(label=label, kind=kind, status=INCONCLUSIVE, reason=f"not measured: {what}")


def _few(n: int) -> str:
    return f"only {n} seed(s); a verdict needs >= {MIN_SEEDS}"


# ------------------------------------------------------------------ decisions on one sample
def _side(iv: Interval, n: int, p: Mapping[str, Any]) -> tuple[str, str]:
    return decide(iv, boundary=float(p["boundary"]), predicted=str(p["predicted"]), n_seeds=n)


def _margin_text(iv: Interval) -> str:
    return f"{level_text(iv.level)} interval [{iv.lo:.4g}, {iv.hi:.4g}]"


def _inside(iv: Interval, w: float) -> bool:
    return iv.lo > -w and iv.hi < w


#: The margin kinds as ordered cases (test(interval, width), status, text; ``{w}`` the width),
#: the last one the inconclusive remainder.
_MARGIN_CASES: dict[str, tuple[tuple[Callable[[Interval, float], bool], str, str], ...]] = {
    "equivalence": ((_inside, PASS, "lies inside +-{w:.3g} (no effect)"),
                    (lambda iv, w: iv.lo > w or iv.hi < -w, FAIL,
                     "lies outside +-{w:.3g} (an effect)"),
                    (lambda iv, w: True, INCONCLUSIVE, "overlaps the margin +-{w:.3g}")),
    "differs": ((lambda iv, w: iv.lo > 0 or iv.hi < 0, PASS, "excludes 0 (an effect)"),
                (_inside, FAIL, "lies inside +-{w:.3g} (no effect)"),
                (lambda iv, w: True, INCONCLUSIVE, "contains 0 but not inside +-{w:.3g}")),
    "not_better": ((lambda iv, w: iv.hi < 0, FAIL, "lies below 0 (it beats the baseline)"),
                   (lambda iv, w: iv.lo > -w, PASS,
                    "lies above -{w:.3g} (not better by more than the margin)"),
                   (lambda iv, w: True, INCONCLUSIVE, "overlaps -{w:.3g} and 0"))}


def _margin_rule(kind: str) -> Callable[[Interval, int, Mapping[str, Any]], tuple[str, str]]:
    def rule(iv: Interval, n: int, p: Mapping[str, Any]) -> tuple[str, str]:
        if n < MIN_SEEDS:
            return INCONCLUSIVE, _few(n)
        w = float(p["width"])
        status, text = next((st, t) for test, st, t in _MARGIN_CASES[kind] if test(iv, w))
        return status, f"{_margin_text(iv)} {text.format(w=w)}"
    return rule


_SAMPLE_RULES: dict[str, Callable[[Interval, int, Mapping[str, Any]], tuple[str, str]]] = {
    "side": _side, **{k: _margin_rule(k) for k in _MARGIN_CASES}}


def decide_samples(kind: str, samples: Mapping[int, float], params: Mapping[str, Any]
                   ) -> tuple[str, str, Interval]:
    """(status, reason, paired t interval at ``params``' level) of a seed kind on ``samples``."""
    iv = contrast_interval(samples, level_of(params))
    status, reason = _SAMPLE_RULES[kind](iv, len(samples), params)
    return status, reason, iv


# ------------------------------------------------------------------ decisions on groups
def _group_ivs(inputs: Mapping[str, Mapping[int, float]], level: float
              ) -> tuple[dict[str, Interval], int]:
    ivs = {k: contrast_interval(v, level) for k, v in inputs.items() if v}
    return ivs, min((len(v) for v in inputs.values()), default=0)


def _ivs_text(ivs: Mapping[str, Interval]) -> str:
    return "; ".join(f"{k}: [{iv.lo:.4g}, {iv.hi:.4g}]" for k, iv in ivs.items())


def _sides(inputs, p) -> tuple[tuple[str, str] | None, dict[str, Interval], set[str], set[str]]:
    """What the group kinds share: (an inconclusive result to return at once, or None; the
    per-group intervals; the groups whose interval lies above 0; below 0)."""
    ivs, n = _group_ivs(inputs, level_of(p))
    early = None
    if len(ivs) < len(inputs) or len(inputs) < 2:
        early = INCONCLUSIVE, f"not measured for {sorted(set(inputs) - set(ivs))}"
    elif n < MIN_SEEDS:
        early = INCONCLUSIVE, _few(n)
    return (early, ivs, {k for k, iv in ivs.items() if iv.lo > 0},
            {k for k, iv in ivs.items() if iv.hi < 0})


def _same_sign(inputs, p) -> tuple[str, str]:
    early, ivs, above, below = _sides(inputs, p)
    if early:
        return early
    if above and below:
        return FAIL, f"opposite directions ({_ivs_text(ivs)})"
    if above == set(ivs) or below == set(ivs):
        return PASS, f"every interval lies {'above' if above else 'below'} 0 ({_ivs_text(ivs)})"
    return INCONCLUSIVE, f"not every interval excludes 0 ({_ivs_text(ivs)})"


def _no_consistent_effect(inputs, p) -> tuple[str, str]:
    early, ivs, above, below = _sides(inputs, p)
    if early:
        return early
    widths = {k: float(w) for k, w in p["widths"].items()}
    null = {k for k, iv in ivs.items() if -widths[k] < iv.lo and iv.hi < widths[k]}
    text = _ivs_text(ivs)
    if above and below:
        return PASS, f"opposite directions ({text})"
    if (above or below) and null:
        return PASS, (f"an effect for {sorted(above | below)}, none (inside the margin) for "
                      f"{sorted(null)} ({text})")
    if null == set(ivs):
        return PASS, f"no effect for any optimizer (every interval inside its margin; {text})"
    if above == set(ivs) or below == set(ivs):
        return FAIL, f"a consistent effect: every interval on one side of 0 ({text})"
    return INCONCLUSIVE, f"neither a consistent effect nor its absence is shown ({text})"


def _divergence(inputs, p) -> tuple[str, str]:
    dg, du = inputs.get("gradient-level", {}), inputs.get("update-level", {})
    n = min(len(dg), len(du))
    text = (f"gradient-level diverged {int(sum(dg.values()))}/{len(dg)}, update-level "
            f"{int(sum(du.values()))}/{len(du)}")
    if n < MIN_SEEDS:
        return INCONCLUSIVE, f"{_few(n)} ({text})"
    rate, alpha = float(p.get("rate", DIVERGENCE_RATE)), 1.0 - level_of(p)
    g = event_rate(int(sum(dg.values())), len(dg), rate, alpha)
    u = event_rate(int(sum(du.values())), len(du), rate, alpha)
    power = (f"the claim read as a divergence rate >= {rate:g}: {runs_to_refute(rate, alpha)} "
             f"runs without one refute it at {1 - alpha:.1%}")
    if g.status == FAIL:
        if p.get("short_runs"):          # absence in short runs is not a refutation
            return INCONCLUSIVE, (f"gradient-level: {g.reason}, but the runs are too short "
                                  f"to show a divergence ({p['short_runs']}; "
                                  f"the paper's runs reach >= 20) ({text})")
        return FAIL, f"gradient-level: {g.reason} ({power}; {text})"
    if g.status == PASS and u.status == FAIL:
        return PASS, f"gradient-level: {g.reason}; update-level: {u.reason} ({text})"
    if g.status != PASS:
        return INCONCLUSIVE, f"gradient-level: {g.reason} ({power}; {text})"
    return INCONCLUSIVE, f"update-level: {u.reason} (it must be shown < {rate:g}; {text})"


_GROUP_RULES = {"same_sign": _same_sign, "no_consistent_effect": _no_consistent_effect,
                "divergence": _divergence}


def _parts_rule(kind: str, statuses: Sequence[str]) -> tuple[str, str]:
    n, p, f = len(statuses), statuses.count(PASS), statuses.count(FAIL)
    counts = f"{p} of {n} pass, {f} fail"
    if not n:
        return INCONCLUSIVE, "no conditions"
    if kind == "all":
        return (FAIL if f else PASS if p == n else INCONCLUSIVE), counts
    if p > n / 2:
        return PASS, f"{counts} (a majority passes)"
    if n - f <= n / 2:
        return FAIL, f"{counts} (no majority can pass)"
    return INCONCLUSIVE, f"{counts} (no majority yet)"


# ------------------------------------------------------------------ constructors
def make(label: str, kind: str, inputs: Mapping[str, Mapping[int, float]],
         weights: Mapping[str, float] | None = None, **params: Any) -> Check:
    """A seed kind on the contrast ``sum w_k inputs[k]`` (``weights`` None: a group kind on
    the groups ``inputs``)."""
    if kind in SEED_KINDS:
        if not weights:
            raise ValueError(f"make({label!r}): a {kind} check needs weights")
        if any(not inputs.get(k) for k, w in weights.items() if w):
            return Check(**{**not_measured(label, "no paired runs", kind).__dict__,
                            "inputs": inputs, "weights": dict(weights), "params": params})
        samples = contrast(inputs, weights)
        status, reason, iv = decide_samples(kind, samples, params)
        return Check(label=label, kind=kind, status=status, reason=reason, interval=iv,
                     n_seeds=len(samples), params=params, samples=samples, inputs=inputs,
                     weights=dict(weights))
    status, reason = _GROUP_RULES[kind](inputs, params)
    return Check(label=label, kind=kind, status=status, reason=reason, params=params,
                 inputs=inputs, n_seeds=min((len(v) for v in inputs.values()), default=0))


def diff(label: str, kind: str, a: tuple[str, Mapping[int, float]],
         b: tuple[str, Mapping[int, float]], scale: float = 1.0, **params: Any) -> Check:
    """A seed kind on the contrast ``scale * a - b`` of two named per-seed inputs."""
    if a[0] == b[0]:
        raise ValueError(f"diff({label!r}): the inputs need distinct names")
    return make(label, kind, {a[0]: a[1], b[0]: b[1]}, {a[0]: scale, b[0]: -1.0}, **params)


def aggregate(label: str, kind: str, parts: Sequence[Check]) -> Check:
    """An ``all`` / ``most`` check over ``parts``; the reason names the undecided ones."""
    status, counts = _parts_rule(kind, [c.status for c in parts])
    if len(parts) == 1:
        reason = parts[0].reason
    else:
        shown = [c for c in parts if c.status == status] or list(parts)
        reason = f"{counts}: " + "; ".join(f"{c.label}: {c.reason}" for c in shown)
    seeds = [c.n_seeds for c in parts if c.n_seeds > 0]
    return Check(label=label, kind=kind, status=status, reason=reason,
                 n_seeds=min(seeds) if seeds else 0, parts=tuple(parts))


def with_missing(check: Check, missing: str) -> Check:
    """``check`` with the runs it lacks recorded (``params["missing"]``) and named in its
    reason while it is inconclusive (kept through :func:`at_level`)."""
    if not missing:
        return check
    params = {**check.params, "missing": missing}
    reason = check.reason
    if check.status == INCONCLUSIVE and not reason.endswith(f"(missing: {missing})"):
        reason = f"{reason} (missing: {missing})"
    return Check(**{**check.__dict__, "params": params, "reason": reason})


def at_level(c: Check, level: float) -> Check:
    """``c`` decided again with every interval at ``level`` (its parts too), from the numbers it
    stores; ``params["level"]`` records it (so :func:`recheck` decides at it as well)."""
    if not 0 < level < 1:
        raise ValueError(f"at_level: level={level!r} must be in (0, 1)")
    params = {**c.params, "level": level}
    if c.kind in PART_KINDS:
        out = aggregate(c.label, c.kind, tuple(at_level(p, level) for p in c.parts))
        out = Check(**{**out.__dict__, "params": params})
    elif c.kind in SEED_KINDS and c.samples:
        status, reason, iv = decide_samples(c.kind, c.samples, params)
        out = Check(**{**c.__dict__, "status": status, "reason": reason, "interval": iv,
                       "params": params})
    elif c.kind in GROUP_KINDS and c.inputs:
        status, reason = _GROUP_RULES[c.kind](c.inputs, params)
        out = Check(**{**c.__dict__, "status": status, "reason": reason, "params": params})
    else:                                    # not measured: nothing to decide
        return Check(**{**c.__dict__, "params": params})
    return with_missing(out, str(c.params.get("missing", "")))


# ------------------------------------------------------------------ from claims.json
def _seed_map(m: Mapping[str, Any]) -> dict[int, float]:
    return {int(k): float(v) for k, v in m.items()}


def recheck(d: Mapping[str, Any]) -> str:
    """The status of a check decided again from its ``to_dict()`` alone: contrasts are
    rebuilt from the inputs and weights, parts are rechecked recursively."""
    kind = d["kind"]
    if kind in PART_KINDS:
        return _parts_rule(kind, [recheck(p) for p in d["parts"]])[0]
    inputs = {k: _seed_map(v) for k, v in d["inputs"].items()}
    if kind in GROUP_KINDS:
        return _GROUP_RULES[kind](inputs, d["params"])[0]
    if not d["weights"] or any(not inputs.get(k) for k, w in d["weights"].items() if w):
        return INCONCLUSIVE
    samples = contrast(inputs, d["weights"])
    return decide_samples(kind, samples, d["params"])[0]
