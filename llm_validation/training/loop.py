"""The training loop: ``train(cfg) -> RunResult`` (one process; CPU or one GPU).

One step t (B = batch_size, T = seq_len, M = microbatches)::

    x, y = sampler.next()                        # [B, T] int64, batch t of the seed's stream
    with opt.delayed_weights():                  # parameters hold W(max(t - tau, 0))
        for m in range(M):                       # fixed order
            (lm_loss(model(x_m), y_m) / M).backward()   # x_m: [B/M, T]
    opt.step(); opt.zero_grad()                  # base step on W(t), then EF

Validation loss at W(t) before step t every ``eval_interval`` steps and at W(N) at the end
(same fixed validation batches every time). Statistics (``stats``) every ``stats_interval``
steps cost one extra forward/backward (the fresh gradient at W(t), or for tau = 0 the gradient
at W(t-1)) and one dry-run optimizer step (restored exactly), and never change the trajectory.
A non-finite loss stops the run: the row is written, status ``diverged``, message on stderr.
``cfg.run.pipeline != "none"`` hands the run to ``llm_validation.pipeline.twobw.launch(cfg)``.
Resuming (``cfg.run.resume``) loads the latest checkpoint and continues bitwise on CPU; only
the fields in :data:`RESUMABLE` may differ from the saved config (a larger ``steps`` extends a
run; with a decaying lr schedule the schedule then follows the new length).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import Tensor

from llm_validation.config import TrainConfig
from llm_validation.rundir import (
    MetricsWriter,
    RunPaths,
    environment,
    latest_checkpoint,
    load_checkpoint,
    read_json,
    read_metrics,
    rewrite_metrics_before,
    rng_state,
    save_checkpoint,
    set_rng_state,
    write_json,
)
from llm_validation.training import stats
from llm_validation.training.data import (
    STREAM_LARGE,
    STREAM_VAL,
    WindowSampler,
    load_corpus,
)
from llm_validation.training.delay import DelayedOptimizer
from llm_validation.training.model import Transformer, lm_loss
from llm_validation.training.optim import (
    build_optimizer,
    group_geometry,
    lr_factor,
    normalized_momentum,
    set_lr,
)

__all__ = ["RunResult", "train", "load_config", "forward_backward", "evaluate", "RESUMABLE",
           "resolve_device"]

#: RunConfig fields that may change on resume (none of them changes the trajectory before
#: the old end; ``steps`` extends it).
RESUMABLE = ("steps", "resume", "out_dir", "eval_interval", "eval_batches", "stats_interval",
             "momentum_error_interval", "large_batch_factor", "checkpoint_interval")


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """Outcome of a run (also written to summary.json)."""

    run_dir: str
    status: str                      # "completed" or "diverged"
    steps: int                       # optimizer steps done
    tokens: int                      # training tokens consumed
    final_loss: float | None         # training loss of the last step
    final_val_loss: float | None     # validation loss at the final weights
    best_val_loss: float | None
    wall_time_s: float               # this invocation
    tokens_per_s: float | None       # this invocation
    n_params: int
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("RunConfig.device='cuda' but no CUDA device is available")
    return torch.device(name)


def forward_backward(model: torch.nn.Module, x: Tensor, y: Tensor, microbatches: int, *,
                     ctx: Callable[[], Any] = nullcontext,
                     observe: Callable[[], None] | None = None) -> float:
    """Accumulate ``(loss_m / M).backward()`` over the M microbatches in order; mean loss."""
    losses = []
    for xm, ym in zip(x.chunk(microbatches), y.chunk(microbatches)):  # [B/M, T] each
        with ctx():
            loss = lm_loss(model(xm), ym)
        (loss / microbatches).backward()
        losses.append(loss.detach())
        if observe is not None:
            observe()
    return float(torch.stack(losses).double().mean())


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches: Sequence[tuple[Tensor, Tensor]], microbatches: int,
             ctx: Callable[[], Any] = nullcontext) -> float:
    """Mean loss over the fixed validation batches."""
    losses = []
    for x, y in batches:
        for xm, ym in zip(x.chunk(microbatches), y.chunk(microbatches)):
            with ctx():
                losses.append(lm_loss(model(xm), ym).double())
    return float(torch.stack(losses).mean())


@contextmanager
def _weights(params: Sequence[Tensor], weights: Sequence[Tensor] | None) -> Iterator[None]:
    """Temporarily give each parameter the data of ``weights`` (None: unchanged)."""
    if weights is None:
        yield
        return
    saved = [p.data for p in params]
    for p, w in zip(params, weights):
        p.data = w
    try:
        yield
    finally:
        for p, s in zip(params, saved):
            p.data = s


class _Probe:
    """The expensive statistics of one step (before and after ``opt.step``)."""

    def __init__(self, cfg: TrainConfig, model: Transformer, opt: DelayedOptimizer, corpus: Any,
                 ctx: Callable[[], Any], device: torch.device) -> None:
        self.cfg, self.model, self.opt, self.ctx, self.device = cfg, model, opt, ctx, device
        self.geoms = [group_geometry(g) for g in opt.param_groups for _ in g["params"]]
        self.large = WindowSampler(corpus.train, cfg.run.batch_size * cfg.run.large_batch_factor,
                                   cfg.data.seq_len, cfg.run.seed, STREAM_LARGE)
        self.prev_base: list[Tensor] | None = None     # v_{t-1}
        self.prev_applied: list[Tensor] | None = None  # W(t) - W(t-1)
        self.prev_step = -1                            # the step they belong to

    def active(self, step: int) -> bool:
        k = self.cfg.run.stats_interval
        return k > 0 and step % k == 0

    def record(self, step: int) -> bool:
        return self.active(step) or self.active(step + 1)

    def _grads(self, weights: Sequence[Tensor] | None, x: Tensor, y: Tensor, m: int
               ) -> tuple[float, list[Tensor]]:
        params = self.opt.params
        saved = [p.grad for p in params]
        for p in params:
            p.grad = None
        with _weights(params, weights):
            loss = forward_backward(self.model, x, y, m, ctx=self.ctx)
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        for p, g in zip(params, saved):
            p.grad = g
        return loss, grads

    def before_step(self, step: int, x: Tensor, y: Tensor, loss: float) -> dict[str, Any]:
        opt, params, run = self.opt, self.opt.params, self.cfg.run
        have_prev = step > 0 and self.prev_step == step - 1
        g_read = [p.grad for p in params]
        out: dict[str, Any] = {"partials": stats.grad_partials(g_read, self.geoms)}
        part = out["partials"]
        x_now = [p.detach() for p in params]
        if opt.tau > 0:   # pair (W(t), read point): fresh gradient at W(t) on the same batch
            y_pt = opt.read_weights()
            f_x, g_fresh = self._grads(None, x, y, run.microbatches)
            f_y, g_y = loss, g_read
        else:             # pair (W(t), W(t-1)): the step's gradient is already fresh
            f_x, g_fresh = loss, g_read
            y_pt = [a - d for a, d in zip(x_now, self.prev_applied)] if have_prev else None
            if y_pt is not None:
                f_y, g_y = self._grads(y_pt, x, y, run.microbatches)
        if y_pt is not None:
            part.update(stats.pair_partials(x_now, y_pt, g_fresh, g_y, self.geoms))
            out.update(f_x=f_x, f_y=f_y)
        lam = opt.ef_lambda if opt.ef is not None else 0.0
        v_prev = opt.ef.v_prev if opt.ef is not None and opt.t > 0 else \
            (self.prev_base if have_prev else None)
        if v_prev is not None:
            part.update(stats.drift_partials(x_now, opt.read_weights(), v_prev, lam))
        out["v_prev"] = [v.clone() for v in v_prev] if v_prev is not None else None
        out["v_fresh"] = self.opt.dry_run_base_update(g_fresh)
        k = run.momentum_error_interval
        if k > 0 and step % k == 0:
            xb, yb = self.large.batch(step)
            _, out["big_grad"] = self._grads(None, xb.to(self.device), yb.to(self.device),
                                             run.microbatches * run.large_batch_factor)
        return out

    def after_step(self, step: int, pre: dict[str, Any] | None) -> dict[str, float]:
        """Partials that need the step's updates; remembers v_t and dx_t for step t + 1."""
        opt = self.opt
        part: dict[str, float] = {}
        if pre is not None:
            dx, v = opt.last_update, opt.last_base_update
            part.update(stats.update_partials(dx, self.geoms, v, pre["v_prev"]))
            part.update(stats.fresh_partials(dx, v, pre["v_fresh"]))
            if "big_grad" in pre:
                mom = normalized_momentum(opt.optimizer, opt.t)
                if len(mom) == len(opt.params):
                    m = [mom[id(p)] for p in opt.params]
                    part.update(stats.momentum_partials(m, pre["big_grad"], self.geoms))
        if self.record(step):
            self.prev_base, self.prev_applied, self.prev_step = \
                opt.last_base_update, opt.last_update, step
        return part

    def state_dict(self) -> dict[str, Any]:
        return {"prev_base": self.prev_base, "prev_applied": self.prev_applied,
                "prev_step": self.prev_step}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.prev_base, self.prev_applied = sd["prev_base"], sd["prev_applied"]
        self.prev_step = int(sd["prev_step"])


def _check_vocab(tokens: Tensor, vocab_size: int, what: str) -> None:
    top = int(tokens.max())
    if top >= vocab_size:
        raise ValueError(f"{what} has token id {top} >= ModelConfig.vocab_size={vocab_size}; "
                         "the shards need a larger vocabulary")


def load_config(run_dir: str | Path) -> TrainConfig:
    """The TrainConfig saved in ``run_dir/config.json``."""
    d = read_json(RunPaths(run_dir).config)
    return TrainConfig.from_dict({k: v for k, v in d.items() if k != "meta"})


def _check_resumable(saved: TrainConfig, cfg: TrainConfig) -> None:
    a, b = saved.to_dict(), cfg.to_dict()
    for sec in a:
        for key in a[sec]:
            if a[sec][key] != b[sec][key] and not (sec == "run" and key in RESUMABLE):
                raise ValueError(f"--resume: {sec}.{key} differs from the saved run "
                                 f"({a[sec][key]!r} -> {b[sec][key]!r}); only run."
                                 f"{{{', '.join(RESUMABLE)}}} may change")


def train(cfg: TrainConfig, *, progress: bool = True,
          callback: Callable[[int, dict[str, Any]], None] | None = None) -> RunResult:
    """Run ``cfg`` (see the module docstring). ``callback(step, row)`` is called after each
    step's row and checkpoint are written (tests use it to interrupt a run)."""
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"train needs a TrainConfig, got {type(cfg).__name__}")
    if cfg.run.pipeline != "none":
        from llm_validation.pipeline.twobw import launch
        return launch(cfg, progress=progress)
    run, t_start = cfg.run, time.perf_counter()
    paths, device = RunPaths(run.out_dir), resolve_device(run.device)
    ctx = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) \
        if run.dtype == "bfloat16" else nullcontext
    corpus = load_corpus(cfg.data)
    model = Transformer(cfg.model, seed=run.seed).to(device)
    n_params = model.num_params()
    param_stage = None
    if cfg.delay.stage_taus is not None:   # PipeDream emulation: groups per stage
        param_stage = {id(p): s for s, st in enumerate(model.split(len(cfg.delay.stage_taus)))
                       for p in st.parameters()}
    base = build_optimizer(model, cfg.optim, param_stage=param_stage)
    group_taus = None if param_stage is None else \
        [cfg.delay.stage_taus[g["stage"]] for g in base.param_groups]
    opt = DelayedOptimizer(base, tau=cfg.delay.tau, ef_lambda=cfg.delay.ef_lambda,
                           ef_level=cfg.delay.ef_level, group_taus=group_taus)
    sampler = WindowSampler(corpus.train, run.batch_size, cfg.data.seq_len, run.seed)
    val_sampler = WindowSampler(corpus.val, run.batch_size, cfg.data.seq_len, run.seed, STREAM_VAL)
    val_batches = [tuple(t.to(device) for t in val_sampler.batch(i))
                   for i in range(run.eval_batches)]
    if not corpus.byte_level:
        for i, (vx, vy) in enumerate(val_batches):
            _check_vocab(torch.cat([vx, vy[:, -1:]], 1), cfg.model.vocab_size, f"val batch {i}")
    probe = _Probe(cfg, model, opt, corpus, ctx, device)

    start, ckpt = 0, latest_checkpoint(paths) if run.resume else None
    if run.resume and paths.config.exists():
        _check_resumable(load_config(paths.root), cfg)
    elif not run.resume and paths.has_run():
        raise ValueError(f"run directory {paths.root} already holds a run; pass --resume or "
                         "choose another --out")
    if ckpt is not None:
        state = load_checkpoint(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sampler.load_state_dict(state["sampler"])
        probe.load_state_dict(state["probe"])
        set_rng_state(state["rng"])
        start = int(state["step"])
    if start > run.steps:
        raise ValueError(f"--steps {run.steps} is below the checkpoint's step {start}")
    paths.root.mkdir(parents=True, exist_ok=True)
    rewrite_metrics_before(paths.metrics, start)
    write_json(paths.config, {**cfg.to_dict(), "meta": {
        "environment": environment(), "corpus": corpus.description, "n_params": n_params,
        "resumed_from_step": start if ckpt is not None else None}})

    def checkpoint(done: int) -> None:
        save_checkpoint(paths, done, {"step": done, "model": model.state_dict(),
                                      "optimizer": opt.state_dict(),
                                      "sampler": sampler.state_dict(),
                                      "probe": probe.state_dict(), "rng": rng_state(),
                                      "config": cfg.to_dict()})

    status, message, loss = "completed", "", float("nan")
    every = max(1, run.steps // 20)
    with MetricsWriter(paths.metrics) as metrics:
        for step in range(start, run.steps):
            factor = lr_factor(step, cfg.optim, run.steps)
            set_lr(opt, factor)
            val_loss = None
            if run.eval_interval and step % run.eval_interval == 0:
                val_loss = evaluate(model, val_batches, run.microbatches, ctx)   # at W(t)
            x, y = (t.to(device) for t in sampler.next())                       # [B, T]
            if not corpus.byte_level:
                _check_vocab(y, cfg.model.vocab_size, f"training batch {step}")
            active = probe.active(step)
            noise = stats.MicrobatchGradVariance(opt.params, run.microbatches) \
                if active and run.microbatches > 1 else None
            with opt.delayed_weights():                                          # W(t - tau)
                loss = forward_backward(model, x, y, run.microbatches, ctx=ctx,
                                        observe=noise.observe if noise else None)
            if not math.isfinite(loss):
                status = "diverged"
                message = f"non-finite training loss {loss} at step {step}; run stopped"
                metrics.write({**stats.finalize({}, step=step, loss=loss, val_loss=val_loss,
                                                lr=cfg.optim.lr * factor), "diverged": True})
                print(f"[train] {message}", file=sys.stderr, flush=True)
                break
            pre = probe.before_step(step, x, y, loss) if active else None
            part = pre["partials"] if pre else stats.grad_partials([p.grad for p in opt.params])
            opt.step(record=probe.record(step))                                  # W(t+1)
            opt.zero_grad()
            part.update(probe.after_step(step, pre))
            if noise is not None:
                part.update(noise.partials())
            row = stats.finalize(part, step=step, loss=loss, lr=cfg.optim.lr * factor,
                                 val_loss=val_loss, microbatches=run.microbatches,
                                 f_x=pre.get("f_x") if pre else None,
                                 f_y=pre.get("f_y") if pre else None)
            row["tokens"] = (step + 1) * cfg.tokens_per_step
            metrics.write(row)
            if run.checkpoint_interval and (step + 1) % run.checkpoint_interval == 0:
                checkpoint(step + 1)
            if progress and (step % every == 0 or step == run.steps - 1):
                vl = f" val {val_loss:.4f}" if val_loss is not None else ""
                print(f"[train] step {step + 1}/{run.steps} loss {loss:.4f}{vl} "
                      f"lr {cfg.optim.lr * factor:.3g}", file=sys.stderr, flush=True)
            if callback is not None:
                callback(step, row)
        done = opt.t
        final_val = None
        if status == "completed":
            final_val = evaluate(model, val_batches, run.microbatches, ctx)     # at W(N)
            metrics.write(stats.finalize({}, step=done, val_loss=final_val))
            if not (run.checkpoint_interval and done % run.checkpoint_interval == 0):
                checkpoint(done)
    wall = time.perf_counter() - t_start
    trained = (done - start) * cfg.tokens_per_step
    rows = read_metrics(paths.metrics)   # the whole run, including earlier invocations
    losses = [r["loss"] for r in rows if r.get("loss") is not None]
    vals = [r["val_loss"] for r in rows if r.get("val_loss") is not None]
    result = RunResult(run_dir=str(paths.root), status=status, steps=done,
                       tokens=done * cfg.tokens_per_step,
                       final_loss=loss if status == "diverged" else (losses[-1] if losses else None),
                       final_val_loss=final_val, best_val_loss=min(vals) if vals else None,
                       wall_time_s=wall, tokens_per_s=trained / wall if wall > 0 else None,
                       n_params=n_params, message=message)
    write_json(paths.summary, result.to_dict())
    if progress and status == "completed":
        print(f"[train] done: {done} steps, val_loss {final_val:.4f}, {wall:.1f}s",
              file=sys.stderr, flush=True)
    return result
