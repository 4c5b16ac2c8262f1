"""Shared helpers for the llm_validation tests: a micro model and fixed token batches."""

from __future__ import annotations

import torch

from llm_validation.config import ModelConfig

#: A very small decoder (about 44k parameters) so bitwise multi-step comparisons stay fast.
MICRO = ModelConfig(name="micro", n_layer=3, d_model=32, n_head=4, n_kv_head=2, d_ff=64,
                    max_seq_len=32)


def make_batches(n: int, batch: int = 4, seq: int = 16, seed: int = 0) -> list[torch.Tensor]:
    """n token batches [batch, seq + 1] from a fixed generator."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (batch, seq + 1), generator=gen) for _ in range(n)]


def loss_fn(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
    """Next-token loss of a [B, T + 1] batch."""
    from llm_validation.training.model import lm_loss

    return lm_loss(model(batch[:, :-1]), batch[:, 1:])


def params_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    """Bitwise equality of two models' parameters."""
    return all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
