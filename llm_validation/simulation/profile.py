"""``RUN_DIR/profile.json``: measured per-action timings of a pipeline run (the calibration input).

A pipeline run started with ``--profile`` writes this file; ``delaybound simulate --from RUN_DIR``
reads it and runs the simulator with these costs. Schema (version 1; every time in seconds, every
per-action figure a mean over the profiled microbatches of that stage)::

    {
      "schema": "delaybound.profile",   # fixed
      "version": 1,
      "schedule": "2bw",                # the run's pipeline kind (2bw, 1f1b, gpipe)
      "stages": 4,                      # P (one entry per stage below)
      "microbatches": 8,                # M per batch
      "microbatch_tokens": 2048,        # tokens of one microbatch (batch_size / M * seq_len)
      "data_parallel": 1,               # replicas (optional, default 1)
      "per_stage": [
        {
          "stage": 0,
          "forward_s": 0.0031,          # one microbatch forward
          "backward_s": 0.0062,         # one microbatch backward (input and weight gradients)
          "backward_input_s": null,     # optional: input-gradient part alone (for ZB-H1)
          "backward_weight_s": null,    # optional: weight-gradient part alone
          "step_s": 0.0104,             # one optimizer step (incl. EF and, with replicas, the
                                        #   gradient all-reduce)
          "send_wait_s": 0.0002,        # blocked in one point-to-point send (activation or
                                        #   gradient) per microbatch
          "recv_wait_s": 0.0009,        # blocked in one receive per microbatch (includes bubbles)
          "activation_bytes": 1048576,  # bytes of one activation this stage sends (0: last)
          "samples": 96,                # microbatches behind the means (optional)
          "flush_s": 0.0011             # optional: a step that ends a metrics flush costs
                                        #   this much more (step_s excludes it)
        }, ...
      ],
      "log_interval": 1,                # optional: steps between the run's flushes
      "grad_clip": 0.0                  # optional: the run's clipping threshold (0: none)
    }

How the simulator uses it (:func:`llm_validation.simulation.costs.profile_costs`): forward,
backward and step times as given; when the backward parts are absent, ``I`` and ``W`` take half
of ``backward_s`` each; a message between stage ``s`` and its neighbour takes stage ``s``'s
``send_wait_s`` (with a blocking send, the time the sender waits is the transfer time) unless a
link bandwidth is given, then ``latency + activation_bytes / bandwidth``. ``recv_wait_s`` is not
a cost: it is what the simulator predicts (the idle time waiting on a neighbour) and is kept for
the measured-vs-simulated comparison.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from llm_validation.records.atomic_io import read_json, write_json

__all__ = ["PROFILE_FILE", "PROFILE_SCHEMA", "PROFILE_VERSION", "SCHEMA", "VERSION", "StageProfile", "Profile", "read_profile",
           "write_profile"]

#: The file, its schema name and version: one definition, torch-free (the pipeline's profiler
#: writes them from here; the simulator reads them without importing torch).
PROFILE_FILE = "profile.json"
PROFILE_SCHEMA = "delaybound.profile"
PROFILE_VERSION = 1
SCHEMA, VERSION = PROFILE_SCHEMA, PROFILE_VERSION


def _nonneg(where: str, value: Any, *, positive: bool = False, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0):
        need = "> 0" if positive else ">= 0"
        raise ValueError(f"{where}={value!r} must be a finite number {need}")
    return float(value)


def _int(where: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{where}={value!r} must be an integer >= {lo}")
    return value


@dataclass(frozen=True, kw_only=True)
class StageProfile:
    """Measured means of one stage (seconds per microbatch unless said otherwise)."""

    stage: int
    """Stage index s."""
    forward_s: float
    """One microbatch's forward."""
    backward_s: float
    """One microbatch's backward (input and weight gradients together)."""
    step_s: float
    """One optimizer step (with EF and any data-parallel all-reduce)."""
    send_wait_s: float
    """Time blocked in one send (activation forward or gradient backward)."""
    recv_wait_s: float
    """Time blocked in one receive (transfer plus the wait for the neighbour)."""
    activation_bytes: float
    """Bytes of one activation sent to the next stage (0 for the last stage)."""
    backward_input_s: float | None = None
    """Input-gradient part of the backward alone, when measured."""
    backward_weight_s: float | None = None
    """Weight-gradient part of the backward alone, when measured."""
    samples: int | None = None
    """Microbatches behind the means."""
    flush_s: float | None = None
    """What a step ending a metrics flush costs more (mean per flush; the waits for another
    stage's verdict and checkpoint saves excluded); None: not measured (0)."""
    side_s: float | None = None
    """Side passes (validation, the statistics' extra gradients) per step; None: 0."""

    def __post_init__(self) -> None:
        w = f"profile stage {self.stage}"
        _int(f"{w}: stage", self.stage, 0)
        for name in ("forward_s", "backward_s"):
            object.__setattr__(self, name, _nonneg(f"{w}: {name}", getattr(self, name),
                                                   positive=True))
        for name in ("step_s", "send_wait_s", "recv_wait_s", "activation_bytes"):
            object.__setattr__(self, name, _nonneg(f"{w}: {name}", getattr(self, name)))
        for name in ("backward_input_s", "backward_weight_s"):
            object.__setattr__(self, name, _nonneg(f"{w}: {name}", getattr(self, name),
                                                   positive=True, optional=True))
        for name in ("flush_s", "side_s"):
            object.__setattr__(self, name, _nonneg(f"{w}: {name}", getattr(self, name),
                                                   optional=True))
        if (self.backward_input_s is None) != (self.backward_weight_s is None):
            raise ValueError(f"{w}: give both backward_input_s and backward_weight_s, or neither")
        if self.samples is not None:
            _int(f"{w}: samples", self.samples, 1)


@dataclass(frozen=True, kw_only=True)
class Profile:
    """The whole ``profile.json`` (see the module docstring)."""

    schedule: str
    """Pipeline kind of the profiled run."""
    stages: int
    """P."""
    microbatches: int
    """M per batch."""
    microbatch_tokens: int
    """Tokens in one microbatch."""
    per_stage: tuple[StageProfile, ...]
    """One entry per stage, in stage order."""
    data_parallel: int = 1
    """Replicas of the profiled run."""
    log_interval: int = 1
    """Steps between the run's metrics flushes (``RunConfig.log_interval``; optional)."""
    grad_clip: float = 0.0
    """The run's global-norm clipping threshold (0: none; optional)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Unknown top-level keys, kept (a newer writer may add some)."""

    def __post_init__(self) -> None:
        if not isinstance(self.schedule, str) or not self.schedule:
            raise ValueError(f"profile: schedule={self.schedule!r} must be a non-empty string")
        _int("profile: stages", self.stages, 1)
        _int("profile: microbatches", self.microbatches, 1)
        _int("profile: microbatch_tokens", self.microbatch_tokens, 1)
        _int("profile: data_parallel", self.data_parallel, 1)
        _int("profile: log_interval", self.log_interval, 1)
        object.__setattr__(self, "grad_clip", _nonneg("profile: grad_clip", self.grad_clip))
        object.__setattr__(self, "per_stage", tuple(self.per_stage))
        if [p.stage for p in self.per_stage] != list(range(self.stages)):
            raise ValueError(f"profile: per_stage must list stages 0..{self.stages - 1} in order, "
                             f"got {[p.stage for p in self.per_stage]}")

    def to_dict(self) -> dict[str, Any]:
        d = {"schema": SCHEMA, "version": VERSION, "schedule": self.schedule,
             "stages": self.stages, "microbatches": self.microbatches,
             "microbatch_tokens": self.microbatch_tokens, "data_parallel": self.data_parallel,
             "log_interval": self.log_interval, "grad_clip": self.grad_clip,
             "per_stage": [asdict(p) for p in self.per_stage]}
        return {**dict(self.extra), **d}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "profile") -> "Profile":
        """Parse and validate; every problem is a ``ValueError`` naming ``where`` and the field."""
        if not isinstance(d, Mapping):
            raise ValueError(f"{where}: must hold a JSON object")
        if d.get("schema") != SCHEMA or d.get("version") != VERSION:
            raise ValueError(f"{where}: expected schema {SCHEMA!r} version {VERSION}, got "
                             f"{d.get('schema')!r} version {d.get('version')!r}")
        missing = [k for k in ("schedule", "stages", "microbatches", "microbatch_tokens",
                               "per_stage") if k not in d]
        if missing:
            raise ValueError(f"{where}: missing keys {missing}")
        if not isinstance(d["per_stage"], list):
            raise ValueError(f"{where}: per_stage must be a list")
        fields = {f for f in StageProfile.__dataclass_fields__}
        stages = []
        for i, p in enumerate(d["per_stage"]):
            if not isinstance(p, Mapping):
                raise ValueError(f"{where}: per_stage[{i}] must be an object")
            need = {"stage", "forward_s", "backward_s", "step_s", "send_wait_s", "recv_wait_s",
                    "activation_bytes"} - set(p)
            if need:
                raise ValueError(f"{where}: per_stage[{i}] misses {sorted(need)}")
            try:
                stages.append(StageProfile(**{k: v for k, v in p.items() if k in fields}))
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        known = {"schema", "version", "schedule", "stages", "microbatches", "microbatch_tokens",
                 "data_parallel", "log_interval", "grad_clip", "per_stage"}
        try:
            return cls(schedule=d["schedule"], stages=d["stages"], microbatches=d["microbatches"],
                       microbatch_tokens=d["microbatch_tokens"], per_stage=tuple(stages),
                       data_parallel=d.get("data_parallel", 1),
                       log_interval=d.get("log_interval", 1),
                       grad_clip=d.get("grad_clip", 0.0),
                       extra={k: v for k, v in d.items() if k not in known})
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


def read_profile(run_dir: str | Path) -> Profile:
    """The :class:`Profile` of ``run_dir/profile.json``; ``FileNotFoundError`` says how to make it."""
    path = Path(run_dir) / PROFILE_FILE
    if not Path(run_dir).is_dir():
        raise FileNotFoundError(f"no such run directory: {run_dir}")
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run the pipeline with --profile to record "
                                "per-action timings")
    return Profile.from_dict(read_json(path), where=str(path))


def write_profile(run_dir: str | Path, profile: Profile) -> Path:
    """Write ``run_dir/profile.json`` atomically (for the runtime's ``--profile``)."""
    path = Path(run_dir) / PROFILE_FILE
    write_json(path, profile.to_dict())
    return path
