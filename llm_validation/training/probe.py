"""The statistics of one training step, and the step itself: one probe for every runtime.

The emulated loop (:mod:`llm_validation.training.loop`) and every pipeline stage
(:mod:`llm_validation.pipeline.runtime`) call :func:`observed_step` with the same arguments;
they differ only in how they obtain the extra gradients, which the caller computes (the loop
and :class:`llm_validation.recorder.StatsRecorder`, a user's own loop, through
:func:`probed_step`, which takes them from a ``gradient_at(weights)`` callable):

- every step: ``grad_partials`` of the step's gradient (``p.grad``, taken at the read point);
- every ``stats_interval`` steps (``active``): the pair (W(t), read point) partials with a
  same-batch gradient at the other point of the pair (tau > 0: the fresh gradient at W(t);
  tau = 0: the gradient at W(t-1) = W(t) - the last applied update, see :meth:`other_point`),
  the EF drift, the dry-run "fresh" base update, the microbatch-gradient variance, the update
  partials after the step and, every ``momentum_error_interval`` steps, the momentum error
  against a large-batch gradient.

Statistics are recorded before ``optimizer.step()`` (and the update partials right after it,
from the step's own record); they are partial sums over this process's parameters, reduced
across pipeline stages as sums before any square root (``stats.reduce_partials``,
``stats.finalize``). Recording never changes the trajectory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from torch import Tensor

from llm_validation.training import stats
from llm_validation.training.delay import DelayedOptimizer
from llm_validation.training.optim import normalized_momentum

if TYPE_CHECKING:
    from theory.geometry import Geometry

__all__ = ["StepProbe", "observed_step", "probed_step"]


class StepProbe:
    """What the statistics of step t need from earlier steps, and when they are due.

    ``tau`` is the run's delay (1 for 2BW: the read point is W(t-1), the extra gradient is the
    fresh one at W(t); 0 for a synchronous run: the extra gradient is at W(t-1)).
    """

    def __init__(self, opt: DelayedOptimizer, geoms: Sequence["Geometry"], *, tau: int,
                 stats_interval: int, momentum_error_interval: int) -> None:
        self.opt, self.geoms, self.tau = opt, list(geoms), tau
        self.stats_interval, self.momentum_error_interval = stats_interval, momentum_error_interval
        self.prev_base: list[Tensor] | None = None     # v_{t-1}
        self.prev_applied: list[Tensor] | None = None  # W(t) - W(t-1)
        self.prev_step = -1                            # the step they belong to

    def active(self, step: int) -> bool:
        k = self.stats_interval
        return k > 0 and step % k == 0

    def record(self, step: int) -> bool:
        """Whether ``opt.step`` must keep its updates (this step's or the next one's statistics)."""
        return self.active(step) or self.active(step + 1)

    def momentum_due(self, step: int) -> bool:
        k = self.momentum_error_interval
        return self.active(step) and k > 0 and step % k == 0

    def have_prev(self, step: int) -> bool:
        return step > 0 and self.prev_step == step - 1

    def other_point(self, step: int) -> list[Tensor] | None:
        """tau = 0: the point W(t-1) whose same-batch gradient the pair statistics need."""
        if not self.have_prev(step):
            return None
        return [p.detach() - d for p, d in zip(self.opt.params, self.prev_applied)]

    def before_step(self, step: int, read_point: Sequence[Tensor],
                    other_grads: list[Tensor] | None, big_grad: list[Tensor] | None
                    ) -> dict[str, Any]:
        """At step t, params = W(t), ``p.grad`` = the step's gradient (taken at ``read_point``).
        ``other_grads``: the same-batch gradient at the other point of the pair (tau > 0: W(t);
        tau = 0: W(t-1), None when there is no previous step)."""
        opt, geoms = self.opt, self.geoms
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
        opt, geoms = self.opt, self.geoms
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


def observed_step(probe: StepProbe, step: int, *, read_point: Sequence[Tensor],
                  other_grads: list[Tensor] | None = None, big_grad: list[Tensor] | None = None,
                  noise: stats.MicrobatchGradVariance | None = None) -> dict[str, float]:
    """Optimizer step t with ``p.grad`` set: statistics before, ``opt.step`` (+ EF), statistics
    after; returns this process's partial sums for the metrics row of step t."""
    opt = probe.opt
    pre = probe.before_step(step, read_point, other_grads, big_grad) if probe.active(step) else None
    part = pre["partials"] if pre else stats.grad_partials([p.grad for p in opt.params])
    opt.step(record=probe.record(step))                                  # W(t+1)
    opt.zero_grad()
    part.update(probe.after_step(step, pre))
    if noise is not None:
        part.update(noise.partials())
    return part


def probed_step(probe: StepProbe, step: int, *, loss: Any,
                gradient_at: Callable[[Sequence[Tensor] | None], tuple[Any, list[Tensor]]],
                big_gradient: Callable[[], list[Tensor]] | None = None,
                noise: stats.MicrobatchGradVariance | None = None
                ) -> tuple[dict[str, float], Any, Any]:
    """Step t of any loop, after the step's backward (``p.grad`` at the read point, ``loss`` its
    batch loss): obtain the extra gradients the statistics need, then :func:`observed_step`.

    ``gradient_at(weights)`` returns ``(loss, grads)`` of the SAME batch at ``weights`` (None:
    the current parameters W(t)), leaving ``p.grad`` as it was; ``big_gradient()`` the
    large-batch gradient at W(t) (called only when the momentum error is due). On an active
    step with tau_t > 0 the pair is (W(t), read point) with the fresh gradient at W(t); with
    tau_t = 0 it is (W(t), W(t-1)). Returns ``(partials, f_x, f_y)``: the partial sums of the
    step's row and the losses at the pair's two points (None off the active steps). The
    emulated loop and :class:`llm_validation.recorder.StatsRecorder` both call this."""
    opt = probe.opt
    active = probe.active(step)
    tau_now = probe.tau = opt.current_tau   # 0 in a synchronous start / cooldown phase
    read_point = opt.read_weights() if active else []
    other = big = f_x = f_y = None
    if active and tau_now > 0:   # the pair (W(t), read point): fresh gradient at W(t)
        f_x, other = gradient_at(None)
        f_y = loss
    elif active:                 # the pair (W(t), W(t-1)): this step's gradient is fresh
        y_pt = probe.other_point(step)
        if y_pt is not None:
            f_y, other = gradient_at(y_pt)
            f_x = loss
    if probe.momentum_due(step) and big_gradient is not None:
        big = big_gradient()
    part = observed_step(probe, step, read_point=read_point, other_grads=other, big_grad=big,
                         noise=noise)                                            # W(t+1)
    return part, f_x, f_y
