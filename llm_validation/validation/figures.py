"""Validation figures (PNG): what the verdicts are made of, drawn from the same runs and fits.

:func:`plot_validation(runs, out_dir)` writes every plot whose data exist and returns
``{file name: path}``:

- ``loss_curves.png``: validation loss over training, sync vs 2BW vs 2BW+EF per optimizer at
  its base condition: mean over seeds with a 95% t band (the real-pipeline run dashed, over
  its emulated twin of the same seed);
- ``gap_vs_lr.png``: per-seed gaps and their means vs lr (log-log) with the fitted power law;
- ``gap_vs_tau.png``: gaps vs tau with the fitted PL law tau (tau + 2(1-alpha)/alpha + 1/2);
- ``gap_vs_momentum.png`` and ``gap_vs_batch.png``: gaps vs momentum / batch size;
- ``ef_vs_lam.png``: share of the gap EF removes vs lam with the verdict's Fieller interval,
  with the mean cosine of consecutive updates (the alignment EF relies on) on a second axis;
- ``cos_delayed_fresh.png``: cos(delayed update, fresh update) over training per optimizer;
- ``smoothness.png``: the distribution of the smoothness estimates in the optimizer's norm
  (the steps the verdict reads; the legend shows its per-seed median and p95, seed-averaged).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from llm_validation.config import optimizer_label
from llm_validation.validation.contrast import share_removed_interval
from llm_validation.validation.groups import (SKIP_FRACTION, base_conditions, ef_rows,
                                              gaps_by_seed, select, series_stat)
from llm_validation.validation.inference import fit_pl_tau_shape, fit_power_law, t_interval
from llm_validation.validation.runs import RunRecord, sync_partner
from llm_validation.validation.trends import best_family, family_points

__all__ = ["plot_validation", "plain_ticks", "DPI"]

#: Resolution of every PNG (readable on screen and in a README without being large).
DPI = 110
_COLORS = {"sync": "tab:blue", "delay": "tab:red", "ef": "tab:green"}
_OPT_COLORS = {"adamw": "tab:orange", "muon": "tab:purple", "sgd": "tab:gray"}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plain_ticks(axis, values: Sequence[float] | None = None, fmt: str = "{:g}") -> None:
    """Plain tick labels ('16', '0.002', '3'; ``fmt`` formats each), never '1.6 x 10^1'. With
    ``values``, the major ticks sit at exactly those values (no minor labels); without, the axis
    keeps its locator and its minor ticks are labelled too (a log axis spanning less than a
    decade)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
    label = FuncFormatter(lambda v, _pos: fmt.format(v))
    if values:
        axis.set_major_locator(FixedLocator(sorted(set(float(v) for v in values))))
        axis.set_minor_formatter(NullFormatter())
    else:
        axis.set_minor_formatter(label)
    axis.set_major_formatter(label)


def _band(runs: Sequence[RunRecord], key: str, how: str = "t"
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Steps, mean, lo, hi of ``key`` over runs at the steps all of them logged; the band is
    the 95% t interval of the mean (``how="t"``) or the range over runs (``"range"``)."""
    series = [dict(zip(*map(np.ndarray.tolist, r.series(key)))) for r in runs]
    if not series or not all(series):
        return None
    common = sorted(set.intersection(*(set(s) for s in series)))
    if not common:
        return None
    return _stack(common, [[s[st] for s in series] for st in common], how)


def _stack(steps: Sequence[int], values: Sequence[Sequence[float]], how: str
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    mean, lo, hi = [], [], []
    for v in values:
        if how == "range":
            mean.append(float(np.mean(v)))
            lo.append(float(np.min(v)))
            hi.append(float(np.max(v)))
            continue
        iv = t_interval(v)
        mean.append(iv.estimate)
        lo.append(iv.lo if iv.bounded else iv.estimate)
        hi.append(iv.hi if iv.bounded else iv.estimate)
    return np.array(steps), np.array(mean), np.array(lo), np.array(hi)


def _paired_gap_band(runs: Sequence[RunRecord], delayed: Sequence[RunRecord]
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """val_loss(delayed) - val_loss(sync, same seed) at every common evaluation step."""
    per_seed = []
    for r in delayed:
        s = sync_partner(r, runs)
        if s is None:
            continue
        a = dict(zip(*map(np.ndarray.tolist, r.series("val_loss"))))
        b = dict(zip(*map(np.ndarray.tolist, s.series("val_loss"))))
        per_seed.append({k: a[k] - b[k] for k in a.keys() & b.keys()})
    if not per_seed:
        return None
    common = sorted(set.intersection(*(set(d) for d in per_seed)))
    if not common:
        return None
    return _stack(common, [[d[st] for d in per_seed] for st in common], "t")


def _save(fig, out: Path, name: str, made: dict[str, Path]) -> None:
    path = out / name
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    _plt().close(fig)
    made[name] = path


def _loss_curves(runs, base, out, made, metric):
    plt = _plt()
    opts = list(base)
    fig, axes = plt.subplots(2, len(opts), figsize=(5.4 * len(opts), 7.4), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2]})
    for ax, gax, opt in zip(axes[0], axes[1], opts):
        cond = base[opt]
        finals = []
        for mode, label in (("sync", "sync"), ("delay", "2BW (tau=1)"), ("ef", "2BW + EF")):
            group = select(runs, condition=cond, mode=mode, tau=None if mode == "sync" else 1,
                           lam=1.0 if mode == "ef" else None)
            b = _band(group, "val_loss") if group else None
            if b is None:
                continue
            st, m, lo, hi = b
            ax.plot(st, m, color=_COLORS[mode], label=f"{label} (n={len(group)})")
            ax.fill_between(st, lo, hi, color=_COLORS[mode], alpha=0.2)
            finals.append(m[-1])
        for p in select(runs, condition=cond, pipeline="2bw"):   # beside its emulated twin
            for e in select(runs, condition=cond, mode="delay", tau=1):
                if e.seed == p.seed:
                    ax.plot(*e.series("val_loss"), color=_COLORS["delay"], lw=2.5, alpha=0.45,
                            label=f"2BW emulated (seed {e.seed} alone)")
            st, v = p.series("val_loss")
            ax.plot(st, v, "k--", lw=1, label=f"2BW real pipeline (seed {p.seed})")
        ax.set_title(f"{optimizer_label(opt)}: validation loss (mean, 95% band)")
        ax.set_xlabel("step")
        ax.set_ylabel("validation loss")
        if finals:   # zoom on the part of training where the curves separate
            top = max(finals) + 3 * (max(finals) - min(finals) + 0.02)
            ax.set_ylim(min(finals) - 0.1 * (top - min(finals)) - 0.02, top)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        for mode, label in (("delay", "2BW - sync"), ("ef", "2BW+EF - sync")):
            group = select(runs, condition=cond, mode=mode, tau=1,
                           lam=1.0 if mode == "ef" else None)
            b = _paired_gap_band(runs, group) if group else None
            if b is None:
                continue
            st, m, lo, hi = b
            gax.plot(st, m, "o-", ms=3, color=_COLORS[mode], label=label)
            gax.fill_between(st, lo, hi, color=_COLORS[mode], alpha=0.2)
        gax.axhline(0.0, color=_COLORS["sync"], lw=1)
        gax.set_title("gap to sync, paired by seed (mean, 95% CI)", fontsize=10)
        gax.set_xlabel("step")
        gax.set_ylabel("validation loss difference")
        gax.grid(alpha=0.3)
        gax.legend(fontsize=8)
    _save(fig, out, "loss_curves.png", made)


def _gap_plot(runs, out, made, metric, axis: str, name: str, xlabel: str,
              fit: Callable | None = None, logx: bool = False) -> None:
    plt = _plt()
    fams = {opt: best_family(runs, opt, axis, metric)
            for opt in sorted({r.optimizer for r in runs})}
    fams = {o: f for o, f in fams.items() if f}
    if not fams:
        return
    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    for opt, fam in fams.items():
        xs, ys, _, _ = family_points(runs, fam, metric)
        c = _OPT_COLORS.get(opt, "k")
        ax.scatter(xs, ys, s=14, alpha=0.5, color=c)
        levels = sorted(set(xs))
        ivs = [t_interval([y for x, y in zip(xs, ys) if x == v]) for v in levels]
        m = np.array([iv.estimate for iv in ivs])
        err = np.array([[iv.estimate - iv.lo, iv.hi - iv.estimate] if iv.bounded else [0, 0]
                        for iv in ivs]).T
        ax.errorbar(levels, m, yerr=err, fmt="o-", color=c, capsize=3,
                    label=f"{optimizer_label(opt)} mean gap (95% CI)")
        if fit is not None and len(levels) >= 2:
            fit(ax, np.array(xs), np.array(ys), c, opt, fam)
    if logx:
        ax.set_xscale("log")
    ax.axhline(0.0, color="k", lw=0.6)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("gap = val loss(delayed) - val loss(sync)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, out, name, made)


def _fit_power(ax, xs, ys, color, opt, fam):
    if len(set(xs.tolist())) < 3:
        return
    f = fit_power_law(xs, ys)
    grid = np.geomspace(xs.min(), xs.max(), 50)
    ax.plot(grid, f.predict(grid), ":", color=color,
            label=f"fit gap ~ lr^{f.exponent.estimate:.2f} [{f.exponent.lo:.2f}, "
                  f"{f.exponent.hi:.2f}]")


def _tau_plot(runs, base, out, made, metric):
    plt = _plt()
    drawn = False
    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    for opt in base:
        conds = {r.condition for r in select(runs, optimizer=opt, mode="delay")}
        best = max(conds, key=lambda c: len({r.tau for r in select(runs, condition=c,
                                                                     mode="delay")}))
        taus = sorted({r.tau for r in select(runs, condition=best, mode="delay")})
        if len(taus) < 2:
            continue
        xs, ys = [], []
        for t in taus:
            g = gaps_by_seed(runs, best, tau=t, metric=metric)
            xs += [t] * len(g)
            ys += list(g.values())
        if len(set(xs)) < 2:
            continue
        c = _OPT_COLORS.get(opt, "k")
        alpha = select(runs, condition=best)[0].alpha
        fit = fit_pl_tau_shape(xs, ys, alpha)
        ax.scatter(xs, ys, color=c, s=16, label=f"{optimizer_label(opt)} per-seed gap")
        grid = np.linspace(0, max(xs), 50)
        ax.plot(grid, fit.predict(grid), "--", color=c,
                label=f"PL law A tau(tau+2(1-a)/a+1/2), a={alpha:g}")
        drawn = True
    if not drawn:
        plt.close(fig)
        return
    ax.set_xlabel("delay tau (steps)")
    ax.set_ylabel("gap")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, out, "gap_vs_tau.png", made)


def _ef_plot(runs, out, made, metric):
    """Share of the gap EF removes vs lam per optimizer with the verdict's interval (Fieller's,
    :func:`~llm_validation.validation.contrast.share_removed_interval`; an unbounded one is drawn
    as a hollow marker without bar), and the mean cosine of consecutive base updates of the EF
    runs on a second axis."""
    plt = _plt()
    pts: dict[str, list[tuple[float, float, float, float, float]]] = {}
    for cond in sorted({r.condition for r in runs}):
        for lam in sorted({r.lam for r in select(runs, condition=cond, mode="ef")}):
            rows = ef_rows(runs, cond, lam, metric=metric)
            if not rows:
                continue
            if np.mean([a for a, _, _ in rows.values()]) <= 0:
                continue
            iv = share_removed_interval({s: a for s, (a, _, _) in rows.items()},
                                        {s: b for s, (_, b, _) in rows.items()})
            cos = [e.series("cos_consecutive_update")[1].mean() for _, _, e in rows.values()
                   if e.series("cos_consecutive_update")[1].size]
            opt = next(iter(rows.values()))[2].optimizer
            lo = iv.lo if iv.bounded else np.nan        # unbounded: no bar (hollow marker)
            hi = iv.hi if iv.bounded else np.nan
            pts.setdefault(opt, []).append((lam, iv.estimate, lo, hi,
                                            float(np.mean(cos)) if cos else np.nan))
    if not pts:
        return
    fig, ax = plt.subplots(figsize=(6.4, 5.0))
    ax2 = ax.twinx()
    lams = sorted({p[0] for v in pts.values() for p in v})
    width = (lams[-1] - lams[0]) or 1.0
    offsets = {opt: (i - (len(pts) - 1) / 2) * 0.02 * width for i, opt in enumerate(pts)}
    for opt, p in pts.items():
        p.sort()
        lam, share, lo, hi, cos = map(np.array, zip(*p))
        x = lam + offsets[opt]
        c = _OPT_COLORS.get(opt, "k")
        ax.errorbar(x, share, yerr=[np.nan_to_num(share - lo), np.nan_to_num(hi - share)],
                    fmt="o-", color=c, capsize=4, label=f"{optimizer_label(opt)}: share of gap "
                    "removed (95% Fieller CI, as the verdict)")
        ax.plot(x[np.isnan(lo)], share[np.isnan(lo)], "o", ms=11, mfc="none", color=c,
                label=f"{optimizer_label(opt)}: interval unbounded" if np.isnan(lo).any() else None)
        ax2.plot(x, cos, "s:", color=c, alpha=0.6, mfc="none",
                 label=f"{optimizer_label(opt)}: cos(consecutive updates)")
    if len(lams) == 1:
        ax.set_xlim(lams[0] - 0.25, lams[0] + 0.25)
        ax.set_xticks(lams)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_ylim(min(-0.05, ax.get_ylim()[0]), max(1.0, ax.get_ylim()[1]))
    ax2.set_ylim(0.0, 1.0)
    ax.set_xlabel("EF coefficient lam")
    ax.set_ylabel("share of the gap EF removes")
    ax2.set_ylabel("mean cos of consecutive updates (alignment)")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14),
              ncol=2)
    ax.grid(alpha=0.3)
    ax.set_title("Error Feedback: gain vs lam, with the update alignment it relies on",
                 fontsize=10)
    _save(fig, out, "ef_vs_lam.png", made)


def _series_plot(runs, base, out, made, key, name, ylabel, title):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    drawn, lows = False, []
    for opt, cond in base.items():
        for mode, style in (("delay", "-"), ("ef", "--")):
            group = select(runs, condition=cond, mode=mode, tau=1)
            b = _band(group, key, how="range") if group else None
            if b is None:
                continue
            st, m, lo, hi = b
            c = _OPT_COLORS.get(opt, "k")
            lows.append(float(lo.min()))
            ax.plot(st, m, style, color=c,
                    label=f"{optimizer_label(opt)} {'2BW' if mode == 'delay' else '2BW+EF'}")
            ax.fill_between(st, lo, hi, color=c, alpha=0.15)
            drawn = True
    if not drawn:
        plt.close(fig)
        return
    ax.set_ylim(max(-1.0, min(lows) - 0.05), 1.02)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title + "\n(mean over seeds; shaded: range over seeds)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, out, name, made)


def _p95(v: np.ndarray) -> float:
    return float(np.quantile(v, 0.95))


def _smoothness_plot(runs, base, out, made):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    drawn = False
    for opt, cond in base.items():   # the steps the verdict reads (warm-up excluded)
        dl = select(runs, condition=cond, mode="delay", tau=1)
        kept = [r.series("smoothness_est") for r in dl]
        vals = np.concatenate([v[st >= SKIP_FRACTION * r.steps] for r, (st, v) in zip(dl, kept)]
                              or [np.array([])])
        vals = vals[vals > 0]
        med = [m for r in dl if (m := series_stat(r, "smoothness_est", np.median)) is not None]
        p95 = [q for r in dl if (q := series_stat(r, "smoothness_est", _p95)) is not None]
        if vals.size < 3 or not med or not p95:
            continue
        bins = np.geomspace(vals.min(), vals.max() * 1.0001, 30)
        ax.hist(vals, bins=bins, alpha=0.5, color=_OPT_COLORS.get(opt, "k"),
                label=f"{optimizer_label(opt)} (median {np.mean(med):.3g}, p95 "
                      f"{np.mean(p95):.3g}: mean over {len(p95)} seeds, as the verdict)")
        drawn = True
    if not drawn:
        plt.close(fig)
        return
    ax.set_xscale("log")
    ax.set_xlabel("local smoothness estimate ||g_x - g_y||_* / ||x - y|| (optimizer's norm)")
    ax.set_ylabel(f"count (steps x seeds; first {SKIP_FRACTION:.0%} of steps excluded)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    _save(fig, out, "smoothness.png", made)


def plot_validation(runs: Sequence[RunRecord], out_dir: str | Path,
               metric: str = "final") -> dict[str, Path]:
    """Write the figures whose data exist into ``out_dir``; returns {file name: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    made: dict[str, Path] = {}
    base = base_conditions(runs, metric)
    if base:
        _loss_curves(runs, base, out, made, metric)
    _gap_plot(runs, out, made, metric, "lr", "gap_vs_lr.png", "peak learning rate",
              fit=_fit_power, logx=True)
    _tau_plot(runs, base, out, made, metric)
    _gap_plot(runs, out, made, metric, "momentum", "gap_vs_momentum.png",
              "momentum (Muon/SGD momentum, AdamW beta1)")
    _gap_plot(runs, out, made, metric, "batch_size", "gap_vs_batch.png",
              "batch size (sequences)", logx=True)
    _ef_plot(runs, out, made, metric)
    _series_plot(runs, base, out, made, "cos_delayed_fresh", "cos_delayed_fresh.png",
                 "cos(applied update, fresh-gradient update)",
                 "How far the delayed update is from the fresh one")
    _smoothness_plot(runs, base, out, made)
    return made
