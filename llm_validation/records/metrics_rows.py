"""The rows of ``metrics.jsonl``: their two shapes and their strict-JSON encoding.

Shapes (told apart by ``kind``):

- ``"train"``: one row per optimizer step with every key of :data:`TRAIN_KEYS` (``None`` where
  a statistic was not measured that step), plus ``"diverged": true`` on the one row of a step
  whose training loss was non-finite (the run's last);
- ``"eval"``: the closing row with every key of :data:`EVAL_KEYS` (the loss at the final
  weights).

:func:`complete_row` fills a row's missing keys of its shape with ``None``; the writer calls it
on every row, so ``row[key]`` never raises for a key of the row's shape.

Non-finite numbers. ``None`` means "not measured"; a measured NaN or infinity (a diverging run's
``grad_norm`` or ``loss``) is written as one of the strings of :data:`NONFINITE_STRINGS` --
``"NaN"``, ``"Infinity"``, ``"-Infinity"``, the spellings of JavaScript and of Python's
``float()`` -- so that a strict JSON reader accepts the file and still tells "not measured"
(``null``) from "measured, not finite" (a string). :func:`decode_value` maps them back to
floats; :func:`llm_validation.rundir.read_metrics` applies it to every value it reads, and it is
the only reader of metrics files in this project. (Other JSON files of a run directory --
``summary.json``, ``index.json`` -- keep ``null`` for non-finite numbers.)
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

__all__ = ["TRAIN_KEYS", "EVAL_KEYS", "NONFINITE_STRINGS", "complete_row", "encode_value",
           "decode_value", "encode_row", "decode_row"]

#: Every key of a ``"train"`` row: the step, its loss and lr, the tokens so far, the validation
#: loss at evaluation steps, and every statistic ``training.stats.finalize`` can record.
TRAIN_KEYS = (
    "step", "kind", "loss", "val_loss", "lr", "tokens",
    "grad_norm", "grad_dual_norm", "update_norm", "update_primal_norm",
    "cos_consecutive_update", "ef_drift", "cos_delayed_fresh", "cos_base_fresh",
    "rel_err_delayed_fresh", "grad_noise_var", "grad_noise_var_micro",
    "smoothness_est", "smoothness_est_l2", "star_convex_slack",
    "momentum_error", "momentum_error_rel", "momentum_error_l2",
)
#: Every key of the closing ``"eval"`` row.
EVAL_KEYS = ("step", "val_loss", "kind")
_SHAPES = {"train": TRAIN_KEYS, "eval": EVAL_KEYS}

#: How a non-finite float is written, and read back.
NONFINITE_STRINGS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def complete_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with every missing key of its shape (``row["kind"]``, default ``"train"``)
    set to ``None``; keys outside the shape are kept. An unknown kind is a ``ValueError``."""
    kind = row.get("kind", "train")
    if kind not in _SHAPES:
        raise ValueError(f"metrics row of unknown kind {kind!r} (expected one of {list(_SHAPES)})")
    out = {k: None for k in _SHAPES[kind]}
    out.update(row)
    out["kind"] = kind
    return out


def encode_value(x: Any) -> Any:
    """``x`` with every non-finite float replaced by its string (recursively)."""
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    if isinstance(x, dict):
        return {str(k): encode_value(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [encode_value(v) for v in x]
    return x


def decode_value(x: Any) -> Any:
    """The inverse of :func:`encode_value`: the strings of :data:`NONFINITE_STRINGS` become
    floats again (recursively); every other value is returned as it is."""
    if isinstance(x, str):
        return NONFINITE_STRINGS.get(x, x)
    if isinstance(x, dict):
        return {k: decode_value(v) for k, v in x.items()}
    if isinstance(x, list):
        return [decode_value(v) for v in x]
    return x


def encode_row(row: Mapping[str, Any]) -> str:
    """One line of metrics.jsonl (no newline): the completed row in strict JSON."""
    return json.dumps(encode_value(complete_row(row)), allow_nan=False)


def decode_row(line: str) -> dict[str, Any]:
    """A row from one line (``json.JSONDecodeError`` on a damaged line); non-finite strings are
    floats again. Rows of files written before the shapes were completed get their keys too."""
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise json.JSONDecodeError("a metrics row must be a JSON object", line, 0)
    return complete_row(decode_value(obj))
