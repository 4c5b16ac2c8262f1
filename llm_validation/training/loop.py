"""The training loop: ``train(cfg) -> RunResult`` (one process; CPU or one GPU).

One step t (B = batch_size, T = seq_len, M = microbatches; statistics: ``training.probe``)::

    x, y = sampler.next()                        # [B, T] int64, batch t of the seed's stream
    with opt.delayed_weights():                  # parameters hold W(max(t - tau, 0))
        for m in range(M):                       # fixed order
            (lm_loss(model(x_m), y_m) / M).backward()   # x_m: [B/M, T]
    opt.step(); opt.zero_grad()                  # base step on W(t), then EF

Validation loss at W(t) before step t every ``eval_interval`` steps and at W(N) at the end (same
fixed validation batches every time; the closing evaluation on the first ``final_eval_batches``
of the stream when that is set). Statistics (``stats``) every ``stats_interval`` steps cost one
extra forward/backward (the fresh gradient at W(t), or for tau = 0 the gradient at W(t-1)) and
one dry-run optimizer step (restored exactly), and never change the trajectory.
A non-finite loss stops the run: the row is written, status ``diverged``, message on stderr.
The step's scalars (loss, val loss, partial sums) stay on the device and are read every
``run.log_interval`` steps, at checkpoint steps and at the end, in one copy
(:mod:`llm_validation.training.flush`): the only host synchronisation of those steps. The
divergence is found there; the weights after a diverged step are dropped, never saved.
Pipeline runs are not this loop's: :func:`llm_validation.run.run` is the one place that chooses.
``run.compile`` sends every forward pass (training, statistics, evaluation) through
``torch.compile`` (:mod:`llm_validation.training.compiled`). summary.json records the whole
invocation's ``tokens_per_s`` and the steady-state ``steady_tokens_per_s``
(:class:`llm_validation.training.steady.SteadyClock`: after the warm-up steps, evaluations and
checkpoints excluded).
Checkpoints every ``run.checkpoint_interval`` steps, every ``run.checkpoint_minutes`` of wall
time, at the end, and at the first SIGINT / SIGTERM (the step finishes, its checkpoint is
written, then :class:`~llm_validation.sweep.interrupt.Interrupted` is raised; a second signal
stops at once). Resuming (``cfg.run.resume``) loads the latest checkpoint and continues bitwise
on CPU (a run directory without one starts over from step 0); only the fields in
:data:`llm_validation.rundir.RESUMABLE` may differ from the saved config (a larger ``steps`` extends a
run; with a decaying lr schedule the schedule then follows the new length).
"""

from __future__ import annotations

import math
import sys
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import Tensor

from llm_validation.config import TrainConfig
from llm_validation.records.progress import eta_suffix
from llm_validation.rundir import (MetricsWriter, RunPaths, RunResult, checkpoint_step,
                                   compose_result, diverged_message, diverged_row, eval_row,
                                   newest_intact_checkpoint, rewrite_metrics_before, rng_state,
                                   save_checkpoint, set_rng_state, start_step)
from llm_validation.records.atomic_io import write_json
from llm_validation.records.provenance import environment
from llm_validation.sweep.interrupt import Interrupted, deferred_signals
from llm_validation.training import host_syncs, stats
from llm_validation.training.determinism import configure_numerics
from llm_validation.training.flush import RowBuffer, flush_due
from llm_validation.training.compiled import forward_of
from llm_validation.training.data import (STREAM_LARGE, STREAM_VAL, WindowSampler, load_corpus,
                                          tiled_windows)
from llm_validation.training.delay import DelayedOptimizer
from llm_validation.training.model import Transformer, batch_loss, lm_loss
from llm_validation.training.optim import build_optimizer, group_geometry, lr_factor, set_lr
from llm_validation.training.probe import StepProbe, probed_step
from llm_validation.training.steady import SteadyClock

__all__ = ["train", "forward_backward", "evaluate", "eval_losses", "gradient_at", "gradient_of",
           "weights_as", "resolve_device"]


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("RunConfig.device='cuda' but no CUDA device is available")
    return torch.device(name)


def forward_backward(model: torch.nn.Module, x: Tensor, y: Tensor, microbatches: int, *,
                     ctx: Callable[[], Any] = nullcontext,
                     observe: Callable[[], None] | None = None) -> Tensor:
    """Accumulate ``(loss_m / M).backward()`` over the M microbatches in order; the mean loss
    (``model.batch_loss``: a float64 tensor on the device, not read here)."""
    losses = []
    for xm, ym in zip(x.chunk(microbatches), y.chunk(microbatches)):  # [B/M, T] each
        with ctx():
            loss = lm_loss(model(xm), ym)
        (loss / microbatches).backward()
        losses.append(loss.detach())
        if observe is not None:
            observe()
    return batch_loss(losses)


@torch.no_grad()
def eval_losses(model: torch.nn.Module, batches: Sequence[tuple[Tensor, Tensor]],
                microbatches: int, ctx: Callable[[], Any] = nullcontext) -> Tensor:
    """Loss of every microbatch of the fixed validation batches, in order (float64)."""
    losses = []
    for x, y in batches:
        for xm, ym in zip(x.chunk(microbatches), y.chunk(microbatches)):
            with ctx():
                losses.append(lm_loss(model(xm), ym).double())
    return torch.stack(losses)                       # [len(batches) * microbatches]


#: Windows per forward pass of the fixed closing set (``run.final_eval_tokens``): 256 x 65
#: tokens keep the activations of the largest CPU presets under ~100 MB.
TILED_CHUNK = 256


@torch.no_grad()
def tiled_loss(model: torch.nn.Module, windows: Tensor, device: torch.device,
               ctx: Callable[[], Any] = nullcontext) -> float:
    """Mean next-token loss over the fixed set ``windows`` (``[W, T + 1]``, every token
    weighted equally), in chunks of :data:`TILED_CHUNK` windows, summed in float64."""
    total = torch.zeros((), dtype=torch.float64, device=device)
    for w in windows.split(TILED_CHUNK):
        w = w.to(device)                                                         # [C, T+1]
        with ctx():
            total += lm_loss(model(w[:, :-1]), w[:, 1:]).double() * w.shape[0]
    return float(total) / windows.shape[0]


def evaluate(model: torch.nn.Module, batches: Sequence[tuple[Tensor, Tensor]], microbatches: int,
             ctx: Callable[[], Any] = nullcontext) -> float:
    """Mean loss over the fixed validation batches."""
    return float(eval_losses(model, batches, microbatches, ctx).mean())


@contextmanager
def weights_as(params: Sequence[Tensor], weights: Sequence[Tensor] | None) -> Iterator[None]:
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


def _check_vocab(tokens: Tensor, vocab_size: int, what: str) -> None:
    top = int(tokens.max())
    if top >= vocab_size:
        raise ValueError(f"{what} has token id {top} >= ModelConfig.vocab_size={vocab_size}; "
                         "the shards need a larger vocabulary")


def gradient_of(params: Sequence[Tensor], weights: Sequence[Tensor] | None,
                closure: Callable[[], Any]) -> tuple[Any, list[Tensor]]:
    """(``closure()``'s return value, gradient) at ``weights`` (None: the current parameters):
    ``closure`` runs the forward and the backward of one batch (gradients accumulate into
    ``p.grad``, cleared first); every ``p.grad`` is left as it was."""
    saved = [p.grad for p in params]
    for p in params:
        p.grad = None
    with weights_as(params, weights):
        loss = closure()
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    for p, g in zip(params, saved):
        p.grad = g
    return loss, grads


def gradient_at(model: torch.nn.Module, params: Sequence[Tensor], weights: Sequence[Tensor] | None,
                x: Tensor, y: Tensor, microbatches: int, ctx: Callable[[], Any] = nullcontext
                ) -> tuple[Tensor, list[Tensor]]:
    """(mean loss as a device tensor, gradient) of the batch at ``weights`` (None: the current
    parameters), leaving every ``p.grad`` as it was."""
    return gradient_of(params, weights,
                       lambda: forward_backward(model, x, y, microbatches, ctx=ctx))


def train(cfg: TrainConfig, *, progress: bool = True,
          callback: Callable[[int, dict[str, Any]], None] | None = None) -> RunResult:
    """Run ``cfg`` on one process under emulated delay (see the module docstring).
    ``callback(step, row)`` is called after each step's row and checkpoint are written (tests
    use it to interrupt a run). Pipeline runs go through :func:`llm_validation.run.run`."""
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"train needs a TrainConfig, got {type(cfg).__name__}")
    if cfg.run.pipeline != "none":
        raise ValueError(f"training.loop.train runs emulated delay only; RunConfig.pipeline="
                         f"{cfg.run.pipeline!r} runs through llm_validation.run.run")
    run, t_start = cfg.run, time.perf_counter()
    paths, device = RunPaths(run.out_dir), resolve_device(run.device)
    numerics = configure_numerics(device, run.deterministic)
    ctx = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) \
        if run.dtype == "bfloat16" else nullcontext
    corpus = load_corpus(cfg.data)
    model = Transformer(cfg.model, seed=run.seed).to(device)
    net = forward_of(model, run.compile)     # what the forward passes call (compiled or not)
    n_params = model.num_params()
    param_stage = None
    if cfg.delay.stage_taus is not None:   # PipeDream emulation: groups per stage
        param_stage = {id(p): s for s, st in enumerate(model.split(len(cfg.delay.stage_taus)))
                       for p in st.parameters()}
    base = build_optimizer(model, cfg.optim, param_stage=param_stage)
    opt = DelayedOptimizer.from_config(base, cfg)   # delay (+ sync phases), EF, correction, clip
    params = opt.params
    sampler = WindowSampler(corpus.train, run.batch_size, cfg.data.seq_len, run.seed)
    val_sampler = WindowSampler(corpus.val, run.batch_size, cfg.data.seq_len, run.seed, STREAM_VAL)
    large = WindowSampler(corpus.train, run.batch_size * run.large_batch_factor, cfg.data.seq_len,
                          run.seed, STREAM_LARGE)
    n_final = run.final_eval_batches or run.eval_batches
    stream = [tuple(t.to(device) for t in val_sampler.batch(i))
              for i in range(max(run.eval_batches, n_final))]
    val_batches, final_batches = stream[:run.eval_batches], stream[:n_final]
    if not corpus.byte_level:
        for i, (vx, vy) in enumerate(stream):
            _check_vocab(torch.cat([vx, vy[:, -1:]], 1), cfg.model.vocab_size, f"val batch {i}")
    geoms = [group_geometry(g) for g in opt.param_groups for _ in g["params"]]
    probe = StepProbe(opt, geoms, tau=opt.tau, stats_interval=run.stats_interval,
                      momentum_error_interval=run.momentum_error_interval)

    ckpt, state = newest_intact_checkpoint(paths, device) if run.resume else (None, None)
    start = start_step(cfg, paths, checkpoint_step(ckpt) if ckpt is not None else None)
    if ckpt is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sampler.load_state_dict(state["sampler"])
        probe.load_state_dict(state["probe"])
        set_rng_state(state["rng"])
        if int(state["step"]) != start:
            raise ValueError(f"checkpoint {ckpt} holds step {state['step']}, its name says {start}")
    # process seconds of the invocations before this one, up to its checkpoint (None: a
    # checkpoint that did not record them)
    before = state.get("process_s") if ckpt is not None else 0.0
    paths.root.mkdir(parents=True, exist_ok=True)
    rewrite_metrics_before(paths.metrics, start)
    write_json(paths.config, {**cfg.to_dict(), "meta": {
        "environment": environment(), "corpus": corpus.description, "n_params": n_params,
        "resumed_from_step": start if ckpt is not None else None, "numerics": numerics}})

    last_save = [time.monotonic()]        # the wall clock of the time-based checkpoints

    def checkpoint(done: int) -> None:
        save_checkpoint(paths, done, {"step": done, "model": model.state_dict(),
                                      "optimizer": opt.state_dict(),
                                      "sampler": sampler.state_dict(),
                                      "probe": probe.state_dict(), "rng": rng_state(),
                                      "config": cfg.to_dict(),
                                      "process_s": None if before is None else
                                      before + time.perf_counter() - t_start})
        last_save[0] = time.monotonic()

    status, message, done = "completed", "", None
    every = max(1, run.steps // 20)
    pending = RowBuffer()                   # the steps since the last flush, on the device
    t_loop = time.perf_counter()            # the ETA's clock: the steps, not the set-up
    clock = SteadyClock(device, start)      # summary.json's steady-state rate
    with deferred_signals() as signals, MetricsWriter(paths.metrics) as metrics:
        for step in range(start, run.steps):
            clock.step(step)
            factor = lr_factor(step, cfg.optim, run.steps)
            set_lr(opt, factor)
            val_loss = None
            if run.eval_interval and step % run.eval_interval == 0:            # at W(t)
                with clock.excluded():
                    val_loss = eval_losses(net, val_batches, run.microbatches, ctx).mean()
            x, y = sampler.next()                                                # [B, T]
            if not corpus.byte_level:          # on the host copy: no device synchronisation
                _check_vocab(y, cfg.model.vocab_size, f"training batch {step}")
            x, y = x.to(device), y.to(device)
            active = probe.active(step)
            noise = stats.MicrobatchGradVariance(params, run.microbatches) \
                if active and run.microbatches > 1 else None
            with opt.delayed_weights():                                          # W(t - tau)
                loss_t = forward_backward(net, x, y, run.microbatches, ctx=ctx,
                                          observe=noise.observe if noise else None)
            big_gradient = None
            if probe.momentum_due(step):
                def big_gradient(step: int = step) -> list[Tensor]:
                    xb, yb = large.batch(step)
                    return gradient_at(net, params, None, xb.to(device), yb.to(device),
                                       run.microbatches * run.large_batch_factor, ctx)[1]
            part, f_x, f_y = probed_step(
                probe, step, loss=loss_t, noise=noise, big_gradient=big_gradient,
                gradient_at=lambda w: gradient_at(net, params, w, x, y, run.microbatches, ctx))
            pending.add(step, part, loss=loss_t, f_x=f_x, f_y=f_y, val_loss=val_loss)
            stop = signals.signum                  # SIGINT / SIGTERM: save this step, then stop
            ckpt_due = bool(run.checkpoint_interval and (step + 1) % run.checkpoint_interval == 0
                            or run.checkpoint_minutes and time.monotonic() - last_save[0]
                            >= 60.0 * run.checkpoint_minutes or stop is not None)
            if not flush_due(step, run.log_interval, run.steps, ckpt_due):
                host_syncs.mark(step)
                continue
            # the flush: every buffered step's loss, f(x), f(y), val loss and partial sums in
            # ONE host read (the only one of these steps); a non-finite loss stops the run at
            # its step: its row is written, the later steps' rows and weights are dropped
            for rec in pending.flush():
                t, loss, vl = rec.pop("step"), rec.pop("loss"), rec.pop("val_loss", None)
                lr = cfg.optim.lr * lr_factor(t, cfg.optim, run.steps)
                if not math.isfinite(loss):
                    status, message, done = "diverged", diverged_message(loss, t), t
                    metrics.write(diverged_row(t, loss, vl, lr))
                    print(f"[train] {message}", file=sys.stderr, flush=True)
                    break
                row = stats.finalize(rec, step=t, loss=loss, lr=lr, val_loss=vl,
                                     microbatches=run.microbatches, f_x=rec.pop("f_x", None),
                                     f_y=rec.pop("f_y", None))
                row["tokens"] = (t + 1) * cfg.tokens_per_step
                metrics.write(row)
                if progress and (t % every == 0 or t == run.steps - 1):
                    vs = f" val {vl:.4f}" if vl is not None else ""
                    print(f"[train] step {t + 1}/{run.steps} loss {loss:.4f}{vs} lr {lr:.3g}"
                          + eta_suffix(t + 1 - start, run.steps - t - 1,
                                       time.perf_counter() - t_loop),
                          file=sys.stderr, flush=True)
                if t == step and ckpt_due:
                    with clock.excluded():
                        checkpoint(step + 1)
                if callback is not None:
                    callback(t, row)
            host_syncs.mark(step)
            if status == "diverged":
                break
            if stop is not None:
                raise Interrupted(stop, f"at step {step + 1} of {run.steps}, checkpoint saved")
        done = opt.t if done is None else done
        clock.stop(done)
        final_val = None
        if status == "completed":
            # at W(N): the curve's batches are the first eval_batches of the closing set, so
            # one pass gives both (the lag reads the curve's set, the gaps the larger one)
            losses = eval_losses(net, final_batches, run.microbatches, ctx)
            final_val = float(losses.mean())
            curve_val = float(losses[:run.eval_batches * run.microbatches].mean())
            if run.final_eval_tokens:          # the fixed set every seed and size shares
                final_val = tiled_loss(model, tiled_windows(
                    corpus.val, cfg.data.seq_len, run.final_eval_tokens), device, ctx)
            metrics.write(eval_row(done, curve_val, final_val
                                   if n_final > run.eval_batches or run.final_eval_tokens
                                   else None))
            if not (run.checkpoint_interval and done % run.checkpoint_interval == 0):
                checkpoint(done)
    wall = time.perf_counter() - t_start
    result = compose_result(cfg, paths, status=status, done=done, start=start,
                            final_val_loss=final_val, n_params=n_params, wall=wall, message=message,
                            steady_tokens_per_s=clock.tokens_per_s(cfg.tokens_per_step),
                            process_before=before)
    if progress and status == "completed":
        print(f"[train] done: {done} steps, val_loss {final_val:.4f}, {wall:.1f}s",
              file=sys.stderr, flush=True)
    return result
