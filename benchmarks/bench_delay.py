"""Cost of the exact delay emulation: step time of plain vs delayed (tau = 1) vs delayed + EF
(tau = 1, lam = 1), and the wrapper's measured extra memory.

Method: three models with the same initialisation and three optimizers are built once; every
repetition times one full training step (forward, backward, optimizer step, zero_grad) of each
variant on the same batch, in a rotating order (interleaved, so machine-load drifts hit all
three alike). Overheads are fractions: ``overhead_*`` is the median over repetitions of
``t(variant) / t(plain) - 1`` within the same repetition (robust to load drifts on a shared
machine); ``*_ratio_of_medians`` is ``median(variant) / median(plain) - 1``. The optimizer-step
part alone (where all of the wrapper's work happens) is timed too:
``overhead_optimizer_step_*`` is its extra time as a fraction of the plain step. Memory is
counted, not sampled: the bytes of the wrapper's persistent buffers (``extra_buffers``) divided
by the bytes of one copy of the parameters (goal: exactly tau, plus one with EF).

On a CUDA machine (``--gpu``, default when CUDA is available) it also reports tokens/s and MFU
of ``smollm-135m`` in bf16 autocast for the three variants (MFU = 6 N + 12 L C T FLOPs per
token over the GPU's dense bf16 peak, from a small table of known GPUs).

``--profile`` adds, in the same call, a torch.profiler summary of ``--profile-steps`` plain
steps of each measured device after its timing (``benchmarks/step_profile.py``: the top
operators or CUDA kernels by self time, and the host-bound time: on CPU the wall time outside
operators, on CUDA the device's idle gaps between kernels), under ``"profile"`` in the JSON
and as text on stderr.

Usage: ``python benchmarks/bench_delay.py --json [--preset small] [--reps 15] [--profile]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_profile import format_summary, profile_steps  # noqa: E402

from llm_validation.config import DataConfig, OptimConfig, preset
from llm_validation.training.data import WindowSampler, load_corpus
from llm_validation.training.delay import DelayedOptimizer
from llm_validation.training.model import Transformer, lm_loss
from llm_validation.training.optim import build_optimizer

__all__ = ["main", "measure", "VARIANTS", "PEAK_BF16_TFLOPS"]

#: (name, tau, lam) of the three variants.
VARIANTS = (("plain", None, 0.0), ("delay", 1, 0.0), ("ef", 1, 1.0))
#: Dense bf16 peak (TFLOP/s) by substring of the CUDA device name.
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}


def _build(model_name: str, optimizer: str, lr: float, tau: int | None, lam: float,
           device: torch.device, compile_model: bool = False):
    cfg = preset(model_name)
    if cfg.vocab_size != 256:                         # byte-level corpus
        cfg = dataclasses.replace(cfg, vocab_size=256)
    model = Transformer(cfg, seed=0).to(device)
    base = build_optimizer(model, OptimConfig(name=optimizer, lr=lr, schedule="constant"))
    opt = base if tau is None else DelayedOptimizer(base, tau=tau, ef_lambda=lam)
    if compile_model:       # the forward/backward only; the optimizers stay eager
        model = torch.compile(model)
    return model, opt


def _step(model, opt, x, y, ctx) -> tuple[float, float]:
    """One training step; returns the seconds of forward+backward and of opt.step()."""
    block = opt.delayed_weights() if isinstance(opt, DelayedOptimizer) else nullcontext()
    t0 = time.perf_counter()
    with block:
        with ctx():
            loss = lm_loss(model(x), y)
        loss.backward()
    _sync(x.device)
    t = time.perf_counter()
    opt.step()
    _sync(x.device)
    dt = time.perf_counter() - t
    opt.zero_grad()
    return t - t0, dt


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(model_name: str = "small", optimizer: str = "adamw", batch_size: int = 16,
            seq_len: int = 128, reps: int = 15, warmup: int = 2, device: str = "cpu",
            bf16: bool = False, lr: float = 1e-3, compile_model: bool = False,
            profile_steps_n: int = 0) -> dict:
    """Interleaved timing of the three variants; see the module docstring.
    ``profile_steps_n`` > 0: then profile that many plain steps (``out["profile"]``)."""
    dev = torch.device(device)
    ctx = (lambda: torch.autocast(dev.type, dtype=torch.bfloat16)) if bf16 else nullcontext
    corpus = load_corpus(DataConfig(seq_len=seq_len))
    sampler = WindowSampler(corpus.train, batch_size, seq_len, seed=0)
    built = {name: _build(model_name, optimizer, lr, tau, lam, dev, compile_model)
             for name, tau, lam in VARIANTS}
    total = {name: [] for name in built}
    opt_only = {name: [] for name in built}
    fwd_bwd = {name: [] for name in built}
    names = list(built)
    for rep in range(warmup + reps):
        x, y = (t.to(dev) for t in sampler.next())
        order = names[rep % 3:] + names[:rep % 3]      # rotate who goes first
        for name in order:
            model, opt = built[name]
            _sync(dev)
            t0 = time.perf_counter()
            dt_fb, dt_opt = _step(model, opt, x, y, ctx)
            _sync(dev)
            if rep >= warmup:
                total[name].append(time.perf_counter() - t0)
                opt_only[name].append(dt_opt)
                fwd_bwd[name].append(dt_fb)
    med = {n: statistics.median(v) for n, v in total.items()}
    med_opt = {n: statistics.median(v) for n, v in opt_only.items()}
    med_fb = {n: statistics.median(v) for n, v in fwd_bwd.items()}
    delay_opt, ef_opt = built["delay"][1], built["ef"][1]
    n_params = built["plain"][0].num_params()
    cfg = built["plain"][0].cfg
    flops_per_token = 6 * n_params + 12 * cfg.n_layer * cfg.d_model * seq_len
    tokens = batch_size * seq_len
    paired = {n: statistics.median(a / b - 1.0 for a, b in zip(total[n], total["plain"]))
              for n in ("delay", "ef")}
    out = {
        "overhead_delay": paired["delay"],
        "overhead_ef": paired["ef"],
        "overhead_delay_ratio_of_medians": med["delay"] / med["plain"] - 1.0,
        "overhead_ef_ratio_of_medians": med["ef"] / med["plain"] - 1.0,
        "extra_weight_copies_delay": delay_opt.extra_bytes() / delay_opt.param_bytes(),
        "extra_weight_copies_ef": ef_opt.extra_bytes() / ef_opt.param_bytes(),
        "extra_bytes_delay": delay_opt.extra_bytes(),
        "extra_bytes_ef": ef_opt.extra_bytes(),
        "param_bytes": delay_opt.param_bytes(),
        "step_s_median": med,
        "optimizer_step_s_median": med_opt,
        "forward_backward_s_median": med_fb,
        "overhead_optimizer_step_delay": (med_opt["delay"] - med_opt["plain"]) / med["plain"],
        "overhead_optimizer_step_ef": (med_opt["ef"] - med_opt["plain"]) / med["plain"],
        "tokens_per_s": {n: tokens / s for n, s in med.items()},
        "preset": model_name, "optimizer": optimizer, "n_params": n_params,
        "batch_size": batch_size, "seq_len": seq_len, "reps": reps, "device": str(dev),
        "dtype": "bfloat16" if bf16 else "float32", "threads": torch.get_num_threads(),
        "compiled": compile_model,
    }
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
        peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
        out["gpu"] = name
        out["mfu"] = {n: (tokens / s) * flops_per_token / (peak * 1e12) if peak else None
                      for n, s in med.items()}
    if profile_steps_n > 0:
        model, opt = built["plain"]
        x, y = (t.to(dev) for t in sampler.next())
        out["profile"] = profile_steps(lambda: _step(model, opt, x, y, ctx), profile_steps_n,
                                       dev)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--preset", default="small")
    p.add_argument("--optimizer", default="adamw", choices=["adamw", "muon", "sgd"])
    p.add_argument("--batch-size", type=int, default=16, help="default: RunConfig.batch_size")
    p.add_argument("--seq-len", type=int, default=128, help="default: DataConfig.seq_len")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--gpu", action=argparse.BooleanOptionalAction, default=None,
                   help="also run smollm-135m bf16 on CUDA (default: when available)")
    p.add_argument("--cpu", action=argparse.BooleanOptionalAction, default=True,
                   help="the CPU measurement of --preset (default on; --no-cpu on a GPU "
                        "machine whose time is short)")
    p.add_argument("--gpu-batch-size", type=int, default=16,
                   help="sequences of 1024 tokens per step on CUDA (default 16)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model on CUDA (the first --warmup steps compile)")
    p.add_argument("--profile", action="store_true",
                   help="also a torch.profiler summary of plain steps on each measured device "
                        "(top operators/kernels, host-bound gaps): JSON 'profile' and stderr")
    p.add_argument("--profile-steps", type=int, default=3,
                   help="steps profiled with --profile (default 3)")
    args = p.parse_args(argv)
    if args.profile and args.profile_steps < 1:
        p.error("--profile-steps must be >= 1")
    n_prof = args.profile_steps if args.profile else 0
    if args.threads:
        torch.set_num_threads(args.threads)
    gpu = torch.cuda.is_available() if args.gpu is None else args.gpu
    if not (args.cpu or gpu):
        p.error("nothing to measure: --no-cpu without a CUDA device")
    result = {}
    if args.cpu:
        result["cpu"] = measure(args.preset, args.optimizer, args.batch_size, args.seq_len,
                                args.reps, args.warmup, profile_steps_n=n_prof)
        result.update({k: result["cpu"][k] for k in ("overhead_delay", "overhead_ef",
                                                     "extra_weight_copies_delay",
                                                     "extra_weight_copies_ef")})
    if gpu:
        result["gpu"] = measure("smollm-135m", args.optimizer, args.gpu_batch_size, 1024,
                                args.reps, args.warmup, device="cuda", bf16=True,
                                compile_model=args.compile, profile_steps_n=n_prof)
        result["gpu"]["torch"] = torch.__version__
        result["gpu"]["cuda"] = torch.version.cuda
    for where in ("cpu", "gpu"):
        if "profile" in result.get(where, {}):
            print(format_summary(result[where]["profile"]), file=sys.stderr)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for where in ("cpu", "gpu"):
            for k in ("overhead_delay", "overhead_ef", "extra_weight_copies_delay",
                      "extra_weight_copies_ef"):
                if where in result:
                    print(f"{where} {k}: {result[where][k]:.4g}")
        if "gpu" in result:
            print("gpu mfu:", {k: round(v, 4) for k, v in result["gpu"]["mfu"].items() if v})
    return 0


if __name__ == "__main__":
    sys.exit(main())
