"""Llama-style decoder-only transformer, splittable into P contiguous pipeline stages.

Architecture (shapes: B batch, T time, C = d_model, H query heads, K kv heads, D = C/H, V vocab):
  idx[B,T] -> embed -> h[B,T,C] -> n_layer x Block -> RMSNorm -> head -> logits[B,T,V]
  Block: h += Attn(RMSNorm(h)); h += SwiGLU(RMSNorm(h))
  Attn: causal grouped-query attention (K kv heads shared by H/K query heads each) with RoPE
        (rotate-half convention, as in Llama / SmolLM).
  SwiGLU: down(silu(gate(x)) * up(x)).
No biases. The head is tied to the embedding (``cfg.tied``) or a separate matrix.

Stages: ``Transformer.split(P)`` returns P :class:`Stage` modules that hold references to the
model's own submodules (no copies: every parameter object is shared with the full model).
Stage 0 maps idx[B,T] -> h[B,T,C] (embedding + its blocks), middle stages h -> h, the last
stage h -> logits[B,T,V] (its blocks + final norm + head); P = 1 gives one module idx -> logits.
Blocks are dealt out contiguously, as evenly as possible (earlier stages get the remainder).
Full forward and stage composition run the same functions in the same order, so their outputs
are bitwise equal. Tying across stages: with a tied head the embedding matrix would live in
stage 0 and be used again in the last stage, which a multi-process pipeline would have to
synchronise; ``split(P)`` therefore raises ``ValueError`` for a tied model with P > 1 (the
``tiny`` and ``small`` presets are untied; use ``tied=False`` for SmolLM shapes in pipelines).

Stage boundaries in the compute dtype (``ModelConfig.boundary_dtype = "compute"``): under bf16
autocast the residual stream h is rounded to bf16 at the boundaries of
``split(cfg.boundary_stages)`` (before the first block of every stage but the first), and its
gradient is rounded to bf16 there in the backward (autograd of the two casts). The full model
applies the round trip ``h.to(bf16).to(float32)`` at those points; a stage ending at one sends
``h.to(bf16)`` and the next stage starts with ``x.to(float32)``: the same two casts split
between two processes, so the emulator and the pipeline stay bitwise equal while activations
and their gradients cross stages in bf16 (half the bytes). Without autocast nothing is rounded.

Parameter naming (used by ``optim`` for the Muon/AdamW split): ``embed.weight``,
``blocks.<i>.attn.{q,k,v,o}.weight``, ``blocks.<i>.mlp.{gate,up,down}.weight``,
``blocks.<i>.{attn_norm,mlp_norm}.weight``, ``norm.weight``, ``head.weight`` (untied only).
A stage names its blocks ``blocks.<i - first block of the stage>``.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llm_validation.config import ModelConfig

__all__ = ["Transformer", "Stage", "Block", "Rotary", "lm_loss", "batch_loss", "param_kind",
           "stage_bounds", "boundary_cuts", "round_boundary", "stage_activation_dtype", "skip_normal"]


class Rotary(nn.Module):
    """RoPE tables (non-persistent buffers) and the rotation of q/k."""

    def __init__(self, head_dim: int, max_seq_len: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.arange(max_seq_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", angles.cos().float(), persistent=False)  # [T_max, D/2]
        self.register_buffer("sin", angles.sin().float(), persistent=False)  # [T_max, D/2]

    def forward(self, x: Tensor) -> Tensor:
        # x: [B, heads, T, D] -> same shape, pair (i, i + D/2) rotated by angle t * f_i
        # in float32 whatever the compute dtype (bf16 angles lose the position's low bits),
        # cast back to x's dtype; a no-op for float32 runs
        t, half = x.shape[-2], x.shape[-1] // 2
        cos, sin = self.cos[:t], self.sin[:t]                             # [T, D/2] float32
        xf = x.float()
        x1, x2 = xf[..., :half], xf[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


class Attention(nn.Module):
    """Causal grouped-query self-attention with RoPE."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        c, d = cfg.d_model, cfg.head_dim
        self.n_head, self.n_kv_head, self.head_dim = cfg.n_head, cfg.n_kv_head, d
        self.q = nn.Linear(c, cfg.n_head * d, bias=False)
        self.k = nn.Linear(c, cfg.n_kv_head * d, bias=False)
        self.v = nn.Linear(c, cfg.n_kv_head * d, bias=False)
        self.o = nn.Linear(cfg.n_head * d, c, bias=False)

    def forward(self, x: Tensor, rope: Rotary) -> Tensor:
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.n_head, self.head_dim).transpose(1, 2)     # [B,H,T,D]
        k = self.k(x).view(b, t, self.n_kv_head, self.head_dim).transpose(1, 2)  # [B,K,T,D]
        v = self.v(x).view(b, t, self.n_kv_head, self.head_dim).transpose(1, 2)  # [B,K,T,D]
        q, k = rope(q), rope(k)
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=self.n_kv_head != self.n_head)   # [B,H,T,D]
        return self.o(y.transpose(1, 2).reshape(b, t, self.n_head * self.head_dim))  # [B,T,C]


class MLP(nn.Module):
    """SwiGLU feed-forward: down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.up = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))  # [B,T,F] -> [B,T,C]


class Block(nn.Module):
    """Pre-norm residual block: attention then SwiGLU."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, h: Tensor, rope: Rotary) -> Tensor:
        h = h + self.attn(self.attn_norm(h), rope)  # [B,T,C]
        return h + self.mlp(self.mlp_norm(h))       # [B,T,C]


# The three pieces of the forward pass, shared by Transformer.forward and Stage.forward so that
# the composition of the stages runs exactly the same operations.
def _embed(embed: nn.Embedding, idx: Tensor) -> Tensor:
    return embed(idx)  # [B,T] -> [B,T,C]


def _blocks(blocks: nn.ModuleList, rope: Rotary, h: Tensor, first: int = 0,
            cuts: frozenset[int] = frozenset()) -> Tensor:
    """Blocks ``first, first + 1, ...`` of the model; the stream is rounded before a block
    whose index is a cut (``boundary_cuts``), except the first one (the caller's boundary)."""
    for i, block in enumerate(blocks):
        if i > 0 and first + i in cuts:
            h = round_boundary(h)
        h = block(h, rope)
    return h  # [B,T,C]


def boundary_cuts(cfg: ModelConfig) -> frozenset[int]:
    """Indices of the blocks before which the residual stream is rounded: the first block of
    every stage but the first of ``split(cfg.boundary_stages)``; none for float32 boundaries."""
    if cfg.boundary_dtype == "float32":
        return frozenset()
    return frozenset(lo for lo, _ in stage_bounds(cfg.n_layer, cfg.boundary_stages)[1:])


def _compute_dtype(device_type: str) -> torch.dtype | None:
    """The autocast dtype in force on ``device_type``, None outside autocast."""
    if not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def _to_compute(h: Tensor) -> Tensor:
    """``h`` in the autocast compute dtype (unchanged outside autocast): what a stage sends."""
    dtype = _compute_dtype(h.device.type)
    return h if dtype is None else h.to(dtype)


def round_boundary(h: Tensor) -> Tensor:
    """The boundary's round trip ``h.to(compute).to(h.dtype)`` (identity outside autocast):
    one stage's send and the next stage's upcast in one process."""
    return _to_compute(h).to(h.dtype)


def stage_activation_dtype(cfg: ModelConfig, run_dtype: str, residual: torch.dtype) -> torch.dtype:
    """Dtype of the activations (and their gradients) crossing stages: bf16 with compute
    boundaries under bf16 autocast (``run_dtype``), else the residual stream's ``residual``."""
    if cfg.boundary_dtype == "compute" and run_dtype == "bfloat16":
        return torch.bfloat16
    return residual


def _logits(norm: nn.RMSNorm, head_weight: Tensor, h: Tensor) -> Tensor:
    return F.linear(norm(h), head_weight)  # [B,T,C] -> [B,T,V]


def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean next-token cross-entropy: logits[B,T,V], targets[B,T] -> scalar (float32 softmax)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def batch_loss(losses: Sequence[Tensor]) -> Tensor:
    """The loss of a batch from its microbatch losses: their mean in float64 (every runtime),
    a tensor on their device (no host synchronisation)."""
    return torch.stack([x.detach() for x in losses]).double().mean()


def param_kind(name: str, p: Tensor) -> str:
    """``matrix`` (hidden 2-D weight of a block: Muon), ``embed``, ``head`` or ``norm``."""
    if name.startswith("blocks.") and p.ndim == 2:
        return "matrix"
    if name.startswith("embed."):
        return "embed"
    if name.startswith("head."):
        return "head"
    return "norm"


def stage_bounds(n_layer: int, stages: int) -> list[tuple[int, int]]:
    """Contiguous block ranges [lo, hi) of each stage, sizes as even as possible."""
    if isinstance(stages, bool) or not isinstance(stages, int) or not 1 <= stages <= n_layer:
        raise ValueError(f"stages={stages!r} must be an int in [1, n_layer={n_layer}]")
    base, extra = divmod(n_layer, stages)
    bounds, lo = [], 0
    for s in range(stages):
        hi = lo + base + (1 if s < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def skip_normal(gen: torch.Generator, n: int, chunk: int) -> None:
    """Advance ``gen`` as ``torch.randn(n, generator=gen)`` does, holding at most about
    ``chunk`` values at a time: draws of ``chunk`` values (a multiple of 16: the CPU kernel
    turns uniforms into normals 16 at a time), the last draw at least 16 long (a shorter tail
    redraws differently). Tested bitwise against the full draw (``tests/.../test_stage_build``)."""
    if chunk < 16 or chunk % 16:
        raise ValueError(f"skip_normal: chunk={chunk} must be a positive multiple of 16")
    done = 0
    while done < n:
        k = min(chunk, n - done)
        if 0 < n - done - k < 16:
            k = n - done
        torch.randn(k, generator=gen)
        done += k


class Transformer(nn.Module):
    """Llama-style decoder. ``Transformer(cfg, seed=0)``: the initialisation is a function of
    ``seed`` only (its own generator), so equal seeds give bitwise equal weights."""

    def __init__(self, cfg: ModelConfig, *, seed: int = 0) -> None:
        super().__init__()
        if not isinstance(cfg, ModelConfig):
            raise TypeError(f"Transformer needs a ModelConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.head = None if cfg.tied else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.rope = Rotary(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.reset_parameters(seed)

    @torch.no_grad()
    def reset_parameters(self, seed: int = 0, *, skip_chunk: int | None = None) -> None:
        """Normal(0, init_std) for every matrix in named order, output projections (attn.o,
        mlp.down) scaled by 1/sqrt(2 n_layer); norm gains 1. Skipped on the meta device;
        with ``skip_chunk`` (elements) the draws of a meta matrix are made in chunks of that
        size and dropped, so the materialised parameters get the weights of a full build
        (:func:`skip_normal`; ``pipeline.stage`` builds one stage that way)."""
        gen = torch.Generator().manual_seed(seed)
        out_std = self.cfg.init_std / math.sqrt(2 * self.cfg.n_layer)
        for name, p in self.named_parameters():
            if p.is_meta:
                if skip_chunk is not None and p.ndim > 1:
                    skip_normal(gen, p.numel(), skip_chunk)
                continue
            if p.ndim == 1:
                p.fill_(1.0)
                continue
            std = out_std if name.endswith(("attn.o.weight", "mlp.down.weight")) else \
                self.cfg.init_std
            torch.randn(p.shape, generator=gen, dtype=torch.float32, out=p.data)  # in place:
            p.mul_(std)                      # no temporaries, the same values as randn() * std

    @property
    def head_weight(self) -> Tensor:
        """The output matrix [V, C]: the embedding when tied."""
        return self.embed.weight if self.head is None else self.head.weight

    def forward(self, idx: Tensor) -> Tensor:
        """idx[B,T] (int64 token ids) -> logits[B,T,V]."""
        h = _embed(self.embed, idx)
        h = _blocks(self.blocks, self.rope, h, 0, boundary_cuts(self.cfg))
        return _logits(self.norm, self.head_weight, h)

    def split(self, stages: int) -> list["Stage"]:
        """P contiguous stages sharing this model's parameters (see the module docstring)."""
        bounds = stage_bounds(self.cfg.n_layer, stages)
        if self.cfg.tied and stages > 1:
            raise ValueError(f"split({stages}): a tied head cannot be split across stages; "
                             "use ModelConfig.tied=False for pipelines")
        return [Stage(self, s, stages, lo, hi) for s, (lo, hi) in enumerate(bounds)]

    def num_params(self) -> int:
        """Number of parameters (each shared tensor once)."""
        return sum(p.numel() for p in self.parameters())


class Stage(nn.Module):
    """Stage ``index`` of ``num_stages``: blocks [lo, hi) plus the embedding (first stage) and
    the final norm and head (last stage). Holds the model's modules, not copies."""

    def __init__(self, model: Transformer, index: int, num_stages: int, lo: int, hi: int) -> None:
        super().__init__()
        self.index, self.num_stages, self.block_range = index, num_stages, (lo, hi)
        self.is_first, self.is_last = index == 0, index == num_stages - 1
        self.embed = model.embed if self.is_first else None
        self.blocks = nn.ModuleList(model.blocks[lo:hi])
        self.rope = model.rope
        self.norm = model.norm if self.is_last else None
        self.head = model.head if self.is_last else None
        self._model_ref = [model]  # a plain list: not registered as a submodule

    def forward(self, x: Tensor) -> Tensor:
        """First stage: idx[B,T] -> h[B,T,C]; middle: h -> h; last: h -> logits[B,T,V]. With
        compute boundaries (module docstring) a stage starting at a cut takes h in the compute
        dtype and upcasts it, a stage ending at one returns h in the compute dtype."""
        (lo, hi), cuts = self.block_range, boundary_cuts(self._model_ref[0].cfg)
        if self.is_first:
            x = _embed(self.embed, x)
        elif lo in cuts:
            x = x.to(self.blocks[0].attn_norm.weight.dtype)
        x = _blocks(self.blocks, self.rope, x, lo, cuts)
        if self.is_last:
            x = _logits(self.norm, self._model_ref[0].head_weight, x)
        elif hi in cuts:
            x = _to_compute(x)
        return x
