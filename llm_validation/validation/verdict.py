"""Verdicts of the validation and their report: the decision rule, JSON and markdown.

A :class:`Verdict` states one claim of the theory, the theory's prediction, the measured
numbers with their intervals, and a status:

- ``pass``: the measured interval lies entirely on the predicted side of the decision boundary,
  with at least :data:`MIN_SEEDS` seeds;
- ``fail``: the interval lies entirely on the other side, with at least :data:`MIN_SEEDS` seeds;
- ``inconclusive``: the interval overlaps the boundary, or there are fewer than
  :data:`MIN_SEEDS` seeds (then the interval is not trusted even when it is narrow), or the
  data needed are missing. There is never a pass without evidence.

:func:`decide` implements the rule for one interval; :func:`combine` for a conjunction of
several conditions (pass only if all pass, fail if any fails).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from llm_validation.validation.inference import Interval, level_text

__all__ = [
    "PASS",
    "FAIL",
    "INCONCLUSIVE",
    "STATUSES",
    "KINDS",
    "MIN_SEEDS",
    "Verdict",
    "ValidationReport",
    "decide",
    "combine",
    "missing",
    "render_markdown",
]

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
STATUSES = (PASS, FAIL, INCONCLUSIVE)
#: assumption: a hypothesis of a theorem measured along the path; trend: a predicted change of
#: the sync-vs-async gap; bound: a theorem's bound evaluated with measured constants.
KINDS = ("assumption", "trend", "bound")
#: Fewest independent seeds behind an interval for a pass or a fail (the brief's "seeds >= 3":
#: with 2 seeds a t interval has 1 degree of freedom and t_0.975 = 12.7, with 3 it is 4.3).
MIN_SEEDS = 3


def decide(interval: Interval, *, boundary: float, predicted: str, n_seeds: int,
           min_seeds: int = MIN_SEEDS) -> tuple[str, str]:
    """Status and reason for "the quantity is ``predicted`` ("above"/"below") ``boundary``"."""
    if predicted not in ("above", "below"):
        raise ValueError(f"decide: predicted={predicted!r} must be 'above' or 'below'")
    if not math.isfinite(boundary):
        raise ValueError(f"decide: boundary={boundary!r} must be finite")
    if n_seeds < min_seeds:
        return INCONCLUSIVE, f"only {n_seeds} seed(s); a verdict needs >= {min_seeds}"
    if math.isnan(interval.estimate) or math.isnan(interval.lo) or math.isnan(interval.hi):
        return INCONCLUSIVE, "no estimate (missing data)"
    side = interval.above if predicted == "above" else interval.below
    other = interval.below if predicted == "above" else interval.above
    where = f"{level_text(interval.level)} interval [{interval.lo:.4g}, {interval.hi:.4g}]"
    if side(boundary):
        return PASS, f"{where} lies {predicted} {boundary:.4g}"
    if other(boundary):
        opposite = "below" if predicted == "above" else "above"
        return FAIL, f"{where} lies {opposite} {boundary:.4g}, against the prediction"
    return INCONCLUSIVE, f"{where} overlaps the boundary {boundary:.4g}"


def combine(parts: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """Conjunction: fail if any part fails, pass if all pass, else inconclusive."""
    if not parts:
        return INCONCLUSIVE, "no conditions"
    statuses = [s for s, _ in parts]
    reason = "; ".join(r for _, r in parts)
    if FAIL in statuses:
        return FAIL, reason
    if all(s == PASS for s in statuses):
        return PASS, reason
    return INCONCLUSIVE, reason


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """One checked claim."""

    id: str
    """Stable identifier, e.g. ``gap_adamw_gt_muon`` or ``ef_gain[muon]``."""
    kind: str
    """``assumption``, ``trend`` or ``bound`` (:data:`KINDS`)."""
    claim: str
    """The claim in words."""
    prediction: str
    """What the theory predicts, with its formula or number."""
    status: str
    """``pass``, ``fail`` or ``inconclusive``."""
    reason: str
    """Why this status (the interval and the boundary it was compared with)."""
    measured: Mapping[str, Any] = field(default_factory=dict)
    """Named measurements: :class:`Interval` or plain numbers/strings."""
    n_seeds: int = 0
    """Independent seeds behind the decisive interval."""
    runs: tuple[str, ...] = ()
    """Run directory names used."""
    plot: str | None = None
    """File name of the plot that shows it, if any."""
    quick: bool = False
    """Made from a ``--quick`` demo (few steps, one seed): never a pass or fail."""
    dropped: tuple[str, ...] = ()
    """One line per run this verdict would have read but dropped (unfinished, diverged, damaged
    metrics: ``RunRecord.unusable``), naming the run, its seed and why."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Verdict.kind={self.kind!r} is not one of {list(KINDS)}")
        if self.status not in STATUSES:
            raise ValueError(f"Verdict.status={self.status!r} is not one of {list(STATUSES)}")
        if isinstance(self.n_seeds, bool) or not isinstance(self.n_seeds, int) \
                or self.n_seeds < 0:
            raise ValueError(f"Verdict.n_seeds={self.n_seeds!r} must be an int >= 0")
        if self.quick and self.status != INCONCLUSIVE:
            raise ValueError("Verdict.quick=True needs status 'inconclusive' (quick runs are "
                             "not evidence)")
        object.__setattr__(self, "runs", tuple(self.runs))
        object.__setattr__(self, "dropped", tuple(self.dropped))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "claim": self.claim,
                "prediction": self.prediction, "status": self.status, "reason": self.reason,
                "measured": _plain(self.measured), "n_seeds": self.n_seeds,
                "runs": list(self.runs), "dropped": list(self.dropped), "plot": self.plot,
                "quick": self.quick}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        measured = _intervals(d.get("measured", {}))
        return cls(id=d["id"], kind=d["kind"], claim=d["claim"], prediction=d["prediction"],
                   status=d["status"], reason=d["reason"], measured=measured,
                   n_seeds=int(d.get("n_seeds", 0)), runs=tuple(d.get("runs", ())),
                   plot=d.get("plot"), quick=bool(d.get("quick", False)),
                   dropped=tuple(d.get("dropped", ())))

    def as_quick(self) -> "Verdict":
        """This verdict marked quick: status inconclusive, the original status kept in reason."""
        if self.quick:
            return self
        reason = f"quick run (not evidence; would read {self.status}): {self.reason}"
        return Verdict(**{**self.__dict__, "status": INCONCLUSIVE, "reason": reason,
                          "quick": True})


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    """Named values with every :class:`Interval` as its dict (JSON)."""
    return {k: (v.to_dict() if isinstance(v, Interval) else v) for k, v in values.items()}


def _intervals(values: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`_plain`: interval dicts back to :class:`Interval`."""
    return {k: (Interval.from_dict(v) if isinstance(v, dict) and "lo" in v else v)
            for k, v in values.items()}


def missing(id: str, kind: str, claim: str, prediction: str, what: str) -> Verdict:
    """An inconclusive verdict for a check whose runs or statistics are absent."""
    return Verdict(id=id, kind=kind, claim=claim, prediction=prediction, status=INCONCLUSIVE,
                   reason=f"not measured: {what}")


@dataclass(frozen=True, kw_only=True)
class ValidationReport:
    """All verdicts of one validation, with the facts needed to read them."""

    verdicts: tuple[Verdict, ...]
    """The verdicts in a fixed order (assumptions, trends, bounds)."""
    gap_definition: str
    """How a gap was measured (e.g. final validation loss, paired by seed)."""
    runs: tuple[Mapping[str, Any], ...] = ()
    """One summary row per run used (name, optimizer, mode, lr, seed, status, val loss...)."""
    notes: tuple[str, ...] = ()
    """Warnings met while reading the runs (diverged runs, unpaired runs, ...)."""
    quick: bool = False
    """True when made from quick (not evidential) runs."""
    comparisons: tuple[Mapping[str, Any], ...] = ()
    """Every pair of optimizers with measured gaps: their gaps, the interval of the difference
    and its reading (``validation.optimizers.comparisons``; descriptive, not verdicts)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "comparisons", tuple(self.comparisons))
        object.__setattr__(self, "verdicts", tuple(self.verdicts))
        object.__setattr__(self, "runs", tuple(self.runs))
        object.__setattr__(self, "notes", tuple(self.notes))

    def counts(self) -> dict[str, int]:
        return {s: sum(v.status == s for v in self.verdicts) for s in STATUSES}

    def get(self, id: str) -> Verdict:
        for v in self.verdicts:
            if v.id == id:
                return v
        raise KeyError(f"no verdict {id!r}; have {[v.id for v in self.verdicts]}")

    def to_dict(self) -> dict[str, Any]:
        return {"quick": self.quick, "gap_definition": self.gap_definition,
                "counts": self.counts(), "verdicts": [v.to_dict() for v in self.verdicts],
                "comparisons": [_plain(c) for c in self.comparisons],
                "runs": [dict(r) for r in self.runs], "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ValidationReport":
        return cls(verdicts=tuple(Verdict.from_dict(v) for v in d["verdicts"]),
                   gap_definition=d["gap_definition"], runs=tuple(d.get("runs", ())),
                   notes=tuple(d.get("notes", ())), quick=bool(d.get("quick", False)),
                   comparisons=tuple(_intervals(c) for c in d.get("comparisons", ())))

    def to_markdown(self, plots: Mapping[str, str] | None = None) -> str:
        return render_markdown(self, plots)


_BADGE = {PASS: "PASS", FAIL: "FAIL", INCONCLUSIVE: "inconclusive"}


def _fmt_value(v: Any) -> str:
    if isinstance(v, Interval):
        return v.fmt()
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def render_markdown(report: ValidationReport, plots: Mapping[str, str] | None = None) -> str:
    """Markdown: a summary table of all verdicts, then one section per verdict. ``plots`` maps
    plot file names to the links to use; a verdict's plot is linked only when it is there."""
    c = report.counts()
    lines = [f"Verdicts: {c[PASS]} pass, {c[FAIL]} fail, {c[INCONCLUSIVE]} inconclusive"
             + (" (QUICK run: not evidence, every verdict is inconclusive)" if report.quick
                else "") + ".", "",
             f"Gap definition: {report.gap_definition}", "",
             "| # | kind | claim | status | seeds |", "|---|---|---|---|---|"]
    for i, v in enumerate(report.verdicts, 1):
        lines.append(f"| {i} | {v.kind} | {v.claim} | **{_BADGE[v.status]}** | {v.n_seeds} |")
    lines.append("")
    for i, v in enumerate(report.verdicts, 1):
        lines += [f"### {i}. {v.claim} — **{_BADGE[v.status]}**", "",
                  f"- id: `{v.id}` ({v.kind})",
                  f"- theory predicts: {v.prediction}",
                  f"- decision: {v.reason}"]
        for k, val in v.measured.items():
            lines.append(f"- {k}: {_fmt_value(val)}")
        lines += [f"- dropped: {d}" for d in v.dropped]
        if v.plot and plots and v.plot in plots:
            lines.append(f"- plot: [{v.plot}]({plots[v.plot]})")
        lines.append("")
    if report.comparisons:
        lines += ["### Optimizers compared (the delay's cost, pairwise)", ""]
        for c in report.comparisons:
            nums = "; ".join(f"{k}: {_fmt_value(x)}" for k, x in c.items()
                             if k not in ("a", "b", "reading", "n_seeds"))
            lines.append(f"- {c['reading']} ({c['n_seeds']} seeds; {nums})")
        lines.append("")
    if report.notes:
        lines += ["Notes:", ""] + [f"- {n}" for n in report.notes] + [""]
    return "\n".join(lines)


def statuses(verdicts: Iterable[Verdict]) -> dict[str, str]:
    """Map id -> status (handy in tests and summaries)."""
    return {v.id: v.status for v in verdicts}
