"""Nominal p-values of the ledger's checks: the smallest error rate at which a check decides.

A leaf check (:mod:`llm_validation.claims.decide.checks`) decides at a level ``L`` by comparing t
intervals at ``L`` with its boundaries. Its **nominal p-value** is

    ``p_nom(c) = inf{a in (0, 1) : at_level(c, 1 - a).status != inconclusive}``

(1.0 when no level decides it: fewer than ``MIN_SEEDS`` seeds, a group not measured, an
estimate on its boundary). It is what a family-wise procedure adjusts
(:mod:`llm_validation.claims.decide.familywise`). The tests compute it from that definition by
bisection with :func:`~llm_validation.claims.decide.checks.at_level` (the reference,
``tests/llm_validation/claims/oracles.py``); :func:`nominal_pvalue` computes it in closed form, through :func:`seed_routes` / :func:`group_routes`,
which are vectorised over replicates for the simulations.

Algorithm
    For per-seed values with mean ``m``, spread ``s`` and ``n`` seeds, the interval at level
    ``1 - a`` is ``m +- t_{n-1, 1-a/2} s / sqrt(n)``. It lies above ``b`` iff
    ``T = (m - b) sqrt(n) / s > t_{n-1, 1-a/2}`` iff ``a > 2 P(t_{n-1} > T)``: every "interval
    above/below a point" event holds exactly for ``a`` above a threshold (:func:`t_tails`).
    A kind's outcomes are AND / OR of such events, so each outcome (a *route*) holds exactly
    for ``a`` above a threshold too (max for AND, min for OR), and the routes are listed in
    the order :mod:`~llm_validation.claims.decide.checks` tests its cases (the first route below
    ``a`` is the status at ``1 - a``; :func:`status_at`):

    - ``side``: pass ``2 P(t > T)`` (predicted above; the mirror for below), fail the other
      tail: ``p_nom`` is the two-sided t p-value against the boundary;
    - ``equivalence``: pass ``2 max(P(t > T_{-w}), P(t < T_{+w}))`` (TOST, each one-sided test
      at ``a/2``), fail ``2 min(P(t > T_{+w}), P(t < T_{-w}))``;
    - ``differs``: pass the two-sided p-value against 0, fail the equivalence pass threshold;
    - ``not_better``: fail ``2 P(t < T_0)`` (tested first), pass ``2 P(t > T_{-w})``;
    - ``same_sign`` (groups k): fail ``2 max(min_k P(t > T_k), min_k P(t < T_k))`` (some
      group above 0 and some below: a union of routes, then an intersection), pass
      ``2 min(max_k P(t > T_k), max_k P(t < T_k))`` (every group on one side:
      intersection-union);
    - ``no_consistent_effect``: pass the min over its three routes (opposite directions; an
      effect and a null; every group inside its margin), fail the min over "every group
      above / below 0" (it reads fail only when no pass route holds, as in the checks).

    ``p_nom`` is the smallest route threshold, capped at 1. ``divergence`` counts outcomes,
    not a mean: it has no p-value (None) and stays outside any family; an ``all`` / ``most``
    aggregate has none of its own (its leaves do).

Assumptions
    Those of the paired t interval: independent seeds, normal per-seed values.

Guarantee
    ``p_nom < 1 - L`` exactly when the check decides at ``L`` (``tests/llm_validation/claims/
    test_pvalues.py`` checks the closed forms against the bisection on random checks of every
    kind). Each verdict claims something about the true means: side, mean strictly on its
    side of the boundary; equivalence pass ``|mean| < w``, fail ``|mean| > w``; differs pass
    ``mean != 0``, fail ``|mean| < w``; not_better fail ``mean < 0``, pass ``mean > -w``;
    same_sign pass every group strictly on one side of 0, fail two strictly on opposite sides;
    no_consistent_effect fail every group strictly on one side of 0, pass *not* every group at
    least its margin on one side. A false claim needs an interval to miss its mean, so under
    the assumptions ``P(wrong verdict at 1 - a) <= a`` for the seed kinds (the interval's
    coverage): ``p_nom`` is a valid p-value for "a wrong verdict". For the group kinds with
    two groups (the ledger's) the bound is ``a`` too (a false claim needs one group's
    interval to miss on one side, ``a/2``, on at most two routes); with ``G`` groups it is up
    to ``G a / 2``.

Sign-flip companion
    :func:`signflip_pvalue` computes the same routes with every t tail ``P(t > T)`` replaced
    by the exact sign-flip tail of the per-seed values against the same point
    (:func:`llm_validation.validation.permutation.sign_flip_pvalue`, which assumes only
    symmetric per-seed values, not normal ones). It is printed beside ``p_nom`` and decides
    nothing. Its floor is ``2 / 2^n`` (two-sided; one-sided ``1 / 2^n``: 1/8, 1/16, 1/32 at
    3, 4, 5 seeds), :func:`signflip_floor`: at 5 seeds or fewer no sign-flip p-value reaches
    5%, whatever the data.

Reference
    The duality of tests and confidence intervals (e.g. Lehmann & Romano, *Testing
    Statistical Hypotheses*, 3rd ed., 2005, sec. 3.5); TOST: Schuirmann (1987), J.
    Pharmacokin. Biopharm. 15; intersection-union tests: Berger (1982), Technometrics 24.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import numpy as np
from scipy import special

from llm_validation.claims.decide.checks import PART_KINDS, SEED_KINDS, Check
from llm_validation.validation.permutation import min_pvalue, sign_flip_pvalue
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, MIN_SEEDS, PASS

__all__ = ["FAMILY_KINDS", "Routes", "Tails", "t_tails", "signflip_tails", "seed_routes",
           "group_routes", "routes", "status_at", "decidable", "nominal_pvalue",
           "signflip_pvalue", "signflip_floor"]

#: Kinds with a p-value (``divergence`` and the aggregates have none).
FAMILY_KINDS = SEED_KINDS + ("same_sign", "no_consistent_effect")

#: A check's outcomes in the order its kind tests them: (status, threshold) pairs; the status
#: at level ``1 - a`` is the first whose threshold is below ``a``.
Routes = tuple[tuple[str, np.ndarray], ...]
#: A test's two tails against a point: ``(x, point) -> (above, below)`` thresholds.
Tails = Callable[[np.ndarray, float], tuple[np.ndarray, np.ndarray]]


def t_tails(x: np.ndarray, point: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Thresholds (``a`` above which the t interval at ``1 - a`` lies above ``point``; below
    it) of the rows of ``x`` (seeds on the last axis): ``2 P(t > T)``, ``2 P(t < T)``, with
    ``T = (mean - point) sqrt(n) / s``. A zero spread gives ``T = +-inf`` (decided at every
    level) or, with the mean on the point, ``T = 0`` (never)."""
    n = x.shape[-1]
    if n < 2:
        ones = np.ones(x.shape[:-1])
        return ones, ones
    d = x.mean(axis=-1) - point
    se = x.std(axis=-1, ddof=1) / math.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, d / np.where(se > 0, se, 1.0),
                     np.where(d == 0, 0.0, np.sign(d) * np.inf))
    tail = special.stdtr(n - 1, -np.abs(t))                  # the smaller tail, <= 1/2
    return 2 * np.where(t >= 0, tail, 1 - tail), 2 * np.where(t >= 0, 1 - tail, tail)


def signflip_tails(x: np.ndarray, point: float) -> tuple[np.ndarray, np.ndarray]:
    """The exact sign-flip counterpart of :func:`t_tails`: ``2 p_greater`` and ``2 p_less``
    of the rows of ``x`` (seeds on the last axis) against ``point``
    (:func:`~llm_validation.validation.permutation.sign_flip_pvalue`)."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[-1] < 2:
        ones = np.ones(x.shape[:-1])
        return ones, ones

    def tail(alt: str) -> np.ndarray:
        return 2 * np.apply_along_axis(lambda r: sign_flip_pvalue(r, float(point), alt), -1, x)
    return tail("greater"), tail("less")


def _never(shape: tuple[int, ...], *statuses: str) -> Routes:
    """Routes that no level in (0, 1) takes (threshold 1)."""
    return tuple((s, np.ones(shape)) for s in statuses)


def seed_routes(kind: str, x: np.ndarray, params: Mapping[str, object],
                tails: Tails = t_tails) -> Routes:
    """The routes of a seed kind on per-seed values ``x`` (seeds on the last axis; leading axes
    are replicates) with the check's ``params`` (``boundary``/``predicted`` or ``width``);
    ``tails``: the test's tails (:func:`t_tails`, or :func:`signflip_tails`)."""
    x = np.asarray(x, dtype=np.float64)
    if kind not in SEED_KINDS:
        raise ValueError(f"seed_routes: kind={kind!r} is not one of {list(SEED_KINDS)}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"seed_routes: samples must be finite, got {x.ravel()[:8].tolist()}")
    if x.shape[-1] < MIN_SEEDS:
        return _never(x.shape[:-1], PASS, FAIL)
    if kind == "side":
        above, below = tails(x, float(params["boundary"]))
        return ((PASS, above), (FAIL, below)) if params["predicted"] == "above" else \
            ((PASS, below), (FAIL, above))
    w = float(params["width"])
    if kind == "not_better":
        return (FAIL, tails(x, 0.0)[1]), (PASS, tails(x, -w)[0])
    inside = np.maximum(tails(x, -w)[0], tails(x, w)[1])
    if kind == "equivalence":
        return (PASS, inside), (FAIL, np.minimum(tails(x, w)[0],
                                                 tails(x, -w)[1]))
    return (PASS, np.minimum(*tails(x, 0.0))), (FAIL, inside)     # differs


def group_routes(kind: str, groups: Mapping[str, np.ndarray],
                 params: Mapping[str, object], tails: Tails = t_tails) -> Routes:
    """The routes of ``same_sign`` / ``no_consistent_effect`` on per-group values (name ->
    array, seeds on the last axis, the same leading replicate axes), ``params["widths"]``
    naming each group's margin (``no_consistent_effect``); ``tails`` as in
    :func:`seed_routes`."""
    if kind not in ("same_sign", "no_consistent_effect"):
        raise ValueError(f"group_routes: kind={kind!r} has no p-value (group kinds with one: "
                         "same_sign, no_consistent_effect)")
    xs = {k: np.asarray(v, dtype=np.float64) for k, v in groups.items()}
    shape = next(iter(xs.values())).shape[:-1] if xs else ()
    if len(xs) < 2 or min(v.shape[-1] for v in xs.values()) < MIN_SEEDS:
        return _never(shape, FAIL, PASS) if kind == "same_sign" else _never(shape, PASS, FAIL)
    if not all(np.all(np.isfinite(v)) for v in xs.values()):
        raise ValueError("group_routes: group values must be finite")
    side = {k: tails(v, 0.0) for k, v in xs.items()}
    above = np.stack([a for a, _ in side.values()])          # [groups, ...replicates]
    below = np.stack([b for _, b in side.values()])
    some = np.maximum(above.min(axis=0), below.min(axis=0))  # one group above, one below
    every = np.minimum(above.max(axis=0), below.max(axis=0))  # all above, or all below
    if kind == "same_sign":
        return (FAIL, some), (PASS, every)
    widths = params["widths"]
    null = np.stack([np.maximum(tails(v, -float(widths[k]))[0],
                                tails(v, float(widths[k]))[1]) for k, v in xs.items()])
    effect_and_null = np.maximum(np.minimum(above, below).min(axis=0), null.min(axis=0))
    passes = np.minimum(np.minimum(some, effect_and_null), null.max(axis=0))
    return (PASS, passes), (FAIL, every)


def _groups(c: Check) -> dict[str, np.ndarray]:
    """A group check's per-group values as arrays (seeds in stored order)."""
    return {k: np.array(list(v.values()), dtype=np.float64) for k, v in c.inputs.items()}


def decidable(c: Check) -> bool:
    """True when some level could decide the leaf ``c`` from its numbers: a kind with a
    p-value, measured, every group present, at least ``MIN_SEEDS`` seeds."""
    if c.kind in SEED_KINDS:
        return len(c.samples) >= MIN_SEEDS
    if c.kind in ("same_sign", "no_consistent_effect"):
        sizes = [len(v) for v in c.inputs.values()]
        return len(sizes) >= 2 and min(sizes) >= MIN_SEEDS
    return False


def routes(c: Check, tails: Tails = t_tails) -> Routes | None:
    """The routes of a leaf check (scalar thresholds) under the test of ``tails``; None for
    ``divergence``."""
    if c.kind in PART_KINDS:
        raise ValueError(f"routes: {c.label!r} is an {c.kind!r} aggregate; its leaves have "
                         "p-values, it has none")
    if c.kind == "divergence":
        return None
    if c.kind in SEED_KINDS:
        return seed_routes(c.kind, np.array(list(c.samples.values()), dtype=np.float64),
                           c.params, tails)
    if any(not v for v in c.inputs.values()):                # a group not measured
        return _never((), PASS, FAIL)
    return group_routes(c.kind, _groups(c), c.params, tails)


def status_at(rts: Routes, a: np.ndarray | float) -> np.ndarray:
    """The status at level ``1 - a`` (elementwise): the first route whose threshold is below
    ``a``, else inconclusive (``a`` NaN: inconclusive)."""
    a = np.asarray(a, dtype=np.float64)
    out = np.full(np.broadcast_shapes(a.shape, *(np.shape(t) for _, t in rts)), INCONCLUSIVE,
                  dtype=f"<U{max(len(s) for s in (PASS, FAIL, INCONCLUSIVE))}")
    for status, thr in reversed(rts):
        out = np.where(a > thr, status, out)
    return out


def nominal_pvalue(c: Check) -> float | None:
    """``p_nom(c)`` in closed form (module docstring); 1.0 when never decided, None for
    ``divergence`` (outside any family: it counts outcomes)."""
    rts = routes(c)
    if rts is None:
        return None
    return float(min(1.0, min(float(t) for _, t in rts)))


def signflip_pvalue(c: Check) -> float | None:
    """The sign-flip companion of :func:`nominal_pvalue` (module docstring): the same routes,
    every t tail replaced by the exact sign-flip tail; None where the check has no p-value
    (``divergence``, or not :func:`decidable`)."""
    if not decidable(c):
        return None
    rts = routes(c, signflip_tails)
    return None if rts is None else float(min(1.0, min(float(t) for _, t in rts)))


def signflip_floor(c: Check) -> float:
    """The smallest value :func:`signflip_pvalue` can take on ``c``'s seed count: ``2 / 2^n``
    (``n`` = :attr:`Check.n_seeds`, the fewest seeds of a group for the group kinds)."""
    return min_pvalue(max(c.n_seeds, 1), "two-sided")
