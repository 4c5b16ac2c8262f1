"""The records of the ledger (the lowest room of :mod:`llm_validation.claims`).

- :mod:`~llm_validation.claims.record.arms`: an arm, one training setting of a claim resolved
  against a scale's base run, and its synchronous partner;
- :mod:`~llm_validation.claims.record.claim`: the :class:`~llm_validation.claims.record.claim.Claim`
  (its statements, arms, grid, figure, analysis and thresholds) and its
  :class:`~llm_validation.claims.record.claim.Statement` records.
"""

__all__: list[str] = []
