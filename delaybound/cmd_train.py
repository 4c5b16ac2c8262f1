"""``delaybound train``: one LLM pretraining run under emulated delay (llm_validation.training.loop).

Flags left out take the dataclass defaults of ``llm_validation.config``; with ``--resume`` they
take the values saved in ``<out>/config.json`` instead, so ``--resume --steps N --out DIR`` is
enough to extend a run; with ``--config FILE`` (a run's ``config.json`` or its directory) they
take that file's values, so ``--config RUN_DIR/config.json --out NEW`` re-runs a recorded run
exactly. ``--model-config FILE.json`` gives a model shape that is not a preset (a JSON object of
``ModelConfig`` fields; the others take their defaults). Exit codes: 0 completed, 1 diverged
(non-finite loss), 2 bad input (one line).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from delaybound.output import check_out_dir, print_json

__all__ = ["register", "config_from_args", "run", "model_fields", "saved_config"]

# flag dest -> (config section, field)
_FIELDS = {
    "optimizer": ("optim", "name"), "lr": ("optim", "lr"), "aux_lr": ("optim", "aux_lr"),
    "momentum": ("optim", "momentum"), "weight_decay": ("optim", "weight_decay"),
    "schedule": ("optim", "schedule"), "warmup": ("optim", "warmup_steps"),
    "min_lr_ratio": ("optim", "min_lr_ratio"),
    "beta1": ("optim", "beta1"), "beta2": ("optim", "beta2"), "grad_clip": ("optim", "grad_clip"),
    "ns_dtype": ("optim", "ns_dtype"), "final_eval_batches": ("run", "final_eval_batches"),
    "wsd_decay_fraction": ("optim", "wsd_decay_fraction"),
    "sync_start": ("delay", "sync_start"), "sync_cooldown": ("delay", "sync_cooldown"),
    "correction": ("delay", "correction"), "correction_coef": ("delay", "correction_coef"),
    "delay": ("delay", "tau"), "ef": ("delay", "ef_lambda"), "ef_level": ("delay", "ef_level"),
    "steps": ("run", "steps"), "batch_size": ("run", "batch_size"),
    "microbatches": ("run", "microbatches"), "seed": ("run", "seed"),
    "eval_interval": ("run", "eval_interval"), "eval_batches": ("run", "eval_batches"),
    "stats_interval": ("run", "stats_interval"),
    "momentum_error_interval": ("run", "momentum_error_interval"),
    "checkpoint_interval": ("run", "checkpoint_interval"), "out": ("run", "out_dir"),
    "checkpoint_minutes": ("run", "checkpoint_minutes"),
    "log_interval": ("run", "log_interval"),
    "pipeline": ("run", "pipeline"), "stages": ("run", "stages"), "device": ("run", "device"),
    "data_parallel": ("run", "data_parallel"),
    "dtype": ("run", "dtype"), "profile": ("run", "profile"),
    "deterministic": ("run", "deterministic"), "compile": ("run", "compile"),
    "boundary_dtype": ("model", "boundary_dtype"), "boundary_stages": ("model", "boundary_stages"),
    "data": ("data", "path"), "data_format": ("data", "format"), "val_data": ("data", "val_path"),
    "seq_len": ("data", "seq_len"),
}


def _taus(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid stage taus {text!r} (expected e.g. 3,2,1,0)")


def register(subparsers: Any) -> None:
    from llm_validation.config import (BOUNDARY_DTYPES, CORRECTIONS, NS_DTYPES, OPTIMIZERS,
                                       PIPELINE_KINDS, PRESETS, SCHEDULES)

    p = subparsers.add_parser(
        "train", help="train a small LLM under exact emulated delay (PipeDream-2BW) with stats",
        description="Pretrain a Llama-style model on the default corpus (this Python's stdlib "
                    "sources, bytes) or your data, with gradient delay TAU and Error Feedback "
                    "LAM emulated exactly; writes config.json, metrics.jsonl, checkpoints/ and "
                    "summary.json to --out.")
    a = p.add_argument
    a("--preset", choices=list(PRESETS), help="model shape (default tiny)")
    a("--model-config", metavar="FILE.json",
      help="model shape from a JSON object of ModelConfig fields (n_layer, d_model, n_head, "
           "n_kv_head, d_ff, max_seq_len, tied, ...; missing ones take the defaults)")
    a("--set", action="append", metavar="[OPT:]SEC.FIELD=VALUE",
      help="set any config field by its dotted path (e.g. --set optim.beta2=0.99; repeatable; "
           "OPT: applies it only when the run's optimizer is OPT): new knobs come through here, "
           "the named flags are frozen")
    a("--config", metavar="FILE.json",
      help="start from a saved config (a run's config.json, or its run directory): re-runs "
           "that run exactly; flags given as well override its values")
    a("--untied", dest="tied", action="store_false", default=None, help="separate output head")
    a("--tied", dest="tied", action="store_true", help="tie the head to the embedding")
    a("--optimizer", choices=list(OPTIMIZERS), help="base optimizer (default adamw)")
    a("--lr", type=float, help="peak learning rate")
    a("--aux-lr", type=float, help="lr of Muon's AdamW part (default: --lr)")
    a("--momentum", type=float, help="Muon/NorMuon/SGD momentum")
    a("--beta1", type=float, help="Adam-family beta1 (Lion: interpolation beta)")
    a("--beta2", type=float, help="Adam-family beta2 (Lion: momentum beta)")
    a("--grad-clip", type=float, metavar="C", help="global L2 gradient clipping (0: off)")
    a("--weight-decay", type=float, help="weight decay")
    a("--ns-dtype", choices=list(NS_DTYPES),
      help="Muon/NorMuon Newton-Schulz dtype (default bfloat16, the libraries'; auto: float32 "
           "on a CPU without native bfloat16, where it is several times faster)")
    a("--schedule", choices=list(SCHEDULES), help="lr decay (default cosine)")
    a("--wsd-decay-fraction", type=float, help="wsd: fraction of the run in the final decay")
    a("--warmup", type=int, help="linear warmup steps")
    a("--min-lr-ratio", type=float, help="final lr / peak lr")
    a("--delay", type=int, metavar="TAU", help="gradient delay in steps (0 sync, 1 2BW)")
    a("--ef", type=float, metavar="LAM", help="Error Feedback coefficient (0 off)")
    a("--ef-level", choices=["update", "grad"], help="update-level (default) or gradient EF")
    a("--sync-start", type=int, metavar="N", help="first N steps without delay (emulated)")
    a("--sync-cooldown", type=int, metavar="N", help="last N steps without delay (emulated)")
    a("--correction", choices=list(CORRECTIONS), help="delay correction (default none)")
    a("--correction-coef", type=float, metavar="C",
      help="DC-ASGD lambda or Nesterov look-ahead gamma")
    a("--stage-taus", type=_taus, metavar="T0,T1,..", help="per-stage delays (PipeDream)")
    a("--pipedream", type=int, metavar="P", help="original PipeDream delays P-1-s for P stages")
    a("--steps", type=int, help="optimizer steps")
    a("--batch-size", type=int, help="sequences per step")
    a("--microbatches", type=int, help="gradient-accumulation microbatches M")
    a("--seq-len", type=int, help="tokens per sequence")
    a("--seed", type=int, help="seed (model init and data order)")
    a("--data", help="text file/folder, .bin shards, or a folder from `delaybound data "
                     "prepare` (its vocabulary becomes the model's) (default: stdlib sources)")
    a("--data-format", choices=["auto", "bytes", "bin", "shards"], help="how to read --data")
    a("--vocab-size", type=int, help="model vocabulary (default: the preset's; with a prepared "
                                     "--data folder the manifest's, which it must not be below)")
    a("--val-data", help=".bin validation shards")
    a("--eval-interval", type=int, help="validation every N steps (0: end only)")
    a("--eval-batches", type=int, help="validation batches per evaluation")
    a("--final-eval-batches", type=int,
      help="validation batches of the closing evaluation (0: --eval-batches; emulated runs)")
    a("--stats-interval", type=int, help="expensive statistics every N steps (0: off)")
    a("--momentum-error-interval", type=int, help="momentum error every N steps (0: off)")
    a("--checkpoint-interval", type=int, help="checkpoint every N steps (0: end only)")
    a("--checkpoint-minutes", type=float, metavar="MIN",
      help="also checkpoint every MIN minutes of wall time and at Ctrl-C / SIGTERM (0: off), so "
           "an interrupted run loses at most that; emulated runs")
    a("--log-interval", type=int,
      help="read the step scalars from the device and write the metrics rows every N steps "
           "(and at checkpoints and the end; default 1); N > 1: no host sync on other steps")
    a("--out", help="run directory (default runs/<run name>: the settings' readable name and 8 "
                    "hex digits of the config, so the same settings find the same folder again)")
    a("--resume", nargs="?", const="yes", default=None, metavar="auto",
      help="continue the run in --out with its saved settings, from its newest checkpoint (none "
           "yet: from step 0); a larger --steps extends a finished run; '--resume auto': "
           "continue or start, without a word (torchrun --max-restarts). Without --resume, an "
           "unfinished run of the same settings in --out is continued too")
    a("--tensorboard", metavar="DIR",
      help="also write the metrics as TensorBoard scalars to DIR (optional extra: pip install "
           "'delaybound[tensorboard]')")
    a("--profile", action="store_true", default=None,
      help="pipeline runs: time every action per stage into RUN_DIR/profile.json "
           "(for delaybound simulate --from RUN_DIR)")
    a("--deterministic", action="store_true", default=None,
      help="deterministic GPU algorithms and the cuBLAS workspace variable (CPU runs are "
           "deterministic already)")
    a("--compile", action="store_true", default=None,
      help="torch.compile the model's forward/backward (emulated runs, CPU or GPU; the same "
           "seed repeats bitwise, eager runs differ by rounding; the run's name ends -compiled)")
    a("--pipeline", choices=["none", *PIPELINE_KINDS], help="real pipeline runtime")
    a("--stages", type=int, help="pipeline stages P")
    a("--data-parallel", type=int, metavar="D",
      help="data-parallel replicas D (P x D processes; batch split over replicas)")
    a("--device", choices=["cpu", "cuda", "auto"], help="device (default cpu)")
    a("--dtype", choices=["float32", "bfloat16"], help="compute dtype")
    a("--boundary-dtype", choices=list(BOUNDARY_DTYPES),
      help="residual stream at the stage boundaries: float32 (default) or compute (bf16 under "
           "--dtype bfloat16: pipelines send half the bytes; the maths includes the rounding)")
    a("--boundary-stages", type=int, metavar="P",
      help="with --boundary-dtype compute: the stage split whose boundaries round (default: "
           "--stages of a pipeline; give it to an emulated run to reproduce that pipeline)")
    a("--quiet", action="store_true", help="no progress on stderr")
    a("--json", action="store_true", help="print the run summary as JSON")
    p.set_defaults(func=run)
    _show_config_defaults(p)


def _show_config_defaults(p: argparse.ArgumentParser) -> None:
    """Append the config's default to every flag of a config field whose help does not say it
    (the flags default to None so that a saved config can fill them: the value shown is what a
    new run takes)."""
    from llm_validation.config import TrainConfig
    d = TrainConfig().to_dict()
    for action in p._actions:                                     # noqa: SLF001
        field = _FIELDS.get(action.dest)
        if field is None or not action.help or "default" in action.help.lower():
            continue
        value = d[field[0]][field[1]]
        action.help += f" (default: {'none' if value is None else value})"


def _json_object(path: Path, flag: str) -> dict[str, Any]:
    from llm_validation.records.atomic_io import read_json
    if not path.is_file():
        raise FileNotFoundError(f"{flag}: no such file {path}")
    d = read_json(path)
    if not isinstance(d, dict):
        raise ValueError(f"{flag} {path}: must hold a JSON object")
    return d


def model_fields(path: str) -> dict[str, Any]:
    """The ``ModelConfig`` fields of ``--model-config FILE.json`` (missing ones: the defaults),
    checked by ``ModelConfig`` itself (one-line errors naming the field)."""
    from llm_validation.config import ModelConfig
    d = _json_object(Path(path), "--model-config")
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    bad = sorted(set(d) - known)
    if bad:
        raise ValueError(f"--model-config {path}: unknown fields {bad} (ModelConfig has "
                         f"{sorted(known)})")
    try:
        return dataclasses.asdict(ModelConfig(**d))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--model-config {path}: {exc}") from None


def saved_config(path: str) -> Any:
    """The ``TrainConfig`` of ``--config FILE`` (a run's config.json or its run directory;
    ``meta`` is ignored); a config written by ``StatsRecorder`` for a model this project did not
    build is refused."""
    from llm_validation.config import TrainConfig
    p = Path(path)
    p = p / "config.json" if p.is_dir() else p
    d = _json_object(p, "--config")
    if isinstance(d.get("model"), dict) and d["model"].get("external"):
        raise ValueError(f"--config {p}: recorded by StatsRecorder from a model this project did "
                         "not build; only the project's own runs can be re-run")
    try:
        return TrainConfig.from_dict({k: v for k, v in d.items() if k != "meta"})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--config {p}: not a valid run config: {exc}") from None


def config_from_args(args: argparse.Namespace) -> Any:
    """The TrainConfig the flags describe (saved config as the base with --resume)."""
    from llm_validation.config import TrainConfig, pipedream_taus, preset
    from llm_validation.rundir import load_config
    from llm_validation.training.manifest import with_prepared_data

    if args.resume not in (None, "yes", "auto"):
        raise ValueError(f"--resume takes no value or 'auto', got {args.resume!r}")
    if args.config is not None and args.resume:
        raise ValueError("give --config or --resume, not both (--resume reads --out's config)")
    if args.model_config is not None and args.preset is not None:
        raise ValueError("give --preset or --model-config, not both")
    base = TrainConfig()
    if args.resume and args.out and (Path(args.out) / "config.json").exists():
        base = load_config(args.out)
    if args.config is not None:
        base = saved_config(args.config)
    d = base.to_dict()
    if args.config is not None:
        d["run"]["resume"] = False
    if args.preset is not None:
        d["model"] = dataclasses.asdict(preset(args.preset))
    if args.model_config is not None:
        d["model"] = model_fields(args.model_config)
    if args.tied is not None:
        d["model"]["tied"] = args.tied
    for dest, (sec, name) in _FIELDS.items():
        value = getattr(args, dest)
        if value is not None:
            d[sec][name] = value
    if args.stage_taus is not None and args.pipedream is not None:
        raise ValueError("give --stage-taus or --pipedream, not both")
    taus = pipedream_taus(args.pipedream) if args.pipedream is not None else args.stage_taus
    if taus is not None:
        d["delay"]["stage_taus"] = list(taus)
        if args.delay is None:
            d["delay"]["tau"] = max(taus)
    if args.pipeline == "2bw" and args.delay is None:
        d["delay"]["tau"] = 1
    if args.out is None and args.resume:
        raise ValueError("--resume needs --out DIR (the run to continue)")
    d["run"]["resume"] = "auto" if args.resume == "auto" else args.resume is not None
    vocab = args.vocab_size
    if vocab is None and (args.resume or args.config) and base.data.format == "shards":
        vocab = base.model.vocab_size               # the resumed run's (maybe padded) vocabulary
    if vocab is not None:
        d["model"]["vocab_size"] = vocab
    cfg = TrainConfig.from_dict(d)
    if args.set:
        from llm_validation.sweep.grid import apply_overrides
        cfg = apply_overrides(cfg, args.set)
    cfg = with_prepared_data(cfg, vocab)
    if args.out is None and args.config is None and not _sets_out_dir(args.set or ()):
        from llm_validation.records.run_name import default_out_dir
        cfg = cfg.replace(run=dataclasses.replace(cfg.run, out_dir=default_out_dir(cfg)))
    return cfg


def _sets_out_dir(sets: Any) -> bool:
    """Whether a ``--set`` names the run directory (``run.out_dir``)."""
    from llm_validation.sweep.grid import parse_override
    return any(parse_override(text)[1:3] == ("run", "out_dir") for text in sets)


def _interrupted(exc: KeyboardInterrupt, out_dir: str) -> int:
    """The one line of an interrupted run: where it stopped and the command that continues it;
    the exit code 128 + signal."""
    import signal

    from llm_validation.rundir import RunPaths
    from llm_validation.records.run_folder import continue_command, newest_checkpoint
    from llm_validation.sweep.interrupt import Interrupted, exit_code
    signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
    where = exc.detail if isinstance(exc, Interrupted) else ""
    if not where:
        step = newest_checkpoint(RunPaths(out_dir))
        where = ("before its first checkpoint (it will start over)" if step is None else
                 f"at once; its newest checkpoint is at step {step}")
    print(f"delaybound train: interrupted by {signal.Signals(signum).name} {where}; continue "
          f"with: {continue_command(out_dir)}", file=sys.stderr, flush=True)
    return exit_code(signum)


def run(args: argparse.Namespace) -> int:
    from llm_validation.pipeline.faults import PipelineFailure
    from llm_validation.run import run as run_training
    from llm_validation.records.run_folder import continuation

    check_out_dir("--out", args.out)
    cfg, line = continuation(config_from_args(args))
    tb = None
    if args.tensorboard is not None:
        from llm_validation.records.tensorboard_log import TensorboardLog
        check_out_dir("--tensorboard", args.tensorboard)
        tb = TensorboardLog(args.tensorboard)
    def announce() -> None:     # once the folder is ours: an error stays one line
        if line:
            print(f"delaybound train: {line}", file=sys.stderr, flush=True)
    emulated = cfg.run.pipeline == "none" and cfg.run.data_parallel == 1
    try:
        result = run_training(cfg, progress=not args.quiet, on_start=announce,
                              callback=tb.row if tb is not None and emulated else None)
        if tb is not None:               # the closing eval row (a pipeline's rows: all)
            tb.add_run(cfg.run.out_dir)
    except PipelineFailure as exc:  # a stage died or hung; the message names it
        print(f"delaybound train: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        return _interrupted(exc, cfg.run.out_dir)
    finally:
        if tb is not None:
            tb.close()
    if args.json:
        print_json(result.to_dict())
    else:
        val = "n/a" if result.final_val_loss is None else f"{result.final_val_loss:.4f}"
        print(f"{result.status}: {result.steps} steps, {result.tokens} tokens, "
              f"final val_loss {val}, {result.wall_time_s:.1f}s -> {result.run_dir}")
    if result.status != "completed":
        print(f"delaybound train: {result.message}", file=sys.stderr)
        return 1
    return 0
