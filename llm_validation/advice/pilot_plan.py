"""The pilot recipe (``advise --plan-pilot``): the cheapest pilot that lets advise choose its
transfer law on held-out sizes without extrapolating, and what it costs on the user's hardware.

Algorithm
    For a target run of ``N`` parameters and ``D`` tokens at ``B`` tokens per step
    (``S = D / B`` steps, ``r = D / N`` tokens per parameter), the pilot is a ladder of
    :data:`SIZES` model sizes of the user's architecture family, the largest ``N / f``
    (``f = largest_factor``, default :data:`~.model_uncertainty.EXTRAPOLATION_FACTOR`), each
    smaller by ``span ** (1 / (SIZES - 1))`` (together ``span``, default :data:`SPAN`), all at the
    user's ``r`` and batch ``B``:

    - the largest size at the full ``r`` only: ``S / f`` steps, so neither the size nor the
      horizon of the target is more than ``f`` times the pilot's (no "extrapolation");
    - the smaller sizes at ``r`` and ``r / 2``: the ``joint`` law needs tokens per parameter to
      vary apart from the size, and the longest-horizon hold-out needs a shorter horizon;
    - per (size, horizon) ``seeds`` seeds x 3 runs (synchronous, 2BW, 2BW + EF, same seed).

    Holding out the largest size then leaves two sizes (a factor ``sqrt(span)``) to fit on:
    the minimum that scores the size-aware laws. Cost: a run of ``n`` parameters and ``d``
    tokens takes ``n d c`` device-seconds with ``c = P D_p t_1f1b / (B N)``, the target run's
    simulated device-seconds per token and parameter (``t_1f1b``: the simulator's steady 1F1B
    step on the user's shape, ``P D_p`` devices); each pilot run runs on one device.

    The *step-count pilot* (:func:`step_count_pilot`): the delay cost follows the step count, so
    the cheapest pilot that measures it where the user runs is one model of ``N / f`` parameters
    trained for the target's own ``S`` steps at its batch ``B`` (``D`` tokens: ``N D c / f``
    device-seconds per run), ``seeds`` seeds x 3 runs. The interval it buys for ``g`` at the
    target's steps is the prediction interval of one more seed from ``seeds``:
    ``g x/ exp(t_{seeds-1} s sqrt(1 + 1/seeds))``, ``s`` the seeds' standard deviation of
    ``log g`` (:func:`seed_scatter`, pooled over the arms of a pilot with two seeds or more;
    without one the half-width is given per unit of ``s``). The size between ``N / f`` and
    ``N`` is still carried by a law (``size_steps_lr``'s size term or an assumption).

Assumptions
    The pilot runs at the target's per-device efficiency (FLOPs proportional to ``n d``, the
    ``6 N D`` rule; small models usually run less efficiently, so the cost is a lower bound); a
    2BW or 2BW + EF pilot run costs a synchronous one (one-device delayed training stores one
    more weight copy, no more FLOPs).

Guarantee
    The plan's largest size and horizon are within ``f`` of the target (advise will not flag an
    extrapolation), and it has the folds :mod:`~.transfer_choice` needs (two sizes below the
    held-out one, two horizons at them); the costs are the arithmetic above.

Reference
    docs/advise.md, "Planning a pilot".
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from llm_validation.advice.horizon import LEVEL
from llm_validation.advice.model_uncertainty import EXTRAPOLATION_FACTOR
from llm_validation.validation.student import t_quantile

__all__ = ["SIZES", "SPAN", "SEEDS", "RUNS_PER_SEED", "plan_pilot", "seed_scatter",
           "step_count_pilot"]

#: Sizes of the ladder: the largest is held out, the two others fit the size-aware laws.
SIZES = 3
#: The ladder's span in parameters (the project's own size ladder spans 5.8x, docs/size_ladder.md).
SPAN = 5.0
#: Seeds per (size, horizon): three give a t interval with two degrees of freedom per arm.
SEEDS = 3
#: Synchronous, 2BW and 2BW + EF runs per seed.
RUNS_PER_SEED = 3


def plan_pilot(*, params: float, tokens: float, tokens_per_step: float,
               device_seconds_per_step: float, largest_factor: float = EXTRAPOLATION_FACTOR,
               span: float = SPAN, seeds: int = SEEDS) -> dict[str, Any]:
    """The pilot of the module docstring: its runs (size, tokens per parameter, steps, seeds,
    device-hours) and the total cost, also as a share of the target run. ``device_seconds_per_
    step``: the target run's simulated step time times its device count."""
    for name, v in (("params", params), ("tokens", tokens), ("tokens_per_step", tokens_per_step),
                    ("device_seconds_per_step", device_seconds_per_step),
                    ("largest_factor", largest_factor)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"plan_pilot: {name} must be a positive number, got {v!r}")
    if not span > 1 or not (isinstance(seeds, int) and seeds >= 2):
        raise ValueError(f"plan_pilot: span must be > 1 and seeds an integer >= 2, got "
                         f"{span!r}, {seeds!r}")
    steps = tokens / tokens_per_step
    ratio = tokens / params
    c = device_seconds_per_step / (tokens_per_step * params)   # per token and parameter
    step = span ** (1.0 / (SIZES - 1))
    largest = params / largest_factor
    runs, total = [], 0.0
    for k in range(SIZES):
        n = largest / step ** k
        for frac in ((1.0,) if k == 0 else (1.0, 0.5)):
            d = ratio * frac * n
            hours = RUNS_PER_SEED * seeds * n * d * c / 3600.0
            total += hours
            runs.append({"params": round(n), "tokens_per_param": ratio * frac,
                         "tokens": d, "steps": math.ceil(d / tokens_per_step), "seeds": seeds,
                         "runs": RUNS_PER_SEED * seeds, "device_hours": hours,
                         "held_out": "largest size" if k == 0 else
                         ("longest horizon" if frac == 1.0 else "fit")})
    target_hours = steps * device_seconds_per_step / 3600.0
    return {"target": {"params": params, "tokens": tokens, "tokens_per_param": ratio,
                       "steps": steps, "device_hours": target_hours},
            "largest_factor": largest_factor, "span": span, "runs": runs,
            "total_runs": sum(r["runs"] for r in runs), "device_hours": total,
            "share_of_target": total / target_hours,
            "assumption": ("each pilot run on one device at the target's simulated "
                           "per-device efficiency (cost proportional to parameters x tokens; "
                           "small models run less efficiently, so this is a lower bound); "
                           "2BW and EF runs cost a synchronous one")}


def seed_scatter(pairs: Sequence[Any]) -> float | None:
    """The seeds' pooled standard deviation of ``log g`` over ``pairs``' arms (same optimizer,
    mode, size, horizon, batch and lr) with two seeds or more and every ``g > 0``; None when
    no arm has two such seeds."""
    arms: dict[tuple[Any, ...], list[float]] = {}
    for p in pairs:
        key = (p.optimizer, p.mode, p.n_params, p.horizon, p.delayed.tokens_per_step,
               p.delayed.lr)
        arms.setdefault(key, []).append(p.gap_fraction)
    ss, dof = 0.0, 0
    for g in arms.values():
        if len(g) >= 2 and all(math.isfinite(x) and x > 0 for x in g):
            lg = np.log(g)
            ss += float(((lg - lg.mean()) ** 2).sum())
            dof += len(g) - 1
    return math.sqrt(ss / dof) if dof else None


def step_count_pilot(*, params: float, tokens: float, tokens_per_step: float,
                     device_seconds_per_step: float, largest_factor: float = EXTRAPOLATION_FACTOR,
                     seeds: int = SEEDS, scatter: float | None = None,
                     level: float = LEVEL) -> dict[str, Any]:
    """The step-count pilot of the module docstring: one model of ``params / largest_factor``
    parameters at the target's steps and batch, its cost (also as a share of the target run)
    and the interval it buys (``log_half_width_per_scatter``; with ``scatter``, the
    ``factor`` the interval spans either side of the estimate)."""
    for name, v in (("params", params), ("tokens", tokens), ("tokens_per_step", tokens_per_step),
                    ("device_seconds_per_step", device_seconds_per_step),
                    ("largest_factor", largest_factor)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"step_count_pilot: {name} must be a positive number, got {v!r}")
    if not (isinstance(seeds, int) and seeds >= 2) or (scatter is not None and not scatter >= 0):
        raise ValueError(f"step_count_pilot: seeds must be an integer >= 2 and scatter >= 0, "
                         f"got {seeds!r}, {scatter!r}")
    steps = math.ceil(tokens / tokens_per_step)
    n = params / largest_factor
    c = device_seconds_per_step / (tokens_per_step * params)
    hours = RUNS_PER_SEED * seeds * n * steps * tokens_per_step * c / 3600.0
    per_s = float(t_quantile(level, seeds - 1)) * math.sqrt(1 + 1 / seeds)
    return {"params": round(n), "steps": steps, "tokens_per_step": tokens_per_step,
            "tokens": steps * tokens_per_step, "seeds": seeds, "runs": RUNS_PER_SEED * seeds,
            "device_hours": hours,
            "share_of_target": hours / (tokens / tokens_per_step * device_seconds_per_step / 3600),
            "interval": {"level": level, "log_half_width_per_scatter": per_s,
                         "scatter": scatter,
                         "factor": None if scatter is None else math.exp(per_s * scatter)}}
