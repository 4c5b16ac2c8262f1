"""The pilot: finished runs in one shape, and the (delayed, synchronous) pairs they form.

``delaybound advise`` reads its evidence from either

- a folder of run directories (``--pilot DIR``: sync + 2BW (+ EF) same-seed pairs, possibly at
  several horizons), read with :mod:`llm_validation.validation.runs`; or
- a ledger folder (``--ledger DIR``) whose ``claims.json`` holds the per-run table ``"runs"``
  (run name -> record with ``optimizer``, ``mode``, ``tau``, ``lam``, ``lr``, ``batch_size``,
  ``seq_len``, ``steps``, ``seed``, ``status``, ``final_val_loss``, ``val_curve``, ``partner``,
  ``stats``; docs/reproduce.md).

Both become :class:`PilotRun` records; :func:`pairs` joins every delayed run with its
synchronous partner into a :class:`DelayPair` whose delay cost is
:func:`llm_validation.validation.lag.lag` (the one definition of the lag).

Only plain one-step-delay pairs are kept: a run with a synchronous phase (``sync_start``,
``sync_cooldown``), a delay correction (DC-ASGD, Nesterov), gradient-level EF or per-stage taus
measures something else. Run directories always carry those settings; a ledger record is
filtered on them when it has the keys (``sync_start``, ``sync_cooldown``, ``correction``) and
otherwise on its mode only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from llm_validation.records.atomic_io import read_json
from llm_validation.validation.envelope import envelope_lag
from llm_validation.validation.lag import Lag, lag
from llm_validation.validation.runs import STATS_FROM_FRACTION, stat_means

__all__ = ["STATS_FROM_FRACTION", "QUANTITIES", "PilotRun", "DelayPair", "stat_means",
           "model_params",
           "runs_from_dirs",
           "runs_from_claims", "load_pilot", "pairs", "SyncReference", "sync_curve",
           "frontier_points", "reference_lrs", "pair_frontier"]

#: The costs a pair carries: the gap as a share of the synchronous loss decrease (``share``)
#: and the compute-equivalent lag (``lag``).
QUANTITIES = ("share", "lag")



@dataclass(frozen=True, kw_only=True)
class PilotRun:
    """One finished run, whatever its source."""

    name: str
    """Run name (the directory's, or the key of the ledger's ``runs`` table)."""
    optimizer: str
    """Optimizer name (``adamw``, ``muon``...)."""
    mode: str
    """``sync``, ``delay``, ``ef`` or ``other``."""
    tau: int
    """Gradient delay in optimizer steps."""
    lam: float
    """Update-level EF coefficient (0 off)."""
    lr: float
    """Peak learning rate."""
    momentum: float | None
    """The optimizer's momentum knob (Adam family: beta1); None when the source omits it."""
    batch_size: int
    """Sequences per step."""
    seq_len: int
    """Tokens per sequence."""
    steps: int
    """Optimizer steps of the run (its horizon)."""
    seed: int
    """Seed (pairs share it)."""
    final_val: float
    """Validation loss at the final weights."""
    val_curve: tuple[tuple[float, float], ...]
    """Every evaluation ``(step, val_loss)``, the final one included."""
    stats: Mapping[str, float] = field(default_factory=dict)
    """Statistic key -> mean over steps >= :data:`STATS_FROM_FRACTION` of the run."""
    partner: str | None = None
    """The synchronous same-seed partner's name (delayed runs)."""
    plain: bool = True
    """False for runs with a synchronous phase or a correction (never paired)."""
    n_params: int | None = None
    """The model's parameter count, all counted (Chinchilla's way); None when unknown."""

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len

    @property
    def curve_final(self) -> float:
        """The closing loss on the validation curve's batches (the curve's last point when it
        is at the final step; else ``final_val``): what a lag compares with a partner's curve."""
        if self.val_curve and self.val_curve[-1][0] >= self.steps:
            return self.val_curve[-1][1]
        return self.final_val


@dataclass(frozen=True, kw_only=True)
class DelayPair:
    """A delayed run, its synchronous partner and the lag between them."""

    delayed: PilotRun
    """The 2BW (mode ``delay``) or 2BW + EF (mode ``ef``) run."""
    sync: PilotRun
    """Its synchronous same-seed partner."""
    lag: Lag
    """:func:`~llm_validation.validation.lag.lag` of the delayed final loss on the partner's curve."""
    lr_ref: float | None = None
    """The pilot's tuned peak lr of this pair's optimizer at its model size
    (:func:`reference_lrs`), the reference of :attr:`lr_rel`; None when not known."""
    frontier_lag: float | None = None
    """The compute-equivalent lag ``1 - s*/T`` (:func:`~llm_validation.validation.envelope.
    envelope_lag`) of the delayed closing loss on the frontier of the partner and the pilot's
    shorter synchronous runs of the same optimizer, size, lr, batch and seed, each trained with
    its own schedule (:func:`pair_frontier`); None when the pilot has no such shorter run."""

    @property
    def mode(self) -> str:
        return self.delayed.mode

    @property
    def optimizer(self) -> str:
        return self.delayed.optimizer

    @property
    def horizon(self) -> int:
        """Steps of the run (both runs have the same)."""
        return self.delayed.steps

    @property
    def n_params(self) -> int | None:
        """The model's parameter count (None when the source did not say)."""
        return self.delayed.n_params

    @property
    def tokens_per_param(self) -> float | None:
        """Training tokens per parameter of the pair (None without ``n_params``)."""
        n = self.delayed.n_params
        return None if not n else self.horizon * self.delayed.tokens_per_step / n

    @property
    def gap(self) -> float:
        return self.lag.gap

    @property
    def gap_fraction(self) -> float:
        return self.lag.gap_fraction

    @property
    def loss_drop(self) -> float:
        """``v_0 - v_T`` of the synchronous partner (what ``gap_fraction`` is a share of)."""
        return self.sync.val_curve[0][1] - self.sync.val_curve[-1][1]

    @property
    def lr_rel(self) -> float | None:
        """The delayed run's peak lr over :attr:`lr_ref` (None when that is unknown)."""
        return None if self.lr_ref is None else self.delayed.lr / self.lr_ref

    def value(self, quantity: str) -> float | None:
        """The pair's cost in ``quantity`` (:data:`QUANTITIES`): ``share`` the gap fraction,
        ``lag`` the compute-equivalent lag (None without a frontier)."""
        if quantity == "share":
            return self.gap_fraction
        if quantity == "lag":
            return self.frontier_lag
        raise ValueError(f"unknown quantity {quantity!r}; choose from {', '.join(QUANTITIES)}")


def _num(x: Any) -> float:
    """A number of the ledger's JSON (non-finite ones are written as strings)."""
    if isinstance(x, str):
        return float(x)
    return float("nan") if x is None else float(x)


def model_params(model: Mapping[str, Any] | str | None,
                 meta: Mapping[str, Any] | None = None) -> int | None:
    """Parameter count of a run config's ``model`` section (or of a preset name): the count the
    section states (``n_params``: what ``StatsRecorder`` writes for a model this project did not
    build), else the project's model built from it, else the ``meta`` section's ``n_params``
    (every run directory's); None when none of these gives it."""
    from llm_validation.config import ModelConfig, preset
    if isinstance(model, Mapping) and model.get("n_params") is not None:
        return int(model["n_params"])
    try:
        if isinstance(model, str):
            return preset(model).n_params()
        if isinstance(model, Mapping) and not model.get("external"):
            return ModelConfig(**dict(model)).n_params()
    except (TypeError, ValueError, KeyError):
        pass
    stated = meta.get("n_params") if isinstance(meta, Mapping) else None
    return int(stated) if stated is not None else None


def runs_from_dirs(paths: Sequence[str | Path]) -> list[PilotRun]:
    """The usable runs under ``paths`` (run directories or folders of them): finished, not
    diverged, metrics whole (``RunRecord.usable``, the policy ``validate`` follows)."""
    from llm_validation.validation.runs import load_runs, sync_partner
    records = [r for r in load_runs(paths) if r.usable]
    out = []
    for r in records:
        steps, vals = r.series("val_loss")
        curve = [(float(s), float(v)) for s, v in zip(steps, vals)]
        if not curve or curve[-1][0] < r.steps:
            curve.append((float(r.steps), float(r.final_val)))
        partner = sync_partner(r, records) if r.mode in ("delay", "ef") else None
        d = r.config.get("delay", {})
        plain = (not d.get("sync_start") and not d.get("sync_cooldown")
                 and d.get("correction", "none") == "none" and r.pipeline == "none")
        out.append(PilotRun(
            name=r.name, optimizer=r.optimizer, mode=r.mode, tau=r.tau, lam=r.lam, lr=r.lr,
            momentum=r.momentum, batch_size=r.batch_size,
            seq_len=int(r.config.get("data", {}).get("seq_len", 0)), steps=r.steps,
            seed=r.seed, final_val=float(r.final_val), val_curve=tuple(curve),
            stats=stat_means(r.rows, r.steps), partner=partner.name if partner else None,
            plain=plain, n_params=model_params(r.config.get("model"), r.config.get("meta"))))
    return out


def runs_from_claims(path: str | Path) -> list[PilotRun]:
    """The completed runs of a ledger's ``claims.json`` per-run table (``ValueError`` when the
    file has no ``runs`` table)."""
    path = Path(path)
    data = read_json(path)
    table = data.get("runs") if isinstance(data, Mapping) else None
    if not isinstance(table, Mapping) or not table:
        raise ValueError(f"{path}: no per-run table (top-level \"runs\"); re-assemble the ledger "
                         f"with delaybound reproduce")
    settings = data.get("settings") if isinstance(data.get("settings"), Mapping) else {}
    ledger_params = model_params(settings.get("model"))      # older tables: the scale's preset
    out = []
    for name, rec in sorted(table.items()):
        try:
            if rec.get("status") != "completed":
                continue
            final = _num(rec["final_val_loss"])
            curve = tuple((float(s), _num(v)) for s, v in rec["val_curve"])
            if not math.isfinite(final) or not all(math.isfinite(v) for _, v in curve):
                continue
            mom = rec.get("momentum")
            plain = (not rec.get("sync_start") and not rec.get("sync_cooldown")
                     and rec.get("correction", "none") in ("none", None))
            out.append(PilotRun(
                name=str(name), optimizer=str(rec["optimizer"]), mode=str(rec["mode"]),
                tau=int(rec["tau"]), lam=float(rec["lam"]), lr=float(rec["lr"]),
                momentum=None if mom is None else float(mom),
                batch_size=int(rec["batch_size"]), seq_len=int(rec["seq_len"]),
                steps=int(rec["steps"]), seed=int(rec["seed"]), final_val=final,
                val_curve=curve, stats={k: _num(v) for k, v in (rec.get("stats") or {}).items()},
                partner=rec.get("partner"), plain=plain,
                n_params=int(rec["n_params"]) if rec.get("n_params") else ledger_params))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: run {name!r}: bad record ({exc})") from None
    return out


def load_pilot(*, pilot: str | Path | None = None,
               ledger: str | Path | None = None) -> list[PilotRun]:
    """Runs of ``--pilot DIR`` and/or ``--ledger DIR`` (a folder holding ``claims.json``, or the
    file itself)."""
    runs: list[PilotRun] = []
    if ledger is not None:
        p = Path(ledger)
        p = p / "claims.json" if p.is_dir() else p
        if not p.is_file():
            raise FileNotFoundError(f"--ledger: no claims.json at {p}")
        runs += runs_from_claims(p)
    if pilot is not None:
        if not Path(pilot).is_dir():
            raise FileNotFoundError(f"--pilot: no such folder {pilot}")
        runs += runs_from_dirs([pilot])
    return runs


def reference_lrs(runs: Sequence[PilotRun]) -> dict[tuple[str, int | None], float]:
    """The pilot's tuned peak lr per (optimizer, model size): the lr of the most plain
    synchronous runs of that optimizer and size (ties: the smaller lr). A designed pilot trains
    most of its cells at each size's tuned lr and moves the lr in a few cells only (the delay-law
    design's 0.5x / 2x cells), so the most common lr is the tuned one; a pilot that sweeps the lr
    evenly has no such reference and gets its smallest lr, which :attr:`DelayPair.lr_rel` then
    reads against."""
    counts: dict[tuple[str, int | None], dict[float, int]] = {}
    for r in runs:
        if r.mode == "sync" and r.plain:
            c = counts.setdefault((r.optimizer, r.n_params), {})
            c[r.lr] = c.get(r.lr, 0) + 1
    return {k: min(c, key=lambda lr: (-c[lr], lr)) for k, c in counts.items()}


def _setting(r: PilotRun) -> tuple[Any, ...]:
    """What two synchronous runs share to lie on one compute frontier: optimizer, size, peak
    lr, batch and sequence length (each trained with its own schedule, at its own steps)."""
    return (r.optimizer, r.n_params, r.lr, r.batch_size, r.seq_len)


def pair_frontier(delayed: PilotRun, sync: PilotRun, runs: Sequence[PilotRun]) -> float | None:
    """The compute-equivalent lag of ``delayed`` (see :attr:`DelayPair.frontier_lag`): closing
    losses on the fixed validation set (``final_val``, the larger evaluation), the frontier of
    ``sync`` and the pilot's plain synchronous runs with ``sync``'s optimizer, size, lr, batch,
    sequence length and seed and fewer steps; None when there is no such run."""
    shorter = {r.steps: r.final_val for r in runs
               if r.mode == "sync" and r.plain and r.steps < sync.steps
               and r.seed == sync.seed and _setting(r) == _setting(sync)}
    if not shorter:
        return None
    steps = sorted(shorter) + [sync.steps]
    losses = [shorter[s] for s in steps[:-1]] + [sync.final_val]
    return envelope_lag(steps, losses, delayed.final_val, total=sync.steps).fraction


def pairs(runs: Sequence[PilotRun]) -> list[DelayPair]:
    """Every plain one-step delayed run (mode ``delay``, or ``ef`` with lam = 1) joined with its
    synchronous partner; runs whose partner is missing are left out. Each pair carries its
    tuned lr (:func:`reference_lrs`) and, when the pilot holds shorter synchronous runs of its
    partner's setting, its compute-equivalent lag (:func:`pair_frontier`)."""
    by_name = {r.name: r for r in runs}
    ref = reference_lrs(runs)
    out = []
    for r in runs:
        if r.mode not in ("delay", "ef") or r.tau != 1 or not r.plain or r.partner is None:
            continue
        if r.mode == "ef" and r.lam != 1.0:
            continue
        s = by_name.get(r.partner)
        if s is None or len(s.val_curve) < 2:
            continue
        steps, vals = zip(*s.val_curve)
        out.append(DelayPair(delayed=r, sync=s, lag=lag(steps, vals, r.curve_final),
                             lr_ref=ref.get((r.optimizer, r.n_params)),
                             frontier_lag=pair_frontier(r, s, runs)))
    return out


@dataclass(frozen=True, kw_only=True)
class SyncReference:
    """The synchronous curve the predictions are read on."""

    steps: np.ndarray
    """Evaluation steps shared by the reference runs."""
    vals: np.ndarray
    """Their mean validation loss at those steps."""
    horizon: int
    """Steps of the reference runs."""
    runs: tuple[PilotRun, ...]
    """The reference runs (one per seed)."""

    @property
    def loss_drop(self) -> float:
        return float(self.vals[0] - self.vals[-1])


def sync_curve(runs: Sequence[PilotRun], optimizer: str) -> SyncReference:
    """The reference synchronous curve of ``optimizer``: among its plain sync runs at the largest
    model size of the pilot (the size closest to the user's; every run when no size is known),
    those of the longest horizon at the most common learning rate and batch, averaged over seeds
    on their common evaluation steps; ``ValueError`` when there is no such run.

    The size comes first: a pilot pooled from a size ladder has its longest horizons at its
    smallest model (the cheap one), whose curve shape is the furthest from the user's."""
    sync = [r for r in runs if r.optimizer == optimizer and r.mode == "sync" and r.plain]
    if not sync:
        raise ValueError(f"the pilot has no finished synchronous run of {optimizer!r}")
    sizes = [r.n_params for r in sync if r.n_params is not None]
    if sizes:
        sync = [r for r in sync if r.n_params == max(sizes)]
    T = max(r.steps for r in sync)
    sync = [r for r in sync if r.steps == T]
    keys = [(r.lr, r.batch_size) for r in sync]
    common = max(sorted(set(keys)), key=keys.count)
    sync = [r for r, k in zip(sync, keys) if k == common]
    steps = sorted(set.intersection(*(set(s for s, _ in r.val_curve) for r in sync)))
    if len(steps) < 2:
        raise ValueError(f"the synchronous runs of {optimizer!r} share fewer than 2 evaluations")
    vals = np.mean([[dict(r.val_curve)[s] for s in steps] for r in sync], axis=0)
    return SyncReference(steps=np.asarray(steps, dtype=np.float64),
                         vals=np.asarray(vals, dtype=np.float64), horizon=T, runs=tuple(sync))


def frontier_points(runs: Sequence[PilotRun], ref: SyncReference) -> tuple[list[float],
                                                                          list[float]]:
    """The compute frontier the pilot holds at ``ref``'s runs: ``(step counts, losses)`` of the
    plain synchronous runs of the same optimizer, model size, peak lr, batch and sequence
    length as the reference, at ``ref.horizon`` steps or fewer (each trained with its own
    schedule), the closing loss (:attr:`PilotRun.curve_final`) averaged over seeds per step
    count. One point (the reference's own) when the pilot has no shorter such run."""
    key = _setting(ref.runs[0])
    by_steps: dict[int, list[float]] = {}
    for r in runs:
        if r.mode == "sync" and r.plain and r.steps <= ref.horizon and _setting(r) == key:
            by_steps.setdefault(r.steps, []).append(r.curve_final)
    steps = sorted(by_steps)
    return [float(s) for s in steps], [float(np.mean(by_steps[s])) for s in steps]
