"""Batch-size and learning-rate laws for near-optimal synchronous training.

The paper chooses its batch "from existing scaling-law estimates for near-optimal synchronous
training" and cites DeepSeek LLM's. At 20 tokens per parameter a batch law fixes the step
count ``S = D / B``, which is the variable the delay's cost follows at a fixed lr, so the
design places one cell per size on the law's path and reads the paper's own setting from it.
A second law stands for the model uncertainty of that choice.

Algorithm
    DeepSeek LLM (Bi et al. 2024, their Eq. 1; compute ``C = 6 N D`` as the delay-law design
    counts it): ``B_opt = 0.292 C^0.3271`` tokens, ``eta_opt = 0.3118 C^-0.125``.
    Step Law (Li et al. 2025, "Predictable Scale: Part I"): ``B_opt = 0.58 D^0.571`` tokens,
    ``eta_opt = 1.79 N^-0.713 D^0.307``.
    :func:`steps_at` turns a batch in tokens into optimizer steps for ``D = tokens_per_param
    N`` tokens, rounding the batch to whole sequences of ``seq_len`` tokens (at least one).

Assumptions
    Both laws were fitted on token-level LLMs of 10^7-10^10 parameters; at the CPU ladder's
    10^4-10^6 parameters and a byte vocabulary they are extrapolations, used only to place a
    cell on the path the paper followed (the design's lr comes from its own lr profile, not
    from these lr laws).

Guarantee
    Deterministic, monotone in ``N`` (larger models train with larger batches and, at 20:1,
    more steps under both laws).

Reference
    X. Bi et al. (2024), "DeepSeek LLM: Scaling open-source language models with longtermism",
    arXiv:2401.02954; H. Li et al. (2025), "Predictable Scale: Part I -- Optimal
    hyperparameter scaling law in large language model pretraining", arXiv:2503.04715.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["BatchLaw", "DEEPSEEK", "STEP_LAW", "BATCH_LAWS", "steps_at"]


@dataclass(frozen=True, kw_only=True)
class BatchLaw:
    """A batch and lr law: ``B = b_coef * C^b_exp_c * D^b_exp_d`` tokens (``C = 6 N D``),
    ``eta = e_coef * C^e_exp_c * N^e_exp_n * D^e_exp_d``."""

    name: str
    reference: str
    b_coef: float
    b_exp_c: float = 0.0
    b_exp_d: float = 0.0
    e_coef: float
    e_exp_c: float = 0.0
    e_exp_n: float = 0.0
    e_exp_d: float = 0.0

    def batch_tokens(self, n_params: int, tokens: float) -> float:
        c = 6.0 * n_params * tokens
        return self.b_coef * c ** self.b_exp_c * tokens ** self.b_exp_d

    def lr(self, n_params: int, tokens: float) -> float:
        c = 6.0 * n_params * tokens
        return self.e_coef * c ** self.e_exp_c * n_params ** self.e_exp_n * tokens ** self.e_exp_d


#: DeepSeek LLM's law, the one the paper cites.
DEEPSEEK = BatchLaw(name="deepseek", reference="Bi et al. 2024 (DeepSeek LLM), Eq. 1",
                    b_coef=0.292, b_exp_c=0.3271, e_coef=0.3118, e_exp_c=-0.125)
#: Step Law, the second law (model uncertainty).
STEP_LAW = BatchLaw(name="steplaw", reference="Li et al. 2025 (Step Law)", b_coef=0.58,
                    b_exp_d=0.571, e_coef=1.79, e_exp_n=-0.713, e_exp_d=0.307)
#: The laws by name.
BATCH_LAWS = {law.name: law for law in (DEEPSEEK, STEP_LAW)}


def steps_at(law: BatchLaw, n_params: int, tokens_per_param: float = 20.0,
             seq_len: int | None = None) -> tuple[int, int]:
    """``(steps, batch tokens)`` of ``law`` at ``n_params`` trained on ``tokens_per_param``
    tokens per parameter; with ``seq_len`` the batch is rounded to whole sequences."""
    if n_params < 1 or not tokens_per_param > 0:
        raise ValueError(f"n_params={n_params} and tokens_per_param={tokens_per_param} must "
                         "be positive")
    tokens = tokens_per_param * n_params
    batch = law.batch_tokens(n_params, tokens)
    if seq_len is not None:
        batch = max(1, round(batch / seq_len)) * seq_len
    return max(1, round(tokens / batch)), int(round(batch))
