"""Scales of the claims ledger: the base run every claim's arms are changes of.

A :class:`Scale` fixes the model preset, the run length, the batch and the per-optimizer peak
learning rates; :func:`base_config` builds the base :class:`~llm_validation.config.TrainConfig`
of one optimizer at a scale. Run settings not named by a scale are those of the demo's base
run :func:`llm_validation.sweep.grid.default_base` (the demo's tiny-model choices, explained
in docs/validation.md), so the ledger and the demo train the same thing.

Scales:

- ``tiny`` (~1M parameters, CPU): 200 steps of 16 x 64 tokens (the horizon ladder up to
  1600); checkpoints every 200 steps, so a killed ledger loses at most 200 steps of a long
  run (the interval is not part of a run's name: ``config.DIGEST_NEUTRAL``); see
  docs/reproduce.md for the budget.
- ``small`` (~10M parameters, CPU): 400 steps of 16 x 128 tokens, for a larger CPU machine.
- ``smollm-135m`` (SmolLM-135M shapes, GPU): 2000 steps of 32 x 512 tokens in bfloat16 on
  ``--device cuda``; checkpoints every 500 steps so an interrupted run resumes.

The per-optimizer learning rates are each optimizer's tuned lr at the tiny scale (the demo's
:data:`~llm_validation.sweep.grid.BASE_OPTIM` for AdamW and Muon; NorMuon takes Muon's, SOAP
AdamW's: the reason is in :data:`LR_REASON`). They are the centres of the ledger's lr sweep
(:mod:`llm_validation.claims.lr_sweep`), which tunes them at every scale (``--set
OPT:optim.lr=...`` skips the sweep for an optimizer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from llm_validation.config import TrainConfig
from llm_validation.sweep.grid import BASE_OPTIM, apply_overrides, default_base

__all__ = ["Scale", "SCALES", "LR_REASON", "OPT_COST", "base_config", "get_scale",
           "FINAL_EVAL_BATCHES", "NS_DTYPE"]

#: Batches of the closing evaluation of every ledger run (docs/performance.md: a larger fixed
#: set lowers the sampling noise of the final loss every gap reads, for ~4 evaluations' cost).
FINAL_EVAL_BATCHES = 32
#: Newton-Schulz dtype of the Muon family: float32 where the device has no fast bfloat16, the
#: libraries' bfloat16 elsewhere (docs/performance.md: Muon 1.4-1.5x faster on AVX2 CPUs).
NS_DTYPE = "auto"

#: Why each optimizer's lr is what it is (shown in docs/reproduce.md, ``--list`` and every
#: claims.json). The scale's lrs are the centres of the stage-1 sweep; the lrs a ledger trains
#: with are the sweep's choice, recorded per optimizer with its source in ``lr_sweep.json``.
LR_REASON = ("The lrs used are stage 1's choice per optimizer (lr_sweep.json: 'sweep' = the best "
             "of a factor-2 log grid of synchronous runs, widened until interior; 'override' = "
             "--set OPT:optim.lr). The grid's centres: AdamW 1e-3 and Muon 1e-2, the demo's tuned "
             "tiny-model lrs (BASE_OPTIM); NorMuon Muon's (Muon with a row-wise second-moment "
             "normalisation and the same RMS-matched lr scale); SOAP AdamW's (Adam in the "
             "preconditioner's eigenbasis; its paper reuses AdamW's lr)")

#: Relative cost of one step per optimizer (AdamW = 1): CPU seconds of 60-step delayed tiny
#: runs with statistics, one thread (AdamW 9.2 s, Muon 11.2, NorMuon 10.4, SOAP 11.5); the
#: optimizers the ledger does not train are set to 1.
OPT_COST: Mapping[str, float] = {"adamw": 1.0, "muon": 1.2, "normuon": 1.15, "soap": 1.25}


@dataclass(frozen=True, kw_only=True)
class Scale:
    """One scale of the ledger (None fields keep the demo base run's value)."""

    name: str
    """Scale name (``--scale``)."""
    model: str
    """Model preset (:data:`llm_validation.config.PRESETS`)."""
    steps: int
    """Optimizer steps of a base run."""
    quick_steps: int
    """Steps of a base run under ``--quick``."""
    lrs: Mapping[str, float]
    """Peak lr per optimizer."""
    sec_per_step: float
    """Estimated seconds per step of a base AdamW run on the scale's device, one process
    (statistics and evaluation included); drives the cost estimate and the ETA."""
    device: str = "cpu"
    """Default ``--device``."""
    batch_size: int | None = None
    """Sequences per step."""
    seq_len: int | None = None
    """Tokens per sequence."""
    dtype: str | None = None
    """``float32`` or ``bfloat16``."""
    eval_interval: int | None = None
    """Validation every this many steps."""
    stats_interval: int | None = None
    """Statistics every this many steps (the alignment claim reads them)."""
    checkpoint_interval: int = 0
    """Checkpoint every this many steps (0: only at the end)."""
    notes: tuple[str, ...] = field(default=())
    """What this scale's numbers are (for claims.md)."""

    def __post_init__(self) -> None:
        for name in ("steps", "quick_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Scale.{name}={v!r} must be an int >= 1")
        if not self.sec_per_step > 0:
            raise ValueError(f"Scale.sec_per_step={self.sec_per_step!r} must be > 0")


_TINY_LRS = {"adamw": BASE_OPTIM["adamw"]["lr"], "muon": BASE_OPTIM["muon"]["lr"],
             "normuon": BASE_OPTIM["muon"]["lr"], "soap": BASE_OPTIM["adamw"]["lr"]}

SCALES: Mapping[str, Scale] = {
    # 0.18 s/step: a 100-step tiny run with statistics took 17-21 s of CPU on one core of
    # this machine (the momentum error is off in the ledger; evaluation every 25 steps adds
    # ~5%: the loss curves of claim 1 get 9 points instead of 5).
    "tiny": Scale(name="tiny", model="tiny", steps=200, quick_steps=100, lrs=_TINY_LRS,
                  sec_per_step=0.18, eval_interval=25, checkpoint_interval=200,
                  notes=("tiny model (~1M parameters, byte vocabulary), default corpus, CPU",)),
    # ~20x the tiny model's FLOPs per step (10x parameters, 2x tokens); an estimate.
    "small": Scale(name="small", model="small", steps=400, quick_steps=200, lrs=_TINY_LRS,
                   sec_per_step=2.5, seq_len=128,
                   notes=("small model (~10M parameters), CPU; lrs swept at the scale (stage 1)",)),
    # H100 bfloat16 estimate (6 N T FLOPs at ~30% MFU plus statistics); not measured here.
    "smollm-135m": Scale(name="smollm-135m", model="smollm-135m", steps=2000, quick_steps=500,
                         lrs=_TINY_LRS, sec_per_step=0.12, device="cuda", batch_size=32,
                         seq_len=512, dtype="bfloat16", eval_interval=200, stats_interval=50,
                         checkpoint_interval=500,
                         notes=("SmolLM-135M shapes on one GPU in bfloat16; lrs swept at the scale (stage 1)",)),
}


def get_scale(name: str) -> Scale:
    """The scale ``name``; ``ValueError`` listing the known scales."""
    if name not in SCALES:
        raise ValueError(f"--scale {name!r} is not one of {list(SCALES)}")
    return SCALES[name]


def base_config(scale: Scale, optimizer: str, *, quick: bool = False, device: str | None = None,
                overrides: Sequence[str] = ()) -> TrainConfig:
    """The base run of ``optimizer`` at ``scale`` (``ValueError`` when the optimizer is not
    configurable yet). ``overrides`` (``[OPT:]section.field=value``) apply last."""
    if optimizer not in scale.lrs:
        raise ValueError(f"scale {scale.name!r} has no learning rate for optimizer "
                         f"{optimizer!r}; known: {sorted(scale.lrs)}")
    steps = scale.quick_steps if quick else scale.steps
    src = optimizer if optimizer in BASE_OPTIM else "adamw"
    d = default_base(src, steps=steps, model=scale.model).to_dict()
    d["optim"].update(name=optimizer, lr=float(scale.lrs[optimizer]), ns_dtype=NS_DTYPE)
    run = d["run"]
    run.update(momentum_error_interval=0, checkpoint_interval=scale.checkpoint_interval,
               final_eval_batches=FINAL_EVAL_BATCHES,
               device=device or scale.device, out_dir="runs/claims")
    for key, value in (("batch_size", scale.batch_size), ("dtype", scale.dtype),
                       ("eval_interval", scale.eval_interval),
                       ("stats_interval", scale.stats_interval)):
        if value is not None:
            run[key] = value
    if scale.seq_len is not None:
        d["data"]["seq_len"] = scale.seq_len
    return apply_overrides(TrainConfig.from_dict(d), overrides)
