"""Statistics of a pipeline run: per-stage partial sums, reduced on stage 0 into metrics rows.

Each stage computes the partial sums of :mod:`llm_validation.training.stats` over its own parameters,
with the same inputs as the emulated run's probe (``train._Probe``) restricted to that stage:
- every step: ``grad_partials`` of the step's gradient;
- every ``stats_interval`` steps (``active``): the dual-norm partials, the pair (W(t), read
  point) partials with a same-batch gradient at the other point (a side pass through the whole
  pipeline), the EF drift, the dry-run "fresh" base update, the microbatch-gradient variance,
  the update partials after the step and, every ``momentum_error_interval`` steps, the
  momentum error against a large-batch gradient (another side pass).
Stages send ``{"step", "partials", ...}`` to stage 0 on the control group; the last stage adds
the training loss, the validation loss and ``f_x``/``f_y``. Stage 0 reduces the partials
(``stats.reduce_partials``: sums, or max for ``max_*``) BEFORE any square root and writes the
row with ``stats.finalize``, exactly the row the emulated run writes (same keys; values equal
up to the order of floating-point summation across parameters).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor

from llm_validation.pipeline.comm import StageLink, decode_message
from llm_validation.pipeline.stage import StageSetup
from llm_validation.rundir import MetricsWriter
from llm_validation.training import stats
from llm_validation.training.optim import normalized_momentum

__all__ = ["StageProbe", "MetricsCollector", "batch_loss"]


def batch_loss(losses: Sequence[Tensor]) -> float:
    """Mean of microbatch losses, as ``train.forward_backward`` computes it."""
    return float(torch.stack([x.detach() for x in losses]).double().mean())


class StageProbe:
    """One stage's statistics (see the module docstring). ``tau`` is the run's delay: 1 for
    2BW (the read point is W(t-1), the extra gradient is the fresh one at W(t)), 0 for the
    synchronous pipelines (the extra gradient is at W(t-1) = W(t) - last applied update)."""

    def __init__(self, setup: StageSetup, tau: int) -> None:
        self.setup, self.tau = setup, tau
        self.prev_base: list[Tensor] | None = None
        self.prev_applied: list[Tensor] | None = None
        self.prev_step = -1

    def active(self, step: int) -> bool:
        k = self.setup.cfg.run.stats_interval
        return k > 0 and step % k == 0

    def record(self, step: int) -> bool:
        return self.active(step) or self.active(step + 1)

    def momentum_due(self, step: int) -> bool:
        k = self.setup.cfg.run.momentum_error_interval
        return self.active(step) and k > 0 and step % k == 0

    def have_prev(self, step: int) -> bool:
        return step > 0 and self.prev_step == step - 1

    def other_point(self, step: int) -> list[Tensor] | None:
        """tau = 0: the point W(t-1) whose same-batch gradient the pair statistics need."""
        if not self.have_prev(step):
            return None
        return [p.detach() - d for p, d in zip(self.setup.opt.params, self.prev_applied)]

    def before_step(self, step: int, read_point: Sequence[Tensor], other_grads: list[Tensor] | None,
                    big_grad: list[Tensor] | None) -> dict[str, Any]:
        """At step t, master = W(t), ``p.grad`` = the step's gradient (taken at ``read_point``).
        ``other_grads``: the same-batch gradient at the other point of the pair (tau = 1: W(t);
        tau = 0: W(t-1), None when there is no previous step)."""
        opt, geoms = self.setup.opt, self.setup.geoms
        g_read = [p.grad for p in opt.params]
        part = stats.grad_partials(g_read, geoms)
        x_now = [p.detach() for p in opt.params]
        if self.tau > 0:
            y_pt, g_fresh, g_y = list(read_point), other_grads, g_read
        else:
            y_pt, g_fresh, g_y = self.other_point(step), g_read, other_grads
        if y_pt is not None:
            part.update(stats.pair_partials(x_now, y_pt, g_fresh, g_y, geoms))
        lam = opt.ef_lambda if opt.ef is not None else 0.0
        v_prev = opt.ef.v_prev if opt.ef is not None and opt.t > 0 else \
            (self.prev_base if self.have_prev(step) else None)
        if v_prev is not None:
            part.update(stats.drift_partials(x_now, read_point, v_prev, lam))
        out: dict[str, Any] = {"partials": part,
                               "v_prev": [v.clone() for v in v_prev] if v_prev is not None else None,
                               "v_fresh": opt.dry_run_base_update(g_fresh)}
        if big_grad is not None:
            out["big_grad"] = big_grad
        return out

    def after_step(self, step: int, pre: dict[str, Any] | None) -> dict[str, float]:
        """Call after every ``opt.step(record=self.record(step))``: the partials that need the
        applied update (active steps, ``pre`` from :meth:`before_step`; else none), and the
        bookkeeping of v_t and dx_t for step t + 1."""
        opt, geoms = self.setup.opt, self.setup.geoms
        part: dict[str, float] = {}
        if pre is not None:
            dx, v = opt.last_update, opt.last_base_update
            part.update(stats.update_partials(dx, geoms, v, pre["v_prev"]))
            part.update(stats.fresh_partials(dx, v, pre["v_fresh"]))
            if "big_grad" in pre:
                mom = normalized_momentum(opt.optimizer, opt.t)
                if len(mom) == len(opt.params):
                    m = [mom[id(p)] for p in opt.params]
                    part.update(stats.momentum_partials(m, pre["big_grad"], geoms))
        if self.record(step):
            self.prev_base, self.prev_applied, self.prev_step = \
                opt.last_base_update, opt.last_update, step
        return part

    def state_dict(self) -> dict[str, Any]:
        return {"prev_base": self.prev_base, "prev_applied": self.prev_applied,
                "prev_step": self.prev_step}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.prev_base, self.prev_applied = sd["prev_base"], sd["prev_applied"]
        self.prev_step = int(sd["prev_step"])


class MetricsCollector:
    """Stage 0: gathers every stage's message of a step and writes the metrics row."""

    def __init__(self, setup: StageSetup, link: StageLink, writer: MetricsWriter) -> None:
        self.setup, self.link, self.writer = setup, link, writer
        self.own: dict[int, dict[str, Any]] = {}
        self.next_row: int | None = None
        self.rows_written = 0
        self.last_row: dict[str, Any] | None = None

    def _gather(self, own: dict[str, Any], step: int | str) -> list[dict[str, Any]]:
        msgs = [own]
        for src in range(1, self.setup.stages):
            m = decode_message(self.link.wait(
                self.link.post_recv_message(src, f"the statistics of step {step} from stage {src}")))
            if m.get("step") != step:
                raise RuntimeError(f"stage 0 expected the message of step {step} from stage {src}, "
                                   f"got step {m.get('step')}")
            msgs.append(m)
        return msgs

    def add(self, step: int, own: dict[str, Any]) -> None:
        """Stage 0's own message of ``step`` (rows are written by :meth:`write_through`)."""
        self.own[step] = own
        if self.next_row is None:
            self.next_row = step

    def write_through(self, step: int, lr_of: Any) -> None:
        """Write every pending row up to and including ``step`` (waits for their messages)."""
        cfg = self.setup.cfg
        while self.next_row is not None and self.next_row <= step and self.next_row in self.own:
            t = self.next_row
            msgs = self._gather(self.own.pop(t), t)
            last = msgs[-1]
            lr = lr_of(t)
            if last.get("diverged"):
                row = {**stats.finalize({}, step=t, loss=last["loss"], val_loss=last.get("val_loss"),
                                        lr=lr), "diverged": True}
            else:
                part = stats.reduce_partials(m["partials"] for m in msgs)
                row = stats.finalize(part, step=t, loss=last["loss"], lr=lr,
                                     val_loss=last.get("val_loss"),
                                     microbatches=cfg.run.microbatches,
                                     f_x=last.get("f_x"), f_y=last.get("f_y"))
                row["tokens"] = (t + 1) * cfg.tokens_per_step
            self.writer.write(row)
            self.last_row = row
            steps = cfg.run.steps
            if t % max(1, steps // 20) == 0 or t == steps - 1:
                vl = f" val {row['val_loss']:.4f}" if row.get("val_loss") is not None else ""
                print(f"[train] step {t + 1}/{steps} loss {row['loss']:.4f}{vl} lr {lr:.3g}",
                      flush=True)
            self.rows_written += 1
            self.next_row = t + 1

    def final(self, done: int) -> float | None:
        """The closing row ``{step: N, val_loss}`` from the last stage's final message."""
        msgs = self._gather({"step": "final"}, "final")
        val = msgs[-1].get("val_loss")
        self.writer.write(stats.finalize({}, step=done, val_loss=val))
        return val
