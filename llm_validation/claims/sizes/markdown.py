"""The size ladder for a reader: its figure and its claims.md section.

- :func:`plot_size_ladder` (drawn by :func:`size_ladder_axes`): two log-log panels against the
  model size N (millions of parameters, all counted): the gap as a share of the synchronous
  loss decrease, and the lag as a share of the synchronous run's steps (in %). Per arm:
  per-seed points (small, jittered sideways so seeds and arms stay apart), the mean over seeds
  per size (a line), the step-and-size exponent with its interval in the legend, and, only for
  fits that carry extrapolations (the ladder's report gives none: steps grow with N), the
  fitted power law continued dotted to the targets in a shaded band labelled "extrapolation". Reference lines: the
  paper's 0.01 nats as a share of an estimated loss decrease (``regime.PAPER_GAP_FRACTION``,
  descriptive: the protocol decides on the lag) on the gap panel, the paper's lag fraction and the agreement bound (TOLERANCE x it) on the lag panel.
  Non-positive values have no logarithm and are not drawn (the fits count them as left out).
- :func:`size_ladder_markdown`: the sizes and why the exponents are confounded, one table per
  arm (step-and-size exponent with interval, mean and t interval per size, seeds left out;
  extrapolations and agreement verdicts only when given), the agreement table when checks are
  given.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from llm_validation.claims.decide import regime
from llm_validation.claims.decide.checks import Check
from llm_validation.claims.sizes.fit import (AGREEMENT_RULES, AGREEMENT_TARGET, CONFOUND,
                                               EXPONENT_NAME, QUANTITIES,
                                               QUANTITY_TEXT, TOLERANCE, VERDICT,
                                               SizeFit, SizeLadderData, arm_label,
                                               paper_lag_fraction, rules_text)
from llm_validation.records.figure_file import save_figure
from llm_validation.validation.inference import t_interval
from llm_validation.validation.figures import DPI, plain_ticks

__all__ = ["PAPER_LAG_LABEL", "size_ladder_axes", "plot_size_ladder", "size_ladder_markdown"]

#: The legend entry of the paper's Muon threshold on the lag panel.
PAPER_LAG_LABEL = "paper's Muon gap as a lag fraction"

_COLORS = {"adamw": "tab:orange", "muon": "tab:purple", "normuon": "tab:blue",
           "soap": "tab:green"}
_STYLE = {"2bw": ("o", "-"), "2bw+ef": ("s", "--")}
#: Sideways jitter of the per-seed points, as a factor on N per arm (log axis: +-7% apart).
_JITTER = 1.07
_UNIT = {"gap_fraction": "gap (% of the synchronous loss decrease)",
         "lag_fraction": "lag (% of the synchronous run's steps)"}


def _targets(fits: Mapping[str, Mapping[str, SizeFit]]) -> dict[str, int]:
    """The extrapolation targets the fits carry (name -> N; empty when none has any: the
    ladder's report does not extrapolate, :data:`~llm_validation.claims.sizes.fit.CONFOUND`)."""
    out = {e.name: e.n_params for by_q in fits.values() for f in by_q.values()
           for e in f.extrapolations.values()}
    return dict(sorted(out.items(), key=lambda kv: kv[1]))


def _mean(by_seed: Mapping[int, float]) -> float:
    vals = [v for v in by_seed.values() if math.isfinite(v)]
    return float(np.mean(vals)) if vals else math.nan


def _decades(ax) -> None:
    """Plain labels at the powers of ten inside the y range (and 2, 5 x when under two)."""
    lo, hi = ax.get_ylim()
    ks = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    ticks = [10.0 ** k for k in ks if lo <= 10.0 ** k <= hi]
    if len(ticks) < 3:
        ticks = [m * 10.0 ** k for k in ks for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi]
    plain_ticks(ax.yaxis, ticks, fmt="{:g}")


def _panel(ax, data: SizeLadderData, fits: Mapping[str, Mapping[str, SizeFit]],
           quantity: str) -> tuple[list[float], list[float]]:
    """Draw one quantity; returns (the drawn values the y range must show: points, means and
    extrapolated estimates; the interval ends of the extrapolations), in %."""
    arms = data.arms
    core: list[float] = []
    ends: list[float] = []
    for k, arm in enumerate(arms):
        opt, mode = arm.split("/", 1)
        color = _COLORS.get(opt, "k")
        marker, ls = _STYLE.get(mode, ("^", "-."))
        jitter = _JITTER ** (k - (len(arms) - 1) / 2)
        values = data.values(arm, quantity)
        if not any(values.values()):
            continue
        pts = [(n, v) for n, by in values.items() for v in by.values()
               if math.isfinite(v) and v > 0]
        core += [100 * v for _, v in pts]
        ax.scatter([n / 1e6 * jitter for n, _ in pts], [100 * v for _, v in pts], s=9,
                   color=color, alpha=0.45, marker=marker, linewidths=0)
        means = [(n, _mean(values[n])) for n in sorted(values)]
        means = [(n, m) for n, m in means if m > 0]
        f = fits.get(arm, {}).get(quantity)
        name = arm_label(arm)
        if f is not None and f.fit.slopes:
            name += f": {EXPONENT_NAME} {f.exponent.fmt(2)}"
        if f is not None and f.excluded:
            name += f" ({len(f.excluded)} seed(s) left out)"
        if not means:
            name += ": no positive mean (not drawn on log axes)"
        ax.plot([n / 1e6 for n, _ in means], [100 * m for _, m in means], marker=marker, ls=ls,
                color=color, label=name, ms=5)
        if f is None or not f.extrapolations:
            continue
        top = max(f.fit.horizons)
        xs = np.geomspace(top, max(e.n_params for e in f.extrapolations.values()), 40)
        b = np.mean(list(f.fit.slopes.values()))
        a = np.mean(list(f.fit.intercepts.values()))
        ax.plot(xs / 1e6, 100 * np.exp(a + b * np.log(xs)), ":", color=color, lw=1.4)
        for e in f.extrapolations.values():
            iv = e.interval
            lo = iv.lo if iv.bounded and iv.lo > 0 else iv.estimate
            hi = iv.hi if iv.bounded else iv.estimate
            core.append(100 * iv.estimate)
            ends += [100 * lo, 100 * hi]
            ax.errorbar([e.n_params / 1e6 * jitter], [100 * iv.estimate],
                        yerr=[[100 * (iv.estimate - lo)], [100 * (hi - iv.estimate)]],
                        fmt=marker, mfc="none", color=color, capsize=3, ms=5, lw=1)
    return core, ends


#: Decades of margin around the drawn values; an extrapolated interval reaching further is
#: clipped at the frame (its ends are in size_ladder.md), so a wide interval does not squash
#: the measured sizes into a sliver of the panel.
_MARGIN_DECADES = 1.0


def _y_range(ax, core: list[float], ends: list[float], refs: list[float]) -> bool:
    """Set the y range to the drawn values +- :data:`_MARGIN_DECADES`; True when an
    extrapolated interval is clipped."""
    vals = [v for v in core + refs if v > 0 and math.isfinite(v)]
    if not vals:
        return False
    lo = min(vals) / 10 ** _MARGIN_DECADES
    hi = max(vals) * 10 ** _MARGIN_DECADES
    ax.set_ylim(lo, hi)
    return any(e < lo or e > hi for e in ends if math.isfinite(e))


def size_ladder_axes(axes, data: SizeLadderData, fits: Mapping[str, Mapping[str, SizeFit]],
                     *, paper_lag: float | None = None, tolerance: float = TOLERANCE) -> None:
    """Draw the size ladder into two axes (gap share, lag share); ``paper_lag`` None:
    :func:`llm_validation.claims.sizes.fit.paper_lag_fraction`."""
    from matplotlib.lines import Line2D
    lag = paper_lag_fraction() if paper_lag is None else float(paper_lag)
    targets = _targets(fits)
    top = max(data.sizes) / 1e6
    right = max(targets.values()) / 1e6 if targets else top
    for ax, q in zip(axes, QUANTITIES):
        core, ends = _panel(ax, data, fits, q)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(min(data.sizes) / 1e6 / 1.6, right * 1.8)
        if targets:
            ax.axvspan(top * 1.3, right * 1.8, color="0.92", zorder=0)
            ax.text(math.sqrt(top * 1.3 * right), 1.0, "extrapolation\n(power law in N assumed)",
                    transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=8,
                    color="0.35")
        refs = ([100 * regime.PAPER_GAP_FRACTION] if q == "gap_fraction"
                else [100 * lag, 100 * tolerance * lag])
        clipped = _y_range(ax, core, ends, refs)
        if q == "gap_fraction":
            # descriptive only: the 7.8-nat decrease behind it is a guess, so the protocol's
            # threshold is the lag (right panel); the line is labelled as the estimate it is
            ax.axhline(100 * regime.PAPER_GAP_FRACTION, color="k", ls="-.", lw=0.9,
                       label=f"paper: {regime.PAPER_NATS:g} nats ~ "
                             f"{100 * regime.PAPER_GAP_FRACTION:.2g}% of an estimated "
                             f"{regime.PAPER_LOSS_DROP:g}-nat decrease (not a rule)")
        else:
            ax.axhline(100 * lag, color="k", ls="-.", lw=0.9,
                       label=f"{PAPER_LAG_LABEL} ({100 * lag:.3g}%)")
            if targets:
                ax.axhline(100 * tolerance * lag, color="0.4", ls=(0, (1, 3)), lw=1.2,
                           label=f"agreement bound: {tolerance:g} x paper "
                                 f"({100 * tolerance * lag:.3g}%)")
        handles, labels = ax.get_legend_handles_labels()
        if targets:
            handles.append(Line2D([], [], color="0.3", ls=":", marker="o", mfc="none"))
            labels.append(f"dotted: extrapolation, 95% interval at {' / '.join(targets)}"
                          + (" (clipped at the frame)" if clipped else ""))
        # under the panel: inside it would cover the extrapolated lines
        ax.legend(handles, labels, fontsize=7.5, loc="upper center",
                  bbox_to_anchor=(0.5, -0.13), framealpha=0.9)
        xt = [n / 1e6 for n in data.sizes] + [n / 1e6 for n in targets.values()]
        plain_ticks(ax.xaxis, xt, fmt="{:.3g}")
        _decades(ax)
        ax.tick_params(axis="x", labelsize=8)
        ax.set_xlabel(f"model size N (millions of parameters, all counted; "
                      f"{data.tokens_per_param:g} tokens each)")
        ax.set_ylabel(_UNIT[q])
        ax.grid(alpha=0.3, which="major")
        ax.set_title(f"{QUANTITY_TEXT[q]} vs model size\n(the step count grows with N: "
                     "step-and-size exponents)", fontsize=10)


def plot_size_ladder(data: SizeLadderData, fits: Mapping[str, Mapping[str, SizeFit]],
                     path: str | Path, *, paper_lag: float | None = None,
                     tolerance: float = TOLERANCE) -> Path:
    """Write the size-ladder figure (:func:`size_ladder_axes`) to ``path`` (PNG); returns it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(13.0, 7.0))
    size_ladder_axes(axes, data, fits, paper_lag=paper_lag, tolerance=tolerance)
    fig.suptitle(f"Size ladder at {data.tokens_per_param:g} tokens per parameter "
                 "(points: seeds; lines: mean over seeds)", fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path, dpi=DPI)


def _cell(by_seed: Mapping[int, float]) -> str:
    vals = [v for v in by_seed.values() if math.isfinite(v)]
    if not vals:
        return "-"
    return f"{t_interval(vals).scaled(100).fmt()} % (n = {len(vals)})"


def _left_out(f: SizeFit) -> str:
    """The seeds without a slope, grouped by reason (``seeds 1, 3: ...``)."""
    by_why: dict[str, list[int]] = {}
    for s, why in f.excluded.items():
        by_why.setdefault(why, []).append(s)
    return "; ".join(f"seed{'s' if len(ss) > 1 else ''} {', '.join(map(str, ss))}: {why}"
                     for why, ss in by_why.items()) or "none"


def _check_of(rule_key: str, checks: Sequence[Check]) -> Check | None:
    return next((c for c in checks if c.label.startswith(f"{rule_key}:")), None)


def _why(c: Check) -> str:
    """The reason without its leading verdict word (the verdict is shown beside it)."""
    head = f"{VERDICT[c.status]}: "
    return c.reason[len(head):] if c.reason.startswith(head) else c.reason


def size_ladder_markdown(data: SizeLadderData, fits: Mapping[str, Mapping[str, SizeFit]],
                         checks: Sequence[Check], *, paper_lag: float | None = None,
                         tolerance: float = TOLERANCE, heading: str = "###") -> list[str]:
    """The size ladder's claims.md section as lines (see the module docstring)."""
    lag = paper_lag_fraction() if paper_lag is None else float(paper_lag)
    lines = [f"{heading} Size ladder at {data.tokens_per_param:g} tokens per parameter", "",
             "Sizes (all parameters counted): " + "; ".join(
                 f"N = {n:,} (non-embedding {data.non_embedding[n]:,}, embeddings and head "
                 f"{data.embedding_share(n):.0%})" for n in data.sizes) + ".", "",
             "Per arm and seed, against the same-seed synchronous run: the gap as a share of "
             "the synchronous loss decrease and the lag as a share of its steps (mean and 95% t "
             f"interval over seeds, in %). The {EXPONENT_NAME} is the mean of per-seed "
             "least-squares slopes of log(value) on log(N) with a t interval over seeds: "
             f"{CONFOUND}." + (" The rows marked EXTRAPOLATION evaluate each seed's power law "
                               "at the paper's sizes (t interval of the log value over seeds), "
                               "assuming the power law in N holds that far."
                               if _targets(fits) else ""), ""]
    for arm in data.arms:
        by_q = fits.get(arm, {})
        lines += [f"{heading}# {arm_label(arm)}", "",
                  "| | " + " | ".join(QUANTITY_TEXT[q] for q in QUANTITIES) + " |",
                  "|---|" + "---|" * len(QUANTITIES)]
        row = [f"{EXPONENT_NAME} (95% t over seeds)"]
        for q in QUANTITIES:
            f = by_q.get(q)
            row.append("-" if f is None else "no seed with a slope" if not f.fit.slopes
                       else f"{f.exponent.fmt()} (n = {f.exponent.n})")
        lines.append("| " + " | ".join(row) + " |")
        for n in data.sizes:
            lines.append(f"| N = {n:,} | " + " | ".join(
                _cell(data.values(arm, q).get(n, {})) for q in QUANTITIES) + " |")
        for name, n in _targets(fits).items():
            cells = []
            for q in QUANTITIES:
                e = by_q[q].extrapolations.get(name) if q in by_q else None
                cells.append(f"{e.interval.scaled(100).fmt()} %" if e else "-")
            lines.append(f"| {name}, N = {n:,} (EXTRAPOLATION) | " + " | ".join(cells) + " |")
        left = [_left_out(by_q[q]) if q in by_q else "-" for q in QUANTITIES]
        lines += ["| seeds left out | " + " | ".join(left) + " |", ""]
        for rule in AGREEMENT_RULES:
            c = _check_of(rule.key, checks)
            if arm in rule.weights and c is not None:
                lines += [f"- agreement ({rule.key}, EXTRAPOLATION): "
                          f"**{VERDICT[c.status]}**: {_why(c)}", ""]
    if not checks:
        return lines + [""]
    lines += [f"{heading}# Agreement with the paper (EXTRAPOLATION to {AGREEMENT_TARGET} at "
              f"{data.tokens_per_param:g}:1)", "",
              "| rule | the paper | scale-free reading | verdict | why |", "|---|---|---|---|---|"]
    for rule in AGREEMENT_RULES:
        c = _check_of(rule.key, checks)
        verdict, why = (VERDICT[c.status], _why(c)) if c else ("undetermined", "no check")
        lines.append(f"| {rule.key} | {rule.paper} | {rule.reading} | **{verdict}** | {why} |")
    lines += ["", f"Rules (fixed before the runs; factor-{tolerance:g} tolerance):", ""]
    lines += [f"- {t}" for t in rules_text(lag, tolerance)]
    notes = {e.note for by_q in fits.values() for f in by_q.values()
             for e in f.extrapolations.values()}
    if notes:
        lines += ["", "Extrapolation notes:", ""] + [f"- {t}" for t in sorted(notes)]
    return lines + [""]
