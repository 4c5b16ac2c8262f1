"""What to train (room 2 of :mod:`llm_validation.claims`).

- :mod:`~llm_validation.claims.plan.scales`: the scales and their base runs;
- :mod:`~llm_validation.claims.plan.calibration`: the cost model measured on this machine;
- :mod:`~llm_validation.claims.plan.plan`: the distinct runs of the selected claims, their cost
  and their execution through the sweep runner;
- :mod:`~llm_validation.claims.plan.lr_sweep`: each optimizer's peak lr, swept at the scale.
"""

__all__: list[str] = []
