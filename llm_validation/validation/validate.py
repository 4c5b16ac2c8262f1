"""``validate(run_dirs) -> ValidationReport``: the theory's assumptions and predicted gap trends
checked against real training runs (``delaybound validate RUN_DIR... [--json]``).

Input: run directories of ``llm_validation.training.loop`` (or folders of them, e.g. a sweep's
``--out``). The runs are grouped (``validation.groups``): per optimizer a *base condition* (the
setting with the most seeds of paired sync / one-step-delayed runs, best sync loss among ties)
carries the assumption checks and the headline comparisons; sweeps over lr, tau, momentum, lam
and batch size feed the trend fits when present. Every verdict is listed even when its runs are
missing (then ``inconclusive: not measured``), so a report always shows what was and was not
checked.

The gap is the validation loss of a delayed run minus that of the synchronous run with the
same config and seed (paired), at the final weights by default (``gap_metric="final"``) or
averaged over the last ``validation.runs.TAIL_EVALS`` evaluations (``"tail"``).

Order of the verdicts: assumptions per optimizer (smoothness, star-convexity, noise, momentum
error, EF criterion), the pipeline check, trends (each optimizer's delay cost and EF's share of
it, AdamW vs Muon, EF gains, EF share vs alignment, lr, tau, momentum, batch), bounds. The report
also compares every pair of optimizers present (``validation.optimizers.comparisons``).

Damaged seeds, one policy: a run that is unfinished, diverged, or whose metrics miss rows
(``RunRecord.damage``: steps against its config, the closing eval row) is dropped by every
verdict alike (``RunRecord.usable``), and each verdict that would have read it lists it in its
own ``dropped`` lines (:func:`dropped_runs`).
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Iterable, Sequence

from llm_validation.rundir import TruncatedMetricsWarning
from llm_validation.validation import assumptions as A
from llm_validation.validation import bounds as B
from llm_validation.validation import optimizers as O
from llm_validation.validation import trends as T
from llm_validation.validation.groups import base_conditions
from llm_validation.validation.runs import (
    GAP_METRICS,
    TAIL_EVALS,
    RunRecord,
    load_runs,
    sync_partner,
)
from llm_validation.validation.verdict import ValidationReport, Verdict

__all__ = ["validate", "validate_runs", "gap_definition", "dropped_runs", "OPTIMIZER_ORDER"]

#: Optimizers checked per-optimizer, in report order (any others found in the runs follow,
#: sorted: every optimizer gets the same checks).
OPTIMIZER_ORDER = ("adamw", "muon", "sgd")


def gap_definition(metric: str) -> str:
    what = ("validation loss at the final weights" if metric == "final" else
            f"mean validation loss over the last {TAIL_EVALS} evaluations")
    return (f"gap = {what} of the delayed run minus that of the synchronous run with the same "
            "config and seed (paired); intervals are 95% t intervals over seeds unless marked "
            "bootstrap/fit/welch/fieller")


def _notes(runs: Sequence[RunRecord]) -> list[str]:
    notes = []
    for r in runs:
        if r.status == "incomplete":
            notes.append(f"{r.name}: unfinished (no complete summary.json); not used")
        elif r.status == "diverged":
            notes.append(f"{r.name}: diverged (non-finite loss); not used in gaps")
        elif r.mode in ("delay", "ef") and r.pipeline == "none" \
                and sync_partner(r, runs) is None:
            notes.append(f"{r.name}: no synchronous run with the same config and seed; "
                         "its gap is not measured")
        elif r.damage:
            notes.append(f"{r.name}: {r.damage}; dropped by every verdict (each that would have "
                         "read it says so)")
        elif r.mode == "other":
            notes.append(f"{r.name}: gradient-level EF or per-stage delays; not validated")
    return notes


def dropped_runs(verdict: Verdict, runs: Sequence[RunRecord]) -> tuple[str, ...]:
    """One line per run the verdict lost. A run is lost when it is unusable
    (``RunRecord.unusable``: unfinished, diverged, damaged metrics; every verdict drops such runs
    alike) and the verdict read its condition but has no run of that condition at its seed, or
    read runs of its very arm (condition and mode) but not at its seed; for a verdict that read
    nothing, every unusable run of its optimizer (``id[opt]``)."""
    by_name = {r.name: r for r in runs}
    used = [by_name[n] for n in verdict.runs if n in by_name]
    opt = verdict.id.partition("[")[2].rstrip("]")
    lines = []
    for r in sorted((r for r in runs if r.unusable), key=lambda r: (r.seed, r.name)):
        if used:
            cond = {u.seed for u in used if u.condition == r.condition}
            arm = {u.seed for u in used if u.condition == r.condition
                   and u.mode_label == r.mode_label}
            if not ((cond and r.seed not in cond) or (arm and r.seed not in arm)):
                continue
        elif not opt or r.optimizer != opt:
            continue
        lines.append(f"{r.name} (seed {r.seed}): {r.unusable}")
    return tuple(lines)


def _with_losses(verdicts: Sequence[Verdict], runs: Sequence[RunRecord]) -> list[Verdict]:
    return [dataclasses.replace(v, dropped=lines) if (lines := dropped_runs(v, runs)) else v
            for v in verdicts]


def validate_runs(runs: Sequence[RunRecord | str | Path] | str | Path, *,
                  gap_metric: str = "final", quick: bool = False) -> ValidationReport:
    """The report for runs: loaded :class:`RunRecord` s, or run directories and folders of
    them (read as :func:`validate` reads them); one path alone is accepted too. The verdicts
    are those of ``delaybound validate`` (``report.verdicts``, ``report.counts()``,
    ``report.to_dict()``)."""
    if gap_metric not in GAP_METRICS:
        raise ValueError(f"gap_metric={gap_metric!r} is not one of {list(GAP_METRICS)}")
    runs = [runs] if isinstance(runs, (str, Path)) else list(runs)
    paths = [r for r in runs if not isinstance(r, RunRecord)]
    if paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TruncatedMetricsWarning)   # as validate() does
            runs = [r for r in runs if isinstance(r, RunRecord)] + load_runs(paths)
    base = base_conditions(runs, gap_metric)
    present = {r.optimizer for r in runs}
    opts = [o for o in OPTIMIZER_ORDER if o in present] + sorted(present - set(OPTIMIZER_ORDER))
    out: list[Verdict] = []
    for opt in opts:
        if opt not in base:
            continue
        cond = base[opt]
        out += [A.smoothness_check(runs, opt, cond), A.star_convexity_check(runs, opt, cond),
                A.noise_check(runs, opt, cond), A.momentum_error_check(runs, opt, cond),
                A.ef_criterion_check(runs, opt, cond, metric=gap_metric)]
    out.append(B.pipeline_check(runs))
    out += [O.delay_cost_check(runs, opt, base[opt], gap_metric) for opt in opts if opt in base]
    out.append(T.adamw_vs_muon_check(runs, base, gap_metric))
    for opt in opts:
        if opt in base:
            out.append(T.ef_gain_check(runs, opt, base[opt], metric=gap_metric))
    for opt in opts:
        if opt not in base:
            continue
        out += [T.ef_share_check(runs, opt, gap_metric),
                T.lr_exponent_check(runs, opt, gap_metric),
                T.tau_shape_check(runs, opt, base[opt], gap_metric),
                T.momentum_check(runs, opt, gap_metric),
                T.batch_check(runs, opt, gap_metric)]
    for opt in opts:
        if opt in base:
            out.append(B.star_convex_check(runs, opt, base[opt], gap_metric))
    out = _with_losses(out, runs)
    if quick:
        out = [v.as_quick() for v in out]
    notes = _notes(runs)
    if not base:
        notes.append("no condition has both synchronous and tau = 1 delayed runs paired by seed:"
                     " no gap could be measured")
    used = [r for r in runs if r.complete]
    return ValidationReport(verdicts=tuple(out), gap_definition=gap_definition(gap_metric),
                            runs=tuple(r.row() for r in used), notes=tuple(notes), quick=quick,
                            comparisons=tuple(O.comparisons(runs, base, opts, gap_metric)))


def validate(run_dirs: Iterable[str | Path], *, gap_metric: str = "final",
             quick: bool = False) -> ValidationReport:
    """Validate the runs under ``run_dirs`` (run directories or folders of them).

    ``quick=True`` marks every verdict inconclusive (quick runs are not evidence). Raises
    ``FileNotFoundError`` when no run directory is found.
    """
    with warnings.catch_warnings():
        # a truncated last metrics line comes from a run killed mid-write, which the notes list
        # as not completed; every other warning stays visible
        warnings.simplefilter("ignore", TruncatedMetricsWarning)
        runs = load_runs(list(run_dirs))
        return validate_runs(runs, gap_metric=gap_metric, quick=quick)
