"""Proofs as checkable objects: steps, their statuses and the report of a check.

A :class:`Proof` is the ordered list of :class:`Step` objects of one theorem; each step has the
same id (``S1``, ``S2``, ...) as in the theorem's ``proofs_md/<name>.md`` file.

- ``kind="algebra"``: the step carries :class:`theory.decide.Obligation` objects that sympy must
  decide. Status ``"proved"`` when all are decided, otherwise ``"failed"`` (undecided counts as
  failed, never as passed).
- ``kind="analytic"``: the step uses A1-A5, LMO optimality, Hoelder or Jensen. It names a numeric
  predicate in :data:`theory.predicates.PREDICATES` (``predicate(**instance) -> slack``, slack >= 0
  means the inequality holds). ``check()`` runs it on random instances (built by
  :mod:`theory.instances` with torch float64 and ``theory.geometry``) in the l2, l_inf and spectral
  geometries; status ``"confirmed"`` when the smallest slack is >= ``-TOL``, else ``"failed"``.
"""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping

from theory.decide import Obligation
from theory.predicates import PREDICATES

__all__ = [
    "Step",
    "StepResult",
    "Proof",
    "ProofReport",
    "KINDS",
    "STATUSES",
    "TOL",
    "DEFAULT_GEOMETRIES",
    "DEFAULT_INSTANCES",
]

KINDS = ("algebra", "analytic")
STATUSES = ("proved", "confirmed", "failed")

#: Smallest slack an analytic predicate may report and still count as holding. Instances are
#: float64 with entries and constants of order 1e-2..1e2 in dimension <= 20 (SVDs of 3x4 matrices,
#: sums of <= 128 terms); round-off in such a slack is below ~1e3 * 2.2e-16 * 1e2 ~ 2e-11, so 1e-9
#: leaves a 50x margin while any real violation (>= 1e-6 in our instances) is still caught.
TOL = 1e-9

#: Geometries an analytic step is checked in (``theory.geometry`` names).
DEFAULT_GEOMETRIES = ("l2", "linf", "spectral")

#: Random instances per geometry for an analytic step (the instance builders batch them).
DEFAULT_INSTANCES = 48


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step of a proof, with the same id as in the markdown proof."""

    id: str
    """Step id, ``S1``, ``S2``, ... (matches ``proofs_md``)."""
    claim: str
    """The inequality or identity the step establishes."""
    justification: str
    """Why it holds (smoothness, star-convexity, LMO optimality, Hoelder, Jensen, algebra...)."""
    kind: str
    """``"algebra"`` (decided by sympy) or ``"analytic"`` (numeric predicate)."""
    obligations: tuple[Obligation, ...] = ()
    """Algebra steps: the claims sympy must decide."""
    predicate: str | None = None
    """Analytic steps: name in ``theory.predicates.PREDICATES``."""
    instance: str | None = None
    """Analytic steps: instance builder name (default: the predicate name)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Analytic steps: options passed to the instance builder (e.g. weight decay on/off)."""
    geometries: tuple[str, ...] = DEFAULT_GEOMETRIES
    """Analytic steps: geometries to check in."""

    def __post_init__(self) -> None:
        if not (isinstance(self.id, str) and self.id.startswith("S") and self.id[1:].isdigit()):
            raise ValueError(f"Step.id={self.id!r} must look like 'S1', 'S2', ...")
        if self.kind not in KINDS:
            raise ValueError(f"Step.kind={self.kind!r} is not one of {KINDS}")
        if self.kind == "algebra" and (not self.obligations or self.predicate is not None):
            raise ValueError(f"algebra step {self.id} needs obligations and no predicate")
        if self.kind == "analytic":
            if self.predicate not in PREDICATES or self.obligations:
                raise ValueError(
                    f"analytic step {self.id}: predicate={self.predicate!r} must be one of "
                    f"theory.predicates.PREDICATES and it takes no obligations")


@dataclass(frozen=True)
class StepResult:
    """Outcome of checking one step."""

    id: str
    kind: str
    status: str
    """``proved`` (algebra), ``confirmed`` (analytic) or ``failed``."""
    detail: str
    min_slack: float | None = None
    """Analytic steps: smallest slack over all instances and geometries."""
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "status": self.status, "detail": self.detail,
                "min_slack": self.min_slack, "seconds": round(self.seconds, 4)}


@dataclass(frozen=True)
class ProofReport:
    """Result of :meth:`Proof.check`: one :class:`StepResult` per step."""

    theorem: str
    steps: tuple[StepResult, ...]

    @property
    def ok(self) -> bool:
        """True when every step is proved or confirmed."""
        return all(s.status in ("proved", "confirmed") for s in self.steps)

    def to_dict(self) -> dict:
        return {"name": self.theorem, "ok": self.ok, "steps": [s.to_dict() for s in self.steps]}


@dataclass(frozen=True, kw_only=True)
class Proof:
    """The encoded proof of one theorem."""

    theorem: str
    """Name of the theorem this proves."""
    steps: tuple[Step, ...]
    """Steps in order; ids must be S1, S2, ... without gaps."""
    _reports: dict = field(default_factory=dict, compare=False, repr=False)
    """Reports already computed in this process, by (instances, seed) (check is deterministic)."""

    def __post_init__(self) -> None:
        ids = [s.id for s in self.steps]
        if ids != [f"S{i}" for i in range(1, len(ids) + 1)]:
            raise ValueError(f"proof of {self.theorem}: step ids {ids} must be S1..S{len(ids)}")

    @property
    def ids(self) -> list[str]:
        return [s.id for s in self.steps]

    def check(self, *, instances: int = DEFAULT_INSTANCES, seed: int = 0,
              use_cache: bool = True) -> ProofReport:
        """Decide every algebra step and run every analytic predicate on random instances.

        Deterministic: the instances of a step depend only on ``seed``, the theorem name, the
        step id and the geometry; a report computed earlier in this process for the same
        ``(instances, seed)`` is returned again unless ``use_cache=False``.
        """
        key = (int(instances), int(seed))
        if not use_cache or key not in self._reports:
            self._reports[key] = ProofReport(self.theorem, tuple(
                self.check_step(step, instances=instances, seed=seed) for step in self.steps))
        return self._reports[key]

    def check_step(self, step: Step, *, instances: int = DEFAULT_INSTANCES,
                   seed: int = 0) -> StepResult:
        start = time.perf_counter()
        if step.kind == "algebra":
            failures = []
            for ob in step.obligations:
                decision = ob.decide()
                if not decision.proved:
                    failures.append(f"{ob.label}: {decision.detail}")
            status = "failed" if failures else "proved"
            detail = "; ".join(failures) if failures else (
                f"{len(step.obligations)} obligation(s) decided by sympy")
            return StepResult(step.id, step.kind, status, detail,
                              seconds=time.perf_counter() - start)
        return self._check_analytic(step, instances, seed, start)

    def _check_analytic(self, step: Step, instances: int, seed: int, start: float) -> StepResult:
        # Imported here, not at the top: theory.instances uses torch and ``import theory`` must not.
        from theory.instances import build_instance

        predicate = PREDICATES[step.predicate]
        per_geometry = {}
        for geometry in step.geometries:
            key = f"{seed}/{self.theorem}/{step.id}/{geometry}"
            instance = build_instance(step.instance or step.predicate, geometry,
                                      n=instances, seed=zlib.crc32(key.encode()),
                                      **dict(step.options))
            slack = predicate(**instance)
            values = slack.reshape(-1).tolist() if hasattr(slack, "reshape") else [float(slack)]
            if not values or any(not math.isfinite(v) for v in values):
                return StepResult(step.id, step.kind, "failed",
                                  f"{geometry}: non-finite or empty slack",
                                  seconds=time.perf_counter() - start)
            per_geometry[geometry] = (min(values), len(values))
        worst = min(v for v, _ in per_geometry.values())
        count = sum(n for _, n in per_geometry.values())
        detail = (f"{step.predicate} on {count} instances; min slack "
                  + ", ".join(f"{g} {v:.3g}" for g, (v, _) in per_geometry.items()))
        status = "confirmed" if worst >= -TOL else "failed"
        return StepResult(step.id, step.kind, status, detail, min_slack=worst,
                          seconds=time.perf_counter() - start)
