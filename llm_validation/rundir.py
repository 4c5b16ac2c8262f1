"""Run-directory files: config.json, metrics.jsonl, checkpoints/, summary.json.

Layout (docs/architecture.md, "One run directory")::

    <out_dir>/config.json         resolved TrainConfig + versions + git commit + corpus facts
    <out_dir>/metrics.jsonl       one JSON object per line (flushed after every line)
    <out_dir>/checkpoints/step_<N>.pt   model, optimizer + delay/EF buffers, sampler, RNG, probe
    <out_dir>/summary.json        RunResult of the last (possibly resumed) invocation

metrics.jsonl: rows of two shapes, every key present, NaN/inf written as the strings "NaN",
"Infinity", "-Infinity" and read back as floats (:mod:`llm_validation.records.metrics_rows`; other JSON
files: NaN/inf become ``null``). :func:`read_metrics` skips a truncated last line (a run killed
mid-write) with a warning; a malformed line elsewhere is an error naming the file and line.
Checkpoints are written to a temporary file and renamed (atomic); the newest
:data:`KEEP_CHECKPOINTS` are kept.
"""

from __future__ import annotations

import random
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Mapping

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from llm_validation.records.atomic_io import (disk_error, read_json, torch_save, write_json,
                                              write_text)
from llm_validation.config import TrainConfig
from llm_validation.records.metrics_rows import decode_row, encode_row

__all__ = [
    "RunResult",
    "RESUMABLE",
    "RESHARDABLE",
    "load_config",
    "check_resumable",
    "start_step",
    "compose_result",
    "process_seconds",
    "eval_row",
    "diverged_row",
    "diverged_message",
    "KEEP_CHECKPOINTS",
    "RunPaths",
    "MetricsWriter",
    "TruncatedMetricsWarning",
    "read_metrics",
    "rewrite_metrics_before",
    "save_checkpoint",
    "latest_checkpoint",
    "checkpoint_step",
    "load_checkpoint",
    "newest_intact_checkpoint",
    "rng_state",
    "set_rng_state",
]

#: Number of checkpoints kept in checkpoints/ (older ones are deleted).
KEEP_CHECKPOINTS = 2
_CKPT = re.compile(r"^step_(\d+)\.pt$")


class RunPaths:
    """The paths of a run directory."""

    def __init__(self, out_dir: str | Path) -> None:
        self.root = Path(out_dir)
        self.config = self.root / "config.json"
        self.metrics = self.root / "metrics.jsonl"
        self.checkpoints = self.root / "checkpoints"
        self.summary = self.root / "summary.json"

    def has_run(self) -> bool:
        """True when the directory already holds a run (metrics or checkpoints)."""
        return self.metrics.exists() or (self.checkpoints.is_dir()
                                         and any(self.checkpoints.iterdir()))


class TruncatedMetricsWarning(UserWarning):
    """A metrics.jsonl ends in a truncated line (a run killed mid-write); the line is skipped."""


class MetricsWriter:
    """Appends one JSON object per line and flushes it. A failed write (full disk) raises one
    ``OSError`` naming the file; the rows before it stay (a partial last line is skipped by
    :func:`read_metrics`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._failed = False
        try:
            self._f = open(self.path, "a", encoding="utf-8")
        except OSError as exc:
            raise disk_error(exc, self.path) from None

    def write(self, row: Mapping[str, Any]) -> None:
        try:
            self._f.write(encode_row(row) + "\n")
            self._f.flush()
        except OSError as exc:
            self._failed = True
            raise disk_error(exc, self.path) from None

    def close(self) -> None:
        try:
            self._f.close()
        except OSError as exc:   # the unflushed rest of a failed row: already reported
            if not self._failed:
                raise disk_error(exc, self.path) from None

    def __enter__(self) -> "MetricsWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a metrics.jsonl (a run directory or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"metrics file not found: {path}")
    text = path.read_text(encoding="utf-8")
    lines, complete = text.split("\n"), text.endswith("\n")
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(decode_row(line))
        except ValueError as exc:   # not JSON, not an object, or a row of unknown kind
            last = i == len(lines) - 1 and not complete
            if last:
                warnings.warn(f"{path}: skipping truncated last line {i + 1}",
                              TruncatedMetricsWarning, stacklevel=2)
                continue
            raise ValueError(f"{path}: line {i + 1} is not valid JSON: {exc}") from None
    return rows


def rewrite_metrics_before(path: str | Path, step: int) -> None:
    """Keep only rows with ``row["step"] < step`` (used on resume; drops a truncated line)."""
    path = Path(path)
    if not path.exists():
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedMetricsWarning)   # the line is dropped here
        rows = [r for r in read_metrics(path) if int(r.get("step", -1)) < step]
    write_text(path, "".join(encode_row(r) + "\n" for r in rows))


def rng_state() -> dict[str, Any]:
    """torch (CPU and CUDA), numpy and Python RNG states."""
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
             "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(paths: RunPaths, step: int, payload: Mapping[str, Any]) -> Path:
    """Write ``checkpoints/step_<step>.pt`` atomically; keep the newest KEEP_CHECKPOINTS."""
    paths.checkpoints.mkdir(parents=True, exist_ok=True)
    final = torch_save(paths.checkpoints / f"step_{step:08d}.pt", payload)   # atomic; a failed
    # write (full disk) leaves no .tmp and the older checkpoints intact
    found = sorted((int(m.group(1)), f) for f in paths.checkpoints.iterdir()
                   if (m := _CKPT.match(f.name)))
    for _, old in found[:-KEEP_CHECKPOINTS]:
        old.unlink()
    return final


def latest_checkpoint(paths: RunPaths) -> Path | None:
    """The checkpoint with the largest step, or None."""
    if not paths.checkpoints.is_dir():
        return None
    found = sorted((int(m.group(1)), f) for f in paths.checkpoints.iterdir()
                   if (m := _CKPT.match(f.name)))
    return found[-1][1] if found else None


def checkpoint_step(path: str | Path) -> int:
    """The step of a ``checkpoints/step_<N>.pt`` file (from its name)."""
    m = _CKPT.match(Path(path).name)
    if m is None:
        raise ValueError(f"{path} is not a checkpoint file (checkpoints/step_<N>.pt)")
    return int(m.group(1))


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    return torch.load(path, map_location=map_location, weights_only=False)


def newest_intact_checkpoint(paths: RunPaths, map_location: str | torch.device = "cpu"
                             ) -> tuple[Path | None, dict[str, Any] | None]:
    """(path, payload) of the newest checkpoint that loads, or (None, None). A newer one that
    does not load (truncated, corrupt) is skipped with one warning line on stderr naming it and
    the checkpoint used instead (:data:`KEEP_CHECKPOINTS` keeps an older one for this)."""
    if not paths.checkpoints.is_dir():
        return None, None
    found = sorted(((int(m.group(1)), f) for f in paths.checkpoints.iterdir()
                    if (m := _CKPT.match(f.name))), reverse=True)
    for i, (_, f) in enumerate(found):
        try:
            return f, load_checkpoint(f, map_location)
        except Exception as exc:  # noqa: BLE001 - any unreadable file: try the next older one
            older = found[i + 1][1].name if i + 1 < len(found) else "none left"
            print(f"warning: checkpoint {f} is unreadable ({type(exc).__name__}); trying the "
                  f"next older one ({older})", file=sys.stderr, flush=True)
    return None, None


# ------------------------------------------------------------------------------ run outcome
#: RunConfig fields that may change on resume (none of them changes the trajectory before the
#: old end; ``steps`` extends it).
RESUMABLE = ("steps", "resume", "out_dir", "eval_interval", "eval_batches", "stats_interval",
             "momentum_error_interval", "large_batch_factor", "checkpoint_interval",
             "checkpoint_minutes", "profile", "log_interval")
#: RunConfig fields of the grid that may change on resume when the maths stays the same
#: (:func:`check_resumable`; the pipeline's checkpoints are keyed by global parameter names).
RESHARDABLE = ("stages", "data_parallel", "microbatches", "pipeline")


def _delay_of(cfg: TrainConfig) -> int:
    """The schedule's delay: 1 for 2BW, 0 for GPipe / 1F1B, the emulated tau otherwise."""
    return {"2bw": 1, "gpipe": 0, "1f1b": 0}.get(cfg.run.pipeline, cfg.delay.tau)


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """Outcome of a run, emulated or pipelined (also written to summary.json)."""

    run_dir: str
    status: str                      # "completed" or "diverged"
    steps: int                       # optimizer steps done
    tokens: int                      # training tokens consumed
    final_loss: float | None         # training loss of the last step
    final_val_loss: float | None     # validation loss at the final weights
    best_val_loss: float | None
    wall_time_s: float               # this invocation
    tokens_per_s: float | None       # this invocation: its tokens over its whole wall time
    n_params: int
    message: str = ""
    steady_tokens_per_s: float | None = None   # the steps after warm-up, evaluations and
    #                                            checkpoints excluded (training.steady.SteadyClock)
    process_s: float | None = None   # every invocation that trained this run: the earlier ones up
    #                                  to the checkpoint this one continued from, plus this one
    #                                  (None: continued from a checkpoint that did not record it)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_config(run_dir: str | Path) -> TrainConfig:
    """The TrainConfig saved in ``run_dir/config.json``."""
    path = RunPaths(run_dir).config
    d = read_json(path)
    if not isinstance(d, dict):
        raise ValueError(f"{path} does not hold a JSON object (a run's config)")
    try:
        return TrainConfig.from_dict({k: v for k, v in d.items() if k != "meta"})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path} is not a valid run config: {exc}") from None


def check_resumable(saved: TrainConfig, cfg: TrainConfig) -> None:
    """Raise unless ``cfg`` differs from the saved config only in :data:`RESUMABLE` fields, or
    in :data:`RESHARDABLE` ones that keep the maths: the same global microbatch split
    (``data_parallel x microbatches``) and the same schedule delay (2BW = emulated tau 1)."""
    a, b = saved.to_dict(), cfg.to_dict()
    split = (saved.run.data_parallel * saved.run.microbatches,
             cfg.run.data_parallel * cfg.run.microbatches)
    if split[0] != split[1] or _delay_of(saved) != _delay_of(cfg):
        grid = ("--resume on another grid must keep data_parallel x microbatches "
                f"({split[0]} -> {split[1]}) and the schedule's delay "
                f"({_delay_of(saved)} -> {_delay_of(cfg)})")
        if any(a["run"][k] != b["run"][k] for k in RESHARDABLE):
            raise ValueError(grid)
    for sec in a:
        for key in a[sec]:
            if a[sec][key] != b[sec].get(key) and not (
                    sec == "run" and (key in RESUMABLE or key in RESHARDABLE)):
                raise ValueError(f"--resume: {sec}.{key} differs from the saved run "
                                 f"({a[sec][key]!r} -> {b[sec].get(key)!r}); only run."
                                 f"{{{', '.join(RESUMABLE)}}} may change")


def start_step(cfg: TrainConfig, paths: RunPaths, checkpoint_step: int | None) -> int:
    """The checks every run makes of its directory; returns the step to start from.

    A new run needs a directory without a run. ``--resume`` (``True`` or ``"auto"``) continues
    from ``checkpoint_step`` (the newest complete checkpoint) when there is one; without one it
    starts this run over from step 0 when the directory holds its config and the run never
    ended (stopped before its first checkpoint; an ended run without one is an error). The saved config must match up to :data:`RESUMABLE` fields (never
    another run's). ``--resume`` on a directory with no run at all is an error (a typo in a run
    name must never start a new run); ``"auto"`` starts one (what ``torchrun --max-restarts``
    needs)."""
    run = cfg.run
    if run.resume:
        if paths.config.exists():
            check_resumable(load_config(paths.root), cfg)
        if checkpoint_step is None and run.resume != "auto" and not paths.config.exists():
            raise ValueError(f"--resume: no checkpoint found in {paths.root} and no run to "
                             "continue there; drop --resume to start a new run")
        if checkpoint_step is None and run.resume != "auto" and paths.summary.exists():
            raise ValueError(f"--resume: no checkpoint found in {paths.root}: its run ended "
                             "and cannot be continued; choose another --out")
    elif paths.has_run():
        raise ValueError(f"run directory {paths.root} already holds a run; pass --resume or "
                         "choose another --out")
    start = checkpoint_step or 0
    if start > run.steps:
        raise ValueError(f"--steps {run.steps} is below the checkpoint's step {start}")
    return start


def eval_row(step: int, val_loss: float | None,
             final_val_loss: float | None = None) -> dict[str, Any]:
    """The closing evaluation row of metrics.jsonl at the final weights W(N): ``val_loss`` on
    the validation curve's own batches (so the curve stays on one set), and, when the closing
    evaluation uses a larger set (``run.final_eval_batches``), ``final_val_loss`` on it."""
    row = {"step": step, "val_loss": val_loss, "kind": "eval"}
    if final_val_loss is not None:
        row["final_val_loss"] = final_val_loss
    return row


def diverged_row(step: int, loss: float, val_loss: float | None, lr: float) -> dict[str, Any]:
    """The row of the step whose training loss was non-finite (the run stops there)."""
    return {"step": step, "loss": loss, "val_loss": val_loss, "lr": lr, "kind": "train",
            "diverged": True}


def diverged_message(loss: float | None, step: int) -> str:
    """One text for every runtime: what stopped a diverged run."""
    return f"non-finite training loss {loss} at step {step}; run stopped"


def compose_result(cfg: TrainConfig, paths: RunPaths, *, status: str, done: int, start: int,
                   final_val_loss: float | None, n_params: int, wall: float,
                   message: str = "", steady_tokens_per_s: float | None = None,
                   process_before: float | None = None) -> RunResult:
    """The RunResult of a finished invocation from the whole run's metrics (earlier invocations
    included); written to summary.json. ``steady_tokens_per_s``: the loop's steady-state rate
    (None where a runtime does not measure one). ``process_before``: the process seconds the
    checkpoint this invocation continued from recorded (ignored when ``start`` is 0; None when
    unknown, which leaves ``process_s`` None for a continued run)."""
    rows = read_metrics(paths.metrics)
    train_rows = [r for r in rows if r.get("kind", "train") == "train"]
    losses = [r["loss"] for r in train_rows if r.get("loss") is not None]
    vals = [r["val_loss"] for r in rows if r.get("val_loss") is not None]
    if status == "diverged":
        final_loss = train_rows[-1].get("loss") if train_rows else None
        final_loss = float("nan") if final_loss is None else final_loss
    else:
        final_loss = losses[-1] if losses else None
    trained = (done - start) * cfg.tokens_per_step
    result = RunResult(run_dir=str(paths.root), status=status, steps=done,
                       tokens=done * cfg.tokens_per_step, final_loss=final_loss,
                       final_val_loss=final_val_loss, best_val_loss=min(vals) if vals else None,
                       wall_time_s=wall, tokens_per_s=trained / wall if wall > 0 else None,
                       n_params=n_params, message=message,
                       steady_tokens_per_s=steady_tokens_per_s,
                       process_s=wall if start == 0 else
                       (None if process_before is None else process_before + wall))
    write_json(paths.summary, result.to_dict())
    return result


#: ``tokens / (tokens / wall)`` returns ``wall`` up to floating-point round-off: a run one
#: invocation trained whole is told apart from a continued one (whose rate covers fewer tokens).
SAME_WALL_RTOL = 1e-9


def process_seconds(summary: Mapping[str, Any]) -> tuple[float, bool]:
    """A finished run's process time from its ``summary.json`` and whether it is measured:
    ``process_s`` (every invocation that trained it) when recorded, ``(value, True)``; else its
    last invocation's rate over all its tokens (``tokens / tokens_per_s``: the wall time itself
    when one invocation trained the whole run, an estimate for a run continued from a checkpoint
    written before ``process_s`` was recorded), ``(value, False)``; else ``wall_time_s``, also
    ``False``."""
    measured = summary.get("process_s")
    if measured is not None:
        return float(measured), True
    wall = float(summary.get("wall_time_s") or 0.0)
    rate, tokens = summary.get("tokens_per_s"), summary.get("tokens")
    if rate and tokens:
        whole = float(tokens) / float(rate)
        return whole, whole <= wall * (1 + SAME_WALL_RTOL)
    return wall, False
