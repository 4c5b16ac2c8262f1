"""The advice's figure: predicted loss against wall-clock time, one line per schedule.

The loss axis is the pilot's synchronous reference curve (its own units: nats per token of its
tokenizer), mapped onto the user's horizon by the fraction of the run: a synchronous schedule at
step ``s`` of ``S`` has the reference loss at ``s / S`` of its run, at time ``s step_time``. A
delayed schedule at step ``s`` is worth ``s (1 - f)`` synchronous steps (the effective-steps model
of :mod:`llm_validation.advice.time_to_target`), so its line is the same curve stretched by
``1 / (1 - f)`` in steps; its band comes from the lag fraction's interval, and a thin dotted
line of its colour is the far end of the model-uncertainty range (the transfer law not ruled out
with the largest lag, when that is beyond the band). The dotted gray line is the
target (the synchronous final loss). It is a projection: only the pilot was measured.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from llm_validation.advice.time_to_target import ratio_text
from llm_validation.records.figure_file import save_figure

__all__ = ["plot_advice", "plot_cell_scores", "COLORS", "ZOOM_FROM", "POINTS"]

COLORS = {"1f1b": "#F58518", "gpipe": "#4C78A8", "interleaved-1f1b": "#54A24B",
          "zb-h1": "#E45756", "2bw": "#B279A2", "2bw+ef": "#222222"}
#: The y axis starts at the reference loss at this share of the run (the first steps' fast drop
#: would flatten the end, where the schedules differ).
ZOOM_FROM = 0.1
#: Points per drawn curve (the reference curve is interpolated linearly between evaluations).
POINTS = 200


def _curve(steps: np.ndarray, vals: np.ndarray, S: float, step_time: float,
           f: float) -> tuple[np.ndarray, np.ndarray] | None:
    if not (f < 1 and math.isfinite(f)):
        return None
    total = S / (1 - f)                               # steps to the target
    s = np.linspace(0.0, total, POINTS)
    frac = np.clip(s * (1 - f) / S, 0.0, 1.0)         # effective share of the synchronous run
    y = np.interp(frac, steps / steps[-1], vals)
    return s * step_time / 3600.0, y


def plot_advice(result: dict[str, Any], path: str | Path, *, title: str) -> Path:
    """Draw the figure of an :func:`~llm_validation.advice.advise.advise` result to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = np.asarray(result["pilot"]["reference_curve"], dtype=np.float64)
    steps, vals = curve[:, 0], curve[:, 1]
    S = result["target_steps"]
    fig, ax = plt.subplots(figsize=(8, 5))
    ttt, table = result["time_to_target"], result["throughput"]
    for name in sorted(ttt, key=lambda k: ttt[k]["ratio"]):
        t = table[name]["steady_step_time_s"]
        d = result["delay_cost"].get(name)
        f = d["lag_fraction"] if d else {"estimate": 0.0}
        line = _curve(steps, vals, S, t, f["estimate"])
        r = ttt[name]
        label = f"{name}: {r['ratio']:.3g}x 1F1B"
        if d:
            label += f" [{r['ratio_lo']:.3g}, {r['ratio_hi']:.3g}]"
        if line is None:
            ax.plot([], [], color=COLORS.get(name), label=f"{name}: never (lag >= the run)")
            continue
        ax.plot(*line, color=COLORS.get(name), lw=2.2 if d else 1.4,
                ls="-" if d else "--", label=label)
        if d:
            lo, hi = (_curve(steps, vals, S, t, f[k]) for k in ("lo", "hi"))
            if lo is not None and hi is not None:
                x = np.linspace(0, max(lo[0][-1], hi[0][-1]), POINTS)
                ylo = np.interp(x, lo[0], lo[1], right=lo[1][-1])
                yhi = np.interp(x, hi[0], hi[1], right=hi[1][-1])
                ax.fill_between(x, np.minimum(ylo, yhi), np.maximum(ylo, yhi),
                                color=COLORS.get(name), alpha=0.15, lw=0)
            m = d.get("model_uncertainty")
            far = _curve(steps, vals, S, t, m["lag_fraction"]["hi"]) if m else None
            if far is not None and m["lag_fraction"]["hi"] > f["hi"]:
                worst = max(m["laws"], key=m["laws"].get)
                ax.plot(*far, color=COLORS.get(name), lw=1.0, ls=":",
                        label=f"{name}, laws' range end ({worst}): "
                              f"{ratio_text(m['time_ratio']['hi'])} 1F1B")
    ax.axhline(vals[-1], color="gray", ls=":", lw=1, label="target: synchronous final loss")
    ax.set_xlabel("wall-clock time (hours, simulated steady step times)")
    ax.set_ylabel("predicted validation loss (pilot's units: nats per token of its tokenizer)")
    top = float(np.interp(ZOOM_FROM, steps / steps[-1], vals))
    ax.set_ylim(vals[-1] - 0.05 * (top - vals[-1]), top)
    xmax = max(ttt[k].get("time_s_hi", ttt[k]["time_s"]) for k in ttt)
    ref = ttt["1f1b"]["time_s"] / ttt["1f1b"]["ratio"] if "1f1b" in ttt else 0.0
    xmax = max([xmax] + [d["model_uncertainty"]["time_ratio"]["hi"] * ref
                         for d in result["delay_cost"].values()
                         if "time_ratio" in d.get("model_uncertainty", {})])
    xmax = min(xmax, 3 * max(ttt[k]["time_s"] for k in ttt)) / 3600.0
    if math.isfinite(xmax) and xmax > 0:
        ax.set_xlim(0, 1.05 * xmax)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right", title="time to target (95% interval)",
              title_fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=130)


def plot_cell_scores(cells: dict[str, Any], path: str | Path, *, title: str) -> Path:
    """The held-out cells' scores (:func:`~llm_validation.advice.cell_choice.cell_summary`) as a
    figure: per scored kind (one panel each, gap share), every law's mean absolute log error on
    the held-out pairs it predicted (bars; the choice compares the laws on the pairs all of them
    predicted, so a bar can differ a little from the error the choice read; the chosen law
    filled dark, a law that predicted too few pairs to be compared hatched, one that predicted
    none marked "not fitted"), the seed
    reference's as a dashed line (the seeds' own scatter: no law fitted elsewhere knows more),
    and the factor-2 tolerance as a dotted line."""
    import matplotlib.pyplot as plt
    from llm_validation.advice.cell_choice import KINDS
    from llm_validation.advice.loo import FACTOR
    from llm_validation.advice.transfer_choice import SEED_REFERENCE
    share, choice = cells["share"], cells["choice"] or {}
    kinds = [k for k in KINDS if "skipped" not in share[k]]
    if not kinds:
        raise ValueError("plot_cell_scores: no kind of held-out cell was scored")
    laws = share["laws"]
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.2 * len(kinds), 4.2), sharey=True,
                             squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        block = share[kind]
        errs = [block[law]["mean_abs_log_error"] for law in laws]
        x = np.arange(len(laws))
        for i, law in enumerate(laws):
            if errs[i] is None:     # no held-out pair predicted: say so where the bar would be
                ax.text(i, 0.02, "not fitted", rotation=90, ha="center", va="bottom",
                        fontsize=6, color="#777777")
                continue
            chosen = law == choice.get("law")
            eligible = law in choice.get("eligible", laws)
            ax.bar(i, errs[i], color="#333333" if chosen else "#9ecae1",
                   hatch="" if eligible else "//", edgecolor="#555555")
        ref = block[SEED_REFERENCE]["mean_abs_log_error"]
        if ref is not None:
            ax.axhline(ref, color="#d62728", linestyle="--", label="seed reference (own cell's "
                       "other seeds)")
        ax.axhline(math.log(FACTOR), color="#777777", linestyle=":",
                   label=f"a factor {FACTOR:g} (log {FACTOR:g})")
        ax.set_xticks(x)
        ax.set_xticklabels(laws, rotation=70, ha="right", fontsize=7)
        ax.set_title(f"held out: {kind} ({len(block['folds'])} folds, "
                     f"{block[SEED_REFERENCE]['pairs']} pairs)", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("mean |log(predicted / measured gap share)|")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{title}: chosen {choice.get('law', 'none')} (dark); hatched: predicted "
                 f"too few pairs to be compared", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)
