"""Checkpoints keyed by global parameter names: continue a run on another P x D grid.

A stage's state (master weights, the 2BW version W(t-1), base optimizer state, EF buffers,
the statistics' previous updates) is a list aligned with the stage's parameters. It is saved
under the FULL MODEL's parameter names (``blocks.<lo + i>...``, :func:`stage.stage_param_names`),
so any rank of any grid finds its parameters in the checkpoint whatever stage held them::

    global form  {"params": {name: {"master", "previous", "state", "group", "tau", "history",
                                    "ef", "gef", "prev_base", "prev_applied"}},
                  "scalars": {"t", "ef_lambda", "ef_level", "correction", "correction_coef",
                              "ef_lam", "gef_lam", "gef_started", "prev_step"}}

(``state``: the base optimizer's per-parameter state; ``group``: its parameter group's
settings and group-level state.) :func:`globalize` turns one stage's state into this form,
:func:`merge` joins the forms of every saved stage, :func:`localize` builds the state dicts
of the parameters ``names`` in the layout of a ``DelayedOptimizer`` and a ``StepProbe``, which
load them with their own checks.

When the maths is the same: the global microbatch split (``data_parallel x microbatches``
chunks of every batch) and the delay are kept, so P2 x D2 with M = 2 continues as P2 x D1 with
M = 4, or as the emulator with M = 4 and tau = 1, bitwise on CPU (``ordered`` reduction; the
``allreduce`` mode adds per replica, so its sums differ in the last bits on another D).
2BW's version W(t-1) is per stage in the pipeline and is the emulator's one-slot delay ring
(``history``), so 2BW <-> emulated tau = 1 holds; a run cannot change between 2BW and a
synchronous schedule (other maths). Each rank reads only its own parameters' tensors.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from torch import Tensor

__all__ = ["globalize", "merge", "localize", "tensor_wanted"]

_SCALARS = ("t", "ef_lambda", "ef_level", "correction", "correction_coef")


def _parts(base_sd: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A base optimizer's state dict as a list of torch optimizer state dicts (a
    ``ChainedOptimizer`` holds one per inner optimizer, each indexing its parameters from 0;
    together they cover the parameters in order)."""
    return list(base_sd["optimizers"]) if "optimizers" in base_sd else [base_sd]


def _groups_by_param(base_sd: Mapping[str, Any]) -> list[tuple[int, int, Mapping[str, Any]]]:
    """``(part, global index, group)`` for every parameter, in the optimizer's order."""
    out, offset = [], 0
    for k, part in enumerate(_parts(base_sd)):
        n = 0
        for g in part["param_groups"]:
            for j in g["params"]:
                out.append((k, offset + j, g))
                n += 1
        offset += n
    return sorted(out, key=lambda x: x[1])


def _offsets(base_sd: Mapping[str, Any]) -> list[int]:
    """Index of the first parameter of each part (:func:`_parts`)."""
    out, total = [], 0
    for part in _parts(base_sd):
        out.append(total)
        total += sum(len(g["params"]) for g in part["param_groups"])
    return out


def globalize(names: Sequence[str], master: Sequence[Tensor],
              previous: Sequence[Tensor] | None, opt_sd: Mapping[str, Any],
              probe_sd: Mapping[str, Any]) -> dict[str, Any]:
    """The global form of one stage's state; ``names[i]``: the full model's name of the i-th
    optimizer parameter, ``master[i]`` / ``previous[i]`` its tensors (``previous``: the 2BW
    version W(t-1), None for the synchronous schedules), ``opt_sd`` / ``probe_sd`` the state
    dicts of ``DelayedOptimizer`` and ``StepProbe``."""
    if opt_sd.get("lookahead") is not None or opt_sd.get("correction", "none") != "none":
        raise ValueError("resharding does not cover delay corrections (not on pipelines)")
    base = opt_sd["optimizer"]
    parts = _parts(base)
    where = _groups_by_param(base)
    ef, gef = opt_sd.get("ef"), opt_sd.get("gef")
    params = {}
    offsets = _offsets(base)
    for i, n in enumerate(names):
        k, _, group = where[i]
        params[n] = {
            "master": master[i], "previous": None if previous is None else previous[i],
            "state": dict(parts[k]["state"].get(i - offsets[k], {})),
            "group": {key: v for key, v in group.items() if key != "params"},
            "tau": opt_sd["taus"][i], "history": list(opt_sd["history"][i]),
            "ef": None if ef is None else ef["v_prev"][i],
            "gef": None if gef is None else gef["g_prev"][i],
            "prev_base": None if probe_sd["prev_base"] is None else probe_sd["prev_base"][i],
            "prev_applied": (None if probe_sd["prev_applied"] is None
                             else probe_sd["prev_applied"][i])}
    scalars = {k: opt_sd.get(k) for k in _SCALARS}
    scalars.update(ef_lam=None if ef is None else ef["lam"],
                   gef_lam=None if gef is None else gef["lam"],
                   gef_started=None if gef is None else gef["started"],
                   prev_step=probe_sd["prev_step"])
    return {"params": params, "scalars": scalars}


def merge(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One global form from the forms of several stages (their scalars must agree)."""
    params: dict[str, Any] = {}
    scalars = None
    for part in parts:
        if scalars is not None and part["scalars"] != scalars:
            raise ValueError(f"the stages' checkpoints disagree: {part['scalars']} != {scalars}")
        scalars = dict(part["scalars"])
        params.update(part["params"])
    return {"params": params, "scalars": scalars or {}}


def tensor_wanted(key: str, names: set[str]) -> bool:
    """Whether a flattened checkpoint key (``g/params/<name>/...``) belongs to ``names``."""
    parts = key.split("/")
    return len(parts) < 3 or parts[1] != "params" or parts[2] in names


def localize(state: Mapping[str, Any], names: Sequence[str], opt_template: Mapping[str, Any],
             taus: Sequence[int]) -> tuple[list[Tensor], list[Tensor] | None, dict, dict]:
    """``(master, previous, opt_sd, probe_sd)`` for the parameters ``names`` (in that order)
    of an optimizer whose current state dict is ``opt_template`` and whose delays are
    ``taus``: a one-step delay ring (the emulator, tau = 1) is filled with the 2BW version."""
    params, sc = state["params"], state["scalars"]
    missing = [n for n in names if n not in params]
    if missing:
        raise ValueError(f"the checkpoint holds no state for {missing[:3]} ({len(missing)} "
                         "parameters): it was saved by another model")
    rows = [params[n] for n in names]
    base = opt_template["optimizer"]
    offsets, built = _offsets(base), []
    for k, part in enumerate(_parts(base)):
        groups = []
        for g in part["param_groups"]:
            saved = rows[offsets[k] + g["params"][0]]["group"]
            groups.append({**g, **{key: v for key, v in saved.items() if key in g}})
        idx = [j for g in part["param_groups"] for j in g["params"]]
        built.append({"state": {j: rows[offsets[k] + j]["state"] for j in idx
                                if rows[offsets[k] + j]["state"]}, "param_groups": groups})
    base_sd = {"optimizers": built} if "optimizers" in base else built[0]
    history = []
    for r, tau in zip(rows, taus):
        if len(r["history"]) == tau:
            history.append(list(r["history"]))
        elif tau == 1 and r["previous"] is not None:     # 2BW's W(t-1) -> the delay ring
            history.append([r["previous"]])
        else:
            raise ValueError(f"cannot continue a tau = {r['tau']} state with tau = {tau}")
    opt_sd = {**{k: sc[k] for k in _SCALARS}, "taus": list(taus), "history": history,
              "optimizer": base_sd,
              "ef": None if sc["ef_lam"] is None else {"lam": sc["ef_lam"],
                                                       "v_prev": [r["ef"] for r in rows]},
              "gef": None if sc["gef_lam"] is None else {
                  "lam": sc["gef_lam"], "started": sc["gef_started"],
                  "g_prev": [r["gef"] for r in rows]},
              "lookahead": None}
    probe_sd = {"prev_base": None if rows[0]["prev_base"] is None else
                [r["prev_base"] for r in rows],
                "prev_applied": None if rows[0]["prev_applied"] is None else
                [r["prev_applied"] for r in rows],
                "prev_step": sc["prev_step"]}
    previous = None if rows[0]["previous"] is None else [r["previous"] for r in rows]
    return [r["master"] for r in rows], previous, opt_sd, probe_sd
