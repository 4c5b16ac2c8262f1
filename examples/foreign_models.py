"""Two language models this project did not write, for examples/nanogpt_delay.py.

Each builder returns a ``torch.nn.Module`` mapping token ids ``[B, T]`` to logits
``[B, T, V]`` (a causal LM), built deterministically from ``torch.manual_seed``.

- ``encoder``: ``torch.nn.TransformerEncoderLayer`` blocks with a causal mask (pre-norm, no
  dropout: the statistics re-run a batch and need the same function each time);
- ``hf-llama``: a Hugging Face ``transformers`` ``LlamaForCausalLM`` from a small
  ``LlamaConfig`` (nothing is downloaded; needs the ``transformers`` package, the ``hf`` extra).
"""

from __future__ import annotations

import torch
from torch import nn

VOCAB = 256          # bytes


class EncoderLM(nn.Module):
    """Token + position embedding, causal ``TransformerEncoderLayer`` blocks, a linear head."""

    def __init__(self, d: int = 32, layers: int = 2, heads: int = 4, block: int = 64) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.0,
                                       batch_first=True, norm_first=True)
            for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, VOCAB)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        h = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        for block in self.blocks:
            h = block(h, src_mask=mask, is_causal=True)
        return self.head(self.norm(h))


class HFCausalLM(nn.Module):
    """A ``transformers`` causal LM behind the ``idx -> logits`` interface."""

    def __init__(self, d: int = 32, layers: int = 2, heads: int = 4, block: int = 64) -> None:
        super().__init__()
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=d, intermediate_size=2 * d,
                          num_hidden_layers=layers, num_attention_heads=heads,
                          num_key_value_heads=heads // 2, max_position_embeddings=block,
                          attention_dropout=0.0, tie_word_embeddings=False)
        self.lm = LlamaForCausalLM(cfg)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=idx).logits


MODELS = {"encoder": EncoderLM, "hf-llama": HFCausalLM}
