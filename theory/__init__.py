"""delaybound.theory: delay-dependent convergence bounds as checked sympy objects.

``THEOREMS`` maps each theorem's name to its :class:`Theorem` (statement, assumptions, parameters
with domains, sympy bound, ``evaluate``/``latex``/``tuned``/``complexity``/``trend`` and the
encoded :class:`Proof`). ``Proof.check()`` returns a :class:`ProofReport`: algebra steps decided
by sympy, analytic steps confirmed by the numeric predicates of :mod:`theory.predicates` on random
instances in the l2, l_inf and spectral geometries. Every theorem module names its markdown proof
in ``proofs_md/`` (indexed by ``proofs_md/README.md``) and vice versa.

The objects the theorems are about live here too, as torch functions: the geometries (norms,
dual norms, exact LMOs) in :mod:`theory.geometry` (the spectral and nuclear norms of many
matrices at once, for training statistics, in :mod:`theory.matrix_norms`) and the update rules
in :mod:`theory.update_rules`; the random instances of the analytic steps are built from them by
:mod:`theory.instances` (with :mod:`theory.objectives`). Importing this package never imports
torch: nothing here imports those modules; whoever needs them imports them (``Proof.check``
loads :mod:`theory.instances` when it checks an analytic step).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from theory.delayed_gd import NONCONVEX_DELAYED_GD, NONCONVEX_DELAYED_GD_EF
from theory.error_feedback import NONCONVEX_DELAYED_EF, STAR_CONVEX_DELAYED_EF
from theory.lemmas import GEOMETRY_WEIGHT_DECAY, MOMENTUM_ERROR
from theory.nonconvex import NONCONVEX_DELAYED
from theory.pl_gap import PL_DELAY_GAP
from theory.proof import Proof, ProofReport, Step, StepResult
from theory.star_convex import STAR_CONVEX_DELAYED, STAR_CONVEX_SYNC
from theory.theorem import Condition, Theorem

__all__ = ["THEOREMS", "Theorem", "Proof", "ProofReport", "Step", "StepResult", "Condition",
           "get_theorem"]

#: Every encoded theorem, by name (lemmas first, then the rates).
THEOREMS: Mapping[str, Theorem] = MappingProxyType({
    th.name: th
    for th in (
        GEOMETRY_WEIGHT_DECAY, MOMENTUM_ERROR,
        STAR_CONVEX_SYNC, STAR_CONVEX_DELAYED, STAR_CONVEX_DELAYED_EF,
        NONCONVEX_DELAYED, NONCONVEX_DELAYED_EF,
        PL_DELAY_GAP,
        NONCONVEX_DELAYED_GD, NONCONVEX_DELAYED_GD_EF,
    )
})


def get_theorem(name: object) -> Theorem:
    """Look a theorem up by name; ``ValueError`` listing the known names otherwise."""
    if not isinstance(name, str) or name not in THEOREMS:
        raise ValueError(f"unknown theorem {name!r}; known: {', '.join(THEOREMS)}")
    return THEOREMS[name]
