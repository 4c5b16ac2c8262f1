"""One figure per claim in the paper's style (PNG), drawn from the claim's finished runs.

- ``curves``: a logged metric over training per arm, mean over seeds with the range over seeds
  as a band; panels per optimizer (``by_optimizer``) and per metric; delayed arms carry their
  final gap in the legend;
- ``bars``: the sync-async gap per delayed arm, grouped by optimizer, mean with its 95% t
  interval, each bar annotated with its mean gap;
- ``ladder``: gap and lag against the horizon, log-log (:func:`ladder_axes`);
- ``lines``: the gap against a swept value (``FigureSpec.x``), per-seed points and the mean with
  its 95% t interval per series; a ``reference`` arm is a horizontal band.

The title carries the claim's number, figure and status. Nothing is drawn for a claim without
any finished run (:func:`plot_claim` returns None).

The phases' figures live here too: :func:`ladder_axes` (two panels on log-log axes, the gap
(nats/byte) and the lag (synchronous steps behind) against the horizon (steps), per optimizer
and mode: per-seed points, the mean per horizon, and the fitted power law (mean per-seed slope
through the centre of the points); Muon 2BW's fit is continued (dotted, labelled
"extrapolation") to the paper's 0.01 where it shrinks; non-positive values have no logarithm
and are not drawn) and :func:`plot_lr_sweep` (final validation loss against the peak lr (log
x) per optimizer, per-seed points and their mean, the chosen lr ringed:
``figures/lr_sweep.png``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

import numpy as np

from llm_validation.claims.catalogue.horizon import MODES, ladder_values
from llm_validation.claims.catalogue.vocabulary import LADDER_OPTIMIZERS
from llm_validation.claims.decide.ladder import PAPER_GAP, crossing, fit_slope
from llm_validation.claims.plan.lr_sweep import LrChoice, grid_lrs
from llm_validation.claims.record.arms import Arm
from llm_validation.claims.record.claim import Claim
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.decisions import ClaimResult
from llm_validation.config import optimizer_label
from llm_validation.validation.inference import t_interval
from llm_validation.validation.figures import DPI, plain_ticks
from llm_validation.validation.runs import RunRecord

__all__ = ["plot_claim", "ladder_axes", "plot_lr_sweep", "GAP_LABEL", "VAL_ZOOM", "LR_SWEEP_PNG"]

GAP_LABEL = "sync-async gap (nats/byte)"
#: Validation-loss panels show this many nats above the lowest curve (the end of training,
#: where the gaps are; the first steps from ln 256 = 5.5 would flatten them).
VAL_ZOOM = 1.0
_OPT_COLORS = {"adamw": "tab:orange", "muon": "tab:purple", "normuon": "tab:blue",
               "soap": "tab:green", "sgd": "tab:gray"}
LR_SWEEP_PNG = "lr_sweep.png"
_STYLE = {"2bw": ("o", "-"), "2bw+ef": ("s", "--")}
_BADGE = {"pass": "PASS", "fail": "FAIL", "inconclusive": "inconclusive"}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _mean_band(runs: list[RunRecord], key: str):
    """steps, mean, min, max over runs at the steps every run logged (None if none)."""
    series = [dict(zip(*(a.tolist() for a in r.series(key)))) for r in runs]
    series = [s for s in series if s]
    if not series:
        return None
    common = sorted(set.intersection(*(set(s) for s in series)))
    if not common:
        return None
    v = np.array([[s[t] for s in series] for t in common])      # [steps, runs]
    return np.asarray(common), v.mean(axis=1), v.min(axis=1), v.max(axis=1)


def _gap_text(d: ClaimData, arm: Arm) -> str:
    if arm.is_sync:
        return ""
    g = d.gaps(arm.key)
    return f" (gap {np.mean(list(g.values())):.3f})" if g else ""


def _curves(ax_grid, claim: Claim, d: ClaimData) -> None:
    spec = claim.plot
    opts = claim.optimizers() if spec.by_optimizer else (None,)
    styles = ["-", "--", ":", "-."]
    for i, opt in enumerate(opts):
        for j, (metric, ylabel) in enumerate(zip(spec.metrics, spec.ylabels)):
            ax = ax_grid[i][j]
            arms = [a for a in claim.all_arms() if opt is None or a.optimizer == opt]
            modes = list(dict.fromkeys(a.mode for a in arms))
            lows = []
            starts: set[int] = set()     # synchronous-start ends drawn on this panel
            for k, arm in enumerate(arms):
                if arm.is_sync and metric not in ("val_loss", "loss"):
                    continue                  # statistics of the delay: delayed runs only
                band = _mean_band(d.records(arm.key), metric)
                if band is None:
                    continue
                steps, mean, lo, hi = band
                lows.append(float(mean.min()))
                color = f"C{k}" if opt is not None else _OPT_COLORS.get(arm.optimizer, f"C{k}")
                ls = "-" if opt is not None else styles[modes.index(arm.mode) % len(styles)]
                ax.plot(steps, mean, ls, color=color, lw=1.6,
                        label=(arm.label if opt is None else f"{arm.mode} {arm.tag}".strip())
                        + (_gap_text(d, arm) if metric == "val_loss" else ""))
                ax.fill_between(steps, lo, hi, color=color, alpha=0.15, lw=0)
                start = arm.value("delay.sync_start")
                if start is not None and d.records(arm.key):
                    at = int(d.records(arm.key)[0].config["delay"]["sync_start"])
                    if at not in starts:      # one grey line and legend entry per step
                        ax.axvline(at, color="0.4", lw=0.8, ls=":",
                                   label=None if starts else "end of synchronous start")
                        starts.add(at)
            ax.set_xlabel("optimizer step")
            ax.set_ylabel(ylabel)
            if opt is not None:
                ax.set_title(optimizer_label(opt), fontsize=10)
            if metric == "loss":
                ax.set_yscale("log")          # a diverging run spans decades
                plain_ticks(ax.yaxis)
            elif metric == "val_loss" and lows:
                ax.set_ylim(min(lows) - 0.05, min(lows) + VAL_ZOOM)
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)


def _bars(ax, claim: Claim, d: ClaimData) -> None:
    arms = [a for a in claim.arms if not a.is_sync]
    opts = claim.optimizers()
    names = list(dict.fromkeys(f"{a.mode} {a.tag}".strip() for a in arms))
    width = 0.8 / max(len(names), 1)
    for i, opt in enumerate(opts):
        for j, name in enumerate(names):
            arm = next((a for a in arms if a.optimizer == opt
                        and f"{a.mode} {a.tag}".strip() == name), None)
            if arm is None:
                continue
            g = list(d.gaps(arm.key).values())
            if not g:
                continue
            iv = t_interval(g)
            x = i + (j - (len(names) - 1) / 2) * width
            err = None
            if iv.bounded:
                err = [[iv.estimate - iv.lo], [iv.hi - iv.estimate]]
            ax.bar(x, iv.estimate, width * 0.9, color=f"C{j}",
                   label=name if i == 0 or len(opts) == 1 else None, yerr=err, capsize=3)
            ax.scatter([x] * len(g), g, s=8, color="k", zorder=3)
            top = max(iv.hi if iv.bounded else iv.estimate, max(g))   # above the whisker
            ax.annotate(f"{iv.estimate:.3f}", (x, top),
                        textcoords="offset points", xytext=(0, 4), ha="center", fontsize=7)
    if len(opts) == 1:            # one optimizer: the bars are named on the x axis
        xs = [(j - (len(names) - 1) / 2) * width for j in range(len(names))]
        ax.set_xticks(xs, names, rotation=15, fontsize=8)
        ax.set_xlabel(f"{optimizer_label(opts[0])}, delayed run")
    else:
        ax.set_xticks(range(len(opts)), [optimizer_label(o) for o in opts])
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi + 0.3 * (hi - lo))          # headroom for the legend
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, title="delayed run", title_fontsize=7, loc="upper right",
                      ncol=min(len(names), 3))
    ax.axhline(0, color="k", lw=0.8)
    ax.set_ylabel(GAP_LABEL)
    ax.grid(axis="y", alpha=0.3)


def _x_of(r: RunRecord, x: str) -> float:
    if x == "momentum":
        return r.momentum
    if x == "stages":
        return float(len(r.stage_taus or ()))
    sec, name = x.split(".")
    return float(r.config[sec][name])


def _lines(ax, claim: Claim, d: ClaimData) -> None:
    spec = claim.plot
    series: dict[str, list[tuple[float, float]]] = {}
    for arm in claim.arms:
        if arm.is_sync or arm.key == spec.reference:
            continue
        recs = {r.seed: r for r in d.records(arm.key)}
        for seed, g in d.gaps(arm.key).items():
            series.setdefault(arm.line, []).append((_x_of(recs[seed], spec.x), g))
    for k, (name, pts) in enumerate(series.items()):
        xs = sorted({p[0] for p in pts})
        ivs = [t_interval([g for x, g in pts if x == xv]) for xv in xs]
        mean = [iv.estimate for iv in ivs]
        lo = [iv.estimate - iv.lo if iv.bounded else 0.0 for iv in ivs]
        hi = [iv.hi - iv.estimate if iv.bounded else 0.0 for iv in ivs]
        ax.errorbar(xs, mean, yerr=[lo, hi], fmt="o-", color=f"C{k}", capsize=3, label=name)
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=10, color=f"C{k}", alpha=0.4)
    if spec.reference:
        g = list(d.gaps(spec.reference).values())
        if g:
            iv = t_interval(g)
            ax.axhline(iv.estimate, color="k", ls="--",
                       label=f"{claim.arm(spec.reference).label} (constant delay)")
            if iv.bounded:
                ax.axhspan(iv.lo, iv.hi, color="k", alpha=0.1,
                           label=f"its {iv.level:.0%} t interval")
    if spec.logx:
        ax.set_xscale("log")
    plain_ticks(ax.xaxis, [x for pts in series.values() for x, _ in pts])
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel(spec.xlabel)
    ax.set_ylabel(GAP_LABEL)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def plot_claim(claim: Claim, d: ClaimData, res: ClaimResult, out_dir: str | Path) -> Path | None:
    """Write ``<out_dir>/<claim id>.png``; None when the claim has no finished run."""
    if not d.run_names():
        return None
    plt = _plt()
    spec = claim.plot
    if spec.kind == "curves":
        rows = len(claim.optimizers()) if spec.by_optimizer else 1
        cols = len(spec.metrics)
        fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
        _curves(axes, claim, d)
    elif spec.kind == "ladder":
        fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.4))
        ladder_axes(axes, claim, d)
    else:
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        (_bars if spec.kind == "bars" else _lines)(ax, claim, d)
    quick = " (quick: not evidence)" if res.quick else ""
    fig.suptitle(f"Claim {claim.number} ({claim.figure}): {spec.title}\n"
                 f"{_BADGE[res.status]}{quick}, {len(d.seeds)} seed(s)", fontsize=10)
    fig.tight_layout()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{claim.id}.png"
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _series(ax, values: Mapping[int, Mapping[int, float]], color: str, mode: str,
            name: str) -> None:
    marker, ls = _STYLE[mode]
    pts = [(h, v) for h, by in values.items() for v in by.values() if v > 0]
    if not pts:
        return
    ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=10, color=color, alpha=0.35,
               marker=marker)
    hs = sorted({h for h, _ in pts})
    means = [float(np.mean([v for x, v in pts if x == h])) for h in hs]
    fit = fit_slope(values)
    text = f"{name} (slope {fit.interval.estimate:.2f})" if fit.slopes else name
    ax.plot(hs, means, marker=marker, ls=ls, color=color, label=text)


def _step_ticks(ax) -> None:
    """Plain step counts at the plotted horizons (and at the decades beyond them, where an
    extrapolation reaches), no minor labels: '400', not '4 x 10^2'."""
    lo, hi = ax.get_xlim()
    hs = sorted({float(x) for line in ax.get_lines() if line.get_marker() not in (None, "None", "")
                 for x in line.get_xdata()} |
                {float(x) for c in ax.collections for x, _ in c.get_offsets()})
    hs = [h for h in hs if lo <= h <= hi]
    if not hs:
        return
    decades = [10.0 ** k for k in range(math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1)
               if all(abs(math.log(10.0 ** k / h)) > math.log(1.5) for h in hs)]
    plain_ticks(ax.xaxis, hs + decades, fmt="{:,.0f}")


def ladder_axes(axes, claim: Claim, d: ClaimData) -> None:
    """Draw the ladder into two axes (gap, lag)."""
    ax_gap, ax_lag = axes
    for o in LADDER_OPTIMIZERS:
        color = _OPT_COLORS.get(o, "k")
        for mode in MODES:
            gaps, lags = ladder_values(d, o, mode)
            name = f"{optimizer_label(o)} {mode}"
            _series(ax_gap, gaps, color, mode, name)
            _series(ax_lag, lags, color, mode, name)
            if o == "muon" and mode == "2bw":
                fit = fit_slope(gaps)
                cr = crossing(fit, gaps, PAPER_GAP)
                if cr is not None and math.isfinite(cr.steps) and fit.horizons:
                    h0 = max(fit.horizons)
                    xs = np.geomspace(h0, max(cr.steps, h0 * 1.01), 50)
                    pts = [(h, v) for h, by in gaps.items() for s, v in by.items()
                           if s in fit.slopes]
                    x0 = float(np.mean([math.log(h) for h, _ in pts]))
                    y0 = float(np.mean([math.log(v) for _, v in pts]))
                    b = fit.interval.estimate
                    ax_gap.plot(xs, np.exp(y0 + b * (np.log(xs) - x0)), ":", color=color,
                                label=f"Muon 2bw EXTRAPOLATION to {PAPER_GAP:g} "
                                      f"(~{cr.steps:.2g} steps)")
    ax_gap.axhline(PAPER_GAP, color="k", lw=0.8, ls="-.", label=f"paper's gap {PAPER_GAP:g}")
    for ax, ylabel in ((ax_gap, "sync-async gap (nats/byte)"),
                       (ax_lag, "lag (synchronous steps behind)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training horizon (optimizer steps, own lr schedule)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
        _step_ticks(ax)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    from matplotlib.ticker import FuncFormatter

    def steps_label(v: float, _pos: object = None) -> str:
        """Plain step counts on the lag axis, minor ticks only at 2 and 5 x 10^k (legible)."""
        lead = v / 10 ** math.floor(math.log10(v)) if v > 0 else 0
        return f"{v:,.0f}" if round(lead, 6) in (1.0, 2.0, 5.0) else ""
    ax_lag.yaxis.set_major_formatter(FuncFormatter(steps_label))
    ax_lag.yaxis.set_minor_formatter(FuncFormatter(steps_label))
    ax_gap.set_title("gap vs horizon", fontsize=10)
    ax_lag.set_title("lag vs horizon", fontsize=10)


def plot_lr_sweep(choices: Mapping[str, LrChoice], out_dir: str | Path,
                  title: str = "") -> Path | None:
    """Write ``<out_dir>/lr_sweep.png``; None when no optimizer was swept."""
    swept = {o: c for o, c in choices.items() if c.exponents}
    if not swept:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for o, c in swept.items():
        color = _OPT_COLORS.get(o, "k")
        lrs = grid_lrs(c.base, c.exponents)
        pts = [(lr, v) for k, lr in zip(c.exponents, lrs)
               for v in c.table.get(k, {}).values() if math.isfinite(v)]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=10, color=color, alpha=0.4)
        means = [(lr, float(np.mean(list(c.table[k].values()))))
                 for k, lr in zip(c.exponents, lrs)
                 if c.table.get(k) and all(math.isfinite(v) for v in c.table[k].values())]
        ax.plot([m[0] for m in means], [m[1] for m in means], "o-", color=color,
                label=f"{optimizer_label(o)}: {c.lr:.3g} ({c.source})")
        best = [m for m in means if m[0] == c.lr]
        if best:
            ax.scatter([best[0][0]], [best[0][1]], s=120, facecolors="none",
                       edgecolors=color, linewidths=1.5)
    ax.set_xscale("log")
    ax.set_xlabel("peak learning rate")
    ax.set_ylabel("final validation loss, sync (nats/byte)")
    ax.set_title(title or "lr sweep (synchronous runs; ringed: the lr used)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, title="optimizer: chosen lr", title_fontsize=7)
    fig.tight_layout()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / LR_SWEEP_PNG
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
