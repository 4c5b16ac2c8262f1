"""The two weight versions of a PipeDream-2BW stage, installed in the user's own module.

Algorithm (one stage; batch ``t`` reads ``W(t-1)``, ``W(-1) = W(0)``; :mod:`.schedule2bw`
drives it)::

    slots[k]: one leaf tensor (an ``nn.Parameter``) per trainable parameter, k in {0, 1};
              batch n reads slots[n % 2]; the module's own parameters (the optimizer's
              master copy) alias the other slot's storage
    install(k)   module._parameters[name] = slots[k][i] at every place the parameter is
                 registered (tied weights: every place); run before each forward AND each
                 backward of a batch of that version, so a recompute during the backward
                 (activation checkpointing, any flavour) reads the version its forward read
    restore()    the master parameters back in place (between calls the module is the
                 user's, unchanged)
    advance(t)   STEP t: slots[t % 2] (W(t-1), batch t done) receives W(t) (one
                 ``_foreach_copy_``); then either
                   moved:    the masters are pointed at that slot (``p.data``), the step
                             writes W(t+1) there while slots[(t+1) % 2] keeps W(t) for the
                             graphs batch t+1 already built, or
                   in place: (no graph of batch t+1 exists yet: a drain, or the last stage)
                             the masters keep their storage and the two slot lists swap
                             places, so whoever holds a reference to a master tensor (a
                             checkpoint being captured) sees W(t+1) after the step

Guarantee: autograd saves the slot leaves (never the masters) and the optimizer writes only
into the slot no live graph holds, so no saved tensor is modified; the gradients of batch n
land on slots[n % 2]. Exactly two copies of the weights (slots[(n+1) % 2] aliases the
masters). Assumption: the module's forward reads its parameters through ``_parameters`` (plain
modules, ``checkpoint_wrapper``, ``torch.compile``d blocks); parameters it reads through a
tensor captured elsewhere are not versioned.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

__all__ = ["WeightVersions", "trainable"]


def trainable(module: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """The module's trainable parameters (name, tensor), each once (tied: the first name)."""
    return [(n, p) for n, p in module.named_parameters() if p.requires_grad]


class WeightVersions:
    """Two versions of ``module``'s trainable parameters (module docstring). ``next_batch``:
    the batch the next forward belongs to (it reads ``slots[next_batch % 2]``);
    ``previous``: that version's weights when resuming (None: ``W(-1) = W(0)``, a copy of the
    module's current weights)."""

    def __init__(self, module: nn.Module, next_batch: int = 0,
                 previous: Sequence[Tensor] | None = None) -> None:
        named = trainable(module)
        self.names = [n for n, _ in named]
        self.masters = [p for _, p in named]
        index = {id(p): i for i, p in enumerate(self.masters)}
        self.places = [(mod, attr, index[id(p)])
                       for _, mod in module.named_modules(remove_duplicate=False)
                       for attr, p in mod._parameters.items() if p is not None and id(p) in index]
        with torch.no_grad():
            alias = [nn.Parameter(p.data) for p in self.masters]         # no copy
            src = self.masters if previous is None else previous
            if len(src) != len(self.masters):
                raise ValueError(f"the saved previous version has {len(src)} tensors, the "
                                 f"stage has {len(self.masters)} trainable parameters")
            copy = [nn.Parameter(torch.empty_like(p)) for p in self.masters]
            for c, s, p in zip(copy, src, self.masters):
                if s.shape != p.shape:
                    raise ValueError(f"the saved previous version has shape {tuple(s.shape)} "
                                     f"where the stage's parameter has {tuple(p.shape)}")
            torch._foreach_copy_(copy, [s.to(p.device, p.dtype) for s, p in
                                        zip(src, self.masters)])
        k = next_batch % 2
        self.slots: list[list[Tensor]] = [copy, alias] if k == 0 else [alias, copy]
        self.installed: int | None = None    # the slot in the module (None: the masters)

    # ------------------------------------------------------------------------- placement
    def install(self, k: int) -> None:
        """Put slot ``k``'s leaves into the module (nothing to do when they are there)."""
        if self.installed == k:
            return
        slot = self.slots[k]
        for mod, attr, i in self.places:
            mod._parameters[attr] = slot[i]
        self.installed = k

    def restore(self) -> None:
        """Put the master parameters back into the module."""
        if self.installed is None:
            return
        for mod, attr, i in self.places:
            mod._parameters[attr] = self.masters[i]
        self.installed = None

    # ---------------------------------------------------------------------------- a step
    def take_grads(self, k: int) -> list[Tensor | None]:
        """Slot ``k``'s gradients, detached from its leaves."""
        slot = self.slots[k]
        grads = [w.grad for w in slot]
        for w in slot:
            w.grad = None
        return grads

    @torch.no_grad()
    def advance(self, t: int, in_place: bool) -> None:
        """Before STEP t: the freed slot of W(t-1) receives W(t); the masters move into it
        (``in_place=False``) or keep their storage while the slots swap (module docstring)."""
        stale, current = self.slots[t % 2], self.slots[(t + 1) % 2]
        torch._foreach_copy_(stale, current)
        self.installed = -1            # the module may hold either list: install again
        if in_place:
            self.slots[t % 2], self.slots[(t + 1) % 2] = current, stale
        else:
            for p, s in zip(self.masters, stale):
                p.data = s.data

    def read_version(self, next_batch: int) -> list[Tensor]:
        """The weights batch ``next_batch`` reads (after the step before it)."""
        return [w.detach() for w in self.slots[next_batch % 2]]

    # ---------------------------------------------------------------------------- memory
    def weight_bytes(self) -> int:
        """Bytes of the distinct storages holding the masters and both versions."""
        seen: dict[int, int] = {}
        for t in self.masters + [w for s in self.slots for w in s]:
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        return sum(seen.values())

    def param_bytes(self) -> int:
        """Bytes of one copy of the trainable parameters."""
        return sum(p.numel() * p.element_size() for p in self.masters)

    def marks(self) -> list[tuple[int, int]]:
        """(identity, version counter) of every master: changes when the weights are written
        or replaced outside the schedule (a load) between two calls."""
        return [(id(p), p._version) for p in self.masters]
