"""The paper's empirical claims as a ledger (``delaybound reproduce``).

Layers inside (one way): :mod:`scales` (base runs per scale) <- :mod:`arms` (one training
setting of a claim, resolved against a scale's base) <- :mod:`claim` (the Claim record) <-
:mod:`statements` (each claim's statements) <- :mod:`registry` (the 18 claims, their grids and the reasons for them) <- :mod:`plan` (the
distinct run configs over all selected claims, their cost, their execution through
:mod:`llm_validation.sweep.runner`) <- :mod:`data` (a claim's run directories, paired gaps) <-
:mod:`checks` (check kinds, per-seed contrasts, ``recheck``), :mod:`seeds`,
:mod:`regime`, :mod:`decisions` (a verdict per statement, the claim's status) and :mod:`predictions` (the theory's directions, from
:mod:`theory`) <- :mod:`analysis` (+ :mod:`analysis_delay`, :mod:`analysis_hparams`: one
measurement and verdict per claim) <- :mod:`armtable`, :mod:`runtable`, :mod:`figures`, :mod:`markdown` <- :mod:`ledger` (claims.md, claims.json).
"""

__all__: list[str] = []
