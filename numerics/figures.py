"""Rate, gap, EF and PL-law figures (matplotlib, Agg backend): ``delaybound plot rates``.

:func:`plot_rates` writes four PNGs:

(a) ``rates.png``: f(x_k) - f* versus k for tau in {0, 1, 2, 4, 8} with the star-convex bound of
    ``theory.THEOREMS['star_convex_delayed']`` overlaid (dashed, same colour), one panel per
    geometry (l2 quadratic, l_inf quadratic, spectral matrix least squares / Muon);
(b) ``gap_heatmap.png``: the sync-vs-delayed loss-floor gap over (tau, eta), one panel per
    geometry;
(c) ``ef_gain.png``: the fraction of the tau = 1 gap that Error Feedback removes versus alpha, one
    line per lam, next to the measured drift omega_bar that replaces tau in the EF theorems;
(d) ``pl_law.png``: measured gap versus the PL gap law of ``theory.THEOREMS['pl_delay_gap']``
    (log-log; the fitted constant and the y = x line drawn).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from numerics.methods import MethodConfig, run  # noqa: E402
from numerics.problems import make_problem  # noqa: E402
from numerics.trends import delay_gap_grid, ef_gain_table, gap_law, pl_law_table  # noqa: E402
import theory  # noqa: E402

__all__ = ["plot_rates", "GEOMETRY_PROBLEMS", "TAUS"]

#: (family, size, title) per geometry panel.
GEOMETRY_PROBLEMS = (
    ("quadratic_l2", 8, "l2 (normalized SGD)\nquadratic, d = 8"),
    ("quadratic_linf", 8, "l_inf (signSGD)\nquadratic, d = 8"),
    ("matrix_ls", 3, "spectral (Muon)\nmatrix least squares, 5 x 3"),
)
TAUS = (0, 1, 2, 4, 8)
_COLORS = plt.get_cmap("viridis")(np.linspace(0.0, 0.85, len(TAUS)))


#: Window of the moving average drawn over the raw (oscillating) gap curves.
SMOOTH = 50


def _moving_average(x: np.ndarray, w: int) -> np.ndarray:
    """Trailing moving average (shorter window at the start), same length as x."""
    c = np.cumsum(np.insert(x, 0, 0.0))
    n = np.arange(1, len(x) + 1)
    lo = np.maximum(n - w, 0)
    return (c[n] - c[lo]) / (n - lo)


def _save(fig, out: Path, name: str) -> str:
    path = out / name
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return str(path)


def _rates(out: Path, steps: int) -> str:
    thm = theory.THEOREMS["star_convex_delayed"]
    eta, alpha = 0.02, 0.1
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), sharey=False)
    for ax, (fam, size, title) in zip(axes, GEOMETRY_PROBLEMS):
        p = make_problem(fam, size, 0)
        radius = 2.0 * max(p.x0_norm, p.x_star_norm)  # D = eta / beta (A5 holds with room)
        beta = eta / radius
        traj = run(p, [MethodConfig(tau=t, eta=eta, alpha=alpha, beta=beta) for t in TAUS], steps,
                   record=("gap",))
        ks = np.arange(steps + 1)
        r0 = float(traj["gap"][0, 0])
        for i, t in enumerate(TAUS):
            g = traj["gap"][:, i].numpy()
            ax.plot(ks, g, color=_COLORS[i], lw=0.5, alpha=0.25)
            ax.plot(ks, _moving_average(g, SMOOTH), color=_COLORS[i], lw=1.6, label=f"tau = {t}")
            kb = ks[1:]
            bound = [thm.evaluate(K=int(k), L=p.L, eta=eta, alpha=alpha, beta=beta, sigma=0.0,
                                  rho=p.rho, tau=t, r0=r0) for k in kb[:: max(1, steps // 200)]]
            ax.plot(kb[:: max(1, steps // 200)], bound, color=_COLORS[i], lw=1.0, ls="--")
        ax.set_yscale("log")
        ax.set_xlabel("step k")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("f(x_k) - f*")
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [plt.Line2D([], [], color="gray", lw=1.6),
                plt.Line2D([], [], color="gray", lw=1.0, ls="--")]
    labels += [f"measured ({SMOOTH}-step moving average;\nfaint: raw)", "theorem bound\n(star_convex_delayed)"]
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9, title="delay")
    fig.suptitle(f"Delayed LMO momentum with weight decay: measured gap vs the star-convex bound "
                 f"(eta = {eta}, alpha = {alpha}, beta = eta/D, D = 2 max(||x0||, ||x*||), sigma = 0)",
                 fontsize=11)
    fig.tight_layout()
    return _save(fig, out, "rates.png")


def _heatmap(out: Path, steps: int, etas) -> str:
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
    alpha = 0.1
    for ax, (fam, size, title) in zip(axes, GEOMETRY_PROBLEMS):
        p = make_problem(fam, size, 0)
        grid = delay_gap_grid(p, [t for t in TAUS if t > 0], etas, alpha=alpha, steps=steps)
        gap = grid["gap"].numpy()
        im = ax.imshow(np.log10(np.maximum(gap, 1e-12)), origin="lower", aspect="auto", cmap="magma")
        ax.set_xticks(range(len(etas)), [f"{e:g}" for e in etas])
        ax.set_yticks(range(len(grid["taus"])), [str(t) for t in grid["taus"]])
        ax.set_xlabel("step length eta")
        ax.set_ylabel("delay tau")
        ax.set_title(title, fontsize=10)
        for i in range(gap.shape[0]):
            for j in range(gap.shape[1]):
                ax.text(j, i, f"{gap[i, j]:.1e}", ha="center", va="center", fontsize=7,
                        color="white" if gap[i, j] < np.median(gap) else "black")
        fig.colorbar(im, ax=ax, label="log10 gap")
    fig.suptitle(f"Loss-floor gap  floor(tau) - floor(tau = 0)  (mean of f - f* over the last half of "
                 f"{steps} steps; alpha = {alpha}, no weight decay, sigma = 0)", fontsize=11)
    fig.tight_layout()
    return _save(fig, out, "gap_heatmap.png")


def _ef(out: Path, steps: int, alphas, lams) -> str:
    p = make_problem("matrix_ls", 3, 0)
    eta = 0.02
    rows = ef_gain_table(p, alphas=alphas, lams=lams, eta=eta, steps=steps)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.6))
    cmap = plt.get_cmap("plasma")(np.linspace(0.0, 0.85, len(lams)))
    for j, lam in enumerate(lams):
        sel = [r for r in rows if r.lam == lam]
        ax1.plot([r.alpha for r in sel], [100 * r.gain for r in sel], "o-", color=cmap[j], label=f"lam = {lam:g}")
        ax2.plot([r.alpha for r in sel], [r.omega_mean for r in sel], "o-", color=cmap[j], label=f"lam = {lam:g}")
        ax2.plot([r.alpha for r in sel], [r.omega_bar for r in sel], ":", color=cmap[j], lw=1)
    ax1.axhline(0, color="k", lw=0.8)
    ax1.set_xscale("log")
    ax1.set_xlabel("momentum weight alpha  (torch momentum = 1 - alpha)")
    ax1.set_ylabel("EF gain: % of the tau = 1 gap removed\n(negative: EF makes it worse)")
    ax1.set_title("Error Feedback gain at tau = 1")
    ax1.legend(fontsize=8)
    ax1.grid(True, alpha=0.3)
    ax2.axhline(1.0, color="k", lw=0.8, ls="--", label="tau = 1 (no EF)")
    ax2.set_xscale("log")
    ax2.set_xlabel("momentum weight alpha")
    ax2.set_ylabel("drift ||y_k - z_k|| / eta over the last half\n(solid: mean; dotted: sup = omega_bar)")
    ax2.set_title("Measured drift that replaces tau in the EF theorems\n(below the dashed line EF's drift is smaller than the delay's)")
    ax2.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    ax2.grid(True, alpha=0.3)
    fig.suptitle(f"{p.name}, spectral geometry (Muon), eta = {eta}, sigma = 0, {steps} steps", fontsize=11)
    fig.tight_layout()
    return _save(fig, out, "ef_gain.png")


def _pl(out: Path, steps: int, etas, alphas, taus) -> str:
    fig, ax = plt.subplots(figsize=(7.5, 6))
    markers = "osD^v"
    all_law, all_gap = [], []
    for i, (fam, size) in enumerate((("quadratic_l2", 8), ("quadratic_linf", 8), ("matrix_ls", 3), ("pl_sine", 8))):
        p = make_problem(fam, size, 0)
        rows = pl_law_table(p, gap_law(p), taus=taus, etas=etas, alphas=alphas, steps=steps)
        law = np.array([r.law for r in rows])
        gap = np.array([r.gap for r in rows])
        ok = gap > 0
        ratio = gap[ok] / law[ok]
        ax.scatter(law[ok], gap[ok], marker=markers[i], s=22, alpha=0.8,
                   label=f"{p.name} ({p.geometry.name}): gap/law in [{ratio.min():.1e}, {ratio.max():.1e}]")
        all_law.extend(law[ok])
        all_gap.extend(gap[ok])
    lo, hi = min(all_law), max(all_law)
    xs = np.array([lo, hi])
    ax.plot(xs, xs, "k--", lw=1, label="gap = law")
    c = float(np.exp(np.mean(np.log(np.array(all_gap) / np.array(all_law)))))
    ax.plot(xs, c * xs, "k:", lw=1, label=f"gap = {c:.1e} x law (geometric-mean fit)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("PL gap law  2 L^2 eta^2 tau (tau + 2(1-alpha)/alpha + 1/2) / mu  (theory)")
    ax.set_ylabel("measured gap  floor(tau) - floor(0)")
    ax.set_title(f"Delay gap vs the PL law (tau in {list(taus)}, eta in {list(etas)},\n"
                 f"alpha in {list(alphas)}, sigma = 0, beta = 0, {steps} steps)", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return _save(fig, out, "pl_law.png")


def plot_rates(out_dir: str | os.PathLike, *, steps: int = 3000, quick: bool = False,
               progress: Callable[[str], None] | None = None) -> list[str]:
    """Write the four figures to ``out_dir`` (created); returns their paths. ``quick`` uses
    small grids and at most 400 steps (for smoke tests)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if quick:
        steps = min(steps, 400)
        etas, alphas, lams, taus = (0.01, 0.04), (0.05, 1.0), (0.5, 1.0), (1, 4)
    else:
        etas, alphas, lams, taus = (0.005, 0.01, 0.02, 0.04), (0.02, 0.05, 0.1, 0.2, 0.5, 1.0), \
            (0.25, 0.5, 0.75, 1.0, 1.25), (1, 2, 4, 8)
    paths = []
    for name, fn in (("rates", lambda: _rates(out, steps)),
                     ("gap heatmap", lambda: _heatmap(out, steps, etas)),
                     ("EF gain", lambda: _ef(out, steps, alphas, lams)),
                     ("PL law", lambda: _pl(out, steps, etas, (0.05, 0.2, 1.0) if not quick else (0.2,), taus))):
        if progress:
            progress(name)
        paths.append(fn())
    return paths
