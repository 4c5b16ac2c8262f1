"""The batch over its gradient-noise scale as a regressor of the delay's cost (exploratory).

Not in the committed protocol: the delay-law ledger's laws are written in the model size, the
step count and the lr. This module reads a variable the runs log beside them, and its numbers
are labelled exploratory wherever they are printed.

Algorithm
    A synchronous run logs, at each statistics step, the norm of the step's gradient
    ``||g||`` (the mean over its ``B`` sequences) and the variance of that estimate from its
    microbatches, ``v ~ tr(Sigma) / B`` (``grad_noise_var``,
    :mod:`~llm_validation.training.stats`). Since ``E ||g||^2 = |G|^2 + tr(Sigma) / B``, the
    ratio ``rho = (||g||^2 - v) / v`` estimates ``|G|^2 B / tr(Sigma) = B / B_simple``: the batch
    over the simple noise scale ``B_simple = tr(Sigma) / |G|^2`` (McCandlish et al., 2018).
    A run's ``rho`` is a ratio of means over its statistics steps from :data:`FROM_FRACTION`
    of the run on (:func:`run_snr`): ``|G|^2`` and ``tr(Sigma)`` are averaged separately and
    divided once, as McCandlish et al. (appendix A) estimate the noise scale, since a ratio
    of single steps is biased where a step's ``v`` happens to be small. A cell's ``rho`` per
    seed is that
    of the seed's full-length synchronous run of the arm's optimizer (:func:`cell_snr`).

    :func:`compare_regressors` fits ``log lag`` by least squares on the (cell, seed) points of
    the training cells at each size's tuned lr, against three regressor sets: ``log rho``;
    ``log N`` and ``log S`` (the design's); ``log B`` alone (``B = 20 N / S``, tokens per
    step). It scores each by its leave-one-cell-out error (the cell's geometric-mean lag
    predicted from the other cells' fit, mean ``|log(pred / observed)|``) and, where held-out
    cells are given, by its error there.

    ``rho`` is read from a cell's own synchronous runs, so as a predictor it needs the target
    cell's synchronous run (or a model of the noise scale there): it explains, it does not by
    itself extrapolate.

Assumptions
    ``rho`` measured on the synchronous run describes the delayed run's regime (both start
    alike and the delay moves the trajectory only by the lag); the second half of training is
    where the closing loss, and so the lag, is decided.

Guarantee
    Descriptive only: the comparison's errors are what they are on these cells; no interval or
    verdict rests on it, and a regressor chosen here after seeing the runs is a hypothesis for
    a later protocol, not a finding.

Reference
    McCandlish, Kaplan, Amodei et al. (2018), "An Empirical Model of Large-Batch Training",
    the simple noise scale; docs/theory.md, trend 4 (gradient noise hides the delay term, larger
    batches expose it).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from llm_validation.claims.plan.plan import run_name
from llm_validation.delay_law.design import Cell
from llm_validation.delay_law.measure import CellCosts
from llm_validation.delay_law.runs import cell_runs
from llm_validation.validation.runs import RunRecord, is_complete

__all__ = ["FROM_FRACTION", "REGRESSORS", "run_snr", "cell_snr", "compare_regressors"]

#: Share of the run after which the statistics steps are averaged: the closing loss, and so the
#: lag, is decided late; early steps are the initial descent, where ``|G|`` is far larger.
FROM_FRACTION = 0.5
#: The regressor sets compared (name -> the features of a point they use).
REGRESSORS = {"rho": ("log_rho",), "N+S": ("log_n", "log_steps"), "B": ("log_batch",)}


def run_snr(run_dir: str | Path) -> float | None:
    """``rho = (mean ||g||^2 - mean v) / mean v`` over the run's statistics steps from
    :data:`FROM_FRACTION` of its planned steps on; None when the run is unfinished or damaged
    (:attr:`~llm_validation.validation.runs.RunRecord.damage`), has fewer than two such steps,
    or the estimate is not positive."""
    if not is_complete(run_dir):
        return None
    rec = RunRecord.load(run_dir)
    if rec.damage:
        return None
    late = [r for r in rec.rows if r.get("grad_noise_var") is not None
            and r.get("grad_norm") is not None and r["step"] >= FROM_FRACTION * rec.steps]
    if len(late) < 2:
        return None
    g2 = float(np.mean([float(r["grad_norm"]) ** 2 for r in late]))
    v = float(np.mean([float(r["grad_noise_var"]) for r in late]))
    rho = (g2 - v) / v if v > 0 else math.nan
    return rho if math.isfinite(rho) and rho > 0 else None


def cell_snr(cell: Cell, runs_dir: str | Path, lrs: Mapping[str, Mapping[str, float]]
             ) -> dict[str, dict[int, float]]:
    """Optimizer -> seed -> ``rho`` of the cell's full-length synchronous runs (seeds without
    a usable estimate left out)."""
    out: dict[str, dict[int, float]] = {}
    for r in cell_runs(cell, lrs):
        if r.kind != "arm" or r.mode != "sync" or r.fraction != 1.0:
            continue
        rho = run_snr(Path(runs_dir) / run_name(r.cfg))
        if rho is not None:
            out.setdefault(r.optimizer, {})[r.seed] = rho
    return out


def _points(costs: Mapping[str, CellCosts], snr: Mapping[str, Mapping[str, Mapping[int, float]]],
            arm: str) -> list[tuple[str, dict[str, float], float]]:
    """(cell, features, log lag) per seed with both a lag and a ``rho``, at the tuned lr
    only (neither regressor set models the lr cells' moved lr)."""
    opt = arm.split("/")[0]
    pts = []
    for name, c in costs.items():
        if c.cell.lr_multiple != 1.0:
            continue
        rhos = snr.get(name, {}).get(opt, {})
        for seed, lag in c.lag_fraction(arm).items():
            if lag > 0 and seed in rhos:
                n, s = float(c.cell.n_params), float(c.cell.steps)
                pts.append((name, {"log_rho": math.log(rhos[seed]), "log_n": math.log(n),
                                   "log_steps": math.log(s), "log_batch": math.log(n / s)},
                            math.log(lag)))
    return pts


def _design(pts: Sequence[tuple[str, dict[str, float], float]], feats: Sequence[str]
            ) -> np.ndarray:
    """The points' design matrix: a constant and ``feats``."""
    return np.array([[1.0] + [f[name] for name in feats] for _, f, _ in pts])


def _fit(pts: Sequence[tuple[str, dict[str, float], float]], feats: Sequence[str]
         ) -> np.ndarray | None:
    k = 1 + len(feats)
    if len(pts) <= k:
        return None
    X = _design(pts, feats)
    if np.linalg.matrix_rank(X) < k:
        return None
    return np.linalg.lstsq(X, np.array([y for _, _, y in pts]), rcond=None)[0]


def _cell_error(beta: np.ndarray, pts: Sequence[tuple[str, dict[str, float], float]],
                feats: Sequence[str]) -> float:
    """``|log(pred / observed)|`` of one cell's geometric means (features and lag averaged on
    the log scale over its seeds)."""
    x = [1.0] + [float(np.mean([f[k] for _, f, _ in pts])) for k in feats]
    return abs(float(np.dot(beta, x)) - float(np.mean([y for _, _, y in pts])))


def compare_regressors(costs: Mapping[str, CellCosts],
                       snr: Mapping[str, Mapping[str, Mapping[int, float]]], arm: str,
                       held: Sequence[str] = ()) -> dict[str, Any]:
    """Per regressor set of :data:`REGRESSORS`, fitted on the cells not in ``held``: the
    coefficients, the in-sample share of the log lag's variance explained (``r2``), the
    leave-one-cell-out mean log error (``loco``) and, when ``held`` cells have points, the mean
    log error there (``held_out``). ``snr``: cell -> optimizer -> seed -> ``rho``."""
    pts = _points(costs, snr, arm)
    train = [p for p in pts if p[0] not in held]
    cells = sorted({p[0] for p in train})
    out: dict[str, Any] = {"arm": arm, "points": len(train), "cells": cells, "sets": {}}
    y = np.array([p[2] for p in train])
    for name, feats in REGRESSORS.items():
        beta = _fit(train, feats)
        if beta is None:
            out["sets"][name] = {"error": "not identified on these cells"}
            continue
        resid = y - _design(train, feats) @ beta
        loco = []
        for c in cells:
            b = _fit([p for p in train if p[0] != c], feats)
            if b is not None:
                loco.append(_cell_error(b, [p for p in train if p[0] == c], feats))
        held_err = [_cell_error(beta, [p for p in pts if p[0] == c], feats)
                    for c in held if any(p[0] == c for p in pts)]
        out["sets"][name] = {
            "coefficients": dict(zip(("const", *feats), (float(b) for b in beta))),
            "r2": float(1 - resid.var() / y.var()) if y.var() > 0 else math.nan,
            "loco": float(np.mean(loco)) if len(loco) == len(cells) else math.nan,
            "held_out": float(np.mean(held_err)) if held_err else None}
    return out
