"""What is written (room 6 of :mod:`llm_validation.claims`).

- :mod:`~llm_validation.claims.report.protocol`: the rules of a ledger, written before its runs;
- :mod:`~llm_validation.claims.report.runtable`: the per-run table of ``claims.json``;
- :mod:`~llm_validation.claims.report.figures`:
  the lr sweep's and the ladder's figures, one figure per claim;
- :mod:`~llm_validation.claims.report.markdown`: ``claims.md``;
- :mod:`~llm_validation.claims.report.ledger`: assemble the results, write claims.md/claims.json;
- :mod:`~llm_validation.claims.report.catalogue_page`: docs/catalogue.md;
- :mod:`~llm_validation.claims.report.size_ladder`, :mod:`~llm_validation.claims.report.regime_table`:
  across the per-size ledgers (size_ladder.md, regime.md).
"""

__all__: list[str] = []
