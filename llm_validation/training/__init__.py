"""One process's training: model, data, base optimizers, the delay/EF wrapper, gradient
statistics, the step probe and the emulated training loop (``training.loop.train``), its
optional compilation (``training.compiled``) and its clocks (``training.timing``: a short run
step by step; ``training.steady``: the steady-state rate summary.json records)."""
