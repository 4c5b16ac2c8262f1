"""Configuration of an LLM validation run: frozen keyword-only dataclasses with validation.

``TrainConfig(model, data, optim, delay, run)`` is everything :func:`llm_validation.training.loop.train`
needs; it round-trips through JSON with ``to_dict()`` / ``from_dict()`` (``config.json`` of a run
directory). Every field is documented; ``__post_init__`` raises ``ValueError`` / ``TypeError``
naming the field, the value and the allowed range.

Vocabulary resolution: byte-level corpora (the default stdlib corpus, a text file or folder)
have vocabulary 256, so ``TrainConfig`` replaces ``model.vocab_size`` by 256 for them (the
model's vocabulary comes from the data when byte-level). Token shards (``.bin``) keep the
model's vocabulary.

Presets (:func:`preset`): ``tiny`` (~1M parameters, CPU tests), ``small`` (~10M, CPU
benchmarks), ``smollm-135m`` and ``smollm-360m`` (SmolLM's dense shapes, tied head).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from llm_validation.hardware import NS_DTYPES, resolve_ns_dtype

__all__ = [
    "ModelConfig",
    "DataConfig",
    "OptimConfig",
    "DelayConfig",
    "RunConfig",
    "TrainConfig",
    "field_value",
    "set_field",
    "PRESETS",
    "preset",
    "pipedream_taus",
    "BYTE_VOCAB",
    "BOUNDARY_DTYPES",
    "PIPELINE_KINDS",
    "OPTIMIZER_LABELS",
    "optimizer_label",
    "SYNC_PIPELINES",
    "OPTIMIZERS",
    "SCHEDULES",
    "CORRECTIONS",
    "NS_DTYPES",
    "DIGEST_LEGACY",
    "DIGEST_NEUTRAL",
    "neutral_dict",
]

#: Vocabulary of byte-level corpora.
BYTE_VOCAB = 256
#: ``ModelConfig.boundary_dtype`` values: no rounding, or the autocast compute dtype.
BOUNDARY_DTYPES = ("float32", "compute")


# --------------------------------------------------------------------------- validation helpers
def _where(obj: Any, name: str) -> str:
    return f"{type(obj).__name__}.{name}"


def _int(obj: Any, name: str, lo: int | None = None, hi: int | None = None) -> None:
    value = getattr(obj, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{_where(obj, name)}={value!r} must be an int")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise ValueError(f"{_where(obj, name)}={value!r} is out of range {rng}")


def _float(obj: Any, name: str, lo: float | None = None, hi: float | None = None,
           lo_open: bool = False) -> None:
    value = getattr(obj, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{_where(obj, name)}={value!r} must be a real number")
    value = float(value)
    bad = not math.isfinite(value)
    if lo is not None:
        bad = bad or (value <= lo if lo_open else value < lo)
    if hi is not None:
        bad = bad or value > hi
    if bad:
        limits = ([f"{'>' if lo_open else '>='} {lo:g}"] if lo is not None else []) + \
            ([f"<= {hi:g}"] if hi is not None else [])
        raise ValueError(f"{_where(obj, name)}={value!r} must be a finite number"
                         + (f" {' and '.join(limits)}" if limits else ""))
    object.__setattr__(obj, name, value)


def _choice(obj: Any, name: str, allowed: tuple[str, ...]) -> None:
    value = getattr(obj, name)
    if value not in allowed:
        raise ValueError(f"{_where(obj, name)}={value!r} is not one of {list(allowed)}")


def _bool(obj: Any, name: str) -> None:
    value = getattr(obj, name)
    if not isinstance(value, bool):
        raise TypeError(f"{_where(obj, name)}={value!r} must be a bool")


# --------------------------------------------------------------------------------------- model
@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Shape of the Llama-style decoder (:class:`llm_validation.training.model.Transformer`)."""

    name: str = "custom"
    """Preset name, for the record only."""
    vocab_size: int = BYTE_VOCAB
    """Vocabulary size V (replaced by 256 for byte-level data, see module docstring)."""
    n_layer: int = 4
    """Number of transformer blocks."""
    d_model: int = 128
    """Residual width C."""
    n_head: int = 4
    """Number of query heads H (C must be divisible by H; head size C/H must be even for RoPE)."""
    n_kv_head: int = 2
    """Number of key/value heads (grouped-query attention; must divide n_head)."""
    d_ff: int = 512
    """Hidden width of the SwiGLU MLP."""
    max_seq_len: int = 1024
    """Longest sequence the RoPE tables cover."""
    tied: bool = False
    """Tie the output head to the token embedding (not supported with pipeline stages P > 1)."""
    rope_theta: float = 10000.0
    """RoPE base frequency."""
    norm_eps: float = 1e-5
    """RMSNorm epsilon."""
    init_std: float = 0.02
    """Standard deviation of the normal initialisation (output projections: / sqrt(2 n_layer))."""
    boundary_dtype: str = "float32"
    """Dtype of the residual stream at the stage boundaries of ``split(boundary_stages)``:
    ``float32`` (no rounding), or ``compute``: under bf16 autocast the stream is rounded to
    bf16 there (forward, and its gradient in the backward), so pipeline stages exchange bf16
    activations and gradients (half the bytes); the emulator applies the same rounding at the
    same points, so the two stay bitwise equal. A no-op without autocast (float32 runs)."""
    boundary_stages: int = 1
    """The stage split (``Transformer.split(boundary_stages)``) whose boundaries round with
    ``boundary_dtype = compute``; 1: no boundary. A pipeline run sets it to its stages P
    (``TrainConfig``); an emulated reference of that pipeline gives it explicitly."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"ModelConfig.name={self.name!r} must be a str")
        _int(self, "vocab_size", 2)
        _int(self, "n_layer", 1)
        _int(self, "d_model", 2)
        _int(self, "n_head", 1)
        _int(self, "n_kv_head", 1)
        _int(self, "d_ff", 1)
        _int(self, "max_seq_len", 1)
        _bool(self, "tied")
        _float(self, "rope_theta", 0.0, lo_open=True)
        _float(self, "norm_eps", 0.0, lo_open=True)
        _float(self, "init_std", 0.0, lo_open=True)
        _choice(self, "boundary_dtype", BOUNDARY_DTYPES)
        _int(self, "boundary_stages", 1, self.n_layer)
        if self.boundary_dtype == "float32" and self.boundary_stages != 1:
            raise ValueError(f"ModelConfig.boundary_stages={self.boundary_stages} needs "
                             "boundary_dtype='compute' (float32 boundaries round nothing)")
        if self.d_model % self.n_head:
            raise ValueError(
                f"ModelConfig.d_model={self.d_model} must be divisible by n_head={self.n_head}")
        if (self.d_model // self.n_head) % 2:
            raise ValueError(f"ModelConfig: head size d_model/n_head={self.d_model // self.n_head}"
                             " must be even (RoPE rotates pairs)")
        if self.n_head % self.n_kv_head:
            raise ValueError(
                f"ModelConfig.n_kv_head={self.n_kv_head} must divide n_head={self.n_head}")

    @property
    def head_dim(self) -> int:
        """Size of one attention head, C / H."""
        return self.d_model // self.n_head

    def n_params(self) -> int:
        """Closed-form parameter count (matches ``sum(p.numel())`` of the model)."""
        c, kv = self.d_model, self.n_kv_head * self.head_dim
        block = 2 * c * c + 2 * c * kv + 3 * c * self.d_ff + 2 * c
        head = 0 if self.tied else self.vocab_size * c
        return self.vocab_size * c + self.n_layer * block + c + head


PRESETS: dict[str, ModelConfig] = {
    # ~1.05M parameters with the byte vocabulary: CPU tests.
    "tiny": ModelConfig(name="tiny", n_layer=4, d_model=128, n_head=4, n_kv_head=2, d_ff=512,
                        max_seq_len=512),
    # ~9.6M parameters: CPU benchmarks and short real runs.
    "small": ModelConfig(name="small", n_layer=6, d_model=384, n_head=6, n_kv_head=2, d_ff=1024,
                         max_seq_len=1024),
    # The size ladder: one Llama-style family on the byte vocabulary, 4 blocks (the
    # PipeDream claim's P = 4 needs a block a stage), head size 8, one kv head, d_ff = 4 d,
    # width 24 / 40 / 64; parameters (all counted, Chinchilla's way) / non-embedding /
    # embedding + head share: 46,296 / 34,008 / 27%; 113,000 / 92,520 / 18%; 266,816 /
    # 234,048 / 12% (SmolLM-135M: ~21%). 20 tokens per parameter at 1024 tokens a step: 904,
    # 2207 and 5211 steps (docs/size_ladder.md).
    "n46k": ModelConfig(name="n46k", n_layer=4, d_model=24, n_head=3, n_kv_head=1, d_ff=96,
                        max_seq_len=512),
    "n113k": ModelConfig(name="n113k", n_layer=4, d_model=40, n_head=5, n_kv_head=1, d_ff=160,
                         max_seq_len=512),
    "n267k": ModelConfig(name="n267k", n_layer=4, d_model=64, n_head=8, n_kv_head=1, d_ff=256,
                         max_seq_len=512),
    # the delay-law design's largest size: 10.5x n46k, the same architecture family
    "n485k": ModelConfig(name="n485k", n_layer=4, d_model=88, n_head=11, n_kv_head=1, d_ff=352,
                         max_seq_len=512),
    # SmolLM-135M (HuggingFaceTB/SmolLM-135M config): 134,515,008 parameters with vocab 49152.
    "smollm-135m": ModelConfig(name="smollm-135m", vocab_size=49152, n_layer=30, d_model=576,
                               n_head=9, n_kv_head=3, d_ff=1536, max_seq_len=2048, tied=True,
                               rope_theta=10000.0),
    # SmolLM-360M: 32 layers, d=960, 15 heads, 5 kv heads, ffn 2560, tied.
    "smollm-360m": ModelConfig(name="smollm-360m", vocab_size=49152, n_layer=32, d_model=960,
                               n_head=15, n_kv_head=5, d_ff=2560, max_seq_len=2048, tied=True,
                               rope_theta=10000.0),
}


def preset(name: str) -> ModelConfig:
    """The model preset ``name``; raises ``ValueError`` listing the known presets."""
    if name not in PRESETS:
        raise ValueError(f"preset={name!r} is not one of {list(PRESETS)}")
    return PRESETS[name]


# ---------------------------------------------------------------------------------------- data
@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the tokens come from and how they are cut into training windows."""

    path: str | None = None
    """None: the Python stdlib sources of the running interpreter (the default corpus). Else a
    text file or folder (byte-level), ``.bin`` token shards (a file, a glob, or a folder), or a
    folder written by ``delaybound data prepare`` (``format="shards"``)."""
    format: str = "auto"
    """``auto`` (``.bin`` suffix or glob means shards, anything else bytes), ``bytes``, ``bin``
    or ``shards`` (a prepared folder: its ``manifest.json`` names the train and validation
    shards; the model's vocabulary must cover the manifest's)."""
    val_path: str | None = None
    """Validation shards for ``bin`` data (file or glob); None: ``*val*`` shards in the same
    folder, or else the last ``val_fraction`` of the tokens."""
    seq_len: int = 128
    """Window length T (tokens per training sequence)."""
    val_fraction: float = 0.1
    """Fraction of files (bytes: by a hash of the relative path) held out for validation."""

    def __post_init__(self) -> None:
        for name in ("path", "val_path"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"DataConfig.{name}={value!r} must be None or a non-empty str")
        _choice(self, "format", ("auto", "bytes", "bin", "shards"))
        _int(self, "seq_len", 1)
        _float(self, "val_fraction", 0.0, 0.5, lo_open=True)
        if self.path is None and self.format in ("bin", "shards"):
            raise ValueError(f"DataConfig.format={self.format!r} needs a path to the shards")
        if self.val_path is not None and not self.is_bin:
            raise ValueError("DataConfig.val_path is only used with .bin shards")
        if self.val_path is not None and self.format == "shards":
            raise ValueError("DataConfig.val_path cannot be used with format='shards' (the "
                             "prepared folder's manifest names its validation shards)")

    @property
    def is_bin(self) -> bool:
        """True for uint16 token shards (``bin``, ``shards``), False for byte-level corpora."""
        if self.format != "auto":
            return self.format in ("bin", "shards")
        return self.path is not None and self.path.endswith(".bin")

    @property
    def byte_level(self) -> bool:
        """True when the vocabulary is the 256 byte values."""
        return not self.is_bin


# ----------------------------------------------------------------------------------- optimizer
#: Base optimizers (``OptimConfig.name``); the library and geometry of each are in
#: :mod:`llm_validation.training.optim` and docs/llm_validation.md.
OPTIMIZERS = ("adamw", "muon", "sgd", "normuon", "soap", "lion", "adan", "nadamw")
#: Learning-rate schedules after warmup (``OptimConfig.schedule``; formula: ``optim.lr_factor``).
SCHEDULES = ("constant", "cosine", "linear", "wsd")


@dataclass(frozen=True, kw_only=True)
class OptimConfig:
    """The base optimizer (:func:`llm_validation.training.optim.build_optimizer`) and its schedule."""

    name: str = "adamw"
    """One of :data:`OPTIMIZERS`: ``adamw`` (torch.optim.AdamW), ``muon`` (torch.optim.Muon on
    hidden matrices + AdamW on embeddings, head and norms), ``sgd`` (torch.optim.SGD with
    momentum), ``normuon`` (pytorch_optimizer.NorMuon on hidden matrices + AdamW on the rest),
    ``soap``, ``lion``, ``adan`` (pytorch_optimizer) or ``nadamw`` (torch.optim.NAdam with
    decoupled weight decay)."""
    lr: float = 1e-3
    """Peak learning rate (Muon/NorMuon: of the matrices, shape-adjusted by ``muon_adjust_lr``)."""
    aux_lr: float | None = None
    """Muon/NorMuon only: peak learning rate of the AdamW part; None means ``lr``."""
    weight_decay: float = 0.1
    """Decoupled weight decay on 2-D weights (norm gains are never decayed); SGD: torch's
    coupled L2 penalty."""
    beta1: float = 0.9
    """First-moment coefficient of the Adam family (AdamW, NAdamW, SOAP, Adan's gradient EMA,
    the AdamW part of Muon/NorMuon) and Lion's update-interpolation beta."""
    beta2: float = 0.95
    """Second-moment coefficient of every Adam-family optimizer (AdamW, NAdamW, SOAP, Adan's
    squared-gradient EMA, NorMuon's row-wise second moment, the AdamW part of Muon/NorMuon)
    and Lion's momentum beta."""
    eps: float = 1e-8
    """Adam-family epsilon."""
    momentum: float = 0.95
    """Muon, NorMuon and SGD momentum mu (docs/theory.md: alpha = 1 - mu)."""
    nesterov: bool = True
    """Nesterov momentum for Muon, NorMuon and SGD."""
    muon_adjust_lr: str = "match_rms_adamw"
    """Muon/NorMuon lr shape adjustment: ``match_rms_adamw`` (0.2 sqrt(max(A, B)): one lr for
    both parts) or ``original`` (Keller Jordan's sqrt(max(1, A/B)))."""
    schedule: str = "cosine"
    """Decay after warmup (one of :data:`SCHEDULES`): ``constant``, ``cosine`` or ``linear``
    (down to min_lr_ratio * lr at ``decay_steps``), or ``wsd`` (warmup-stable-decay: peak lr
    until the last ``wsd_decay_fraction`` of the run, then linear to min_lr_ratio * lr)."""
    warmup_steps: int = 0
    """Linear warmup length in steps."""
    min_lr_ratio: float = 0.1
    """Final lr as a fraction of the peak for cosine/linear/wsd decay."""
    decay_steps: int | None = None
    """Step at which decay ends; None means the run's total steps."""
    wsd_decay_fraction: float = 0.2
    """WSD only: fraction in (0, 1] of the run (of ``decay_steps``) spent in the final linear
    decay (it never starts before the warmup ends)."""
    grad_clip: float = 0.0
    """Global L2-norm clipping of the gradient the step uses (0 = off): ``g <- g min(1,
    grad_clip / (||g|| + 1e-6))`` as torch.nn.utils.clip_grad_norm_, over all stages."""
    ns_dtype: str = "bfloat16"
    """Muon/NorMuon only: dtype of the Newton-Schulz iteration (one of :data:`NS_DTYPES`).
    ``bfloat16`` is the libraries' own (exactly ``torch.optim.Muon`` / ``NorMuon``), ``float32``
    the same iteration in float32 (:mod:`llm_validation.training.muon`), ``auto`` float32 on a
    CPU without native bfloat16 and bfloat16 elsewhere; ``TrainConfig`` resolves ``auto`` at
    construction (:func:`llm_validation.hardware.resolve_ns_dtype`), so config.json records
    the dtype the run used."""

    def __post_init__(self) -> None:
        _choice(self, "name", OPTIMIZERS)
        _float(self, "lr", 0.0, lo_open=True)
        if self.aux_lr is not None:
            _float(self, "aux_lr", 0.0, lo_open=True)
        _float(self, "weight_decay", 0.0)
        _float(self, "beta1", 0.0, 1.0)
        _float(self, "beta2", 0.0, 1.0)
        if self.beta1 >= 1.0 or self.beta2 >= 1.0:
            raise ValueError(f"OptimConfig.beta1={self.beta1}, beta2={self.beta2} must be < 1")
        _float(self, "eps", 0.0, lo_open=True)
        _float(self, "momentum", 0.0, 1.0)
        if self.momentum >= 1.0:
            raise ValueError(f"OptimConfig.momentum={self.momentum} must be in [0, 1)")
        _bool(self, "nesterov")
        if self.nesterov and self.momentum == 0.0 and self.name == "sgd":
            raise ValueError("OptimConfig.nesterov=True needs momentum > 0 for sgd")
        _choice(self, "muon_adjust_lr", ("match_rms_adamw", "original"))
        _choice(self, "schedule", SCHEDULES)
        _int(self, "warmup_steps", 0)
        _float(self, "min_lr_ratio", 0.0, 1.0)
        if self.decay_steps is not None:
            _int(self, "decay_steps", 1)
        _float(self, "wsd_decay_fraction", 0.0, 1.0, lo_open=True)
        _float(self, "grad_clip", 0.0)
        _choice(self, "ns_dtype", NS_DTYPES)


# --------------------------------------------------------------------------------------- delay
def pipedream_taus(stages: int) -> tuple[int, ...]:
    """Original PipeDream's per-stage delays for P stages: stage s gets P - 1 - s."""
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
        raise ValueError(f"stages={stages!r} must be an int >= 1")
    return tuple(stages - 1 - s for s in range(stages))


#: Delay corrections (``DelayConfig.correction``; formulas: ``training.corrections``).
CORRECTIONS = ("none", "dcasgd", "nesterov")


@dataclass(frozen=True, kw_only=True)
class DelayConfig:
    """Emulated gradient delay and Error Feedback (:class:`llm_validation.training.delay.DelayedOptimizer`)."""

    tau: int = 0
    """Gradient delay in optimizer steps: 0 synchronous, 1 PipeDream-2BW. With ``stage_taus``
    it must equal ``max(stage_taus)``."""
    ef_lambda: float = 0.0
    """Error Feedback coefficient lam (0 = off, 1 = the paper's default)."""
    ef_level: str = "update"
    """``update``: x+ = x + v + lam (v - v_prev) on the full base update v; ``grad``: the base
    optimizer is fed (1 + lam) g - lam g_prev."""
    stage_taus: tuple[int, ...] | None = None
    """Per-stage delays (original PipeDream: :func:`pipedream_taus`): the model is cut into
    ``len(stage_taus)`` contiguous stages as ``Transformer.split`` does, and the parameters of
    stage s read weights ``stage_taus[s]`` steps old."""
    sync_start: int = 0
    """The first ``sync_start`` steps run with tau = 0 (the delay switches on at that step and
    its read point is then ``W(step - tau)``). Emulated runs only."""
    sync_cooldown: int = 0
    """The last ``sync_cooldown`` steps of the run (``RunConfig.steps``) run with tau = 0 (each
    reads ``W(t)``). Emulated runs only."""
    correction: str = "none"
    """Delay correction (one of :data:`CORRECTIONS`, next to EF): ``none``; ``dcasgd``
    (Zheng et al. 2017: the gradient becomes ``g + c g*g*(W(t) - read point)``); ``nesterov``
    (a Nesterov look-ahead on the base update, ``llm_validation.training.corrections``)."""
    correction_coef: float = 0.0
    """Coefficient c of the correction: DC-ASGD's lambda (> 0), or the look-ahead momentum
    gamma in (0, 1); must be 0 with ``correction='none'``."""

    def __post_init__(self) -> None:
        _int(self, "tau", 0)
        _float(self, "ef_lambda", 0.0)
        _choice(self, "ef_level", ("update", "grad"))
        _int(self, "sync_start", 0)
        _int(self, "sync_cooldown", 0)
        _choice(self, "correction", CORRECTIONS)
        _float(self, "correction_coef", 0.0)
        if self.correction == "none" and self.correction_coef != 0.0:
            raise ValueError(f"DelayConfig.correction_coef={self.correction_coef} needs a "
                             f"correction (one of {list(CORRECTIONS[1:])})")
        if self.correction != "none" and self.correction_coef <= 0.0:
            raise ValueError(f"DelayConfig.correction={self.correction!r} needs "
                             "correction_coef > 0 (0 would be no correction)")
        if self.correction == "nesterov" and self.correction_coef >= 1.0:
            raise ValueError(f"DelayConfig.correction_coef={self.correction_coef} is the "
                             "look-ahead momentum of 'nesterov' and must be < 1")
        if self.correction == "nesterov" and self.uses_ef and self.ef_level == "update":
            raise ValueError("DelayConfig: correction='nesterov' and update-level EF both "
                             "rewrite the applied update; use one of them (or ef_level='grad')")
        if self.stage_taus is not None:
            taus = self.stage_taus
            if isinstance(taus, list):
                taus = tuple(taus)
                object.__setattr__(self, "stage_taus", taus)
            if not isinstance(taus, tuple) or not taus or any(
                    isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in taus):
                raise ValueError(
                    f"DelayConfig.stage_taus={self.stage_taus!r} must be a non-empty tuple of "
                    "ints >= 0")
            if self.tau != max(taus):
                raise ValueError(f"DelayConfig.tau={self.tau} must equal max(stage_taus)="
                                 f"{max(taus)} when stage_taus is given")

    @property
    def uses_ef(self) -> bool:
        """True when Error Feedback is on (lam > 0)."""
        return self.ef_lambda > 0.0

    @property
    def uses_sync_phases(self) -> bool:
        """True when some steps run without delay (``sync_start`` or ``sync_cooldown`` > 0)."""
        return self.sync_start > 0 or self.sync_cooldown > 0


# ----------------------------------------------------------------------------------------- run
#: Display name of each ``OptimConfig.name`` (tables, plots, verdict texts).
OPTIMIZER_LABELS = {"adamw": "AdamW", "muon": "Muon", "sgd": "SGD", "normuon": "NorMuon",
                    "soap": "SOAP", "lion": "Lion", "adan": "Adan", "nadamw": "NAdamW"}


def optimizer_label(name: str) -> str:
    """The display name of an optimizer (the name itself when it has none)."""
    return OPTIMIZER_LABELS.get(name, name)


#: The real pipeline runtimes (``RunConfig.pipeline``; ``none`` is the emulated run).
PIPELINE_KINDS = ("2bw", "gpipe", "1f1b")
#: The synchronous ones (torch.distributed.pipelining schedules, flush every step).
SYNC_PIPELINES = ("gpipe", "1f1b")


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Length, batch, intervals, output and device of a run."""

    steps: int = 200
    """Number of optimizer steps."""
    seed: int = 0
    """Seed of the model initialisation and of the data sampler."""
    batch_size: int = 16
    """Sequences per optimizer step (all microbatches together)."""
    microbatches: int = 1
    """M: the batch is cut into M equal microbatches, in order; gradients are accumulated as
    ``(loss_m / M).backward()`` for m = 0..M-1 (the sum of the means divided by M)."""
    eval_interval: int = 50
    """Validation loss every this many steps (0: only at the end; the end is always evaluated)."""
    eval_batches: int = 8
    """Number of fixed validation batches (of ``batch_size`` windows) per evaluation."""
    final_eval_batches: int = 0
    """Fixed validation batches of the closing evaluation at W(N) (0: ``eval_batches``, the
    same set as every evaluation; larger: that set and the next batches of the validation
    stream). The final loss is what every claim's gap reads; a larger set lowers its sampling
    noise for one evaluation's cost. Emulated single-process runs only."""
    final_eval_tokens: int = 0
    """Predicted tokens of a fixed closing evaluation set shared by every seed, batch size and
    model (0: off): windows of ``seq_len + 1`` tokens tiling the validation split in order
    (:func:`~llm_validation.training.data.tiled_windows`), so two runs' final losses differ by
    their weights only, never by their evaluation sets. When set, ``final_val_loss`` is its
    mean; the curve's closing point stays on the curve's batches. Emulated single-process runs
    only."""
    stats_interval: int = 10
    """Expensive statistics every this many steps (0: off; loss, lr, grad_norm are every step)."""
    momentum_error_interval: int = 0
    """Momentum error against a large-batch gradient every this many steps (0: off)."""
    large_batch_factor: int = 8
    """The large batch of the momentum error has ``large_batch_factor * batch_size`` windows."""
    checkpoint_interval: int = 0
    """Checkpoint every this many steps (0: only at the end; the end is always saved)."""
    checkpoint_minutes: float = 10.0
    """Also checkpoint when this many minutes of wall time have passed since the last
    checkpoint (0: off), and at SIGINT / SIGTERM, so an interrupted run loses at most this much:
    the emulated single-process loop (pipeline runs checkpoint every ``checkpoint_interval``
    steps). Checkpoints are atomic; resuming from any of them is bitwise on CPU."""
    log_interval: int = 1
    """Host-read flush every this many steps (>= 1): the per-step scalars of the metrics rows
    (loss, lr, grad_norm, every statistic) stay on the device and are read in ONE copy every
    ``log_interval`` steps, and at checkpoint steps and the last step, when the buffered rows
    are written; divergence is found there (the rows up to the diverged step are written and the
    run stops, as with 1). 1 (the default) reads every step; larger values remove the per-step
    host synchronisation (a crash loses at most the unflushed rows, which are always after the
    newest checkpoint and rewritten on resume). Rows are bitwise the same for every value."""
    out_dir: str = "runs/default"
    """Run directory (config.json, metrics.jsonl, checkpoints/, summary.json)."""
    device: str = "cpu"
    """``cpu``, ``cuda`` or ``auto`` (cuda when available)."""
    dtype: str = "float32"
    """Compute dtype: ``float32``, or ``bfloat16`` autocast (parameters stay float32)."""
    pipeline: str = "none"
    """``none`` (this process, emulated delay), ``2bw`` (real PipeDream-2BW pipeline, tau = 1),
    ``gpipe`` or ``1f1b`` (synchronous pipeline baselines)."""
    stages: int = 1
    """Pipeline stages P (>= 2 when pipeline is not ``none``)."""
    data_parallel: int = 1
    """Data-parallel replicas D: the run has P x D processes (a 2-D device mesh ("dp", "pp"));
    each replica of a stage takes ``batch_size / D`` sequences of every batch, cut into
    ``microbatches`` microbatches, and the stage's gradients are averaged over its D replicas
    before the step. With ``pipeline='none'`` and D > 1 the emulated delay and EF run on D
    processes. ``batch_size`` must be divisible by ``D * microbatches``."""
    resume: bool | str = False
    """Continue from the latest checkpoint of ``out_dir`` (a larger ``steps`` extends the run).
    ``True``: a checkpoint must exist; ``"auto"``: continue from the latest complete checkpoint
    if there is one, else start (a directory holding another run's config is refused): what a
    process restarted by ``torchrun --max-restarts N`` needs."""
    profile: bool = False
    """Pipeline runs: time every action per stage and write ``profile.json`` (what
    ``delaybound simulate --from RUN_DIR`` replays); changes no number of the run."""
    deterministic: bool = False
    """Deterministic GPU settings: ``torch.use_deterministic_algorithms(True)`` and the cuBLAS
    workspace variable (``training.determinism``); CPU runs are deterministic without it."""
    compile: bool = False
    """``torch.compile`` the model's forward and backward (training, statistics and
    evaluation passes; the optimizer step and the delay's bookkeeping stay eager), on CPU or
    GPU. The same seed on the same machine repeats a compiled CPU run bitwise on one torch
    thread (not with more: ``training.compiled``); against an eager run the numbers differ by
    floating-point reassociation (the final loss within
    ``training.compiled.COMPILED_FINAL_LOSS_RTOL``), so it is a different run with its own
    name. The emulated single-process loop only (a pipeline or ``data_parallel > 1`` refuses
    it)."""

    def __post_init__(self) -> None:
        _bool(self, "profile")
        _bool(self, "deterministic")
        _bool(self, "compile")
        _int(self, "steps", 1)
        _int(self, "seed", 0)
        _int(self, "batch_size", 1)
        _int(self, "microbatches", 1)
        if self.batch_size % self.microbatches:
            raise ValueError(f"RunConfig.batch_size={self.batch_size} must be divisible by "
                             f"microbatches={self.microbatches}")
        for name in ("eval_interval", "stats_interval", "momentum_error_interval",
                     "checkpoint_interval"):
            _int(self, name, 0)
        _float(self, "checkpoint_minutes", 0.0)
        _int(self, "log_interval", 1)
        _int(self, "eval_batches", 1)
        _int(self, "final_eval_batches", 0)
        _int(self, "final_eval_tokens", 0)
        _int(self, "large_batch_factor", 1)
        if not isinstance(self.out_dir, str) or not self.out_dir:
            raise TypeError(f"RunConfig.out_dir={self.out_dir!r} must be a non-empty str")
        _choice(self, "device", ("cpu", "cuda", "auto"))
        _choice(self, "dtype", ("float32", "bfloat16"))
        _choice(self, "pipeline", ("none", *PIPELINE_KINDS))
        _int(self, "stages", 1)
        _int(self, "data_parallel", 1)
        if self.batch_size % (self.data_parallel * self.microbatches):
            raise ValueError(f"RunConfig.batch_size={self.batch_size} must be divisible by "
                             f"data_parallel x microbatches = {self.data_parallel} x "
                             f"{self.microbatches} (each replica cuts its share of the batch "
                             "into microbatches)")
        if not (isinstance(self.resume, bool) or self.resume == "auto"):
            raise TypeError(f"RunConfig.resume={self.resume!r} must be True, False or 'auto'")
        if self.pipeline == "none" and self.stages != 1:
            raise ValueError(f"RunConfig.stages={self.stages} needs a pipeline (pipeline='none' "
                             "runs in one process; use stages=1)")
        if self.pipeline != "none" and self.stages < 2:
            raise ValueError(f"RunConfig.stages={self.stages} must be >= 2 for "
                             f"pipeline={self.pipeline!r}")
        if self.compile and (self.pipeline != "none" or self.data_parallel > 1):
            raise ValueError(f"RunConfig.compile=True runs in the emulated single-process loop "
                             f"only; pipeline={self.pipeline!r}, data_parallel="
                             f"{self.data_parallel} run eager (leave compile False)")


# ---------------------------------------------------------------------------------------- all
#: Fields added after run directories were first named by a digest of the whole config
#: (``claims.plan.run_name``), with the value that reproduces the runs made before them: a
#: digest leaves a field out while it holds that value, so those runs keep their names.
DIGEST_LEGACY: Mapping[str, Any] = {"optim.ns_dtype": "bfloat16", "run.final_eval_batches": 0,
                                    "run.final_eval_tokens": 0,
                                    "run.log_interval": 1, "model.boundary_dtype": "float32",
                                    "model.boundary_stages": 1, "run.compile": False,
                                    "run.checkpoint_minutes": 0.0}
#: RunConfig fields that do not change a run's numbers (a run resumes bitwise from any
#: checkpoint; its rows are bitwise the same at any log interval), with the value a run-name
#: digest and a sweep's same-config check read in their place: changing them keeps a run's name
#: and directory (e.g. the ledger checkpointing its long runs), and a run started under one
#: value continues under another (:data:`~llm_validation.rundir.RESUMABLE` allows it).
DIGEST_NEUTRAL: Mapping[str, Any] = {"run.checkpoint_interval": 0, "run.log_interval": 1,
                                     "run.checkpoint_minutes": 0.0}


def neutral_dict(cfg_dict: dict[str, Any]) -> dict[str, Any]:
    """``cfg_dict`` (a ``TrainConfig.to_dict()``) with the :data:`DIGEST_NEUTRAL` fields at their
    neutral values and ``run.out_dir`` / ``run.resume`` dropped: the part that names a run."""
    d = {k: dict(v) if isinstance(v, dict) else v for k, v in cfg_dict.items()}
    d.get("run", {}).pop("out_dir", None)
    d.get("run", {}).pop("resume", None)
    for key, value in DIGEST_NEUTRAL.items():
        section, name = key.split(".")
        if name in d.get(section, {}):
            d[section][name] = value
    return d

_SECTIONS = {"model": ModelConfig, "data": DataConfig, "optim": OptimConfig,
             "delay": DelayConfig, "run": RunConfig}


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """A whole run: model, data, optimizer, delay, run. JSON round-trip via to_dict/from_dict."""

    model: ModelConfig = field(default_factory=lambda: PRESETS["tiny"])
    """Model shape (vocab replaced by 256 for byte-level data)."""
    data: DataConfig = field(default_factory=DataConfig)
    """Corpus and window length."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """Base optimizer and lr schedule."""
    delay: DelayConfig = field(default_factory=DelayConfig)
    """Emulated delay and Error Feedback."""
    run: RunConfig = field(default_factory=RunConfig)
    """Steps, batch, intervals, output, device."""

    def __post_init__(self) -> None:
        for name, cls in _SECTIONS.items():
            if not isinstance(getattr(self, name), cls):
                raise TypeError(f"TrainConfig.{name} must be a {cls.__name__}, "
                                f"got {type(getattr(self, name)).__name__}")
        if self.data.byte_level and self.model.vocab_size != BYTE_VOCAB:
            object.__setattr__(self, "model",
                               dataclasses.replace(self.model, vocab_size=BYTE_VOCAB))
        if self.optim.ns_dtype == "auto":  # the dtype the run will use, as config.json records
            object.__setattr__(self, "optim", dataclasses.replace(
                self.optim, ns_dtype=resolve_ns_dtype("auto", self.run.device)))
        if self.data.seq_len > self.model.max_seq_len:
            raise ValueError(f"DataConfig.seq_len={self.data.seq_len} exceeds "
                             f"ModelConfig.max_seq_len={self.model.max_seq_len}")
        if self.delay.stage_taus is not None and len(self.delay.stage_taus) > self.model.n_layer:
            raise ValueError(f"DelayConfig.stage_taus has {len(self.delay.stage_taus)} stages but "
                             f"the model has only n_layer={self.model.n_layer} blocks")
        run = self.run
        if run.pipeline == "none" and run.data_parallel > 1:
            extra = [f.name for f in dataclasses.fields(self.delay)
                     if f.name not in ("tau", "ef_lambda", "ef_level")
                     and getattr(self.delay, f.name) != f.default]
            if extra:
                raise ValueError(f"DelayConfig.{extra[0]}={getattr(self.delay, extra[0])!r} is "
                                 "not supported with data_parallel > 1 (the data-parallel "
                                 "emulation runs tau, ef_lambda and ef_level only)")
        for name in ("final_eval_batches", "final_eval_tokens"):
            if getattr(run, name) and (run.pipeline != "none" or run.data_parallel > 1):
                raise ValueError(f"RunConfig.{name}={getattr(run, name)} is supported by the "
                                 "emulated single-process loop only (leave it 0 with a "
                                 "pipeline or data_parallel > 1)")
        if run.pipeline != "none":
            if run.stages > self.model.n_layer:
                raise ValueError(f"RunConfig.stages={run.stages} exceeds "
                                 f"n_layer={self.model.n_layer}")
            if self.model.boundary_dtype == "compute":   # the rounding follows the stages
                if self.model.boundary_stages == 1:
                    object.__setattr__(self, "model", dataclasses.replace(
                        self.model, boundary_stages=run.stages))
                elif self.model.boundary_stages != run.stages:
                    raise ValueError(f"ModelConfig.boundary_stages={self.model.boundary_stages} "
                                     f"must equal RunConfig.stages={run.stages} (the stage "
                                     "boundaries are where the residual stream is rounded)")
            if self.model.tied:
                raise ValueError("pipeline stages need an untied head (ModelConfig.tied=False)")
            if self.delay.stage_taus is not None:
                raise ValueError("DelayConfig.stage_taus is the single-process emulation of "
                                 "PipeDream; it cannot be combined with a real pipeline")
            if self.delay.uses_sync_phases:
                raise ValueError(f"DelayConfig.sync_start={self.delay.sync_start} and "
                                 f"sync_cooldown={self.delay.sync_cooldown} must be 0 with "
                                 f"pipeline={run.pipeline!r}: the real pipeline has no flush "
                                 "to switch the delay off and on")
            if run.pipeline == "2bw" and self.delay.tau != 1:
                raise ValueError(f"pipeline='2bw' has delay tau=1 by construction; got "
                                 f"DelayConfig.tau={self.delay.tau}")
            if run.pipeline in SYNC_PIPELINES and (self.delay.tau != 0 or self.delay.uses_ef):
                raise ValueError(f"pipeline={run.pipeline!r} is synchronous: it needs tau=0 and "
                                 "ef_lambda=0")

    @property
    def tokens_per_step(self) -> int:
        """Training tokens consumed by one optimizer step (B * T)."""
        return self.run.batch_size * self.data.seq_len

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable nested dict (tuples become lists)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TrainConfig":
        """Inverse of :meth:`to_dict`; unknown sections or fields raise ``ValueError``."""
        if not isinstance(d, Mapping):
            raise TypeError(f"TrainConfig.from_dict needs a mapping, got {type(d).__name__}")
        unknown = set(d) - set(_SECTIONS)
        if unknown:
            raise ValueError(f"TrainConfig: unknown sections {sorted(unknown)}; "
                             f"allowed {list(_SECTIONS)}")
        parts = {}
        for name, sub in _SECTIONS.items():
            values = dict(d.get(name, {}))
            fields = {f.name for f in dataclasses.fields(sub)}
            bad = set(values) - fields
            if bad:
                raise ValueError(f"{sub.__name__}: unknown fields {sorted(bad)}")
            if name == "delay" and isinstance(values.get("stage_taus"), list):
                values["stage_taus"] = tuple(values["stage_taus"])
            parts[name] = sub(**values)
        return cls(**parts)

    def replace(self, **sections: Any) -> "TrainConfig":
        """Copy with whole sections replaced, e.g. ``cfg.replace(run=new_run)``."""
        return dataclasses.replace(self, **sections)

    def with_fields(self, changes: Mapping[str, Any] | Iterable[tuple[str, Any]]
                    ) -> "TrainConfig":
        """Copy with ``section.field`` paths set (``{"optim.beta2": 0.99}``, or pairs applied
        in order), validated once as a whole; ``KeyError`` naming a path that is not a config
        field (:func:`set_field`). The one dotted-path override of the project: ``train
        --set``, sweeps' and the claims' ``--set`` and the claims' arms all go through it."""
        d = self.to_dict()
        for path, value in (changes.items() if isinstance(changes, Mapping) else changes):
            set_field(d, path, value)
        return TrainConfig.from_dict(d)


def field_value(d: Mapping[str, Any], path: str) -> Any:
    """The value at ``section.field`` of a config dict (:meth:`TrainConfig.to_dict`'s shape);
    ``KeyError`` with a one-line reason when ``path`` is not a config field."""
    section, _, name = path.partition(".")
    if not name or "." in name:
        raise KeyError(f"{path!r}: a config field is section.field (e.g. optim.beta2)")
    if section not in d:
        raise KeyError(f"{path} is not a config field: no section {section!r} (have "
                       f"{', '.join(d)})")
    if name not in d[section]:
        raise KeyError(f"{path} is not a config field in this checkout")
    return d[section][name]


def set_field(d: dict[str, Any], path: str, value: Any) -> None:
    """Set ``section.field`` of a config dict in place (tuples stored as lists, as
    :meth:`TrainConfig.to_dict` writes them); ``KeyError`` as :func:`field_value`."""
    field_value(d, path)
    section, _, name = path.partition(".")
    d[section][name] = list(value) if isinstance(value, tuple) else value
