"""Per-virtual-stage sizes of the Llama-style model: parameters, FLOPs, activation and message bytes.

Algorithm. The ``n_layer`` blocks are cut into ``K`` contiguous virtual stages as the runtime
cuts them (:func:`llm_validation.training.model.stage_bounds`); the first holds the embedding,
the last the final norm and the head (a head of its own even for a tied model: a pipeline
cannot share the embedding between its first and last stage). ``K > n_layer`` (a stage finer
than one block) is refused: it needs tensor parallelism inside a block, which is not modelled.
``balance="uniform"`` instead gives every stage ``1/K``
of the whole model (FLOPs, parameters, activations, embedding and head included): an ideal
balanced pipeline, not a cut any runtime makes (the head alone can outweigh a stage), which
isolates the schedule's effect from the imbalance of the runtime's cut.

Formulas (per token; ``c = d_model``, ``kv = n_kv_head * head_dim``, ``f = d_ff``, ``V`` vocab,
``n`` the sequence length):
- block parameters ``2c^2 + 2c kv + 3c f + 2c`` (as :meth:`ModelConfig.n_params`), of which all
  but the two norm gains are matrix weights;
- forward FLOPs ``2 * (matrix weights) + 2 n c`` per block (Kaplan et al. 2020, Table 1: the
  ``2 n_layer n_ctx d_attn`` attention term), ``2 V c`` for the head, 0 for the embedding (a
  lookup); backward = 2 x forward, split evenly into input and weight parts (each one forward);
- activations kept for the backward: ``6c + 2kv + 3f`` elements per block (norm inputs and
  outputs, q/k/v, attention output, SwiGLU gate, up and product; a fused attention kernel, so
  no ``n x n`` scores), plus ``2c`` elements and ``V`` logits with their float32 softmax on the
  last stage;
- a point-to-point message carries the hidden state, ``c`` elements per token.
These are estimates of a standard implementation, not measurements of ours.

Reference: Kaplan et al., "Scaling Laws for Neural Language Models", 2020, Section 2.1;
Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", 2022, Sec. 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_validation.config import ModelConfig
from llm_validation.training.model import stage_bounds

__all__ = ["StageShape", "stage_shapes", "block_params", "block_matrix_params"]

#: Bytes of the float32 softmax the loss keeps per logit.
LOSS_SOFTMAX_BYTES = 4


def block_params(m: ModelConfig) -> int:
    """Parameters of one block (matrices and the two RMSNorm gains)."""
    c, kv = m.d_model, m.n_kv_head * m.head_dim
    return 2 * c * c + 2 * c * kv + 3 * c * m.d_ff + 2 * c


def block_matrix_params(m: ModelConfig) -> int:
    """Matrix weights of one block (what the FLOPs count)."""
    return block_params(m) - 2 * m.d_model


@dataclass(frozen=True, kw_only=True)
class StageShape:
    """Sizes of one virtual stage."""

    index: int
    """Virtual stage k."""
    layers: float
    """Blocks held (fractional only with ``balance="uniform"``, 1/K of the model per stage)."""
    params: float
    """Parameters (weights the optimizer updates and the all-reduce sums)."""
    matrix_params: float
    """Parameters in the blocks' hidden 2-D matrices (Muon-like optimizers' share)."""
    forward_flops_per_token: float
    """Forward FLOPs per token."""
    activation_bytes_per_token: float
    """Activation bytes kept from the forward until the backward, per token."""
    message_bytes_per_token: float
    """Bytes sent to the next stage per token (0 for the last stage)."""
    fractional: bool = False
    """True when ``layers`` is not a whole number of blocks (``balance="uniform"`` only)."""


def stage_shapes(model: ModelConfig, vstages: int, *, seq_len: int,
                 activation_bytes: int = 2, balance: str = "layers") -> list[StageShape]:
    """The :class:`StageShape` of each of ``vstages`` virtual stages of ``model`` for sequences of
    ``seq_len`` tokens with activations of ``activation_bytes`` bytes per element; ``balance``
    ``layers`` (the runtime's cut) or ``uniform`` (1/K of everything, see the module docstring)."""
    if isinstance(vstages, bool) or not isinstance(vstages, int) or vstages < 1:
        raise ValueError(f"vstages must be an integer >= 1, got {vstages!r}")
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len must be an integer >= 1, got {seq_len!r}")
    if activation_bytes not in (2, 4):
        raise ValueError(f"activation_bytes must be 2 (bf16) or 4 (float32), got {activation_bytes!r}")
    if balance not in ("layers", "uniform"):
        raise ValueError(f"balance must be 'layers' or 'uniform', got {balance!r}")
    c, kv, f, V = model.d_model, model.n_kv_head * model.head_dim, model.d_ff, model.vocab_size
    bp, bm = block_params(model), block_matrix_params(model)
    if vstages > model.n_layer:
        raise ValueError(f"{vstages} (virtual) stages of a {model.n_layer}-block model: a stage "
                         "finer than one transformer block needs tensor parallelism, which is "
                         "not modelled")
    if balance == "uniform":
        layers = [model.n_layer / vstages] * vstages
    else:
        layers = [float(hi - lo) for lo, hi in stage_bounds(model.n_layer, vstages)]
    fractional = any(n != int(n) for n in layers)
    out = []
    for k, n in enumerate(layers):
        first, last = k == 0, k == vstages - 1
        params = n * bp + (V * c if first else 0) + ((c + V * c) if last else 0)
        matrix = n * bm
        flops = n * (2 * bm + 2 * seq_len * c) + (2 * V * c if last else 0)
        act = n * (6 * c + 2 * kv + 3 * f) * activation_bytes
        if last:
            act += 2 * c * activation_bytes + V * (activation_bytes + LOSS_SOFTMAX_BYTES)
        out.append(StageShape(index=k, layers=n, params=params, matrix_params=matrix,
                              forward_flops_per_token=flops, activation_bytes_per_token=act,
                              message_bytes_per_token=0.0 if last else c * activation_bytes,
                              fractional=fractional))
    if balance == "uniform":
        out = [_uniform(out, k) for k in range(vstages)]
    return out


def _uniform(shapes: list[StageShape], k: int) -> StageShape:
    """Stage ``k`` holding ``1/K`` of the totals of ``shapes`` (messages stay the hidden state)."""
    K = len(shapes)

    def share(name: str) -> float:
        return sum(getattr(s, name) for s in shapes) / K
    return StageShape(index=k, layers=share("layers"), params=share("params"),
                      matrix_params=share("matrix_params"),
                      forward_flops_per_token=share("forward_flops_per_token"),
                      activation_bytes_per_token=share("activation_bytes_per_token"),
                      message_bytes_per_token=0.0 if k == K - 1 else shapes[0].message_bytes_per_token,
                      fractional=True)
