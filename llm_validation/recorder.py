"""``StatsRecorder``: the project's gradient statistics recorded from ANY model, optimizer and loop.

A researcher's own loop (nanoGPT-style, a Hugging Face model, a torchtitan step) calls the
recorder where it would call ``optimizer.step()``; the recorder takes the step through the same
probe as the project's own loop (:func:`llm_validation.training.probe.probed_step`, the
statistics of :mod:`llm_validation.training.stats`) and writes a run directory that
``delaybound validate`` reads::

    opt = DelayedOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3), tau=1, ef_lambda=1.0)
    rec = StatsRecorder(model, opt, "runs/mine-2bw-ef", seed=0, batch_size=B, steps=N,
                        microbatches=M, stats_interval=10, momentum_error_interval=20)
    for t in range(N):
        x, y = get_batch(t)                          # the batch of step t
        def closure():                               # this batch's loss at the current weights,
            losses = []                              # backward inside (as forward/backward are)
            for xm, ym in zip(x.chunk(M), y.chunk(M)):
                loss = loss_fn(model(xm), ym)
                (loss / M).backward()
                losses.append(loss.detach())
                rec.observe_microbatch()             # the gradient-noise statistic
            return torch.stack(losses).mean()
        with opt.delayed_weights():                  # W(t - tau); a plain optimizer: no block
            loss = closure()
        rec.step(loss, closure)                      # opt.step() + zero_grad() + the row
    rec.finish(val_loss=evaluate(model))             # closing eval row + summary.json

Algorithm (step t; identical to the emulated loop, ``training/loop.py``): the step's gradient
is in ``p.grad`` (taken at the read point); on every ``stats_interval``-th step the recorder
calls ``closure`` once more at the other point of the pair (tau > 0: W(t), the fresh gradient;
tau = 0: W(t-1)), ``large_closure`` at W(t) when the momentum error is due, dry-runs the base
optimizer on the fresh gradient (restored exactly), then steps; the row holds every key of
:data:`llm_validation.records.metrics_rows.TRAIN_KEYS`. Recording never changes the trajectory.

Geometry (the norm of each parameter, whose dual measures its gradient): given by
``geometry`` (one name for all, a mapping parameter name -> name, or a callable ``(name,
param) -> name``), else the group's ``geometry`` / ``kind`` key (``build_optimizer``'s
groups), else inferred from the optimizer's class (``optim.optimizer_kind``: AdamW, Adam,
NAdam, Lion, Adan -> l_inf; SGD -> l2; Muon, NorMuon -> spectral; SOAP -> spectral for matrices
it preconditions, else l_inf), else :data:`DEFAULT_GEOMETRY` (l2: the Euclidean norm, which
makes no claim about the update's shape).

Run directory (``rundir``): ``config.json`` holds what the recorder knows (``model``: the
class and parameter count, ``external: true``; ``optim``: the rule and the first group's
hyper-parameters; ``delay``: the wrapper's tau / EF / correction; ``run``: seed, batch size,
steps, intervals; ``data``: ``seq_len``; each section updated by ``config``; ``meta``: the
geometry of every parameter and the environment); ``metrics.jsonl`` the documented row shapes;
``summary.json`` the ``RunResult``. Two recorded runs pair for a gap when their config.json
agree up to seed, delay and bookkeeping fields (``validation.runs.RunRecord.condition``).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import torch
from torch import Tensor, nn

from llm_validation.records.metrics_rows import TRAIN_KEYS
from llm_validation.records.provenance import environment
from llm_validation.rundir import (MetricsWriter, RunPaths, RunResult, diverged_message,
                                   diverged_row, eval_row, read_metrics)
from llm_validation.records.atomic_io import write_json
from llm_validation.records.tensorboard_log import TensorboardLog
from llm_validation.training import stats
from llm_validation.training.delay import DelayedOptimizer
from llm_validation.training.flush import RowBuffer
from llm_validation.training.loop import gradient_of
from llm_validation.training.optim import (ChainedOptimizer, group_geometry, kind_geometry,
                                           optimizer_kind)
from llm_validation.training.probe import StepProbe, probed_step
from theory.geometry import Geometry, get_geometry

__all__ = ["StatsRecorder", "DEFAULT_GEOMETRY", "infer_geometries", "recorder_config"]

#: Geometry of a parameter whose optimizer this project does not know and for which none was
#: given: the Euclidean norm (its dual is itself), which assumes nothing about the update.
DEFAULT_GEOMETRY = "l2"

GeometrySpec = str | Mapping[str, str] | Callable[[str, Tensor], str | None] | None


def _children(base: Any) -> tuple:
    return base.optimizers if isinstance(base, ChainedOptimizer) else (base,)


def _check(name: str, p: Tensor, geom: Geometry) -> Geometry:
    if geom.event_ndim == 2 and p.ndim != 2:
        raise ValueError(f"StatsRecorder: geometry {geom.name!r} of parameter {name!r} needs a "
                         f"matrix, got shape {tuple(p.shape)}")
    return geom


def infer_geometries(base: Any, names: Mapping[int, str], geometry: GeometrySpec = None
                     ) -> dict[int, Geometry]:
    """``id(p) -> Geometry`` for every parameter of ``base`` (a torch optimizer or a
    ``ChainedOptimizer``), by the rules of the module docstring; ``names``: ``id(p) -> name``."""
    out: dict[int, Geometry] = {}
    for child in _children(base):
        kind = optimizer_kind(child)
        for group in child.param_groups:
            for p in group["params"]:
                name = names[id(p)]
                given = geometry(name, p) if callable(geometry) else \
                    geometry.get(name) if isinstance(geometry, Mapping) else geometry
                if given is not None:
                    geom = get_geometry(given)
                elif "geometry" in group or "kind" in group:
                    geom = group_geometry(group)
                else:
                    geom = kind_geometry(kind, p) or get_geometry(DEFAULT_GEOMETRY)
                out[id(p)] = _check(name, p, geom)
    return out


def _optim_section(base: Any) -> dict[str, Any]:
    """The first group's hyper-parameters under ``OptimConfig``'s field names."""
    child = _children(base)[0]
    g = child.param_groups[0]
    betas = g.get("betas")
    mom = g.get("momentum", betas[0] if betas else 0.0)
    out = {"name": g.get("kind") or optimizer_kind(child) or type(child).__name__.lower(),
           "lr": float(g.get("base_lr", g.get("initial_lr", g["lr"]))),
           "weight_decay": float(g.get("weight_decay", 0.0)),
           "beta1": float(betas[0] if betas else mom), "momentum": float(mom),
           "nesterov": bool(g.get("nesterov", False))}
    if betas:
        out["beta2"] = float(betas[-1])
    if "eps" in g:
        out["eps"] = float(g["eps"])
    return out


def recorder_config(model: nn.Module, opt: DelayedOptimizer, *, seed: int, batch_size: int,
                    steps: int | None, microbatches: int, stats_interval: int,
                    momentum_error_interval: int, out_dir: str, seq_len: int | None = None,
                    config: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The config.json sections a recorder writes (module docstring), ``config`` on top."""
    taus = set(opt.taus)
    d: dict[str, Any] = {
        "model": {"name": type(model).__name__, "external": True,
                  "class": f"{type(model).__module__}.{type(model).__qualname__}",
                  "n_params": sum(p.numel() for p in model.parameters())},
        "data": {"seq_len": seq_len},
        "optim": _optim_section(opt.optimizer),
        "delay": {"tau": opt.tau, "ef_lambda": opt.ef_lambda, "ef_level": opt.ef_level,
                  "stage_taus": None if len(taus) <= 1 else list(opt.taus),
                  "sync_start": opt.sync_start, "sync_cooldown": opt.sync_cooldown,
                  "correction": opt.correction, "correction_coef": opt.correction_coef},
        "run": {"steps": steps, "seed": seed, "batch_size": batch_size,
                "microbatches": microbatches, "stats_interval": stats_interval,
                "momentum_error_interval": momentum_error_interval, "out_dir": out_dir,
                "pipeline": "none", "stages": 1, "data_parallel": 1},
    }
    for section, values in (config or {}).items():
        if section == "meta" or not isinstance(values, Mapping):
            raise ValueError(f"StatsRecorder: config[{section!r}] must be a mapping of a "
                             "section (model, data, optim, delay, run or your own)")
        d.setdefault(section, {}).update(values)
    return d


def _int(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"StatsRecorder: {name}={value!r} must be an int >= {lo}")
    return value


class StatsRecorder:
    """``StatsRecorder(model, optimizer, out_dir, *, seed, batch_size, steps=None,
    seq_len=None, microbatches=1, stats_interval=10, momentum_error_interval=0,
    geometry=None, config=None)``: records the project's statistics from your loop into the
    run directory ``out_dir`` (module docstring).

    ``optimizer``: a :class:`~llm_validation.training.delay.DelayedOptimizer` or any torch
    optimizer (wrapped with tau = 0, bitwise the bare optimizer); its parameters must be
    ``model``'s. ``seed`` and ``batch_size`` identify the run (runs pair by seed);
    ``microbatches``: the M backward passes of ``loss_m / M`` each step accumulates (the noise
    statistic needs M >= 2 and :meth:`observe_microbatch`); ``momentum_error_interval`` > 0
    needs ``large_closure`` in :meth:`step`. A directory that already holds a run is refused.
    ``tensorboard``: a folder where every row is also written as TensorBoard scalars
    (:class:`~llm_validation.records.tensorboard_log.TensorboardLog`; the optional extra
    ``delaybound[tensorboard]``).
    """

    def __init__(self, model: nn.Module, optimizer: Any, out_dir: str | Path, *, seed: int,
                 batch_size: int, steps: int | None = None, seq_len: int | None = None,
                 microbatches: int = 1, stats_interval: int = 10,
                 momentum_error_interval: int = 0, geometry: GeometrySpec = None,
                 config: Mapping[str, Mapping[str, Any]] | None = None,
                 tensorboard: str | Path | None = None) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"StatsRecorder: model must be a torch.nn.Module, got "
                            f"{type(model).__name__}")
        _int("seed", seed, 0)
        _int("batch_size", batch_size, 1)
        _int("microbatches", microbatches, 1)
        _int("stats_interval", stats_interval, 0)
        _int("momentum_error_interval", momentum_error_interval, 0)
        for name, value in (("steps", steps), ("seq_len", seq_len)):
            if value is not None:
                _int(name, value, 1)
        opt = optimizer if isinstance(optimizer, DelayedOptimizer) else \
            DelayedOptimizer(optimizer, tau=0)
        names = {id(p): n for n, p in model.named_parameters()}
        foreign = [i for i, p in enumerate(opt.params) if id(p) not in names]
        if foreign:
            raise ValueError(f"StatsRecorder: {len(foreign)} optimizer parameter(s) are not "
                             "parameters of the model")
        geoms = infer_geometries(opt.optimizer, names, geometry)
        self.model, self.opt, self.paths = model, opt, RunPaths(out_dir)
        if self.paths.has_run() or self.paths.config.exists():
            raise ValueError(f"run directory {self.paths.root} already holds a run; choose "
                             "another out_dir")
        self.geoms = [geoms[id(p)] for p in opt.params]
        self.steps, self.batch_size, self.seq_len = steps, batch_size, seq_len
        self.microbatches = microbatches
        self.probe = StepProbe(opt, self.geoms, tau=opt.tau, stats_interval=stats_interval,
                               momentum_error_interval=momentum_error_interval)
        self.config = recorder_config(
            model, opt, seed=seed, batch_size=batch_size, steps=steps,
            microbatches=microbatches, stats_interval=stats_interval,
            momentum_error_interval=momentum_error_interval, out_dir=str(out_dir),
            seq_len=seq_len, config=config)
        self.config["meta"] = {
            "recorder": {"optimizer_class": [type(c).__name__ for c in _children(opt.optimizer)],
                         "geometry": {names[id(p)]: g.name for p, g in zip(opt.params,
                                                                           self.geoms)}},
            "n_params": self.config["model"]["n_params"], "environment": environment()}
        self._tb = TensorboardLog(tensorboard) if tensorboard is not None else None
        self.paths.root.mkdir(parents=True, exist_ok=True)
        write_json(self.paths.config, self.config)
        self._writer = MetricsWriter(self.paths.metrics)
        self._noise: stats.MicrobatchGradVariance | None = None
        self._stepping = False
        self._t0, self.t, self.status, self.message = time.perf_counter(), 0, "running", ""
        self.last_loss: float | None = None

    # ---------------------------------------------------------------------------- the loop
    @property
    def optimizer(self) -> DelayedOptimizer:
        """The (delay-emulating) optimizer the recorder steps."""
        return self.opt

    def active(self) -> bool:
        """Whether the current step records the expensive statistics."""
        return self.probe.active(self.t)

    def momentum_due(self) -> bool:
        """Whether the current step measures the momentum error (calls ``large_closure``)."""
        return self.probe.momentum_due(self.t)

    def observe_microbatch(self) -> None:
        """Call after each microbatch's backward of the step (``(loss_m / M).backward()``):
        the microbatch gradients give the noise statistic (statistics steps, M >= 2)."""
        if self.microbatches < 2 or self._stepping or not self.active():
            return      # (the recorder's own extra passes through a closure are not the step's)
        if self._noise is None:      # p.grad held nothing before the first microbatch
            self._noise = stats.MicrobatchGradVariance(self.opt.params, self.microbatches)
        self._noise.observe()

    def step(self, loss: Any, closure: Callable[[], Any], *, val_loss: Any = None,
             large_closure: Callable[[], Any] | None = None,
             lr: float | None = None) -> dict[str, Any]:
        """``optimizer.step()`` + ``zero_grad()`` of step t with its statistics; returns the
        metrics row written. ``loss``: the step's batch loss (float or tensor); ``closure()``:
        re-runs this batch's forward and backward at the current weights and returns its loss
        (called only on statistics steps); ``large_closure()``: the same on a larger batch
        (momentum error steps); ``val_loss``: a validation loss at W(t) (before this step);
        ``lr``: the lr to log (default: the first param group's). A non-finite loss writes its
        row and summary.json (status ``diverged``) and raises ``FloatingPointError``."""
        if self.status != "running":
            raise RuntimeError(f"StatsRecorder.step: the run is {self.status}")
        if not callable(closure):
            raise TypeError("StatsRecorder.step: closure must be a callable that re-runs the "
                            "step's batch (forward + backward) and returns its loss")
        if torch.is_tensor(loss):
            loss = loss.detach().double()
        t, params = self.t, self.opt.params
        lr = float(self.opt.param_groups[0]["lr"]) if lr is None else float(lr)
        big = None if large_closure is None else (lambda: gradient_of(params, None,
                                                                      large_closure)[1])
        if self.probe.momentum_due(t) and big is None:
            raise ValueError("StatsRecorder.step: the momentum error is due at this step "
                             "(momentum_error_interval > 0) but no large_closure was given")
        noise, self._noise, self._stepping = self._noise, None, True
        try:
            part, f_x, f_y = probed_step(self.probe, t, loss=loss, noise=noise,
                                         big_gradient=big,
                                         gradient_at=lambda w: gradient_of(params, w, closure))
        finally:
            self._stepping = False
        buf = RowBuffer()
        buf.add(t, part, loss=loss, f_x=f_x, f_y=f_y, val_loss=val_loss)
        rec = buf.flush()[0]
        rec.pop("step")
        loss_f, vl = rec.pop("loss"), rec.pop("val_loss", None)
        self.t += 1
        if not math.isfinite(loss_f):
            self.status, self.message = "diverged", diverged_message(loss_f, t)
            self._writer.write(diverged_row(t, loss_f, vl, lr))
            self._close(None)
            raise FloatingPointError(f"StatsRecorder: {self.message}")
        row = stats.finalize(rec, step=t, loss=loss_f, lr=lr, val_loss=vl,
                             microbatches=self.microbatches, f_x=rec.pop("f_x", None),
                             f_y=rec.pop("f_y", None))
        row["tokens"] = (t + 1) * self.batch_size * self.seq_len if self.seq_len else None
        self._writer.write(row)
        if self._tb is not None:
            self._tb.row(t, row)
        self.last_loss = loss_f
        return {k: row.get(k) for k in TRAIN_KEYS}

    def finish(self, val_loss: float | None = None, *,
               final_val_loss: float | None = None) -> RunResult:
        """Close the run: the closing eval row (``val_loss`` at the final weights; with a
        larger closing set ``final_val_loss`` too), ``summary.json`` (status ``completed``;
        config.json's ``run.steps`` becomes the steps done when ``steps`` was not given)."""
        if self.status != "running":
            raise RuntimeError(f"StatsRecorder.finish: the run is {self.status}")
        val = None if val_loss is None else float(val_loss)
        fin = None if final_val_loss is None else float(final_val_loss)
        self._writer.write(eval_row(self.t, val, fin))
        if self._tb is not None:
            self._tb.row(self.t, eval_row(self.t, val, fin))
        self.status = "completed"
        return self._close(fin if fin is not None else val)

    def _close(self, final_val: float | None) -> RunResult:
        self._writer.close()
        if self._tb is not None:
            self._tb.close()
        if self.steps is None:
            self.config["run"]["steps"] = self.t
            write_json(self.paths.config, self.config)
        wall = time.perf_counter() - self._t0
        rows = read_metrics(self.paths.metrics)
        vals = [r["val_loss"] for r in rows if r.get("val_loss") is not None]
        tokens = self.t * self.batch_size * (self.seq_len or 0)
        result = RunResult(run_dir=str(self.paths.root), status=self.status, steps=self.t,
                           tokens=tokens, final_loss=self.last_loss if self.status ==
                           "completed" else float("nan"), final_val_loss=final_val,
                           best_val_loss=min(vals) if vals else None, wall_time_s=wall,
                           tokens_per_s=tokens / wall if tokens and wall > 0 else None,
                           n_params=self.config["model"]["n_params"], message=self.message,
                           process_s=wall)
        write_json(self.paths.summary, result.to_dict())
        return result

    def __enter__(self) -> "StatsRecorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        """Leaving the block without :meth:`finish` (a crash, a break): the rows are kept and no
        summary is written, so ``validate`` lists the run as unfinished."""
        if self.status == "running":
            self._writer.close()
            if self._tb is not None:
                self._tb.close()
            self.status = "stopped"
