"""Synthetic ledgers for the advice tests: ``claims.json`` per-run tables with chosen gaps.

The synchronous curve is linear, ``v(s) = V_T + DROP (1 - s/T)``, so a delayed run whose final
loss is ``V_T + g DROP`` has gap fraction ``g`` and lag fraction exactly ``g`` (the lag's
interpolation is linear in steps).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

__all__ = ["V_T", "DROP", "EVALS", "sync_record", "pair_records", "write_ledger"]

V_T = 2.0
DROP = 3.0
EVALS = 8


def _curve(T: int) -> list[list[float]]:
    return [[T * i / EVALS, V_T + DROP * (1 - i / EVALS)] for i in range(EVALS + 1)]


def sync_record(*, opt: str, T: int, seed: int, lr: float = 1e-3, batch: int = 16,
                L: float = 10.0, eta: float = 0.01, momentum: float | None = 0.9,
                n_params: int | None = None) -> dict:
    rec: dict[str, Any] = {
        "optimizer": opt, "mode": "sync", "tau": 0, "lam": 0.0, "lr": lr, "batch_size": batch,
        "seq_len": 64, "steps": T, "tokens_per_step": batch * 64, "seed": seed,
        "status": "completed", "final_val_loss": V_T, "best_val_loss": V_T,
        "val_curve": _curve(T), "partner": None, "lag": None,
        "stats": {"smoothness_est": L, "update_primal_norm": eta, "grad_noise_var": "nan"}}
    if momentum is not None:
        rec["momentum"] = momentum
    if n_params is not None:
        rec["n_params"] = n_params
    return rec


def pair_records(*, opt: str, T: int, seed: int, g: float, mode: str = "delay",
                 **sync_kw: Any) -> dict[str, dict]:
    """A sync run and a delayed (``delay`` or ``ef``) partner with gap fraction ``g``."""
    s = sync_record(opt=opt, T=T, seed=seed, **sync_kw)
    size = f"-N{s['n_params']}" if "n_params" in s else ""
    sname = f"{opt}-sync-T{T}-lr{s['lr']:g}{size}-s{seed}"
    d = dict(s, mode=mode, tau=1, lam=1.0 if mode == "ef" else 0.0,
             final_val_loss=V_T + g * DROP, best_val_loss=V_T + g * DROP, partner=sname,
             val_curve=[[st, v + g * DROP] for st, v in s["val_curve"]])
    return {sname: s, f"{opt}-{mode}-T{T}-lr{s['lr']:g}{size}-s{seed}": d}


def write_ledger(root: Path, records: Iterable[dict[str, dict]]) -> Path:
    """``root/claims.json`` with the given records as its ``runs`` table."""
    runs: dict[str, dict] = {}
    for r in records:
        runs.update(r)
    root.mkdir(parents=True, exist_ok=True)
    (root / "claims.json").write_text(json.dumps({"claims": [], "runs": runs}))
    return root
