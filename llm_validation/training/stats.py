"""Gradient and update statistics as reducible partial sums, then one ``finalize``.

Every ``*_partials`` function takes lists of tensors aligned with a list of parameters (one
stage's, or the whole model's) and returns a dict of float64 scalars ON THE TENSORS' DEVICE
(no host synchronisation; :func:`to_host` reads a whole step's partials with one copy) that
can be reduced across stages BEFORE any square root: keys starting with ``max_`` reduce with MAX, all others with SUM
(:func:`reduce_partials`; a pipeline all-reduces the same way). :func:`finalize` takes the
square roots and ratios and returns the metrics under the fixed key names (:data:`KEYS`); a
statistic whose inputs were not measured at this step is ``None``.

Geometry (the "optimizer's norm" of docs/theory.md A2/A3), per parameter from its optimizer group
(``optim.group_geometry``): Muon matrices -> spectral norm, dual nuclear (a call's
matrices all at once, batched by shape: :func:`theory.matrix_norms.matrix_norms`); AdamW
tensors -> l_inf, dual l1 (Adam without momentum is sign descent); SGD tensors -> one l2
block over all of them. The norm of the whole parameter space is the max over blocks (each
Muon matrix and each AdamW tensor a block, the SGD tensors together one block), so its dual
is the SUM of the blocks' dual norms (nuclear + l1 + l2-of-the-SGD-block) and its primal is
the MAX of the blocks' primal norms (spectral, l_inf, l2).

Statistics (step t; x = W(t), y = the read point W(t - tau), or W(t - 1) when tau = 0; the
gradients g_y and g_x are taken on the same batch):
- ``grad_norm`` ||g_t||_2, ``grad_dual_norm`` ||g_t||_* of the step's (delayed) gradient.
- ``update_norm`` ||W(t+1) - W(t)||_2 (the applied update, EF included).
- ``cos_consecutive_update`` cos(v_t, v_{t-1}) of the base updates (THEORY result 5: lam = 1
  helps in l2 iff it exceeds 1/2).
- ``ef_drift`` omega_t = ||z_t - y_t||_2 / ||v_{t-1}||_2 with z_t = x_t - lam v_{t-1} (the EF
  virtual iterate; lam = 0 without update-level EF): the read mismatch in units of one step
  (about tau without EF, ||d_{t-1} - lam d_{t-2}|| with it).
- ``cos_delayed_fresh``, ``rel_err_delayed_fresh``: the applied update vs the base update a
  fresh gradient g(W(t)) would give from the same optimizer state: cosine and
  ||dx - v_fresh|| / ||v_fresh|| (``cos_base_fresh``: the base update v_t instead of dx).
- ``grad_noise_var``: variance of the step's gradient estimate from its M microbatch gradients,
  sum_i ||g_i - g||^2 / (M (M - 1)) (``grad_noise_var_micro``: of one microbatch, / (M - 1)).
- ``smoothness_est`` ||g_x - g_y||_* / ||x - y|| in the optimizer's norm (``_l2``: Euclidean).
- ``star_convex_slack`` <g_y, y - x> - (f(y) - f(x)): the first-order star-convexity inequality
  at y with the later iterate x as the proxy minimizer (>= 0 when it holds; for a convex
  quadratic it equals (x - y)^T A (x - y) / 2). The true minimizer is unknown during training.
- ``momentum_error`` ||m_t - G||_* with m_t the normalized momentum (``optim.normalized_momentum``)
  and G a large-batch gradient at W(t) (``momentum_error_rel``: / ||G||_*).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import torch
from torch import Tensor

from theory.geometry import L2, SPECTRAL, Geometry
from theory.matrix_norms import matrix_norms

__all__ = [
    "KEYS",
    "grad_partials",
    "pair_partials",
    "drift_partials",
    "update_partials",
    "fresh_partials",
    "momentum_partials",
    "MicrobatchGradVariance",
    "to_host",
    "to_host_rows",
    "reduce_partials",
    "finalize",
]

#: The core metric keys, always present in a metrics row (None when not measured).
KEYS = ("step", "loss", "val_loss", "lr", "grad_norm", "grad_dual_norm", "update_norm",
        "cos_consecutive_update", "ef_drift", "cos_delayed_fresh", "rel_err_delayed_fresh",
        "grad_noise_var", "smoothness_est", "star_convex_slack", "momentum_error")


def _f(x: Tensor) -> Tensor:
    return x.detach().double()


def _sq(x: Tensor) -> Tensor:
    """||x||_2^2 accumulated in float64 (no float64 copy of x is made), on x's device."""
    return torch.linalg.vector_norm(x.detach(), dtype=torch.float64).square()


def _sq_fast(x: Tensor) -> Tensor:
    """||x||_2^2 from a native-precision norm (every step: relative error ~1e-7 is plenty)."""
    return torch.linalg.vector_norm(x.detach()).double().square()


#: Elements per float64 slice of :func:`_dot` (8 MB): the float64 copies stay small and reused
#: instead of two copies of a whole weight matrix per product.
DOT_CHUNK = 1 << 20


def _dot(a: Tensor, b: Tensor) -> Tensor:
    """<a, b> in float64 (exact products of the float32 entries, float64 sums), slice by
    slice of :data:`DOT_CHUNK` elements."""
    acc = torch.zeros((), dtype=torch.float64, device=a.device)
    for ca, cb in zip(a.detach().reshape(-1).split(DOT_CHUNK),
                      b.detach().reshape(-1).split(DOT_CHUNK)):
        acc += torch.dot(ca.double(), cb.double())
    return acc


def _zero(tensors: Sequence[Tensor]) -> Tensor | float:
    """A float64 zero on the tensors' device (0.0 when there are none)."""
    return torch.zeros((), dtype=torch.float64, device=tensors[0].device) if tensors else 0.0


def to_host(part: Mapping[str, Any], **extra: Any) -> dict[str, float]:
    """The partials (device tensors or floats) and ``extra`` scalars (e.g. the loss) as Python
    floats with ONE device-to-host copy: the step's only host synchronisation for them."""
    return to_host_rows([{**part, **extra}])[0]


def to_host_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """Several records (e.g. the buffered steps of a ``log_interval``) of scalars, device
    tensors or floats (``None`` values dropped), as Python floats with ONE device-to-host copy;
    each value read exactly as :func:`to_host` reads it (float64), so the rows are the same
    bits whichever records travel together."""
    items = [{k: v for k, v in r.items() if v is not None} for r in records]
    where = [(i, k) for i, r in enumerate(items) for k, v in r.items() if isinstance(v, Tensor)]
    out = [{k: float(v) for k, v in r.items() if not isinstance(v, Tensor)} for r in items]
    if where:
        values = torch.stack([items[i][k].detach().reshape(()).double() for i, k in where]
                             ).tolist()
        for (i, k), v in zip(where, values):
            out[i][k] = v
    return [{k: o[k] for k in r} for o, r in zip(out, items)]


def _check(name: str, *lists: Sequence[Any]) -> None:
    n = len(lists[0])
    if any(len(x) != n for x in lists):
        raise ValueError(f"{name}: inputs have different lengths {[len(x) for x in lists]}")


def _blocks(prefix: str, tensors: Sequence[Tensor], geoms: Sequence[Geometry],
            spectral_kind: str, per_block: str) -> tuple[list[Tensor], Tensor | float]:
    """The non-l2 blocks' norms (``per_block``: ``"dual_norm"`` or ``"norm"`` of their
    geometry; the spectral geometry's matrices all at once, batched by shape,
    :func:`theory.matrix_norms.matrix_norms` of ``spectral_kind``) and the l2 block's sum of
    squares."""
    l2sq, vals, mats = _zero(tensors), [], []
    for t, g in zip(tensors, geoms):
        if g is L2:
            l2sq += _sq(t)
        elif g.event_ndim == 2 and t.ndim != 2:
            raise ValueError(f"{prefix}: geometry {g.name} needs a matrix, got {tuple(t.shape)}")
        elif g is SPECTRAL:
            mats.append(t.detach())
        else:
            flat = t.detach().reshape(-1) if g.event_ndim == 1 else t.detach()
            vals.append(_f(getattr(g, per_block)(flat.double())))
    if mats:
        vals.extend(matrix_norms(mats, spectral_kind).unbind())
    return vals, l2sq


def _dual(prefix: str, tensors: Sequence[Tensor], geoms: Sequence[Geometry]) -> dict[str, float]:
    """Partials of the product dual norm: additive part and the l2 block's sum of squares."""
    vals, l2sq = _blocks(prefix, tensors, geoms, "nuclear", "dual_norm")
    add = torch.stack(vals).sum() if vals else _zero(tensors)
    return {f"{prefix}_dual_add": add, f"{prefix}_dual_l2sq": l2sq}


def _primal(prefix: str, tensors: Sequence[Tensor], geoms: Sequence[Geometry]) -> dict[str, float]:
    """Partials of the product primal norm: max over blocks, and the l2 block's squares."""
    vals, l2sq = _blocks(prefix, tensors, geoms, "spectral", "norm")
    mx = torch.stack(vals).amax().clamp_min(0.0) if vals else _zero(tensors)
    return {f"max_{prefix}_primal": mx, f"{prefix}_primal_l2sq": l2sq}


def grad_partials(grads: Sequence[Tensor], geoms: Sequence[Geometry] | None = None
                  ) -> dict[str, float]:
    """||g||_2^2 always (cheap: it is logged every step); the dual-norm partials when ``geoms``
    is given."""
    out = {"grad_sq": sum(_sq_fast(g) for g in grads)}
    if geoms is not None:
        _check("grad_partials", grads, geoms)
        out.update(_dual("grad", grads, geoms))
    return out


def pair_partials(x: Sequence[Tensor], y: Sequence[Tensor], g_x: Sequence[Tensor],
                  g_y: Sequence[Tensor], geoms: Sequence[Geometry]) -> dict[str, float]:
    """Smoothness and star-convexity partials for points x, y with same-batch gradients."""
    _check("pair_partials", x, y, g_x, g_y, geoms)
    dg = [a.detach() - b.detach() for a, b in zip(g_x, g_y)]
    dx = [a.detach() - b.detach() for a, b in zip(x, y)]
    out = {"dg_sq": sum(_sq(d) for d in dg), "dx_sq": sum(_sq(d) for d in dx),
           "gy_dot_y_minus_x": -sum(_dot(g, d) for g, d in zip(g_y, dx))}
    out.update(_dual("dg", dg, geoms))
    out.update(_primal("dx", dx, geoms))
    return out


def drift_partials(x: Sequence[Tensor], y: Sequence[Tensor], v_prev: Sequence[Tensor],
                   lam: float) -> dict[str, float]:
    """||x - lam v_prev - y||^2 and ||v_prev||^2 (EF drift, see the module docstring)."""
    _check("drift_partials", x, y, v_prev)
    return {"drift_sq": sum(_sq(a.detach() - lam * v.detach() - b.detach())
                            for a, b, v in zip(x, y, v_prev)),
            "vprev_sq": sum(_sq(v) for v in v_prev)}


def update_partials(dx: Sequence[Tensor], geoms: Sequence[Geometry],
                    v: Sequence[Tensor] | None = None,
                    v_prev: Sequence[Tensor] | None = None) -> dict[str, float]:
    """Applied update dx: ||dx||_2^2 and its primal norm; with the base updates v_t and v_{t-1}
    the consecutive-update cosine partials."""
    _check("update_partials", dx, geoms)
    out = {"update_sq": sum(_sq(d) for d in dx)}
    out.update(_primal("update", dx, geoms))
    if v is not None and v_prev is not None:
        _check("update_partials", dx, v, v_prev)
        out.update({"v_dot_vprev": sum(_dot(a, b) for a, b in zip(v, v_prev)),
                    "v_sq": sum(_sq(a) for a in v), "vprev_sq_c": sum(_sq(b) for b in v_prev)})
    return out


def fresh_partials(dx: Sequence[Tensor], v: Sequence[Tensor], v_fresh: Sequence[Tensor]
                   ) -> dict[str, float]:
    """Applied update dx and base update v against the fresh-gradient base update."""
    _check("fresh_partials", dx, v, v_fresh)
    return {"dx_dot_fresh": sum(_dot(a, b) for a, b in zip(dx, v_fresh)),
            "v_dot_fresh": sum(_dot(a, b) for a, b in zip(v, v_fresh)),
            "dx_sq_f": sum(_sq(a) for a in dx), "v_sq_f": sum(_sq(a) for a in v),
            "fresh_sq": sum(_sq(b) for b in v_fresh),
            "dx_minus_fresh_sq": sum(_sq(a.detach() - b.detach()) for a, b in zip(dx, v_fresh))}


def momentum_partials(m: Sequence[Tensor], big_grad: Sequence[Tensor],
                      geoms: Sequence[Geometry]) -> dict[str, float]:
    """Dual-norm partials of m - G and of G (G: large-batch gradient at the current point)."""
    _check("momentum_partials", m, big_grad, geoms)
    diff = [a.detach() - b.detach() for a, b in zip(m, big_grad)]
    out = _dual("merr", diff, geoms)
    out.update(_dual("bigg", big_grad, geoms))
    out["merr_sq"] = sum(_sq(d) for d in diff)
    return out


class MicrobatchGradVariance:
    """Welford accumulation of the microbatch gradients of one step, read from ``p.grad``
    after each microbatch's backward (``p.grad`` accumulates ``g_i / M``)."""

    def __init__(self, params: Sequence[Tensor], microbatches: int) -> None:
        self.params, self.m = list(params), microbatches
        self.prev = [torch.zeros_like(p) for p in self.params]   # p.grad before microbatch i
        self.mean = [torch.zeros_like(p) for p in self.params]   # running mean of g_i
        self.count, self.ss = 0, 0.0

    @torch.no_grad()
    def observe(self) -> None:
        """Call after each microbatch's backward."""
        self.count += 1
        for p, prev, mean in zip(self.params, self.prev, self.mean):
            acc = torch.zeros_like(p) if p.grad is None else p.grad
            g = (acc - prev) * self.m                             # g_i (one microbatch's mean)
            prev.copy_(acc)
            delta = g - mean
            mean.add_(delta / self.count)
            self.ss += _dot(delta, g - mean)

    def partials(self) -> dict[str, float]:
        return {"noise_ss": self.ss}


def reduce_partials(parts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Combine per-stage partials: MAX for ``max_*`` keys, SUM otherwise."""
    out: dict[str, float] = {}
    for part in parts:
        for k, v in part.items():
            if k not in out:
                out[k] = float(v)
            else:
                out[k] = max(out[k], float(v)) if k.startswith("max_") else out[k] + float(v)
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0.0 or not math.isfinite(b):
        return None
    return a / b


def finalize(p: Mapping[str, float], *, step: int, loss: float | None = None,
             lr: float | None = None, val_loss: float | None = None,
             f_x: float | None = None, f_y: float | None = None,
             microbatches: int | None = None) -> dict[str, Any]:
    """Metrics row from reduced partials ``p`` and the scalars every stage agrees on."""
    def has(*keys: str) -> bool:
        return all(k in p for k in keys)

    def dual(prefix: str) -> float | None:
        if not has(f"{prefix}_dual_add"):
            return None
        return p[f"{prefix}_dual_add"] + math.sqrt(p[f"{prefix}_dual_l2sq"])

    def primal(prefix: str) -> float | None:
        if not has(f"max_{prefix}_primal"):
            return None
        return max(p[f"max_{prefix}_primal"], math.sqrt(p[f"{prefix}_primal_l2sq"]))

    def sqrt(key: str) -> float | None:
        return math.sqrt(p[key]) if key in p else None

    def cos(dot: str, a: str, b: str) -> float | None:
        if not has(dot, a, b) or p[a] == 0.0 or p[b] == 0.0:
            return None
        return p[dot] / math.sqrt(p[a] * p[b])

    out: dict[str, Any] = {k: None for k in KEYS}
    out.update(step=step, kind="train", loss=loss, val_loss=val_loss, lr=lr)
    out["grad_norm"] = sqrt("grad_sq")
    out["grad_dual_norm"] = dual("grad")
    out["update_norm"] = sqrt("update_sq")
    out["update_primal_norm"] = primal("update")
    out["cos_consecutive_update"] = cos("v_dot_vprev", "v_sq", "vprev_sq_c")
    if has("drift_sq", "vprev_sq"):
        out["ef_drift"] = _ratio(math.sqrt(p["drift_sq"]), math.sqrt(p["vprev_sq"]))
    out["cos_delayed_fresh"] = cos("dx_dot_fresh", "dx_sq_f", "fresh_sq")
    out["cos_base_fresh"] = cos("v_dot_fresh", "v_sq_f", "fresh_sq")
    if has("dx_minus_fresh_sq", "fresh_sq"):
        out["rel_err_delayed_fresh"] = _ratio(math.sqrt(p["dx_minus_fresh_sq"]),
                                              math.sqrt(p["fresh_sq"]))
    if "noise_ss" in p and microbatches is not None and microbatches >= 2:
        out["grad_noise_var_micro"] = p["noise_ss"] / (microbatches - 1)
        out["grad_noise_var"] = out["grad_noise_var_micro"] / microbatches
    if has("dg_sq", "dx_sq"):
        out["smoothness_est"] = _ratio(dual("dg"), primal("dx"))
        out["smoothness_est_l2"] = _ratio(math.sqrt(p["dg_sq"]), math.sqrt(p["dx_sq"]))
        if f_x is not None and f_y is not None:
            out["star_convex_slack"] = p["gy_dot_y_minus_x"] - (f_y - f_x)
    if has("merr_dual_add"):
        out["momentum_error"] = dual("merr")
        out["momentum_error_rel"] = _ratio(dual("merr"), dual("bigg"))
        out["momentum_error_l2"] = sqrt("merr_sq")
    return out
