"""The ledger's cost model, measured on the machine that runs it.

Before, the ledger estimated a run as ``Scale.sec_per_step x steps x OPT_COST[optimizer]``
with constants measured once on another CPU (Muon 1.2x AdamW); on a CPU without native bfloat16
a Muon step cost 3.5-6x an AdamW one, and every estimate and ETA was off by that factor.

:func:`calibrate` times a short real run of each optimizer's base config at the scale
(:func:`llm_validation.training.timing.time_run`: :data:`CAL_STEPS` steps with statistics every
:data:`CAL_STATS_INTERVAL` steps, so plain and statistics steps are both measured, one thread
per process as under ``--jobs`` on this machine) and turns it into seconds per step of the
base run at its own intervals (:meth:`~llm_validation.training.timing.StepTimes.sec_per_step`).
A run's estimate is then ``sec_per_step[optimizer] x steps x batch / base batch``, the same
form as before with measured numbers. The tiny scale takes a few seconds (four optimizers x
:data:`CAL_STEPS` steps).

:func:`load_or_calibrate` caches the result in the ledger's folder (``calibration.json``) with
what it was measured for (scale, device, threads, the base configs' digests), so a resumed
ledger reuses it; any change of those measures again. Delayed and EF runs cost a few percent
more than the synchronous base run measured here (the delay's weight copies, the EF buffer).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from llm_validation.claims.plan.scales import OPT_COST, Scale, base_config
from llm_validation.config import TrainConfig
from llm_validation.records.atomic_io import read_json, write_json

__all__ = ["CostModel", "calibrate", "constant_model", "load_or_calibrate", "CAL_STEPS",
           "CAL_STATS_INTERVAL", "CALIBRATION_FILE"]

#: Steps of each timed run: step 0 is not counted, so 7 timed steps of which 2 record the
#: statistics (steps 3 and 6): enough for medians on a loaded 2-core machine in ~1-3 s a run.
CAL_STEPS = 8
#: Statistics every this many steps in the timed run.
CAL_STATS_INTERVAL = 3
#: File name of the cached calibration in a ledger folder.
CALIBRATION_FILE = "calibration.json"


@dataclass(frozen=True, kw_only=True)
class CostModel:
    """Seconds per step of each optimizer's base run at a scale."""

    sec_per_step: Mapping[str, float]
    """Optimizer -> seconds of one step of its base run (statistics and evaluation included)."""
    source: str
    """``calibrated`` (measured here) or ``constants`` (Scale.sec_per_step x OPT_COST)."""
    detail: Mapping[str, Any] = field(default_factory=dict)
    """What was measured: machine, date, per optimizer the plain / statistics / tail seconds."""

    def step_s(self, optimizer: str) -> float:
        """Seconds per step of ``optimizer`` (the AdamW one for an optimizer not measured)."""
        if optimizer in self.sec_per_step:
            return self.sec_per_step[optimizer]
        return self.sec_per_step.get("adamw", max(self.sec_per_step.values()))

    def run_cost(self, cfg: TrainConfig, base_batch: int) -> float:
        """Estimated process-seconds of a run."""
        return self.step_s(cfg.optim.name) * cfg.run.steps * cfg.run.batch_size / base_batch

    def ratios(self) -> dict[str, float]:
        """Each optimizer's step time over AdamW's (what OPT_COST used to be)."""
        ref = self.step_s("adamw")
        return {k: round(v / ref, 3) for k, v in self.sec_per_step.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "sec_per_step": dict(self.sec_per_step),
                "relative_to_adamw": self.ratios(), "detail": dict(self.detail)}


def constant_model(scale: Scale, optimizers: Sequence[str]) -> CostModel:
    """The old constants: ``Scale.sec_per_step x OPT_COST`` (used by ``--list`` before any
    calibration exists)."""
    return CostModel(sec_per_step={o: scale.sec_per_step * OPT_COST.get(o, 1.0)
                                   for o in optimizers}, source="constants")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _key(scale: Scale, bases: Mapping[str, TrainConfig], threads: int) -> dict[str, Any]:
    digests = {o: hashlib.sha1(json.dumps(_timed_dict(c), sort_keys=True).encode()).hexdigest()[:12]
               for o, c in sorted(bases.items())}
    return {"scale": scale.name, "threads": threads, "cpu": _cpu_name(), "configs": digests}


def _timed_dict(cfg: TrainConfig) -> dict[str, Any]:
    d = cfg.to_dict()
    d["run"].pop("out_dir", None)
    d["run"].pop("seed", None)
    return d


def calibrate(scale: Scale, bases: Mapping[str, TrainConfig], *, threads: int = 1
              ) -> CostModel:
    """Time each base config (module docstring)."""
    from llm_validation.training.timing import time_run   # torch: load late

    per, detail = {}, {}
    for opt, cfg in bases.items():
        t = time_run(cfg, steps=CAL_STEPS, stats_interval=CAL_STATS_INTERVAL, eval_interval=0,
                     threads=threads)
        per[opt] = t.sec_per_step(steps=cfg.run.steps, stats_interval=cfg.run.stats_interval,
                                  eval_interval=cfg.run.eval_interval)
        detail[opt] = {k: round(v, 4) for k, v in t.to_dict().items()}
    detail["measured_at"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return CostModel(sec_per_step=per, source="calibrated", detail=detail)


def load_or_calibrate(folder: str | Path, scale: Scale, optimizers: Sequence[str], *,
                      quick: bool = False, device: str | None = None,
                      overrides: Sequence[str] = (), threads: int = 1,
                      measure: bool = True) -> CostModel | None:
    """The cached calibration of ``folder`` when it was measured for the same scale, machine,
    threads and base configs; else a new one, written there (``measure=False``: None)."""
    bases = {o: base_config(scale, o, quick=quick, device=device, overrides=overrides)
             for o in dict.fromkeys(optimizers)}
    key = _key(scale, bases, threads)
    path = Path(folder) / CALIBRATION_FILE
    if path.is_file():
        try:
            saved = read_json(path)
        except (OSError, ValueError):
            saved = None
        if isinstance(saved, dict) and saved.get("key") == key:
            return CostModel(sec_per_step=saved["sec_per_step"], source="calibrated",
                             detail={**saved.get("detail", {}), "cached": True})
    if not measure:
        return None
    model = calibrate(scale, bases, threads=threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"key": key, **model.to_dict()})
    return model
