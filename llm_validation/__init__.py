"""LLM pretraining under exact emulated delay: config, model, data, optimizers, the delay/EF
wrapper, gradient statistics and the training loop (see docs/llm_validation.md).

Modules: ``config`` (frozen run configuration, presets), ``model`` (Llama-style decoder,
splittable into pipeline stages), ``data`` (stdlib / text / .bin token corpora, deterministic
sampler), ``optim`` (AdamW, Muon+AdamW, SGD, lr schedule), ``delay`` (``DelayedOptimizer`` and
per-stage Error Feedback), ``stats`` (reducible gradient statistics), ``checkpoint`` (run
directory files), ``train`` (``train(cfg) -> RunResult``).
"""

__all__: list[str] = []
