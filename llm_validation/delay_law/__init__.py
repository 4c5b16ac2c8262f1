"""What sets the delay's cost: model size, step count or learning rate.

Reading order: :mod:`batch_laws` (the paper's cited batch and lr laws, and a second one as
the model uncertainty) <- :mod:`design` (the cells: sizes x step counts x lrs, arms, seeds,
held-out cells, cost) <- :mod:`runs` (one resolved config per run, grouped into phases) <-
:mod:`measure` (per-seed compute-equivalent lag and gap share per cell) <- :mod:`laws`
(candidate power and saturating laws, per-seed fits with t intervals, held-out scores, the
choice rule) <- :mod:`verdicts` (the statements under one gatekeeping family) <- :mod:`paper`
(SmolLM-135M/360M predicted) <- :mod:`paper_gap` (exploratory: the gap share there) <-
:mod:`protocol` (the rules and the decision code's digest, written before the runs) <-
:mod:`noise_scale` (exploratory: the batch over its noise scale) <-
:mod:`report` (ledger.md and figures) <- :mod:`ledger` (the front door: phases, predictions,
assembly).
"""

__all__: list[str] = []
