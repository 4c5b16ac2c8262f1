"""Shared helpers of the pipeline tests: configs, the emulated reference run, run comparison."""

from __future__ import annotations

import dataclasses
import math
import sysconfig
from pathlib import Path

import torch

from llm_validation.config import (
    DataConfig,
    DelayConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)
from llm_validation.pipeline.checkpoint import latest_complete, load_global
from llm_validation.run import run as run_launch
from llm_validation.rundir import (RunPaths, latest_checkpoint, load_checkpoint, read_metrics)
from llm_validation.training.loop import train
from tests.llm_validation.helpers import MICRO

#: Statistics are sums over parameters reduced across stages: the same float64 terms as the
#: emulator's, added in another order, so they agree to a few ulps (observed <= 5e-16 relative).
STATS_RTOL = 1e-12
#: ... except differences of nearly equal terms (the star-convexity slack), whose rounding is
#: relative to the terms, not the result (observed up to 5e-13 relative, ~1e-16 absolute).
STATS_ATOL = 1e-12
#: Values that must be bitwise equal (the same floating-point operations in the same order).
BITWISE_KEYS = ("step", "kind", "loss", "val_loss", "lr", "tokens")


def small_corpus(tmp_dir: Path) -> str:
    """A 120 kB byte-level text corpus (a stdlib source file): fast to load in every stage."""
    path = tmp_dir / "corpus.txt"
    if not path.exists():
        src = Path(sysconfig.get_paths()["stdlib"]) / "typing.py"
        path.write_bytes(src.read_bytes()[:120_000])
    return str(path)


def pipe_cfg(out: Path, corpus: str, *, pipeline: str, P: int = 1, M: int = 2, steps: int = 6,
             lam: float = 0.0, level: str = "update", optim: OptimConfig | None = None,
             **run) -> TrainConfig:
    """The test run: MICRO model (3 blocks), seq 16, batch 2M, Muon unless ``optim`` given."""
    tau = 1 if pipeline in ("2bw", "emulate-2bw") else 0
    pl = "none" if pipeline.startswith("emulate") else pipeline
    return TrainConfig(
        model=MICRO, data=DataConfig(path=corpus, seq_len=16),
        optim=optim or OptimConfig(name="muon", lr=0.02),
        delay=DelayConfig(tau=tau, ef_lambda=lam, ef_level=level),
        run=RunConfig(**{"steps": steps, "batch_size": 2 * M, "microbatches": M,
                         "pipeline": pl, "stages": P if pl != "none" else 1,
                         "eval_interval": 3, "eval_batches": 1, "stats_interval": 2,
                         "momentum_error_interval": 4, "checkpoint_interval": 2,
                         "out_dir": str(out), **run}))


#: SGD with a learning rate that makes the MICRO run's loss non-finite within a few steps.
DIVERGING_SGD = OptimConfig(name="sgd", lr=1e30, momentum=0.0, nesterov=False,
                            weight_decay=0.0, schedule="constant")


def assert_diverges_like_the_emulator(tmp_path: Path, pipeline: str, reference: str, *,
                                      P: int, M: int, steps: int, before: int, **run):
    """Run ``pipeline`` and its emulated ``reference`` with :data:`DIVERGING_SGD`: both
    diverge at the same step (< ``before``) with the same message and rows. Returns the
    pipeline's config."""
    corpus = small_corpus(tmp_path)
    cfg = pipe_cfg(tmp_path / "pipe", corpus, pipeline=pipeline, P=P, M=M, optim=DIVERGING_SGD,
                   steps=steps, **run)
    ref = emulate(pipe_cfg(tmp_path / "emu", corpus, pipeline=reference, M=M,
                           optim=DIVERGING_SGD, steps=steps))
    got = run_launch(cfg)
    assert ref.status == got.status == "diverged" and ref.steps < before
    assert got.steps == ref.steps and got.message == ref.message
    assert_same_run(got.run_dir, ref.run_dir, cfg, weights=False)
    return cfg


def emulate(cfg: TrainConfig):
    """The single-process emulated run of ``cfg`` with one thread (as each stage has)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return train(cfg, progress=False)
    finally:
        torch.set_num_threads(threads)


def pipeline_weights(cfg: TrainConfig, run_dir: str) -> dict[str, torch.Tensor]:
    """Final master weights of every stage of a pipeline run, under the full model's names
    (the checkpoint's keys)."""
    step, d = latest_complete(RunPaths(run_dir))
    assert step == cfg.run.steps
    names = list(emulated_weights_names(cfg))
    state, _ = load_global(d, names, 0, 0, torch.device("cpu"))
    return {n: state["params"][n]["master"] for n in names}


def emulated_weights_names(cfg: TrainConfig) -> list[str]:
    """The full model's parameter names (what the emulator's checkpoint holds)."""
    from llm_validation.training.model import Transformer
    return [n for n, _ in Transformer(cfg.model, seed=cfg.run.seed).named_parameters()]


def emulated_weights(run_dir: str) -> dict[str, torch.Tensor]:
    return load_checkpoint(latest_checkpoint(RunPaths(run_dir)))["model"]


def assert_same_run(pipe_dir: str, ref_dir: str, cfg: TrainConfig,
                    weights: bool = True) -> dict[str, float]:
    """Metrics rows: bitwise for BITWISE_KEYS, within STATS_RTOL/ATOL for the statistics;
    final weights bitwise (``weights``). Returns the largest relative difference per statistic."""
    a, b = read_metrics(pipe_dir), read_metrics(ref_dir)
    assert [r["step"] for r in a] == [r["step"] for r in b]
    worst: dict[str, float] = {}
    for ra, rb in zip(a, b):
        assert set(ra) == set(rb), set(ra) ^ set(rb)
        for k, x in ra.items():
            y = rb[k]
            if x is None or y is None or k in BITWISE_KEYS or isinstance(x, bool):
                # NaN (a diverged loss, read back from metrics.jsonl) equals NaN bitwise here
                same = x == y or (isinstance(x, float) and isinstance(y, float)
                                  and math.isnan(x) and math.isnan(y))
                assert same, (ra["step"], k, x, y)
                continue
            assert abs(x - y) <= STATS_RTOL * max(abs(x), abs(y)) + STATS_ATOL, (ra["step"], k, x, y)
            worst[k] = max(worst.get(k, 0.0), abs(x - y) / max(abs(y), 1e-300))
    if not weights:
        return worst
    wa, wb = pipeline_weights(cfg, pipe_dir), emulated_weights(ref_dir)
    assert set(wa) == set(wb)
    for n in wb:
        assert torch.equal(wa[n], wb[n]), (n, (wa[n] - wb[n]).abs().max())
    return worst


def assert_staged_bytes(run_dir: str, cfg: TrainConfig, bytes_per_value: int) -> None:
    """Every stage of a host-staged run staged tensors, each one activation (or its gradient)
    of ``bytes_per_value`` bytes per value (``logs/result.json``'s ``stage_memory[].staged``)."""
    from llm_validation.records.atomic_io import read_json

    values = cfg.run.batch_size // cfg.run.microbatches * cfg.data.seq_len * cfg.model.d_model
    staged = [m["staged"] for m in read_json(f"{run_dir}/logs/result.json")["stage_memory"]]
    assert all(s["tensors"] > 0 and s["bytes"] == s["tensors"] * values * bytes_per_value
               for s in staged), staged


# ------------------------------------------------------------------------- unit tests


# ------------------------------------------------------------------------- data parallelism
def dp_cfgs(tmp_dir: Path, corpus: str, *, pipeline: str, P: int, D: int, M: int = 2,
            **kw) -> tuple[TrainConfig, TrainConfig]:
    """(the P x D run, its single-process reference): batch 2 D M sequences; each replica
    cuts its 2 M into M microbatches; the reference cuts the whole batch into the same D M
    microbatches (``pipeline``: ``2bw``, ``1f1b``, ``gpipe`` or ``none``; the reference is the
    emulated run with the same delay)."""
    tau = kw.pop("tau", 1 if pipeline == "2bw" else 0)
    emulate_kind = "emulate-2bw" if tau == 1 else "emulate-sync"
    run = pipe_cfg(tmp_dir / f"{pipeline}_p{P}_d{D}", corpus, pipeline=pipeline, P=P, M=M,
                   batch_size=2 * D * M, data_parallel=D, **kw)
    if pipeline == "none" and tau != run.delay.tau:
        run = run.replace(delay=dataclasses.replace(run.delay, tau=tau))
    ref = pipe_cfg(tmp_dir / f"emu_{pipeline}_p{P}_d{D}", corpus, pipeline=emulate_kind,
                   M=D * M, batch_size=2 * D * M, **kw)
    if ref.delay.tau != tau:
        ref = ref.replace(delay=dataclasses.replace(ref.delay, tau=tau))
    return run, ref


def loss_gaps(pipe_dir: str, ref_dir: str,
              keys: tuple[str, ...] = ("loss", "val_loss", "grad_norm", "update_norm")
              ) -> dict[str, float]:
    """Largest relative difference per metric of two runs with the same steps (the training
    and validation losses, and the norms of the gradient and the update by default)."""
    a, b = read_metrics(pipe_dir), read_metrics(ref_dir)
    assert [r["step"] for r in a] == [r["step"] for r in b]
    worst = {k: 0.0 for k in keys}
    for ra, rb in zip(a, b):
        for k in worst:
            x, y = ra.get(k), rb.get(k)
            assert (x is None) == (y is None), (ra["step"], k, x, y)
            if x is not None:
                worst[k] = max(worst[k], abs(x - y) / max(abs(y), 1e-300))
    return worst
