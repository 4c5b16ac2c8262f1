"""The cost-source flags ``simulate`` and ``advise`` share: hardware and model-shape options,
their checks, and the cost / memory builders of one configuration (``--model`` FLOP costs or
``--from RUN_DIR`` measured ones) that the schedule simulator runs on.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from delaybound.output import UsageError

__all__ = ["hardware", "cost_setup", "check_stage_blocks", "add_cost_arguments"]


def hardware(args: argparse.Namespace, required: bool):
    """The :class:`~llm_validation.simulation.costs.Hardware` of the flags (None when no link
    flag is given and ``required`` is False)."""
    from llm_validation.simulation.costs import Hardware
    if args.gpu_tflops is None and args.link_gbps is None and not required:
        return None
    if required and (args.gpu_tflops is None or args.link_gbps is None):
        raise ValueError("--model costs need --gpu-tflops (sustained TFLOP/s per GPU) and "
                         "--link-gbps (point-to-point Gb/s)")
    if args.link_gbps is None:
        raise ValueError("--gpu-tflops without --model has no use; give --link-gbps to model "
                         "the links of a profiled run")
    return Hardware(gpu_tflops=args.gpu_tflops if args.gpu_tflops is not None else 1.0,
                    link_gbps=args.link_gbps, link_latency_us=args.link_latency_us,
                    dp_gbps=args.dp_gbps, hbm_gbps=args.hbm_gbps)


def cost_setup(args: argparse.Namespace, ef: bool = False) -> dict[str, Any]:
    """Schedule, shape, cost and memory builders of one configuration (also ``advise``'s);
    ``ef``: count update-level EF's buffers and step work (``--model`` costs; a profiled run's
    own EF setting otherwise)."""
    from llm_validation.config import preset
    from llm_validation.simulation.costs import model_costs, profile_costs, unit_costs
    from llm_validation.simulation.memory import memory_model
    from llm_validation.simulation.shapes import stage_shapes
    D = args.data_parallel[0] if args.data_parallel else None
    # the flush and clipping flags (absent from a hand-built namespace: the defaults)
    log_interval = getattr(args, "log_interval", None)
    flush_ms, clip = getattr(args, "flush_ms", 0.0), getattr(args, "clip", False)
    if args.unit_costs:
        if D not in (None, 1):
            raise ValueError("--unit-costs has no all-reduce cost; --data-parallel needs "
                             "--model or --from")
        return {"source": "unit", "make_costs": unit_costs, "memory_for": None,
                "optimizer": args.optimizer or "adamw"}
    if args.from_dir:
        from llm_validation.rundir import load_config
        from llm_validation.simulation.profile import read_profile
        prof = read_profile(args.from_dir)
        cfg = load_config(args.from_dir) if (Path(args.from_dir) / "config.json").is_file() \
            else None
        link = hardware(args, required=False)
        act = 2 if cfg is not None and cfg.run.dtype == "bfloat16" else 4
        opt = args.optimizer or (cfg.optim.name if cfg is not None else "adamw")
        ef = ef or bool(cfg is not None and cfg.delay.uses_ef)

        def shapes(plan):
            return stage_shapes(cfg.model, plan.vstages, seq_len=cfg.data.seq_len,
                                activation_bytes=act) if cfg is not None else None

        def make_costs(plan):
            sh = shapes(plan)
            grads = None if sh is None else [4 * s.params for s in sh]
            costs = profile_costs(plan, prof, link=link, data_parallel=D, grad_bytes=grads,
                                  overlap_p2p=not args.no_overlap_p2p,
                                  overlap_allreduce=args.overlap_allreduce)
            if log_interval is not None:             # another flush interval than the run's
                costs = dataclasses.replace(costs, flush_interval=log_interval)
            return costs

        def memory_for(plan):
            sh = shapes(plan)
            return None if sh is None else memory_model(
                sh, prof.microbatch_tokens, optimizer=opt, ef=ef,
                separate_master=args.separate_master)
        return {"source": f"profile:{args.from_dir}", "make_costs": make_costs,
                "memory_for": memory_for, "profile": prof, "optimizer": opt,
                "step_after": "forward" if prof.grad_clip > 0 else "backward"}
    model = preset(args.model)
    hw = hardware(args, required=True)
    seq = args.seq_len or model.max_seq_len
    tokens = seq * args.microbatch_size
    act = 2 if args.dtype == "bfloat16" else 4
    opt = args.optimizer or "adamw"

    def shapes(plan):
        return stage_shapes(model, plan.vstages, seq_len=seq, activation_bytes=act,
                            balance=args.balance)

    def make_costs(plan):
        return model_costs(plan, shapes(plan), hw, microbatch_tokens=tokens,
                           data_parallel=D or 1, optimizer=opt, ef=ef,
                           overlap_p2p=not args.no_overlap_p2p,
                           overlap_allreduce=args.overlap_allreduce,
                           flush_s=flush_ms * 1e-3, flush_interval=log_interval or 1,
                           clip=clip)

    def memory_for(plan):
        return memory_model(shapes(plan), tokens, optimizer=opt, ef=ef,
                            separate_master=args.separate_master)
    return {"source": f"model:{args.model}", "make_costs": make_costs, "memory_for": memory_for,
            "optimizer": opt, "step_after": "forward" if clip else "backward"}


def check_stage_blocks(model: str, stages: Any) -> None:
    """Refuse a pipeline of more stages than ``model`` has blocks (``simulate``, ``advise``)."""
    from llm_validation.config import preset
    n_layer = preset(model).n_layer
    for P in stages:
        if P > n_layer:
            raise UsageError(f"--stages {P}: more stages than the {n_layer} blocks of {model}; "
                             "a stage finer than one block needs tensor parallelism, which is "
                             "not modelled")


def add_cost_arguments(p: argparse.ArgumentParser, gpu_tflops: float | None = None,
                       link_gbps: float | None = None) -> None:
    """The hardware and model-shape flags of ``--model`` / ``--from`` costs (``simulate`` and
    ``advise``); ``gpu_tflops`` / ``link_gbps``: defaults (None: required with --model)."""
    a = p.add_argument
    dflt = (lambda v: f" (default {v:g})" if v is not None else "")
    a("--gpu-tflops", type=float, default=gpu_tflops,
      help="sustained TFLOP/s of one GPU (peak x utilisation)" + dflt(gpu_tflops))
    a("--link-gbps", type=float, default=link_gbps,
      help="point-to-point link bandwidth, Gb/s" + dflt(link_gbps))
    a("--link-latency-us", type=float, default=5.0, help="point-to-point latency, us (5)")
    a("--dp-gbps", type=float, help="all-reduce bandwidth per GPU, Gb/s (default --link-gbps)")
    a("--hbm-gbps", type=float, default=2000.0,
      help="GPU memory bandwidth for the optimizer step, GB/s (2000)")
    a("--seq-len", type=int, help="tokens per sequence (default the preset's max_seq_len)")
    a("--microbatch-size", type=int, default=1, help="sequences per microbatch (1)")
    a("--dtype", choices=["bfloat16", "float32"], default="bfloat16",
      help="activation dtype of --model costs (bfloat16)")
    a("--balance", choices=["layers", "uniform"], default="layers",
      help="stage cut of --model: the runtime's (layers) or 1/P of the model per stage")
    a("--no-overlap-p2p", action="store_true", help="blocking point-to-point sends")
    a("--overlap-allreduce", action="store_true",
      help="all-reduce and update beside the compute stream")
    a("--separate-master", action="store_true",
      help="count 2BW's master apart from its two versions (3 copies; the runtime holds 2)")
    a("--log-interval", type=int, default=None,
      help="steps between metrics flushes (default: the profiled run's, or 1 with --model)")
    a("--flush-ms", type=float, default=0.0,
      help="what a step ending a flush costs more, ms, with --model (0; --from measures it)")
    a("--clip", action="store_true",
      help="global-norm gradient clipping with --model: each step waits for the pipeline's "
           "norm reduction, 2BW's step after F((t+1)M+P-1) (--from: the run's own setting)")
