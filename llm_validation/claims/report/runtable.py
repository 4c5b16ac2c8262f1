"""The per-run table of ``claims.json`` (``"runs"``): one record per finished run the ledger used.

Read by ``delaybound advise`` (issue 19) and by anyone who wants to recompute a pairing or a
contrast without the run directories. Record keys (documented in docs/reproduce.md):
``optimizer``, ``mode`` (``sync`` | ``delay`` | ``ef`` | ``other``: gradient-level EF, per-stage
delays, synchronous phases, corrections), ``tau``, ``lam``, ``lr``, ``batch_size``, ``seq_len``,
``steps``, ``tokens_per_step``, ``n_params`` (the model's parameter count, all counted; issue
28), ``seed``, ``status``, ``final_val_loss``, ``best_val_loss``,
``val_curve`` (``[[step, val_loss], ...]``, the final evaluation included), ``partner`` (the
synchronous same-seed partner's run name; None for synchronous runs), ``lag``
(:meth:`llm_validation.validation.lag.Lag.to_dict` against the partner, or None), ``stats``
(statistic -> mean over steps >= 10% of the run, every statistic the run logged) and ``arms``
(the ``claim id: arm key`` pairs that read it). Non-finite numbers are the strings ``nan``,
``inf``, ``-inf``.
"""

from __future__ import annotations

from typing import Any, Sequence

from llm_validation.claims.decide.checks import number
from llm_validation.claims.decide.data import ClaimData
from llm_validation.validation.lag import run_lag
from llm_validation.validation.runs import NOT_STATS, STATS_FROM_FRACTION, RunRecord, stat_means

__all__ = ["STATS_SKIP", "NOT_STATS", "run_table", "run_mode", "mean_stats"]

#: Statistics are averaged over steps >= this fraction of the run (the first 10% is the
#: initial transient; the same skip as ``ClaimData.mean_stat``).
STATS_SKIP = STATS_FROM_FRACTION


def run_mode(r: RunRecord) -> str:
    """``RunRecord.mode``, with synchronous phases and corrections counted as ``other``."""
    delay = r.config.get("delay", {})
    if r.mode in ("delay", "ef") and (delay.get("sync_start") or delay.get("sync_cooldown")
                                      or delay.get("correction", "none") != "none"):
        return "other"
    return r.mode


def mean_stats(r: RunRecord, skip: float = STATS_SKIP) -> dict[str, Any]:
    """statistic -> mean over the rows at steps >= skip * steps where it was measured
    (:func:`~llm_validation.validation.runs.stat_means`), non-finite numbers as strings."""
    return {k: number(v) for k, v in stat_means(r.rows, r.steps, skip).items()}


def _n_params(r: RunRecord) -> int | None:
    """The run's parameter count from its config's model section (None when absent)."""
    from llm_validation.config import ModelConfig
    try:
        return ModelConfig(**dict(r.config.get("model") or {})).n_params()
    except (TypeError, ValueError):
        return None


def _record(r: RunRecord, partner: RunRecord | None) -> dict[str, Any]:
    run = r.config.get("run", {})
    seq = int(r.config.get("data", {}).get("seq_len", 0))
    steps, vals = r.series("val_loss")
    best = (r.summary or {}).get("best_val_loss")
    lg = run_lag(r, partner) if partner is not None else None
    return {"optimizer": r.optimizer, "mode": run_mode(r), "tau": r.tau, "lam": r.lam,
            "lr": r.lr, "batch_size": r.batch_size, "seq_len": seq, "steps": r.steps,
            "tokens_per_step": r.batch_size * seq * int(run.get("data_parallel", 1) or 1),
            "n_params": _n_params(r),
            "seed": r.seed, "status": r.status,
            "final_val_loss": None if r.final_val is None else number(r.final_val),
            "best_val_loss": None if best is None else number(float(best)),
            "val_curve": [[int(s), number(float(v))] for s, v in zip(steps, vals)],
            "partner": partner.name if partner is not None else None,
            "lag": lg.to_dict() if lg is not None else None, "stats": mean_stats(r)}


def run_table(datas: Sequence[ClaimData]) -> dict[str, Any]:
    """run name -> record (see the module docstring) over the finished runs of ``datas``."""
    out: dict[str, Any] = {}
    for d in datas:
        for arm in d.claim.all_arms():
            partner_key = None if arm.is_sync else arm.partner().key
            for r in d.records(arm.key):
                use = f"{d.claim.id}: {arm.key}"
                if r.name in out:
                    out[r.name]["arms"].append(use)
                    continue
                partner = d.record(partner_key, r.seed) if partner_key else None
                out[r.name] = {**_record(r, partner), "arms": [use]}
    return dict(sorted(out.items()))
