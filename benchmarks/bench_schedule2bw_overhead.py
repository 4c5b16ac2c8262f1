"""Python cost of Schedule2BW's weight versions, per microbatch and per step, before and after.

One process, one thread, a stack of ``Linear(16, 16)`` layers with ``--tensors`` parameter
tensors (weight + bias per layer; ~100 and ~600, the sizes of a small and a large stage), a
(4, 16) input, so that the Python work around the kernels dominates. Per microbatch (forward
and backward, gradients reset after each):

- ``direct``: the module called as is (no versions: torch's 1F1B);
- ``before``: the version applied by ``torch.func.functional_call(module, version, x)`` (the
  earlier design, whose activation-checkpointing recompute read the master);
- ``after``: :class:`llm_validation.pipeline.weight_versions.WeightVersions` ``install`` of the
  version before the forward and of the other version before the backward (the steady-state
  alternation of 2BW: a forward of batch t+1, a backward of batch t), then the module called.

Per step: ``step_loops`` (one ``copy_`` and one ``div_`` per tensor: the earlier loops) against
``step_foreach`` (``torch._foreach_copy_`` and ``_foreach_div_``). Each figure is the median
over ``--repeats`` repetitions of ``--iters`` timed iterations (milliseconds per iteration);
``overhead_*`` subtracts ``direct``. All cases run in one invocation, side by side.

Usage: ``python benchmarks/bench_schedule2bw_overhead.py --json [--out docs/bench/...json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from torch import nn
from torch.func import functional_call

from llm_validation.pipeline.weight_versions import WeightVersions

__all__ = ["main", "measure"]


def _model(tensors: int) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Linear(16, 16) for _ in range(max(1, tensors // 2))])


def _time(fn, iters: int, repeats: int) -> float:
    """Median over ``repeats`` of the mean milliseconds per call of ``fn`` over ``iters``."""
    fn()                                             # warm-up (allocations, dispatch caches)
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        runs.append((time.perf_counter() - t0) / iters * 1e3)
    return statistics.median(runs)


def measure(tensors: int, iters: int, repeats: int) -> dict:
    """The figures of one model size (module docstring)."""
    x = torch.randn(4, 16)
    plain = _model(tensors)
    leaves = list(plain.parameters())

    def direct() -> None:                # gradients reset by the same loop in all three
        plain(x).sum().backward()
        for w in leaves:
            w.grad = None

    fmod = _model(tensors)
    version = {n: p.detach().clone().requires_grad_(True) for n, p in fmod.named_parameters()}

    def before() -> None:
        functional_call(fmod, version, (x,)).sum().backward()
        for w in version.values():
            w.grad = None

    vmod = _model(tensors)
    versions = WeightVersions(vmod)

    def after() -> None:
        versions.install(0)
        out = vmod(x).sum()
        versions.install(1)              # the other batch's backward comes next in 2BW
        versions.install(0)
        out.backward()
        for w in versions.slots[0]:
            w.grad = None

    stale = [p.detach().clone() for p in plain.parameters()]
    current = [p.detach().clone() for p in plain.parameters()]

    def step_loops() -> None:
        for s, c in zip(stale, current):
            s.copy_(c)
        for s in stale:
            s.div_(2.0)

    def step_foreach() -> None:
        torch._foreach_copy_(stale, current)
        torch._foreach_div_(stale, 2.0)

    got = {name: _time(fn, iters, repeats) for name, fn in
           (("direct", direct), ("before", before), ("after", after),
            ("step_loops", step_loops), ("step_foreach", step_foreach))}
    n = sum(1 for _ in plain.parameters())
    return {"tensors": n, **{f"{k}_ms": round(v, 4) for k, v in got.items()},
            "overhead_before_ms": round(got["before"] - got["direct"], 4),
            "overhead_after_ms": round(got["after"] - got["direct"], 4),
            "step_speedup": round(got["step_loops"] / got["step_foreach"], 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tensors", type=int, nargs="+", default=[100, 600])
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    args = p.parse_args(argv)
    if args.iters < 1 or args.repeats < 1 or min(args.tensors) < 2:
        p.error("--iters and --repeats must be >= 1, --tensors >= 2")
    torch.set_num_threads(1)
    report = {"torch": torch.__version__, "threads": 1, "iters": args.iters,
              "repeats": args.repeats,
              "cases": [measure(n, args.iters, args.repeats) for n in args.tensors]}
    text = json.dumps(report, indent=1)
    if args.out is not None:
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(text + "\n")
        tmp.replace(args.out)
    if args.json:
        print(text)
    else:
        for c in report["cases"]:
            print(f"{c['tensors']:4d} tensors: per microbatch direct {c['direct_ms']:.3f} ms, "
                  f"+{c['overhead_before_ms']:.3f} ms before, +{c['overhead_after_ms']:.3f} ms "
                  f"after; per step loops {c['step_loops_ms']:.3f} ms, foreach "
                  f"{c['step_foreach_ms']:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
