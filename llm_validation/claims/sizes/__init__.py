"""The size ladder across model sizes (room 4 of :mod:`llm_validation.claims`).

- :mod:`~llm_validation.claims.sizes.fit`: per-seed power laws in the parameter count, the
  extrapolation to the paper's sizes and the agreement rules;
- :mod:`~llm_validation.claims.sizes.markdown`: its figure and its section for a reader.

The assembly across the per-size ledgers is :mod:`llm_validation.claims.report.size_ladder`.
"""

__all__: list[str] = []
