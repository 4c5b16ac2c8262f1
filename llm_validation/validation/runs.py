"""Run directories as a table: what each run is, and which runs pair up for a gap.

A run directory (``llm_validation.training.loop``) holds ``config.json``, ``metrics.jsonl`` and, once
finished, ``summary.json``. :func:`load_runs` reads any mix of run directories and folders of
run directories (a sweep's ``--out``), and :class:`RunRecord` exposes what the validation needs:

- the *condition* of a run: its whole config except the seed, the delay/EF/pipeline settings
  and the bookkeeping fields (:data:`NON_CONDITION_RUN_FIELDS`): runs with the same condition
  differ only in seed and in how gradients are delayed;
- its *mode*: ``sync`` (tau = 0, no EF, one process), ``delay`` (tau >= 1, no EF) or ``ef``
  (update-level EF, lam > 0), plus whether it ran on a real pipeline;
- its final validation loss (at the final weights) and the tail mean of its evaluations.

The *gap* of a delayed run is its validation loss minus that of the synchronous run with the
same condition and the same seed (paired: same initialisation and data order).
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from llm_validation.config import TrainConfig
from llm_validation.rundir import RunPaths, TruncatedMetricsWarning, read_metrics
from llm_validation.records.atomic_io import read_json

__all__ = [
    "NON_CONDITION_RUN_FIELDS",
    "STATS_FROM_FRACTION",
    "NOT_STATS",
    "stat_means",
    "TAIL_EVALS",
    "GAP_METRICS",
    "RunRecord",
    "load_runs",
    "find_run_dirs",
    "sync_partner",
    "paired_gaps",
    "is_complete",
]

#: RunConfig fields that do not change what is being trained (bookkeeping, intervals of the
#: statistics, and ``microbatches``, which only changes the order of a sum of per-microbatch
#: means), plus those that define the mode rather than the condition.
NON_CONDITION_RUN_FIELDS = ("seed", "out_dir", "resume", "device", "eval_interval",
                            "stats_interval", "momentum_error_interval", "large_batch_factor",
                            "checkpoint_interval", "checkpoint_minutes", "log_interval", "profile",
                            "microbatches",
                            "pipeline", "stages")
#: ``tail`` gap metric: the mean of the last this many validation evaluations (the final one,
#: at W(N), included).
TAIL_EVALS = 3
#: ``final``: validation loss at the final weights; ``tail``: mean of the last TAIL_EVALS.
GAP_METRICS = ("final", "tail")


def is_complete(run_dir: str | Path) -> bool:
    """True when ``run_dir/summary.json`` exists, parses, and says the run finished all of
    ``config.json``'s steps (a diverged run is finished too: it stops on purpose)."""
    paths = RunPaths(run_dir)
    try:
        summary, config = read_json(paths.summary), read_json(paths.config)
    except (FileNotFoundError, ValueError, json.JSONDecodeError):
        return False
    if not isinstance(summary, dict) or not isinstance(config, dict):
        return False
    if summary.get("status") == "diverged":
        return True
    want = config.get("run", {}).get("steps")
    return summary.get("status") == "completed" and summary.get("steps") == want


@dataclass(frozen=True)
class RunRecord:
    """One run directory, read lazily (metrics are loaded on first use)."""

    path: Path
    config: Mapping[str, Any] = field(repr=False)
    summary: Mapping[str, Any] | None = field(repr=False)

    @classmethod
    def load(cls, run_dir: str | Path) -> "RunRecord":
        paths = RunPaths(run_dir)
        if not paths.config.is_file():
            raise FileNotFoundError(f"not a run directory (no config.json): {run_dir}")
        config = read_json(paths.config)
        if not isinstance(config, dict):
            raise ValueError(f"{paths.config} does not hold a JSON object (a run's config)")
        summary = read_json(paths.summary) if is_complete(run_dir) else None
        return cls(Path(run_dir), config, summary)

    # ---------------------------------------------------------------------- identity
    @property
    def name(self) -> str:
        return self.path.name

    def _get(self, section: str, key: str, default: Any = None) -> Any:
        return self.config.get(section, {}).get(key, default)

    @property
    def optimizer(self) -> str:
        return str(self._get("optim", "name"))

    @property
    def lr(self) -> float:
        return float(self._get("optim", "lr"))

    @property
    def momentum(self) -> float:
        """The momentum knob of the optimizer: Muon/SGD ``momentum``, AdamW ``beta1``."""
        key = "beta1" if self.optimizer == "adamw" else "momentum"
        return float(self._get("optim", key))

    @property
    def alpha(self) -> float:
        """docs/theory.md's EMA weight alpha = 1 - momentum (of the matrices' optimizer)."""
        return 1.0 - self.momentum

    @property
    def weight_decay(self) -> float:
        return float(self._get("optim", "weight_decay"))

    @property
    def batch_size(self) -> int:
        return int(self._get("run", "batch_size"))

    @property
    def seed(self) -> int:
        return int(self._get("run", "seed"))

    @property
    def steps(self) -> int:
        return int(self._get("run", "steps"))

    @property
    def tau(self) -> int:
        return int(self._get("delay", "tau", 0))

    @property
    def lam(self) -> float:
        lam = float(self._get("delay", "ef_lambda", 0.0))
        return lam if self._get("delay", "ef_level", "update") == "update" else 0.0

    @property
    def grad_ef(self) -> bool:
        """Gradient-level EF (a separate mode, never paired as ``ef``)."""
        return self._get("delay", "ef_level", "update") == "grad" and \
            float(self._get("delay", "ef_lambda", 0.0)) > 0

    @property
    def pipeline(self) -> str:
        return str(self._get("run", "pipeline", "none"))

    @property
    def stage_taus(self) -> tuple[int, ...] | None:
        st = self._get("delay", "stage_taus")
        return tuple(st) if st is not None else None

    @property
    def mode(self) -> str:
        """``sync``, ``delay``, ``ef`` or ``other`` (gradient-level EF, per-stage taus)."""
        if self.grad_ef or self.stage_taus is not None:
            return "other"
        if self.tau == 0 and self.lam == 0:
            return "sync"
        if self.tau >= 1 and self.lam == 0:
            return "delay"
        if self.tau >= 1 and self.lam > 0:
            return "ef"
        return "other"

    @property
    def mode_label(self) -> str:
        """Human label, e.g. ``sync``, ``2bw``, ``2bw+ef``, ``tau=3``, ``2bw (pipeline)``."""
        if self.mode == "sync":
            base = "sync"
        elif self.mode in ("delay", "ef"):
            base = "2bw" if self.tau == 1 else f"tau={self.tau}"
            if self.mode == "ef":
                base += "+ef" if self.lam == 1.0 else f"+ef(lam={self.lam:g})"
        else:
            base = "other"
        return base + (f" ({self.pipeline} pipeline)" if self.pipeline != "none" else "")

    @cached_property
    def condition(self) -> str:
        """The config without seed, delay and bookkeeping fields, as canonical JSON. The saved
        config is read through ``TrainConfig`` first, so fields added since the run was made
        take their defaults: a run written by older code pairs with its partner written by newer
        code (a raw dict when the config does not parse here)."""
        raw = {k: v for k, v in self.config.items() if k != "meta"}
        try:
            raw = TrainConfig.from_dict(raw).to_dict()
        except (TypeError, ValueError, KeyError):
            pass
        cfg = {k: v for k, v in raw.items() if k != "delay"}
        cfg["run"] = {k: v for k, v in cfg.get("run", {}).items()
                      if k not in NON_CONDITION_RUN_FIELDS}
        return json.dumps(cfg, sort_keys=True)

    def condition_without(self, *dotted: str) -> str:
        """The condition with some more fields removed (``optim.lr``...): a sweep family."""
        cfg = json.loads(self.condition)
        for d in dotted:
            sec, key = d.split(".")
            cfg.get(sec, {}).pop(key, None)
        return json.dumps(cfg, sort_keys=True)

    # ----------------------------------------------------------------------- results
    @property
    def complete(self) -> bool:
        return self.summary is not None

    @property
    def status(self) -> str:
        return str(self.summary["status"]) if self.summary else "incomplete"

    @property
    def final_val(self) -> float | None:
        """Validation loss at the final weights (None unless completed)."""
        if not self.summary or self.summary.get("status") != "completed":
            return None
        v = self.summary.get("final_val_loss")
        return float(v) if v is not None else None

    @property
    def curve_final(self) -> float | None:
        """Validation loss at the final weights on the validation *curve's* batches (the
        closing eval row's ``val_loss``; :attr:`final_val` is on the closing set, larger under
        ``run.final_eval_batches``). What a lag reads against a partner's curve; runs written
        before the closing row kept both fall back to :attr:`final_val`."""
        if self.final_val is None:
            return None
        for r in reversed(self.rows):
            if r.get("kind") == "eval" and "final_val_loss" in r and r.get("val_loss") is not None:
                return float(r["val_loss"])
        return self.final_val

    @cached_property
    def _metrics(self) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
        """(rows, what was skipped): a truncated last line is skipped and recorded."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TruncatedMetricsWarning)
            rows = read_metrics(self.path)
        return rows, tuple(str(w.message) for w in caught
                           if issubclass(w.category, TruncatedMetricsWarning))

    @property
    def rows(self) -> list[dict[str, Any]]:
        """metrics.jsonl rows (a truncated last line is skipped, see :attr:`damage`)."""
        return self._metrics[0]

    @cached_property
    def damage(self) -> str | None:
        """What a finished run's metrics miss (training rows stopping before its config's last
        step, no closing eval row; a skipped truncated line named beside it), or None. Every
        verdict drops a damaged run alike (:attr:`usable`), never using it in part."""
        if not self.complete:
            return None
        try:
            rows, skipped = self._metrics
        except FileNotFoundError:
            return "metrics.jsonl is missing"
        except ValueError as exc:                    # a malformed line before the last
            return f"metrics.jsonl is unreadable ({exc})"
        missing = []
        train = [int(r["step"]) for r in rows if r.get("kind", "train") == "train"]
        last = max(train, default=-1)
        if self.status == "completed":
            if last < self.steps - 1:
                missing.append(f"its training rows stop at step {last} of {self.steps}")
            if not any(r.get("kind") == "eval" and int(r.get("step", -1)) == self.steps
                       for r in rows):
                missing.append(f"it has no closing eval row (step {self.steps})")
        if not missing:
            return None
        why = "metrics.jsonl is damaged: " + " and ".join(missing)
        return why + (f" ({'; '.join(skipped)})" if skipped else "")

    @property
    def unusable(self) -> str | None:
        """Why this run cannot give its seed's numbers in full (unfinished, diverged, damaged
        metrics), or None."""
        if not self.complete:
            return "unfinished"
        if self.status == "diverged":
            return "diverged"
        return self.damage

    @property
    def usable(self) -> bool:
        """Finished, not diverged, metrics whole: the runs every verdict reads (``groups.select``,
        :func:`sync_partner`); each verdict that lost another run says so."""
        return self.final_val is not None and self.damage is None

    def series(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of the rows where ``key`` was measured (finite)."""
        steps, vals = [], []
        for r in self.rows:
            v = r.get(key)
            if v is not None and isinstance(v, (int, float)) and math.isfinite(v):
                steps.append(int(r["step"]))
                vals.append(float(v))
        return np.asarray(steps, dtype=np.int64), np.asarray(vals, dtype=np.float64)

    def tail_val(self, evals: int = TAIL_EVALS) -> float | None:
        """Mean of the last ``evals`` validation losses (None unless completed)."""
        if self.final_val is None:
            return None
        _, v = self.series("val_loss")
        return float(v[-evals:].mean()) if v.size else None

    def val_metric(self, metric: str) -> float | None:
        if metric not in GAP_METRICS:
            raise ValueError(f"gap metric={metric!r} is not one of {list(GAP_METRICS)}")
        return self.final_val if metric == "final" else self.tail_val()

    def row(self) -> dict[str, Any]:
        """A summary row for reports."""
        return {"name": self.name, "optimizer": self.optimizer, "mode": self.mode_label,
                "lr": self.lr, "momentum": self.momentum, "batch_size": self.batch_size,
                "tau": self.tau, "lam": self.lam, "seed": self.seed, "steps": self.steps,
                "status": self.status, "final_val_loss": self.final_val}


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Every run directory (holding ``config.json``) at or below the given paths, sorted."""
    found: set[Path] = set()
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise FileNotFoundError(f"no such run directory: {p}")
        if (p / "config.json").is_file():
            found.add(p)
            continue
        found.update(c.parent for c in p.rglob("config.json")
                     if "checkpoints" not in c.parts)
    return sorted(found)


def load_runs(paths: Iterable[str | Path]) -> list[RunRecord]:
    """:class:`RunRecord` of every run directory under ``paths`` (see :func:`find_run_dirs`)."""
    dirs = find_run_dirs(paths)
    if not dirs:
        raise FileNotFoundError(f"no run directories (config.json) under {list(paths)}")
    return [RunRecord.load(d) for d in dirs]


def sync_partner(run: RunRecord, runs: Sequence[RunRecord]) -> RunRecord | None:
    """The usable (:attr:`RunRecord.usable`) synchronous single-process run with ``run``'s
    condition and seed."""
    for r in runs:
        if r.mode == "sync" and r.pipeline == "none" and r.condition == run.condition \
                and r.seed == run.seed and r.usable:
            return r
    return None


def paired_gaps(delayed: Sequence[RunRecord], runs: Sequence[RunRecord],
                metric: str = "final") -> dict[int, float]:
    """seed -> val(delayed) - val(sync, same seed) for the delayed runs that have a partner."""
    out: dict[int, float] = {}
    for r in delayed:
        if not r.usable:
            continue
        partner = sync_partner(r, runs)
        a, b = r.val_metric(metric), partner.val_metric(metric) if partner else None
        if a is not None and b is not None:
            out[r.seed] = a - b
    return dict(sorted(out.items()))


#: Statistics are averaged over the steps >= this fraction of the run (the first steps, from
#: the initialisation, are not representative). Used by the ledger's per-run table and advise.
STATS_FROM_FRACTION = 0.1
#: Row keys that are not statistics (bookkeeping of metrics.jsonl rows).
NOT_STATS = frozenset({"step", "loss", "lr", "tokens", "val_loss", "kind", "diverged"})


def stat_means(rows: Sequence[Mapping[str, Any]], steps: int,
               skip: float = STATS_FROM_FRACTION) -> dict[str, float]:
    """Statistic key -> mean of its finite values on ``"train"`` rows at steps >=
    ``skip * steps`` (:data:`NOT_STATS` excluded), keys sorted."""
    start = skip * steps
    acc: dict[str, list[float]] = {}
    for r in rows:
        if r.get("kind", "train") != "train" or r.get("step", 0) < start:
            continue
        for k, v in r.items():
            if k in NOT_STATS or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if math.isfinite(v):
                acc.setdefault(k, []).append(float(v))
    return {k: float(np.mean(v)) for k, v in sorted(acc.items())}
