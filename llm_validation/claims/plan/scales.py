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
(:mod:`llm_validation.claims.plan.lr_sweep`), which tunes them at every scale (``--set
OPT:optim.lr=...`` skips the sweep for an optimizer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from llm_validation.config import TrainConfig
from llm_validation.sweep.grid import BASE_OPTIM, apply_overrides, default_base

__all__ = ["Scale", "SCALES", "LR_REASON", "OPT_COST", "base_config", "get_scale",
           "FINAL_EVAL_BATCHES", "NS_DTYPE", "SIZE_LADDER", "steps_at_ratio", "CHINCHILLA_TPP",
           "TOKENS_PER_STEP", "WARMUP_FRACTION", "AUX_OPTIMIZERS"]

#: Batches of the closing evaluation of every ledger run (docs/performance.md: a larger fixed
#: set lowers the sampling noise of the final loss every gap reads, for ~4 evaluations' cost).
FINAL_EVAL_BATCHES = 32
#: Newton-Schulz dtype of the Muon family at the fixed scales: float32 where the device has no
#: fast bfloat16, the libraries' bfloat16 elsewhere (docs/performance.md: Muon 1.4-1.5x faster
#: on AVX2 CPUs). It resolves per machine: re-assembling the tiny ledger on a CPU with native
#: bfloat16 needs ``--set optim.ns_dtype=float32`` (the machine it ran on had none).
NS_DTYPE = "auto"

#: Why each optimizer's lr is what it is (shown in docs/reproduce.md, ``--list`` and every
#: claims.json). The scale's lrs are the centres of the phase-1 sweep; the lrs a ledger trains
#: with are the sweep's choice, recorded per optimizer with its source in ``lr_sweep.json``.
LR_REASON = ("The lrs used are phase 1's choice per optimizer (lr_sweep.json: 'sweep' = the best "
             "of a factor-2 log grid of synchronous runs, widened until interior; 'override' = "
             "--set OPT:optim.lr). The grid's centres: AdamW 1e-3 and Muon 1e-2, the demo's tuned "
             "tiny-model lrs (BASE_OPTIM); NorMuon Muon's (Muon with a row-wise second-moment "
             "normalisation and the same RMS-matched lr scale); SOAP AdamW's (Adam in the "
             "preconditioner's eigenbasis; its paper reuses AdamW's lr)")

#: Optimizers with an AdamW part (embeddings, head, norms) whose lr is ``optim.aux_lr``.
AUX_OPTIMIZERS = ("muon", "normuon")

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
    warmup_fraction: float = 0.0
    """Linear warmup of the base run as a fraction of its steps (``optim.warmup_steps``, a
    fixed step count: an arm that changes ``run.steps`` keeps it, as recipes with a fixed
    warmup do). 0 at ``tiny`` (its runs keep their names), 2% at the 20:1 scales."""
    aux_lr_from_adamw: bool = False
    """Muon and NorMuon: their AdamW part (embeddings, head, norms) runs at the scale's AdamW
    lr (the lr sweep's choice, swept first) instead of their own matrix lr
    (``optim.aux_lr``, recorded in every run's config). False at ``tiny`` (its runs ran the
    AdamW part at Muon's lr, labelled in its ledger), True at the 20:1 scales."""
    ns_dtype: str = NS_DTYPE
    """Newton-Schulz dtype of the Muon family (``optim.ns_dtype``). ``auto`` resolves per
    machine (bfloat16 where the CPU has it natively), which changes run names between
    machines; the 20:1 scales pin ``float32`` so that a ledger spread over several sessions
    resumes with the same runs on any machine."""
    tokens_per_param: float | None = None
    """Training tokens per parameter of the base run (all parameters counted, as Chinchilla);
    None: not a ratio-defined scale. Shown in claims.md and ``--list``."""
    claims: tuple[str, ...] | None = None
    """The claims ``reproduce`` selects at this scale without ``--claims`` (None: every claim
    but those run on request, ``registry.ON_REQUEST``)."""
    notes: tuple[str, ...] = field(default=())
    """What this scale's numbers are (for claims.md)."""

    def __post_init__(self) -> None:
        for name in ("steps", "quick_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Scale.{name}={v!r} must be an int >= 1")
        if not self.sec_per_step > 0:
            raise ValueError(f"Scale.sec_per_step={self.sec_per_step!r} must be > 0")
        if not 0.0 <= self.warmup_fraction < 0.5:
            raise ValueError(f"Scale.warmup_fraction={self.warmup_fraction!r} must be in "
                             "[0, 0.5)")


_TINY_LRS = {"adamw": BASE_OPTIM["adamw"]["lr"], "muon": BASE_OPTIM["muon"]["lr"],
             "normuon": BASE_OPTIM["muon"]["lr"], "soap": BASE_OPTIM["adamw"]["lr"]}

_FIXED_SCALES: dict[str, Scale] = {
    # 0.18 s/step: a 100-step tiny run with statistics took 17-21 s of CPU on one core of
    # this machine (the momentum error is off in the ledger; evaluation every 25 steps adds
    # ~5%: the loss curves of claim 1 get 9 points instead of 5).
    "tiny": Scale(name="tiny", model="tiny", steps=200, quick_steps=100, lrs=_TINY_LRS,
                  sec_per_step=0.18, eval_interval=25, checkpoint_interval=200,
                  notes=("tiny model (~1M parameters, byte vocabulary), default corpus, CPU",
                         "its runs were trained before the verdict protocol: no warmup, and Muon's and NorMuon's AdamW "
                         "part (embeddings, head, norms) at their own lr (optim.aux_lr unset, "
                         "10x AdamW's tuned lr for Muon); the 20:1 scales fix both")),
    # ~20x the tiny model's FLOPs per step (10x parameters, 2x tokens); an estimate.
    "small": Scale(name="small", model="small", steps=400, quick_steps=200, lrs=_TINY_LRS,
                   sec_per_step=2.5, seq_len=128,
                   notes=("small model (~10M parameters), CPU; lrs swept at the scale (phase 1)",)),
    # H100 bfloat16 estimate (6 N T FLOPs at ~30% MFU plus statistics); not measured here.
    "smollm-135m": Scale(name="smollm-135m", model="smollm-135m", steps=2000, quick_steps=500,
                         lrs=_TINY_LRS, sec_per_step=0.12, device="cuda", batch_size=32,
                         seq_len=512, dtype="bfloat16", eval_interval=200, stats_interval=50,
                         checkpoint_interval=500,
                         notes=("SmolLM-135M shapes on one GPU in bfloat16; lrs swept at the scale (phase 1)",)),
}


#: Tokens of one base step at the 20:1 scales (16 sequences x 64 bytes, the tiny ledger's).
TOKENS_PER_STEP = 16 * 64
#: The ratio of the paper's dense runs ("a Chinchilla compute-optimal token-to-parameter
#: ratio of 20:1").
CHINCHILLA_TPP = 20.0
#: Warmup of the 20:1 scales' base runs: 2% of the steps, a short linear warmup as in
#: pretraining recipes (the paper's practice: a warmup of a few percent).
WARMUP_FRACTION = 0.02


def steps_at_ratio(model: str, tokens_per_param: float = CHINCHILLA_TPP,
                   tokens_per_step: int = TOKENS_PER_STEP) -> int:
    """Optimizer steps that train ``model`` (a preset) on ``tokens_per_param`` tokens per
    parameter, all parameters counted (Chinchilla's convention)."""
    from llm_validation.config import preset
    return max(1, round(tokens_per_param * preset(model).n_params() / tokens_per_step))


#: The smallest size runs every claim (the whole ledger at 20:1; ``registry`` resolves "all").
ALL_CLAIMS = ("all",)
#: The larger sizes run the headline claims: the size ladder (claims 1a and 2a at the size, 5
#: seeds) and the horizon (claim 4: half and full run, 10 and 20 tokens per parameter; its
#: full-run arms are the size ladder's).
HEADLINE = ("horizon", "size-ladder")


def _ratio_scale(model: str, sec_per_step: float, eval_interval: int, stats_interval: int,
                 claims: tuple[str, ...] | None) -> Scale:
    """A size-ladder scale: ``model`` at 20 tokens per parameter (see :data:`SIZE_LADDER`)."""
    steps = steps_at_ratio(model)
    return Scale(name=model, model=model, steps=steps, quick_steps=max(1, steps // 2),
                 lrs=_TINY_LRS, sec_per_step=sec_per_step, eval_interval=eval_interval,
                 stats_interval=stats_interval, checkpoint_interval=500,
                 warmup_fraction=WARMUP_FRACTION, aux_lr_from_adamw=True,
                 tokens_per_param=CHINCHILLA_TPP, claims=claims, ns_dtype="float32",
                 notes=(f"{model} preset ({steps} steps of 16 x 64 bytes = 20 tokens per "
                        "parameter, all parameters counted), byte vocabulary, default corpus, "
                        "CPU; 2% linear warmup, cosine; Muon's and NorMuon's AdamW part at "
                        "the swept AdamW lr; lrs swept at the scale (phase 1)",))


#: The size ladder's scales, smallest first (issue 27): one architecture at three sizes, each
#: at 20 tokens per parameter. Seconds per step: one thread, 1024 tokens a step, measured with
#: other jobs on the machine (the issue's 47k-parameter model 0.024 s, 279k 0.079 s; the others scaled by parameters), statistics
#: included at the scale's interval.
SIZE_LADDER: tuple[Scale, ...] = (
    _ratio_scale("n46k", 0.024, eval_interval=50, stats_interval=15, claims=ALL_CLAIMS),
    _ratio_scale("n113k", 0.045, eval_interval=125, stats_interval=50, claims=HEADLINE),
    _ratio_scale("n267k", 0.079, eval_interval=250, stats_interval=100, claims=HEADLINE))
#: Every scale by name (``--scale``).
SCALES: Mapping[str, Scale] = {**_FIXED_SCALES, **{s.name: s for s in SIZE_LADDER}}


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
    d["optim"].update(name=optimizer, lr=float(scale.lrs[optimizer]), ns_dtype=scale.ns_dtype)
    if scale.warmup_fraction:
        d["optim"]["warmup_steps"] = max(1, round(scale.warmup_fraction * steps))
    if scale.aux_lr_from_adamw and optimizer in AUX_OPTIMIZERS:
        d["optim"]["aux_lr"] = float(scale.lrs["adamw"])
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
