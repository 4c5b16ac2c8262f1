"""The paper's empirical claims as a ledger (``delaybound reproduce``).

Layers inside (one way): :mod:`scales` (base runs per scale) <- :mod:`arms` (one training
setting of a claim, resolved against a scale's base) <- :mod:`claim` (the Claim record) <-
:mod:`registry` (the 17 claims, their grids and the reasons for them) <- :mod:`plan` (the
distinct run configs over all selected claims, their cost, their execution through
:mod:`llm_validation.sweep.runner`) <- :mod:`data` (a claim's run directories, paired gaps) <-
:mod:`decisions` (checks and their pass/fail/inconclusive rules, built on
:mod:`llm_validation.validation.verdict`) and :mod:`predictions` (the theory's directions, from
:mod:`theory`) <- :mod:`analysis` (+ :mod:`analysis_delay`, :mod:`analysis_hparams`: one
measurement and verdict per claim) <- :mod:`figures` <- :mod:`ledger` (claims.md, claims.json).
"""

__all__: list[str] = []
