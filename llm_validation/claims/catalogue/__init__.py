"""What is claimed (room 5 of :mod:`llm_validation.claims`): every claim, each in a family module
with its statements, arms, grid, analysis and thresholds, as a theorem carries its proof.

- :mod:`~llm_validation.claims.catalogue.vocabulary`: optimizers, phases, horizons; arm and
  statement builders;
- family modules: :mod:`~llm_validation.claims.catalogue.headline` (claims 1, 2, 15),
  :mod:`~llm_validation.claims.catalogue.horizon` (4, 5, 18),
  :mod:`~llm_validation.claims.catalogue.hparams` (3, 6, 7, 12),
  :mod:`~llm_validation.claims.catalogue.recipe` (8-11),
  :mod:`~llm_validation.claims.catalogue.fixes` (13, 14, 16, 17),
  :mod:`~llm_validation.claims.catalogue.size` (19);
- :mod:`~llm_validation.claims.catalogue.registry`: every claim listed once, in the paper's order.
"""

__all__: list[str] = []
