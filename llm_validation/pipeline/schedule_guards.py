"""What a schedule that owns the optimizer step refuses from the training loop, and its name.

``Schedule2BW`` takes the optimizer and learning-rate steps inside ``step()`` (the stages reach
step t in different calls), so a loop written for torch's schedules must drop its own
``optimizer.step()``, ``lr_scheduler.step()`` and ``clip_grad_norm_``. Left in, they would be
wrong silently: the optimizer step finds no gradient (a no-op), the scheduler shifts the
learning rate of steps the schedule has not taken yet, the clip finds no gradient and returns
0. Each is refused here with one line instead:

- ``optimizer.step()`` outside the schedule: a step pre-hook (torch's
  ``Optimizer.register_step_pre_hook``, on the optimizer and on each optimizer it chains)
  raises unless the schedule is stepping, from the schedule's first step on (before it, a
  checkpoint load may initialise the optimizer's state with a zero-lr step, as DCP does);
- ``lr_scheduler.step()``: the scheduler's ``last_epoch`` (each chained scheduler's) is
  recorded after every schedule step and compared before the next one;
- a clip (or any use of a gradient) between calls: every master parameter's ``.grad`` holds a
  :class:`GradientGuard` (a zero-memory tensor whose arithmetic raises);
  ``zero_grad()`` stays allowed (it sets ``None`` or zeroes nothing).

:func:`register_schedule` lets ``torch.distributed.pipelining.schedules.get_schedule_class``
(and modules that imported it, e.g. a trainer's builder) find a schedule by name.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import torch
from torch import Tensor

__all__ = ["GradientGuard", "guard_grads", "StepGuard", "register_schedule"]

_REFUSAL = ("Schedule2BW clips by the global norm itself (max_norm=; its norm is "
            "schedule.last_grad_norm): the gradients are not on the parameters between calls")
# what zero_grad may do to a guard (attribute reads, and no-op resets)
_RESETS = {"zero_", "detach_", "requires_grad_", "_foreach_zero_"}


class GradientGuard(Tensor):
    """A parameter's ``.grad`` between two schedule calls: reading its attributes and
    resetting it (``zero_grad``) work; any arithmetic (a clip, a norm, an optimizer)
    raises with :data:`_REFUSAL`."""

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        name = getattr(func, "__name__", "")
        if name == "__get__":
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))
        if name in _RESETS:
            return args[0]
        raise RuntimeError(_REFUSAL)


def guard_grads(params: list[Tensor]) -> None:
    """Give each parameter a :class:`GradientGuard` gradient (an expanded zero: no memory)."""
    for p in params:
        zero = torch.zeros((), dtype=p.dtype, device=p.device).expand_as(p)
        p.grad = Tensor._make_subclass(GradientGuard, zero, False)


def _chain(obj: Any, attr: str) -> list[Any]:
    """``obj`` and the objects it chains under ``attr`` (a container of optimizers/schedulers)."""
    inner = getattr(obj, attr, None)
    return [obj] + (list(inner) if isinstance(inner, (list, tuple)) else [])


class StepGuard:
    """Refuses steps of ``optimizer`` / ``lr_scheduler`` not taken through :meth:`stepping`."""

    def __init__(self, optimizer: Any, lr_scheduler: Any = None) -> None:
        self.active = False
        self.armed = False   # from the schedule's first step on (a load may step before it)
        self.handles = [o.register_step_pre_hook(self._pre_hook)
                        for o in _chain(optimizer, "optimizers")
                        if hasattr(o, "register_step_pre_hook")]
        if not self.handles:
            raise TypeError(f"{type(optimizer).__name__} has no register_step_pre_hook (a torch "
                            "optimizer, or a container of them under .optimizers, is needed)")
        self.schedulers = [] if lr_scheduler is None else [
            s for s in _chain(lr_scheduler, "schedulers") if hasattr(s, "last_epoch")]
        if lr_scheduler is not None and not self.schedulers:
            raise TypeError(f"{type(lr_scheduler).__name__} has no last_epoch (a torch LR "
                            "scheduler, or a container of them under .schedulers, is needed)")
        self.epochs = self._epochs()

    def _pre_hook(self, *_: Any) -> None:
        if self.armed and not self.active:
            raise RuntimeError("Schedule2BW takes the optimizer steps inside schedule.step(): "
                               "remove optimizer.step() from the training loop")

    def _epochs(self) -> list[int]:
        return [s.last_epoch for s in self.schedulers]

    def check(self) -> None:
        """Raise if a scheduler was stepped since the schedule's last step."""
        if self._epochs() != self.epochs:
            raise RuntimeError("Schedule2BW steps the lr scheduler after each optimizer step: "
                               "remove lr_scheduler.step() from the training loop")

    def stepping(self, step: Callable[[], None]) -> None:
        """Run ``step`` (the schedule's optimizer and scheduler steps) with the guard open."""
        self.check()
        self.active = True
        try:
            step()
        finally:
            self.active = False
        self.epochs = self._epochs()

    def close(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


_REGISTRY: dict[str, type] = {}


def register_schedule(name: str, cls: type) -> None:
    """Make torch's ``get_schedule_class(name)`` (any case) return ``cls``: torch's function
    is wrapped once, in ``torch.distributed.pipelining.schedules``, in the package, and in
    every loaded module that imported it by name (a trainer's pipeline builder)."""
    from torch.distributed.pipelining import schedules

    _REGISTRY[name.lower()] = cls
    original = getattr(schedules.get_schedule_class, "__wrapped__", schedules.get_schedule_class)
    if schedules.get_schedule_class is not original:
        return

    def get_schedule_class(schedule_name: str):
        got = _REGISTRY.get(schedule_name.lower())
        return got if got is not None else original(schedule_name)

    get_schedule_class.__wrapped__ = original  # type: ignore[attr-defined]
    get_schedule_class.__doc__ = original.__doc__
    for mod in list(sys.modules.values()):
        if getattr(mod, "get_schedule_class", None) is original:
            mod.get_schedule_class = get_schedule_class
