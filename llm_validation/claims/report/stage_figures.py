"""Figures of the ledger's stages: the horizon ladder (gap and lag vs horizon) and the lr sweep.

- :func:`ladder_axes`: two panels on log-log axes, the gap (nats/byte) and the lag
  (synchronous steps behind) against the horizon (steps), per optimizer and mode: per-seed
  points, the mean per horizon, and the fitted power law (mean per-seed slope through the
  centre of the points). Muon 2BW's fit is continued (dotted, labelled "extrapolation") to the
  paper's 0.01 where it shrinks. Non-positive values have no logarithm and are not drawn.
- :func:`draw_lr_sweep`: final validation loss against the peak lr (log x) per optimizer,
  per-seed points and their mean, the chosen lr ringed: ``figures/lr_sweep.png``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

import numpy as np

from llm_validation.claims.catalogue.horizon import MODES, ladder_values
from llm_validation.claims.record.claim import Claim
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.ladder import PAPER_GAP, crossing, fit_slope
from llm_validation.claims.plan.lr_sweep import LrChoice, grid_lrs
from llm_validation.claims.catalogue.vocabulary import LADDER_OPTIMIZERS
from llm_validation.config import optimizer_label
from llm_validation.validation.plots import DPI, plain_ticks

__all__ = ["ladder_axes", "draw_lr_sweep", "LR_SWEEP_PNG"]

LR_SWEEP_PNG = "lr_sweep.png"
_COLORS = {"adamw": "tab:orange", "muon": "tab:purple", "normuon": "tab:blue",
           "soap": "tab:green"}
_STYLE = {"2bw": ("o", "-"), "2bw+ef": ("s", "--")}


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
        color = _COLORS.get(o, "k")
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


def draw_lr_sweep(choices: Mapping[str, LrChoice], out_dir: str | Path,
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
        color = _COLORS.get(o, "k")
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
