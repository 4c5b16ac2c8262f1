"""The theory's predictions the ledger sets next to its measurements.

Directions come from the PL delay-gap law of :mod:`theory` (``theory.THEOREMS["pl_delay_gap"]``,
extra ``gap_leading`` = ``2 L^2 eta^2 tau (tau + 2 (1 - alpha)/alpha + 1/2) / mu``): the sign of
its partial derivative in ``eta``, ``tau`` or ``alpha``, decided by sympy over the theorem's
domains (:func:`gap_sign`; never guessed: an undecided sign raises), and predicted ratios of
the gap between two settings (:func:`gap_ratio`). The law is a difference of upper bounds for
a deterministic PL problem, so the ledger uses its direction and its ratios as the theory's
prediction, not as a bound on a measured gap.
"""

from __future__ import annotations

from functools import lru_cache

import sympy

__all__ = ["THEOREM", "EXTRA", "gap_sign", "gap_ratio", "direction_words"]

#: The theorem and its extra whose derivatives give the directions.
THEOREM = "pl_delay_gap"
EXTRA = "gap_leading"


def _theorem():
    import theory
    return theory.get_theorem(THEOREM)


@lru_cache(maxsize=None)
def gap_sign(param: str) -> int:
    """+1 when the PL gap law grows with ``param`` (``eta``, ``tau``, ``alpha``), -1 when it
    shrinks; ``ValueError`` when sympy cannot decide the sign over the theorem's domains."""
    from theory.decide import domain_substitutions, is_nonneg
    th = _theorem()
    if param not in th.parameters:
        raise ValueError(f"gap_sign: {param!r} is not a parameter of {THEOREM}; "
                         f"have {list(th.parameters)}")
    deriv = sympy.diff(th.extras[EXTRA], th.parameters[param])
    for old, new in domain_substitutions(th.domains, th.parameters):
        deriv = deriv.subs(old, new)
    if is_nonneg(deriv):
        return 1
    if is_nonneg(-deriv):
        return -1
    raise ValueError(f"{THEOREM}: cannot decide the sign of d {EXTRA} / d {param}")


def gap_ratio(changed: dict[str, float], base: dict[str, float]) -> float:
    """gap_leading(changed) / gap_leading(base); unnamed parameters default to
    ``L = mu = 1``, ``tau = 1``, ``alpha = 0.1``, ``eta = 1`` (they cancel in the ratios used)."""
    th = _theorem()
    default = {"L": 1.0, "mu": 1.0, "tau": 1, "alpha": 0.1, "eta": 1.0}
    num = th.evaluate_extra(EXTRA, **{**default, **base, **changed})
    den = th.evaluate_extra(EXTRA, **{**default, **base})
    return float(num / den)


def direction_words(param: str, what: str) -> str:
    """``the gap grows with <what>`` / ``shrinks`` from :func:`gap_sign`, with its source."""
    verb = "grows" if gap_sign(param) > 0 else "shrinks"
    return (f"the gap {verb} with {what} (sign of d {EXTRA}/d {param} in theory "
            f"{THEOREM}, decided by sympy)")
