"""What sets the delay's cost: model size, step count or learning rate.

Reading order: :mod:`batch_laws` (the paper's cited batch and lr laws, and a second one as
the model uncertainty) <- :mod:`design` (the cells: sizes x step counts x lrs, arms, seeds,
held-out cells, cost) <- :mod:`laws` (candidate power and saturating laws, per-seed fits with t
intervals, held-out scores, the choice rule).
"""

__all__: list[str] = []
