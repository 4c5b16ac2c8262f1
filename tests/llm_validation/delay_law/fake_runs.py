"""Run folders with chosen closing losses for the delay-law design's runs (no training)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from llm_validation.claims.plan.plan import run_name
from llm_validation.delay_law.runs import DesignRun
from llm_validation.records.atomic_io import write_json

__all__ = ["V0", "frontier_loss", "write_run"]

#: Loss at initialisation of every fake run (ln 256, a byte model's uniform loss).
V0 = math.log(256)


def frontier_loss(steps: float, seed: int, optimizer: str) -> float:
    """A synchronous frontier exactly linear in log steps (so envelope lags are exact)."""
    return 3.0 - 0.25 * math.log(steps) + 0.01 * seed + (0.05 if optimizer == "adamw" else 0.0)


def write_run(root: Path, r: DesignRun, final: float, *, truncate: bool = False,
              rho: float | None = None) -> Path:
    """A finished run folder of ``r`` whose closing loss (on the fixed set) is ``final``;
    with ``rho``, every step from the run's middle on logs ``grad_noise_var = 1`` and
    ``grad_norm = sqrt(1 + rho)`` (so ``B / B_simple = rho`` exactly), and the steps before it
    a hundred times that ratio (the initial descent, which the estimate leaves out)."""
    d = root / run_name(r.cfg)
    d.mkdir(parents=True, exist_ok=True)
    steps = r.cfg.run.steps
    write_json(d / "config.json", {**r.cfg.to_dict(), "meta": {"synthetic": True}})
    last = steps // 2 if truncate else steps
    rows = [{"step": t, "kind": "train", "loss": final, "val_loss": V0 if t == 0 else None}
            for t in range(last)]
    if rho is not None:
        for row in rows:
            ratio = rho if row["step"] >= steps / 2 else 100 * rho
            row.update(grad_noise_var=1.0, grad_norm=math.sqrt(1.0 + ratio))
    if not truncate:
        rows.append({"step": steps, "kind": "eval", "val_loss": final, "final_val_loss": final})
    (d / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    write_json(d / "summary.json", {"run_dir": str(d), "status": "completed", "steps": steps,
                                    "final_val_loss": final})
    return d
