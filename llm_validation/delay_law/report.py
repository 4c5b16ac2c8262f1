"""The delay-law ledger for a reader: ``ledger.md`` and its figures (the lag against the
step count with one colour per size; the lag against the model size at the shared step count
and against the lr at the lr cells' size, every seed visible)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from llm_validation.delay_law import design
from llm_validation.delay_law.measure import CellCosts
from llm_validation.records.figure_file import save_figure
from llm_validation.validation.inference import t_interval

__all__ = ["exponent_at_fixed_steps", "plot_lag_vs_steps", "plot_lag_vs_size",
           "plot_lag_vs_lr", "plot_lr_profiles", "render"]

_ARMS = (("adamw/2bw", "AdamW 2BW"), ("muon/2bw", "Muon 2BW"))
#: Major ticks per decade on the log axes: a lag spans less than a decade, so 1-2-5 alone
#: would label only one or two values.
_LOG_TICKS = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
#: Said beside a predicted lag of 100% or more: a power law has left the range where a lag
#: (a share of the run) is defined.
_BEYOND_RUN = (" (100% or more: on this law 2BW does not reach the synchronous final loss "
               "within the run)")


def exponent_at_fixed_steps(values: Mapping[int, float]) -> dict[str, float]:
    """N's exponent at the shared step count: the mean per-seed slope of log lag on log N with
    its 95% t interval (``values``: seed -> slope, the ``N-<optimizer>`` statement's values)."""
    iv = t_interval(list(values.values()))
    return {"estimate": iv.estimate, "lo": iv.lo, "hi": iv.hi, "n": iv.n}


def _axes(title_left: str, title_right: str):
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, t in zip(axes, (title_left, title_right)):
        ax.set_title(t)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        for axis, fmt in ((ax.xaxis, lambda v, _: f"{v:,.0f}"),
                          (ax.yaxis, lambda v, _: f"{v:.0%}" if v >= 0.01 else f"{v:.1%}")):
            axis.set_major_locator(LogLocator(base=10, subs=_LOG_TICKS))
            axis.set_major_formatter(FuncFormatter(fmt))
            axis.set_minor_formatter(NullFormatter())
    axes[0].set_ylabel("compute-equivalent lag (% of the run)")
    return fig, axes


def plot_lag_vs_steps(costs: Mapping[str, CellCosts], path: str | Path) -> Path:
    """The lag of each 2BW arm against the step count, one colour per size (cells at the tuned
    lr; small points: seeds, large: the cell's geometric mean); held-out cells hollow."""
    import matplotlib.pyplot as plt
    fig, axes = _axes(*(f"{label}: lag vs steps" for _, label in _ARMS))
    colours = dict(zip(design.SIZES, plt.cm.viridis(np.linspace(0, 0.9, len(design.SIZES)))))
    for ax, (arm, _) in zip(axes, _ARMS):
        for c in costs.values():
            if c.cell.lr_multiple != 1.0:
                continue
            v = [x for x in c.lag_fraction(arm).values() if x > 0]
            if not v:
                continue
            col = colours[c.cell.size]
            ax.scatter([c.cell.steps] * len(v), v, s=10, color=col, alpha=0.5)
            ax.scatter([c.cell.steps], [float(np.exp(np.mean(np.log(v))))], s=60,
                       facecolors="none" if c.cell.held_out else col, edgecolors=col)
        ax.set_xlabel("optimizer steps (batch = 20 N / steps)")
        ticks = sorted({c.cell.steps for c in costs.values()})
        ax.set_xticks(ticks, [f"{t:,}" for t in ticks], rotation=45)
        ax.minorticks_off()
    handles = [plt.Line2D([], [], marker="o", ls="", color=col, label=s)
               for s, col in colours.items()]
    handles.append(plt.Line2D([], [], marker="o", ls="", mfc="none", color="k",
                              label="held out"))
    axes[1].legend(handles=handles, title="model size", fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def _seed_lines(ax: Any, cells: Sequence[CellCosts], arm: str,
                x_of: Callable[[CellCosts], float]) -> None:
    """One line per seed through ``cells`` (in their order): ``x_of(cell)`` against the seed's
    positive lag of ``arm`` (a log axis cannot show the others)."""
    for s in sorted({s for c in cells for s in c.lag_fraction(arm)}):
        pts = [(x_of(c), c.lag_fraction(arm)[s]) for c in cells
               if c.lag_fraction(arm).get(s, 0) > 0]
        if pts:
            ax.plot(*zip(*pts), marker="o", ms=4, lw=1, alpha=0.7, label=f"seed {s}")


def plot_lag_vs_size(costs: Mapping[str, CellCosts], path: str | Path) -> Path:
    """The lag of each 2BW arm against N at the shared step count, one line per seed."""
    import matplotlib.pyplot as plt
    fig, axes = _axes(*(f"{label}: lag vs N at {design.SHARED_STEPS} steps"
                        for _, label in _ARMS))
    shared = sorted((c for c in costs.values() if c.cell.role == "shared"),
                    key=lambda c: c.cell.n_params)
    sizes = sorted({c.cell.n_params for c in shared})
    for ax, (arm, _) in zip(axes, _ARMS):
        _seed_lines(ax, shared, arm, lambda c: c.cell.n_params)
        # ticks at the measured sizes only: log-spaced ticks crowd between 1e5 and 3e5
        ax.set_xticks(sizes, [f"{n:,}" for n in sizes], rotation=30)
        ax.minorticks_off()
        ax.set_xlabel(f"parameters N (all counted)\nthe batch, 20 N / {design.SHARED_STEPS} "
                      "tokens, grows with N")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def plot_lag_vs_lr(costs: Mapping[str, CellCosts], path: str | Path) -> Path | None:
    """The lag of each 2BW arm against the peak lr as a multiple of the size's tuned lr, at the
    size and step count of the design's ``lr`` cells (the tuned lr is that size's shared
    cell), one line per seed; None when the ledger has no ``lr`` cell."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
    lr_cells = [c for c in costs.values() if c.cell.role == "lr"]
    if not lr_cells:
        return None
    size, steps = lr_cells[0].cell.size, lr_cells[0].cell.steps
    row = sorted((c for c in costs.values() if c.cell.size == size and c.cell.steps == steps
                  and (c.cell.role == "lr" or c.cell.lr_multiple == 1.0)),
                 key=lambda c: c.cell.lr_multiple)
    fig, axes = _axes(*(f"{label}: lag vs lr ({size}, {steps} steps)" for _, label in _ARMS))
    multiples = [c.cell.lr_multiple for c in row]
    for ax, (arm, _) in zip(axes, _ARMS):
        _seed_lines(ax, row, arm, lambda c: c.cell.lr_multiple)
        ax.xaxis.set_major_locator(FixedLocator(multiples))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("peak lr / the size's tuned lr (batch and steps fixed)")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def plot_lr_profiles(lr_doc: Mapping[str, Any], path: str | Path) -> Path:
    """Each size's synchronous lr profile (closing loss on the fixed validation set against
    the peak lr; small points: the profile seeds, line: their mean), one panel per optimizer,
    one colour per size; the chosen lr ringed (``lr_doc``: the ``lr_choice.json`` document)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    from llm_validation.config import preset
    from llm_validation.delay_law.runs import LR_CENTRES
    opts = sorted({o for by in lr_doc["lrs"].values() for o in by})
    fig, axes = plt.subplots(1, len(opts), figsize=(5 * len(opts), 4), squeeze=False)
    sizes = [s for s in design.SIZES if s in lr_doc["lrs"]]
    colours = dict(zip(sizes, plt.cm.viridis(np.linspace(0, 0.9, len(sizes)))))
    params = {s: preset(s).n_params() for s in sizes}
    for ax, opt in zip(axes[0], opts):
        for size in sizes:
            entry = lr_doc["lrs"][size].get(opt)
            if entry is None:
                continue
            centre = LR_CENTRES[size][opt]
            pts = sorted((float(m) * centre, v) for m, v in entry["profile"].items())
            col = colours[size]
            for lr, v in pts:
                ax.scatter([lr] * len(v), v, s=10, color=col, alpha=0.5)
            ax.plot([lr for lr, _ in pts], [float(np.mean(v)) for _, v in pts], color=col,
                    label=f"{size} (N={params[size]:,})")
            chosen = [float(np.mean(v)) for lr, v in pts if np.isclose(lr, entry["lr"])]
            ax.scatter([entry["lr"]], chosen, s=120, facecolors="none", edgecolors=col,
                       linewidths=1.5)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{opt}: synchronous lr profile")
        ax.set_xlabel("peak learning rate")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("closing validation loss (nats/byte)")
    axes[0][-1].legend(title="size (ringed: chosen lr)", fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def _fmt(x: Any) -> str:
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def render(doc: Mapping[str, Any], figures: Mapping[str, str]) -> str:
    """``ledger.md`` from :func:`~llm_validation.delay_law.ledger.assemble`'s document."""
    lines = ["# The delay law: what sets the cost of a one-step delay", "",
             "Verdicts under one gatekeeping family (alpha 0.05); the unit is the "
             "compute-equivalent lag (docs/delay_law.md). The sign-flip p-value is shown beside "
             "the t p-value with its floor at this seed count; it never decides.", "",
             "| statement | reading | status | mean | seeds | p (t) | p adjusted | p (sign-flip) "
             "| floor | why |", "|---|---|---|---|---|---|---|---|---|---|"]
    for sid, s in doc["statements"].items():
        lines.append(f"| {sid} | {s['reading']} | **{s['status']}** | {_fmt(s['mean'])} | "
                     f"{s['n']} | {_fmt(s['p_t'])} | {_fmt(s['p_adjusted'])} | "
                     f"{_fmt(s['p_sign_flip'])} | {_fmt(s['p_floor'])} | {s['reason']} |")
    if "exponents" in doc:
        lines += ["", "## N's exponent at the shared step count", ""]
        for arm, e in doc["exponents"].items():
            lines.append(f"- {arm}: {e['estimate']:+.3f} [{e['lo']:+.3f}, {e['hi']:+.3f}] "
                         f"(95% t over {e['n']} seeds)" if e["n"] >= 2 else
                         f"- {arm}: not measured ({e['n']} seeds have a value at every size of "
                         "the shared step count; the interval needs 2)")
    lines += ["", "## Laws, scored on the held-out cells", ""]
    if "predictions_check" in doc:
        lines += [_predictions_line(doc["predictions_check"]), ""]
    for key, entry in doc["laws"].items():
        lines += [f"### {key} (chosen: {entry['chosen']})", "",
                  "| law | held-out cells within x2 | mean log error |", "|---|---|---|"]
        for s in entry["scores"]:
            lines.append(f"| {s['law']} | {s['hits']} / {len(s['errors'])} | {_score_error(s)} |")
        lines.append("")
    paper = doc.get("paper", {})
    lines += ["## The paper's setting (an extrapolation)", ""]
    for arm, entry in paper.items():
        if not isinstance(entry, dict):
            continue
        lines.append(f"- {entry['statement']}: " + "; ".join(
            f"{m}: {v['reading']} (threshold {v['threshold']:.2%}; " + ", ".join(
                f"{k} {p['steps']} steps: {p['lag']:.2%} [{p['lo']:.2%}, {p['hi']:.2%}]"
                + (_BEYOND_RUN if p["lag"] >= 1 else "")
                for k, p in v["predictions"].items()) + ")"
            for m, v in entry.get("models", {}).items()) if "models" in entry
            else f"- {entry['statement']}: {entry['reading']} ({entry.get('why', '')})")
    if paper.get("ef"):
        lines.append(f"- EF: {paper['ef']}.")
    if doc.get("paper_gap_share"):
        lines += [""] + _gap_share_lines(doc["paper_gap_share"])
    if doc.get("noise_scale"):
        lines += [""] + _noise_lines(doc["noise_scale"])
    lines += ["", "## Figures", ""] + [f"![{k}]({v})" for k, v in figures.items()]
    if doc.get("missing"):
        lines += ["", "## Runs left out", "", "Per cell, the runs without a usable closing "
                  "loss, by reason (every run's name is in ledger.json):", ""]
        lines += [f"- {c}: {_missing_line(m)}" for c, m in doc["missing"].items()]
    return "\n".join(lines) + "\n"


def _score_error(score: Mapping[str, Any]) -> str:
    """A law's mean held-out log error, or why it has none (a held-out cell without a value
    or without a prediction)."""
    err = score["mean_log_error"]
    if isinstance(err, float) and np.isfinite(err):
        return _fmt(err)
    errors = score.get("errors", {})
    if not errors:
        return "not scored: no held-out cell has a value yet"
    scored = sum(1 for e in errors.values() if isinstance(e, float) and np.isfinite(e))
    return f"not scored ({scored} of {len(errors)} held-out cells have a value and a prediction)"


def _predictions_line(check: Mapping[str, Any]) -> str:
    """Whether the held-out scores are the committed predictions'
    (:func:`~llm_validation.delay_law.ledger.check_predictions`)."""
    if not check["committed"]:
        return ("No committed predictions.json: the laws are fitted at assembly, so these "
                "held-out scores are exploratory.")
    missing = (f" They were written with {check['train_missing']} training runs missing."
               if check["train_missing"] else "")
    early = check.get("started_before")
    if check.get("written_at"):
        missing += (f" Written {check['written_at']}; " + (
            "no held-out run started before that." if not early else
            f"{len(early)} held-out run(s) started before that ({', '.join(early[:3])}"
            f"{', ...' if len(early) > 3 else ''}): their scores are not predictions."))
    if check["differ"]:
        return (f"The laws refitted on the training runs differ from the committed "
                f"predictions.json for {len(check['differ'])} law(s) "
                f"({', '.join(check['differ'][:4])}{', ...' if len(check['differ']) > 4 else ''}): "
                "the training runs changed after the predictions were committed, so these "
                f"scores are the refit's, not the protocol's.{missing}")
    return (f"The laws refitted on the training runs reproduce all {check['compared']} "
            f"committed predictions (largest relative difference {check['max_rel_diff']:.1g}): "
            f"these are the protocol's predictions, scored.{missing}")


def _missing_line(runs: list[str]) -> str:
    """``name: reason`` entries grouped by reason: the count, and the names when few."""
    by: dict[str, list[str]] = {}
    for r in runs:
        name, _, why = r.partition(": ")
        by.setdefault(why or "no reason recorded", []).append(name)
    return "; ".join(f"{len(names)} {why}" + (f" ({', '.join(names)})" if len(names) <= 3 else "")
                     for why, names in by.items())


def _gap_share_lines(gap: Mapping[str, Any]) -> list[str]:
    """The exploratory gap-share predictions of :mod:`~llm_validation.delay_law.paper_gap`."""
    lines = ["## Exploratory: the gap share at the paper's setting (not in the protocol)", "",
             "The chosen gap-share law per arm (the gap as a share of the synchronous loss "
             "decrease), refitted on every cell, at the same sizes and step counts as above. No "
             "threshold is read: the share becomes nats only through the loss decrease at that "
             "size on the paper's data, which the ledger does not measure. Added after the "
             "runs; an extrapolation.", ""]
    for arm, entry in gap.items():
        if "models" not in entry:
            lines.append(f"- {arm}: {entry.get('why', 'not predicted')}")
            continue
        lines.append(f"- {arm} ({entry['law']}): " + "; ".join(
            f"{m}: " + ", ".join(f"{k} {p['steps']} steps {p['share']:.2%} "
                                 f"[{p['lo']:.2%}, {p['hi']:.2%}]" for k, p in v.items())
            for m, v in entry["models"].items()))
    return lines


def _noise_lines(noise: Mapping[str, Any]) -> list[str]:
    """The exploratory comparison of :mod:`~llm_validation.delay_law.noise_scale`."""
    lines = ["## Exploratory: the batch over its noise scale (not in the protocol)", "",
             "`log lag` fitted on the (cell, seed) points of the training cells at each size's "
             "tuned lr against `log rho` "
             "(`rho = B / B_simple`, from each seed's synchronous run), against `log N + log S` "
             "(the design's) and against `log B` alone (tokens per step). `rho` is read from a "
             "cell's own synchronous run, so it explains a cell's lag rather than predicting it "
             "from elsewhere. Chosen after seeing runs: a hypothesis, not a verdict.", "",
             "| arm | regressors | coefficients | R^2 | leave-one-cell-out error "
             "| held-out error |",
             "|---|---|---|---|---|---|"]
    for arm, entry in noise.items():
        for name, r in entry["sets"].items():
            if "error" in r:
                lines.append(f"| {arm} | {name} | {r['error']} | | | |")
                continue
            coefs = ", ".join(f"{k} {v:+.3f}" for k, v in r["coefficients"].items()
                              if k != "const")
            held = "-" if r["held_out"] is None else _fmt(r["held_out"])
            lines.append(f"| {arm} | {name} | {coefs} | {_fmt(r['r2'])} | {_fmt(r['loco'])} | "
                         f"{held} |")
    return lines
