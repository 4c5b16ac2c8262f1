"""What a run folder holds, and what ``delaybound train`` does with it: one answer per state.

:func:`folder_state` reads the folder; :func:`continuation` turns the state and the command's
config into the config to run and the one line that says what happens (or a ``ValueError`` with
the one message that says what to type instead). No two answers contradict: the flag an error
names is the one that works.

========================================  ===========================  ==========================
state                                     ``train --out DIR``          ``train --resume --out DIR``
========================================  ===========================  ==========================
``empty`` (no folder, or no run files)    starts                       error: drop ``--resume``
``finished`` (summary for all its steps)  error: ``--resume --steps``  extends with a larger
                                          M (M > N) to extend          ``--steps`` (else the same
                                                                       error)
``unfinished`` with a checkpoint          continues (says so)          continues (says so)
``unfinished`` without a checkpoint       starts it over (says so)     starts it over (says so)
``other``: another run's config           error: ``--resume``          (the saved config is the
                                          continues that run           base: its own run)
========================================  ===========================  ==========================

``--resume auto`` keeps the library's meaning (continue or start, no line; what ``torchrun
--max-restarts`` needs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import shlex
from pathlib import Path

from llm_validation.config import TrainConfig
from llm_validation.pipeline.checkpoint import newest_intact
from llm_validation.rundir import (RunPaths, check_resumable, checkpoint_step, latest_checkpoint,
                                   load_config)
from llm_validation.records.atomic_io import read_json
from llm_validation.validation.runs import is_complete

__all__ = ["STATES", "folder_state", "newest_checkpoint", "continuation", "continue_command"]

#: The states of a run folder (module docstring).
STATES = ("empty", "finished", "unfinished", "unfinished-no-checkpoint", "other")


def newest_checkpoint(paths: RunPaths) -> int | None:
    """The step of the newest checkpoint of either runtime (the emulator's ``step_<N>.pt``, a
    pipeline's complete and intact DCP folder), or None."""
    steps = []
    own = latest_checkpoint(paths)
    if own is not None:
        steps.append(checkpoint_step(own))
    with contextlib.redirect_stderr(io.StringIO()):    # its warning is the run's to print
        piped = newest_intact(paths)
    if piped is not None:
        steps.append(piped[0])
    return max(steps, default=None)


def folder_state(paths: RunPaths, cfg: TrainConfig | None = None) -> str:
    """One of :data:`STATES` (``other`` only when ``cfg`` is given and the saved config is not
    ``cfg``'s run up to the fields a resume may change)."""
    if not paths.config.exists() and not paths.has_run():
        return "empty"
    if paths.config.exists() and is_complete(paths.root):
        return "finished"
    if cfg is not None and paths.config.exists():
        try:
            check_resumable(load_config(paths.root), cfg)
        except ValueError:
            return "other"
    return "unfinished" if newest_checkpoint(paths) is not None else "unfinished-no-checkpoint"


def continue_command(out_dir: str | Path) -> str:
    """The exact command that continues the run in ``out_dir`` (its saved settings)."""
    return f"delaybound train --resume --out {shlex.quote(str(out_dir))}"


def _finished_text(paths: RunPaths) -> tuple[int, str]:
    summary = read_json(paths.summary)
    steps = int(summary.get("steps", 0))
    val = summary.get("final_val_loss")
    return steps, f"{steps} steps" + (f", final val_loss {val:.4f}" if val is not None else "")


def continuation(cfg: TrainConfig) -> tuple[TrainConfig, str | None]:
    """(config to run, the line saying what happens or None) for ``cfg`` in its ``out_dir``;
    ``ValueError`` with the one message of a state ``train`` refuses (module docstring)."""
    paths, resume = RunPaths(cfg.run.out_dir), cfg.run.resume
    if resume == "auto":
        return cfg, None
    root = paths.root
    if not paths.config.exists():
        if not paths.has_run():
            if resume:
                raise ValueError(f"--resume: no checkpoint found in {root} and no run to "
                                 "continue there; drop --resume to start a new run")
            return cfg, None
        raise ValueError(f"{root} holds run files without their config.json (not a run train "
                         "can continue); choose another --out")
    if resume:                    # its own run, up to the fields a resume may change
        check_resumable(load_config(root), cfg)
    state = folder_state(paths, cfg)
    step = newest_checkpoint(paths)
    if state == "finished":
        done, text = _finished_text(paths)
        if resume and cfg.run.steps > done and step is not None:
            return cfg, f"extending the finished run in {root} from step {step} to {cfg.run.steps}"
        if resume and step is None:
            raise ValueError(f"{root} holds a finished run ({text}) whose checkpoints were "
                             "removed: it cannot be trained longer; choose another --out")
        raise ValueError(f"{root} holds a finished run ({text}); to train it longer give "
                         f"--resume --steps M with M > {done}, or choose another --out")
    if state == "other":
        try:
            check_resumable(load_config(root), cfg)
        except ValueError as exc:
            what = str(exc).removeprefix("--resume: ").split(";")[0]
        raise ValueError(f"{root} holds another run ({what}); continue that run with --resume "
                         "(its saved settings), or choose another --out")
    cfg = cfg.replace(run=dataclasses.replace(cfg.run, resume=True))
    if state == "unfinished":
        return cfg, (f"continuing the unfinished run in {root} from its checkpoint at step "
                     f"{step} of {cfg.run.steps}")
    return cfg, (f"starting the unfinished run in {root} over from step 0: it stopped before "
                 "its first checkpoint")
