"""How a run is named from its config: the one home of run-folder names.

Two names, one built on the other:

- :func:`point_name`: readable and deterministic, carrying every value a sweep varies, e.g.
  ``muon-2bw+ef-lr0.02-mom0.95-bs16-tau1-lam1-s0``. It names the points of a sweep grid
  (``delaybound sweep``), whose runs share one base config, so the varied values tell them apart.
  A config that uses none of the newer fields keeps its old name: the parts of the optimizer axes
  appear only when that axis is swept (``beta2_0.99``, ``wd0``, ``warm20``, ``wsd``, ``clip1``),
  the newer fields' parts whenever they differ from their defaults (``clip1``, ``wsdf0.1``,
  ``sync20``, ``cool20``, ``dcasgd0.5``, ``nesterov0.9``, ``pp2`` for a real pipeline,
  ``compiled`` for ``run.compile``).
- :func:`run_name`: ``<point name>-<8 hex digits of the config>`` (:func:`config_digest`), unique
  per config, so two configs never share a folder and the same config always finds its folder
  again. It names the ledger's runs (``delaybound reproduce``), the delay-law design's runs, and
  the default folder of ``delaybound train`` (``runs/<run name>``, :func:`default_out_dir`).

The digest hashes the whole config except ``run.out_dir`` / ``run.resume``, with the fields of
:data:`~llm_validation.config.DIGEST_NEUTRAL` (checkpoint and log intervals) at fixed values,
and leaves out each field of :data:`~llm_validation.config.DIGEST_LEGACY` while it holds the
value the older runs had: runs named before a field existed keep their names.
"""

from __future__ import annotations

import hashlib
import json

from llm_validation.config import DIGEST_LEGACY, OptimConfig, TrainConfig, neutral_dict

__all__ = ["MOMENTUM_FIELD", "point_name", "config_digest", "run_name", "default_out_dir"]

#: The OptimConfig field that holds each optimizer's momentum (docs/theory.md's 1 - alpha): the
#: EMA momentum of Muon, NorMuon and SGD; the first-moment beta of the Adam family; Lion's
#: interpolation beta (the coefficient of the direction its sign acts on). A name's ``mom`` part
#: reads it, and a sweep's ``momenta`` axis sets it.
MOMENTUM_FIELD = {"adamw": "beta1", "muon": "momentum", "sgd": "momentum", "normuon": "momentum",
                  "soap": "beta1", "lion": "beta1", "adan": "beta1", "nadamw": "beta1"}

#: The OptimConfig defaults (for the name parts of the newer fields).
_OPTIM_DEFAULTS = OptimConfig()
#: Hex digits of the config digest in a run name.
_DIGEST_CHARS = 8


def _mode(cfg: TrainConfig) -> str:
    d = cfg.delay
    if d.tau == 0 and d.ef_lambda == 0:
        return "sync"
    return "2bw" if d.ef_lambda == 0 else "2bw+ef"


def point_name(cfg: TrainConfig, swept: frozenset[str] | set[str] = frozenset()) -> str:
    """Deterministic run name carrying every swept value of ``cfg``: the optimizer fields in
    ``swept`` (``OptimConfig`` field names, see
    :meth:`~llm_validation.sweep.grid.SweepGrid.swept`) and every newer field that differs from
    its default (the module docstring lists the parts)."""
    o, d, r = cfg.optim, cfg.delay, cfg.run
    mom = getattr(o, MOMENTUM_FIELD.get(o.name, "momentum"))
    mode = _mode(cfg)
    parts = [o.name, mode, f"lr{o.lr:g}", f"mom{mom:g}", f"bs{r.batch_size}"]
    if "beta2" in swept:
        parts.append(f"beta2_{o.beta2:g}")
    if "weight_decay" in swept:
        parts.append(f"wd{o.weight_decay:g}")
    if "warmup_steps" in swept:
        parts.append(f"warm{o.warmup_steps}")
    if "schedule" in swept:
        parts.append(o.schedule)
    if "grad_clip" in swept or o.grad_clip != 0.0:
        parts.append(f"clip{o.grad_clip:g}")
    if o.wsd_decay_fraction != _OPTIM_DEFAULTS.wsd_decay_fraction:
        parts.append(f"wsdf{o.wsd_decay_fraction:g}")
    if mode != "sync":
        parts.append(f"tau{d.tau}")
    if mode == "2bw+ef":
        parts.append(f"lam{d.ef_lambda:g}")
    if d.correction != "none":
        parts.append(f"{d.correction}{d.correction_coef:g}")
    if d.sync_start:
        parts.append(f"sync{d.sync_start}")
    if d.sync_cooldown:
        parts.append(f"cool{d.sync_cooldown}")
    parts.extend(([f"pp{r.stages}"] if r.pipeline != "none" else [])
                 + (["compiled"] if r.compile else []))
    parts.append(f"s{r.seed}")
    return "-".join(parts)


def config_digest(cfg: TrainConfig) -> str:
    """The first 8 hex digits of the SHA-1 of the part of ``cfg`` that names a run (the module
    docstring says which part)."""
    d = neutral_dict(cfg.to_dict())
    for key, legacy in DIGEST_LEGACY.items():
        section, name = key.split(".")
        if d[section].get(name) == legacy:
            del d[section][name]
    return hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:_DIGEST_CHARS]


def run_name(cfg: TrainConfig) -> str:
    """``<point name>-<digest>``: readable, and unique per config."""
    return f"{point_name(cfg)}-{config_digest(cfg)}"


def default_out_dir(cfg: TrainConfig) -> str:
    """``runs/<run name>``: the folder ``delaybound train`` writes to when no ``--out`` is given
    (the same settings find the same folder again; other settings never share it)."""
    return f"runs/{run_name(cfg)}"
