"""The paper's empirical claims as a ledger (``delaybound reproduce``), in rooms by concept.

Rooms, lowest first; a module imports only from its own room or lower ones
(``tests/test_architecture.py`` guards it):

1. :mod:`~llm_validation.claims.record`: the records. ``arms`` (one training setting of a
   claim), ``claim`` (the :class:`~llm_validation.claims.record.claim.Claim`: statements, arms,
   grid, analysis, thresholds).
2. :mod:`~llm_validation.claims.plan`: what to train. ``scales`` (the base run per scale),
   ``calibration`` (the cost model), ``plan`` (the distinct runs of the selected claims, their
   cost and execution), ``lr_sweep`` (each optimizer's peak lr).
3. :mod:`~llm_validation.claims.decide`: how a verdict is reached. ``checks`` (check kinds),
   ``pvalues``, ``seeds`` (seeds an open check needs), ``sequential`` (the two-look seeds
   policy), ``familywise`` (Holm, BH), ``gatekeeping`` (central statements first), ``decisions`` (a verdict per statement, the claim's
   status), ``data`` (a claim's runs), ``regime`` (margins as a lag), ``measure`` (shared
   measurements), ``ladder`` (slopes over horizons), ``predictions`` (the theory's directions),
   ``armtable``, ``analysis`` (runs a claim's analysis).
4. :mod:`~llm_validation.claims.sizes`: the size ladder's fit across model sizes (``fit``) and
   its section and figure (``markdown``).
5. :mod:`~llm_validation.claims.catalogue`: what is claimed. ``vocabulary`` (arm and statement
   builders), the family modules ``headline`` (1, 2, 15), ``horizon`` (4, 5, 18), ``hparams``
   (3, 6, 7, 12), ``recipe`` (8-11), ``fixes`` (13, 14, 16, 17), ``size`` (19), and
   ``registry`` (every claim listed once).
6. :mod:`~llm_validation.claims.report`: what is written. ``protocol`` (the rules, before the
   runs), ``runtable``, ``figures`` (one per claim, the ladder's and the lr sweep's), ``markdown`` (claims.md), ``ledger``
   (assemble and write claims.md / claims.json), ``catalogue_page`` (docs/catalogue.md),
   ``size_ladder`` and ``regime_table`` (across the per-size ledgers).
7. Top: :mod:`~llm_validation.claims.phases` (lr sweep -> the claims' runs -> extra seeds) and
   :mod:`~llm_validation.claims.reproduce` (the front door: ``reproduce(options, out)``).

Add a claim (read five files, edit one family module and one line):

1. this map;
2. ``record/claim.py``: the fields a claim fills;
3. ``catalogue/vocabulary.py``: the arm builders and statement builders;
4. a family module as the worked example, e.g. ``catalogue/recipe.py`` (four claims, each an
   analysis function then its ``Claim``);
5. ``decide/measure.py``: the contrasts an analysis is made of (check kinds:
   ``decide/checks.py``).

Then write the claim in the family module it belongs to (its statements, arms, grid, reason,
``analyse`` and ``thresholds``), add its name to ``catalogue/registry.py``'s list, give it a
passing and a failing synthetic scenario (``tests/llm_validation/claims/scenarios.py``) and
regenerate ``docs/catalogue.md`` (``delaybound reproduce --list --markdown``). The protocol
reads the statements and thresholds from the claim.
"""

__all__: list[str] = []
