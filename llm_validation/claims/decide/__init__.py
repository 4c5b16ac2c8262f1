"""How a verdict is reached (room 3 of :mod:`llm_validation.claims`), lowest first.

- :mod:`~llm_validation.claims.decide.checks`: a check (kind, per-seed numbers, status);
- :mod:`~llm_validation.claims.decide.pvalues`, :mod:`~llm_validation.claims.decide.seeds`,
  :mod:`~llm_validation.claims.decide.sequential`: p-values, the seeds an open check needs,
  the two-look seeds policy;
- :mod:`~llm_validation.claims.decide.familywise`: Holm's family-wise control (BH beside it);
- :mod:`~llm_validation.claims.decide.gatekeeping`: the central statements first, side readings
  once their central statement is decided (the ledger's paper family);
- :mod:`~llm_validation.claims.decide.decisions`: a verdict per statement, the claim's status;
- :mod:`~llm_validation.claims.decide.data`: a claim's run directories and paired numbers;
- :mod:`~llm_validation.claims.decide.regime`: margins and thresholds as a compute-equivalent lag;
- :mod:`~llm_validation.claims.decide.measure`: the contrasts analyses are made of;
- :mod:`~llm_validation.claims.decide.ladder`: log-log slopes over horizons;
- :mod:`~llm_validation.claims.decide.predictions`: the theory's directions;
- :mod:`~llm_validation.claims.decide.armtable`: a claim's arms as numbers;
- :mod:`~llm_validation.claims.decide.analysis`: runs a claim's own analysis.
"""

__all__: list[str] = []
