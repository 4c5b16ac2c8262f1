"""Synthetic (delayed, synchronous) pairs at chosen sizes, horizons and gap fractions.

The synchronous curve is linear (``v(s) = V_T + DROP (1 - s/T)``), so a delayed run whose final
loss is ``V_T + g DROP`` has gap fraction ``g`` exactly (as ``synthetic_ledger``).
"""

from __future__ import annotations

from llm_validation.advice.pilot import PilotRun, pairs

__all__ = ["V_T", "DROP", "run_pair", "frontier_run", "make_pairs"]

V_T, DROP, EVALS = 2.0, 3.0, 8


def run_pair(*, opt: str = "muon", mode: str = "delay", T: int, N: int | None, g: float,
             seed: int = 0, batch: int = 16, L: float = 10.0, eta: float = 0.01,
             lr: float = 1e-3) -> list[PilotRun]:
    """A synchronous run and its delayed partner (``delay`` or ``ef``) with gap fraction ``g``."""
    curve = tuple((T * i / EVALS, V_T + DROP * (1 - i / EVALS)) for i in range(EVALS + 1))
    common = dict(optimizer=opt, lr=lr, momentum=0.9, batch_size=batch, seq_len=64, steps=T,
                  seed=seed, n_params=N)
    tag = f"T{T}-N{N}-b{batch}-lr{lr:g}-s{seed}"
    sname = f"{opt}-sync-{tag}"
    sync = PilotRun(name=sname, mode="sync", tau=0, lam=0.0, final_val=V_T, val_curve=curve,
                    stats={"smoothness_est": L, "update_primal_norm": eta}, **common)
    delayed = PilotRun(name=f"{opt}-{mode}-{tag}", mode=mode, tau=1,
                       lam=1.0 if mode == "ef" else 0.0, final_val=V_T + g * DROP,
                       val_curve=tuple((s, v + g * DROP) for s, v in curve), partner=sname,
                       stats={}, **common)
    return [sync, delayed]


def frontier_run(*, opt: str = "muon", T: int, N: int | None, final: float, seed: int = 0,
                 batch: int = 16, lr: float = 1e-3) -> PilotRun:
    """A shorter synchronous run of ``T`` steps (its own schedule) closing at ``final``: a point
    of the compute frontier of the pairs with the same optimizer, size, lr, batch and seed."""
    curve = tuple((T * i / EVALS, final + DROP * (1 - i / EVALS)) for i in range(EVALS + 1))
    return PilotRun(name=f"{opt}-sync-T{T}-N{N}-b{batch}-lr{lr:g}-s{seed}", mode="sync", tau=0,
                    lam=0.0, final_val=final, val_curve=curve, optimizer=opt, lr=lr,
                    momentum=0.9, batch_size=batch, seq_len=64, steps=T, seed=seed, n_params=N,
                    stats={"smoothness_est": 10.0, "update_primal_norm": 0.01})


def make_pairs(points, **kw):
    """Pairs of ``(T, N, g)`` points (seed = the point's index)."""
    runs = []
    for i, (T, N, g) in enumerate(points):
        runs += run_pair(T=T, N=N, g=g, seed=i, **kw)
    return runs, pairs(runs)
