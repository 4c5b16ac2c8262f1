"""The size ladder across sizes: the per-size 20:1 ledgers read together (``reproduce --size-ladder``).

Each size of the ladder is its own ledger folder (``ROOT/<scale>``: ``runs/``, ``lr_sweep.json``,
``protocol.json``), trained by ``reproduce --scale <scale>``. This module reads the size-ladder
claim's arms from every one of them, builds :class:`~llm_validation.claims.sizes.fit.SizeLadderData`
(per arm, size and seed the gap share of the synchronous loss decrease and the lag fraction,
:func:`llm_validation.validation.lag.run_lag`), fits the step-and-size exponents (the ladder's
step count grows with N: :data:`~llm_validation.claims.sizes.fit.CONFOUND`) and writes
``ROOT/size_ladder.md``, ``ROOT/size_ladder.json`` and ``ROOT/figures/size-ladder.png``. It
does not extrapolate in N to the paper's sizes nor decide agreement checks there: a fit whose
N and step count move together cannot say what N alone does (the delay-law design,
docs/delay_law.md, does).

Algorithm
    Per scale: the plan of the ``size-ladder`` claim at the scale's swept lrs (its
    ``lr_sweep.json``) over :data:`~llm_validation.claims.catalogue.size.SIZE_LADDER_SEEDS` seeds, the
    finished runs read by :class:`~llm_validation.claims.decide.data.ClaimData`. A lag censored above
    (no better than the synchronous run's first evaluation) is kept at its bound; one censored
    below (ahead with a flat tail) or non-finite is left out (the horizon ladder's rule).
    :func:`agreement_verdicts` (the N-only extrapolation's agreement checks, Bonferroni over
    the two rules) stays for fits that identify N; the ladder's assembly does not call it.

Guarantee
    The numbers are the per-size ledgers' own runs (nothing is trained here); a size whose
    folder or runs are missing is named in the output and left out of the fits.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from llm_validation.claims.decide.checks import Check, at_level
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.plan.lr_sweep import read_sweep
from llm_validation.claims.plan.plan import build_plan
from llm_validation.claims.report.protocol import FAMILY_ALPHA
from llm_validation.claims.report.regime_table import read_ledger, regime_markdown, regime_rows
from llm_validation.claims.catalogue.registry import CLAIMS
from llm_validation.claims.catalogue.size import SIZE_LADDER_SEEDS
from llm_validation.claims.plan.scales import SIZE_LADDER, Scale
from llm_validation.claims.sizes.fit import (AGREEMENT_RULES, ARMS, CONFOUND, EXPONENT_NAME,
                                               SizeFit, SizeLadderData, agreement_checks,
                                               size_fits)
from llm_validation.claims.sizes.markdown import plot_size_ladder, size_ladder_markdown
from llm_validation.config import preset
from llm_validation.records.atomic_io import write_json

__all__ = ["read_size_ladder", "assemble_size_ladder", "agreement_verdicts",
           "write_regime_table", "AGREEMENT_LEVEL"]

#: The agreement checks' level: Bonferroni over the rules at the protocol's family-wise 5%
#: (two rules: 97.5% each).
AGREEMENT_LEVEL = 1.0 - FAMILY_ALPHA / len(AGREEMENT_RULES)


def _tuned(scale: Scale, folder: Path) -> Scale | None:
    sweep = read_sweep(folder)
    if sweep is None:
        return None
    return dataclasses.replace(scale, lrs={**scale.lrs, **{
        o: float(c["lr"]) for o, c in sweep["optimizers"].items()}})


def read_size_ladder(root: str | Path, scales: Sequence[Scale] = SIZE_LADDER
                     ) -> tuple[SizeLadderData, list[str]]:
    """(the ladder's data from the ledgers under ``root``, what is missing, in words)."""
    root, claim = Path(root), CLAIMS["size-ladder"]
    gap: dict[str, dict[int, dict[int, float]]] = {a: {} for a in ARMS}
    lag: dict[str, dict[int, dict[int, float]]] = {a: {} for a in ARMS}
    non_emb, notes = {}, []
    for scale in scales:
        folder = root / scale.name
        tuned = _tuned(scale, folder)
        if tuned is None:
            notes.append(f"{scale.name}: no ledger (no {folder / 'lr_sweep.json'})")
            continue
        plan = build_plan([claim], tuned, seeds=tuple(range(SIZE_LADDER_SEEDS)))
        d = ClaimData(claim, plan, folder / "runs")
        m = preset(scale.model)
        n = m.n_params()
        non_emb[n] = n - 2 * m.vocab_size * m.d_model
        for arm in ARMS:
            lags = d.lags(arm)
            gap[arm][n] = {s: lg.gap_fraction for s, lg in lags.items()
                           if math.isfinite(lg.gap_fraction)}
            lag[arm][n] = {s: lg.fraction for s, lg in lags.items()
                           if math.isfinite(lg.fraction) and lg.censored != "below"}
        if (miss := d.missing(*ARMS)):
            notes.append(f"{scale.name}: {miss}")
    data = SizeLadderData(gap_fraction=gap, lag_fraction=lag,
                          non_embedding=non_emb or {1: 1})
    return data, notes


def write_regime_table(root: str | Path, tiny: str | Path,
                       scales: Sequence[Scale] = SIZE_LADDER) -> list[str]:
    """Write ``root/regime.md``: per claim the tiny ledger's verdict (``tiny``: its folder or
    claims.json), each size's and the size trend (:mod:`llm_validation.claims.report.regime_table`).
    Returns the table's lines."""
    root = Path(root)
    tiny_doc = read_ledger(tiny)
    if tiny_doc is None:
        raise ValueError(f"--tiny {tiny}: no claims.json there (the tiny ledger's folder, "
                         "e.g. docs/claims_tiny)")
    sizes = {s.name: read_ledger(root / s.name) for s in scales}
    columns = {"tiny": "tiny, 0.2 tokens/param"}
    columns.update({s.name: f"{s.name}, 20:1" + (" (all claims)" if "all" in s.claims else "")
                    for s in scales})
    table = regime_markdown(regime_rows(tiny_doc, sizes), columns)
    lines = ["# How the verdicts move with the regime", "",
             "Per claim, the verdict of each ledger under its committed protocol: the tiny "
             "ledger (~1M parameters, 0.2 tokens per parameter: the early-training record), each "
             "size of the ladder at 20 tokens per parameter (the smallest runs every claim, the "
             "larger ones the headline claims; a larger size's cell for claims 1 and 2 is the "
             "size-ladder statement with the same sentence, 19d (which needs claim 1's "
             "synchronous-start arm) and 19b), and the size trend (the per-size verdicts; "
             "the ladder's step count grows with N, so a trend across it is one of steps and "
             "size together, not of size). '-': the ledger did not run the claim; 'not run': "
             "no ledger for that size yet.", "", *table]
    (root / "regime.md").write_text("\n".join(lines) + "\n")
    return table


def agreement_verdicts(fits: Mapping[str, Mapping[str, SizeFit]], tolerance: float
                       ) -> tuple[list[Check], dict[str, Any]]:
    """The protocol's agreement checks (:func:`~llm_validation.claims.sizes.fit.
    agreement_checks`) decided as the ledger decides them: each at :data:`AGREEMENT_LEVEL`
    (Bonferroni over the rules, family-wise :data:`FAMILY_ALPHA`; the simulation in
    ``tests/llm_validation/claims/test_size_ladder_coverage.py`` measures that rate)."""
    checks, measured = agreement_checks(fits, tolerance=tolerance)
    return [at_level(c, AGREEMENT_LEVEL) for c in checks], measured


def assemble_size_ladder(root: str | Path, scales: Sequence[Scale] = SIZE_LADDER,
                         tiny: str | Path | None = None) -> dict[str, Any]:
    """Fit, decide, draw and write the size ladder of the ledgers under ``root``; with
    ``tiny`` (the tiny ledger's folder) also the regime table ``root/regime.md``."""
    root = Path(root)
    data, notes = read_size_ladder(root, scales)
    fits = size_fits(data, targets={})            # no extrapolation in N: steps grow with N
    fig = plot_size_ladder(data, fits, root / "figures" / "size-ladder.png")
    steps = ", ".join(f"{s.name} {s.steps} steps" for s in scales)
    lines = ["# The size ladder at 20 tokens per parameter", "",
             f"Sizes read from `{root}`: " + ", ".join(s.name for s in scales) + f" ({steps}).",
             "", f"**Steps grow with N**: {CONFOUND}.", ""]
    if notes:
        lines += ["Missing:", ""] + [f"- {x}" for x in notes] + [""]
    lines += [f"![size ladder](figures/{fig.name})", ""]
    lines += size_ladder_markdown(data, fits, [])
    (root / "size_ladder.md").write_text("\n".join(lines) + "\n")
    doc = {"data": data.to_dict(),
           "fits": {a: {q: f.to_dict() for q, f in by_q.items()} for a, by_q in fits.items()},
           "exponents": EXPONENT_NAME, "confound": CONFOUND,
           "steps": {s.name: s.steps for s in scales}, "checks": [], "missing": notes}
    if tiny is not None:
        doc["regime"] = write_regime_table(root, tiny, scales)
    write_json(root / "size_ladder.json", doc)
    return doc
