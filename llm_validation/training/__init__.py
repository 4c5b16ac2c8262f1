"""One process's training: model, data, base optimizers, the delay/EF wrapper, gradient
statistics, the step probe and the emulated training loop (``training.loop.train``)."""
