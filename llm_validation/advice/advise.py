"""``advise``: should this run use 2BW? Throughput x predicted delay cost -> time to target.

Algorithm
    1. Throughput: every schedule's steady step time and memory at the user's ``P, M, D``
       (:func:`~llm_validation.advice.throughput.schedule_table`); the horizon in steps is
       ``S = N / tokens per step``.
    2. Delay cost per delayed mode (2BW, 2BW + EF): the gap fraction ``g`` at ``S`` steps from
       the empirical predictor (:mod:`~llm_validation.advice.horizon`) when the pilot has delayed
       pairs of this optimizer, else from the theory predictor
       (:mod:`~llm_validation.advice.delay_term`, calibrated on the pilot's pairs of the family);
       both are reported when both apply. ``g`` becomes a lag fraction on the pilot's synchronous
       curve (:func:`~llm_validation.advice.time_to_target.lag_fraction_from_gap`), or on the
       compute frontier when the pilot holds shorter fully trained synchronous runs at the
       reference's size, batch and lr (:func:`~llm_validation.advice.pilot.frontier_points`).
    3. Time to the synchronous final loss per schedule, as a ratio to 1F1B with an interval
       (:func:`~llm_validation.advice.time_to_target.ratios_to_reference`); the recommendation
       is the schedule with the smallest estimate, and why, in two sentences.
    Across sizes: step 2's law is the transfer law chosen on held-out cells (another batch,
    size at the same steps, lr, horizon: :mod:`~llm_validation.advice.cell_choice`) when the
    pilot holds at least two of those kinds, else on held-out sizes and horizons
    (:mod:`~llm_validation.advice.transfer_choice`), printed with the spread of the laws not
    ruled out and its time-to-target range (:mod:`~llm_validation.advice.model_uncertainty`);
    beyond 10x the pilot's size or horizon the recommendation says "Extrapolation".

Assumptions
    Those of the three modules; the pilot's loss curve stands for the shape of the user's run.

Guarantee
    Every number is the simulator's or a predictor's; nothing is fitted on the user's run.

Reference
    docs/advise.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from llm_validation.advice.delay_term import FAMILIES
from llm_validation.advice.model_uncertainty import (extrapolation, model_time_ratios,
                                                     transfer_delay_cost)
from llm_validation.advice.pilot import PilotRun, frontier_points, pairs, sync_curve
from llm_validation.advice.throughput import DELAYED_ADVISED, SYNC_ADVISED
from llm_validation.advice.time_to_target import (MIN_LAG_FRACTION, REFERENCE,
                                                  frontier_unusable, ratios_to_reference)
from llm_validation.advice.transfer import ALL_LAWS, Target
from llm_validation.advice.cell_choice import choose_on_cells, drop_rows, score_cells
from llm_validation.advice.transfer_choice import choose, score_laws

__all__ = ["MODES", "AdviseSpec", "advise", "recommendation",
           "one_horizon_warnings"]

#: Delayed schedule -> the pilot's run mode that measures it.
MODES = {"2bw": "delay", "2bw+ef": "ef"}


@dataclass(frozen=True, kw_only=True)
class AdviseSpec:
    """The user's question."""

    optimizer: str
    """Optimizer of the run (one of the calibration families' members)."""
    stages: int
    """Pipeline stages P (>= 2)."""
    microbatches: int
    """Microbatches per optimizer step M."""
    data_parallel: int = 1
    """Replicas D."""
    tokens: float
    """Training horizon in tokens N."""
    params: float | None = None
    """The user's model size in parameters (all counted); None when unknown."""
    batch_tokens: float | None = None
    """Tokens per optimizer step of the user's run (``--batch-tokens``): its step count is
    ``tokens / batch_tokens``; None: the simulator's batch stands in, and the laws with an
    explicit step count refuse it."""
    lr: float | None = None
    """The run's peak learning rate (``--lr``), read against the pilot's tuned lr (right when
    the run is the pilot reference's size); None when not given."""
    lr_ratio: float | None = None
    """The run's peak lr over the lr tuned for the run's own size (``--lr-ratio``; 1: tuned), the
    quantity the lr laws read from each pilot pair; exclusive with :attr:`lr`."""
    law: str | None = None
    """The transfer law requested (``--law``, one of :data:`~.transfer.ALL_LAWS`); None: the
    law chosen on held-out sizes."""

    def __post_init__(self) -> None:
        if self.optimizer not in FAMILIES:
            raise ValueError(f"--optimizer: unknown optimizer {self.optimizer!r}; choose from "
                             f"{', '.join(FAMILIES)}")
        for name, low in (("stages", 2), ("microbatches", 1), ("data_parallel", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"--{name.replace('_', '-')} must be an integer >= {low}, "
                                 f"got {v!r}")
        if not (isinstance(self.tokens, (int, float)) and math.isfinite(self.tokens)
                and self.tokens > 0):
            raise ValueError(f"--tokens must be a positive number, got {self.tokens!r}")
        for name in ("params", "batch_tokens", "lr", "lr_ratio"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v)
                                      and v > 0):
                raise ValueError(f"--{name.replace('_', '-')} must be a positive number, "
                                 f"got {v!r}")
        if self.lr is not None and self.lr_ratio is not None:
            raise ValueError("give --lr or --lr-ratio, not both: --lr is read against the "
                             "pilot's tuned lr, --lr-ratio against your size's")
        if self.law is not None and self.law not in ALL_LAWS:
            raise ValueError(f"--law: unknown transfer law {self.law!r}; choose from "
                             f"{', '.join(ALL_LAWS)}")


def recommendation(ttt: dict[str, Any], table: dict[str, Any],
                   delay: dict[str, Any]) -> dict[str, str]:
    """The schedule with the smallest predicted time to target, and why (two sentences)."""
    best = min(ttt, key=lambda k: ttt[k]["ratio"])
    sync_best = min((k for k in ttt if k not in DELAYED_ADVISED), key=lambda k: ttt[k]["ratio"])
    two = table["2bw"]["speedup_vs_1f1b"]
    d = delay.get(best if best in DELAYED_ADVISED else "2bw")
    f = d["lag_fraction"]["estimate"] if d else math.nan
    need = 1 / (1 - f) if f < 1 else math.inf
    why_cost = (f"2BW's step is x{two:.3g} the speed of 1F1B's, and the {d['used']} predictor "
                f"puts its lag at {f:.1%} of the run (x{need:.3g} the steps)" if d else
                "no delay cost could be predicted")
    if best in DELAYED_ADVISED:
        r = ttt[best]
        clip = "*" if delay[best]["lag_fraction"]["lo"] <= MIN_LAG_FRACTION else ""
        first = (f"Use {best}: it reaches the synchronous final loss in {r['ratio']:.3g}x the "
                 f"time of 1F1B [{r['ratio_lo']:.3g}{clip}, {r['ratio_hi']:.3g}].")
        doubt = ("" if r["ratio_hi"] < ttt[sync_best]["ratio"] else
                 f"; the interval reaches {sync_best}'s {ttt[sync_best]['ratio']:.3g}x, so the "
                 f"gain is not certain")
        return {"schedule": best, "why": f"{first} {why_cost}{doubt}."}
    two_r = ttt["2bw"]["ratio"]
    first = (f"Use {best}: it reaches the target in {ttt[best]['ratio']:.3g}x the time of 1F1B, "
             f"ahead of 2BW's predicted {two_r:.3g}x.")
    if two_r < 1:      # the lag is repaid against 1F1B; another synchronous schedule is faster
        return {"schedule": best, "why": f"{first} {why_cost}: the faster step more than repays "
                                         f"that lag against 1F1B, but {best} is faster still "
                                         "with no delay."}
    return {"schedule": best, "why": f"{first} {why_cost}, more than the faster step repays."}


#: The transfer laws that read the pilot's horizons (``advice.transfer``): with one horizon
#: they carry its gap unchanged.
HORIZON_LAWS = ("steps", "tokens_per_param")


def one_horizon_warnings(delay: dict[str, Any], optimizer: str, pilot_horizon: int,
                         target_steps: float) -> list[str]:
    """One warning (a list of zero or one line) when an empirical prediction has no trend (the
    pilot's pairs of this optimizer all have one horizon): its gap fraction is carried
    unchanged to the target horizon, which over-predicts a gap that shrinks with the horizon
    (docs/advise.md)."""
    flat = {name: d["predictions"][d["used"]].get("horizons", [pilot_horizon])
            for name, d in delay.items() if d["used"] in HORIZON_LAWS
            and str(d["predictions"][d["used"]].get("trend", "")).startswith("none")}
    if not flat:
        return []
    hs = ", ".join(f"{h:g}" for h in sorted({h for v in flat.values() for h in v}))
    return [f"WARNING ({', '.join(flat)}): the pilot's {optimizer} pairs all have one horizon "
            f"({hs} steps), so their gap fraction is carried unchanged to {target_steps:,.0f} "
            "steps (no trend). A gap that shrinks with the horizon (Muon's about as 1/horizon on "
            "the tiny ledger, AdamW's slowly) is then over-predicted (docs/advise.md: Muon held "
            "out at one horizon was predicted 20-40x too large at 1600 steps): read these rows "
            "as a pessimistic bound, or give a pilot with several horizons (e.g. --ledger)."]


def advise(spec: AdviseSpec, runs: Sequence[PilotRun], table: dict[str, dict[str, Any]],
           progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The advice (module docstring) from the pilot's ``runs`` and the simulator's ``table``
    (:func:`~llm_validation.advice.throughput.schedule_table`). ``ValueError`` for a pilot
    without the runs it needs or a horizon shorter than every horizon the pilot measured (the
    laws are fitted over the pilot's horizons: inside their range they interpolate, above it they
    extrapolate, below it advise does not go)."""
    ref = sync_curve(runs, spec.optimizer)
    all_pairs = pairs(runs)
    sim_per_step = table[REFERENCE]["tokens_per_step"]
    per_step = spec.batch_tokens or sim_per_step
    S = spec.tokens / per_step
    horizons = [ref.horizon] + [p.horizon for p in all_pairs if p.optimizer == spec.optimizer]
    pilot_T = max(horizons)
    if S < min(horizons):
        raise ValueError(f"--tokens {spec.tokens:g} is {S:.0f} steps of {per_step} tokens, "
                         f"shorter than the pilot's shortest horizon ({min(horizons)} steps)")
    if progress is not None:
        progress("choosing the transfer law on held-out cells, sizes and horizons")
    scores = score_laws(all_pairs)
    cells = score_cells(all_pairs, "share")
    on_cells = choose_on_cells(cells)
    choice = choose(scores)
    if on_cells is not None and on_cells["law"] is not None:
        choice = {"law": on_cells["law"], "reason": on_cells["reason"],
                  "deciding_hold_out": "cells", "not_ruled_out": on_cells["not_ruled_out"],
                  "ruled_out": on_cells["ruled_out"]}
    if spec.law is not None:
        choice = {**choice, "law": spec.law, "requested": True,
                  "reason": f"requested with --law; the held-out choice is {choice['law']}"}
    pilot_lr = ref.runs[0].lr
    ratio = spec.lr_ratio if spec.lr is None else spec.lr / pilot_lr
    target = Target(steps=S, tokens_per_step=per_step, n_params=spec.params,
                    steps_stated=spec.batch_tokens is not None, lr_ratio=ratio,
                    pilot_lr=None if ratio is None else pilot_lr)
    front = frontier_points(runs, ref)
    unusable = frontier_unusable(*front)
    frontier = None if unusable else front
    delay: dict[str, Any] = {}
    for name, mode in MODES.items():
        if progress is not None:
            progress(f"predicting the delay cost of {name}")
        d = transfer_delay_cost(all_pairs, ref, spec.optimizer, mode, target, choice, frontier)
        if d is not None:
            delay[name] = d
    if "2bw" not in delay:
        raise ValueError(f"the pilot has no 2BW/sync pair of {spec.optimizer!r} and no "
                         f"calibration pair of its family ({FAMILIES[spec.optimizer]}): add "
                         f"delayed runs or --ledger")
    # the simulator's throughput (tokens/s) carried to the user's batch: a step of
    # per_step tokens takes per_step / sim_per_step of the simulated step
    step_times = {k: v["steady_step_time_s"] * per_step / sim_per_step
                  for k, v in table.items() if "skipped" not in v}
    step_times = {k: v for k, v in step_times.items() if k in SYNC_ADVISED or k in delay}
    ttt = ratios_to_reference(step_times, S, {k: v["lag_fraction"] for k, v in delay.items()})
    for k, v in model_time_ratios(step_times, S, delay).items():
        delay[k]["model_uncertainty"]["time_ratio"] = v
    sizes = [r.n_params for r in runs if r.optimizer == spec.optimizer and r.n_params]
    extra = extrapolation(pilot_params=max(sizes, default=None), pilot_steps=pilot_T,
                          target=target, law=delay["2bw"]["used"])
    rec = recommendation(ttt, table, delay)
    if extra is not None:
        rec["why"] = f"{rec['why']} {extra['text']}."
    notes = one_horizon_warnings(delay, spec.optimizer, ref.horizon, S)
    notes.append(f"lag read on the compute frontier: the pilot's synchronous runs at "
                 f"{', '.join(f'{x:g}' for x in front[0])} steps, each fully trained"
                 if frontier else
                 f"lag read on the synchronous run's own curve, which understates the compute a "
                 f"delay costs: {unusable}")
    if spec.batch_tokens is not None and spec.batch_tokens != sim_per_step:
        notes.append(f"the step count is read at --batch-tokens {spec.batch_tokens:.0f} "
                     f"({S:,.0f} steps); the simulated schedules step {sim_per_step:.0f} tokens, "
                     "so their step times are scaled to the batch at the simulated tokens/s")
    if "2bw+ef" not in delay:
        notes.append("no 2BW + EF prediction: the pilot has no EF pair of this optimizer and no "
                     "EF calibration pair of its family")
    return {"optimizer": spec.optimizer, "stages": spec.stages, "microbatches": spec.microbatches,
            "data_parallel": spec.data_parallel, "tokens": spec.tokens,
            "tokens_per_step": per_step, "target_steps": S,
            "lr": None if ratio is None else {"run": spec.lr, "pilot": pilot_lr,
                                              "ratio": ratio},
            "pilot": {"runs": len(runs), "pairs": len(all_pairs), "reference_horizon": ref.horizon,
                      "reference_runs": [r.name for r in ref.runs],
                      "reference_loss_drop": ref.loss_drop,
                      "reference_curve": [[float(a), float(b)] for a, b in
                                          zip(ref.steps, ref.vals)]},
            "frontier": {"steps": front[0], "losses": front[1], "used": frontier is not None,
                         "reason": unusable},
            "throughput": table, "delay_cost": delay, "time_to_target": ttt,
            "transfer": {"choice": choice, "held_out": scores, "held_out_cells": drop_rows(cells),
                         "params": spec.params},
            "extrapolation": extra, "recommendation": rec, "notes": notes}
