"""The 2BW action list cut into per-batch segments, for a schedule driven one batch at a time.

A training loop on ``torch.distributed.pipelining`` calls ``schedule.step(batch_t)`` once per
batch and does not know how many batches will come. The 2BW action list
(:func:`llm_validation.pipeline.schedule.schedule_2bw`) is a stream of pairs ``(F(k + w_s),
B(k))`` with warm-up forwards only at the start and cool-down backwards only at the end, so it
is cut here into:

- ``segment(t)``: every action up to and including the pair that holds the last forward of
  batch ``t`` (``F(t*M + M - 1)``), from where ``segment(t - 1)`` stopped. On stage ``s`` that
  is pairs ``k = t*M - w_s .. t*M + M - 1 - w_s`` (plus the warm-up forwards at ``t = start``):
  it takes batch ``t`` in (all its forwards), finishes the backwards that batch ``t - 1`` left in
  flight and holds the optimizer step of batch ``t - 1`` (of batch ``t`` on the last stage, where
  ``w_s = 0``);
- ``drain(batches)``: the cool-down after the last batch (``w_s`` backwards and the last step).

Guarantee: ``segment(start) + ... + segment(batches - 1) + drain(batches)`` equals
``schedule_2bw(stage, P, M, batches, start)`` action for action (tested for P = 2..5,
M = P..2P+1, several lengths and restarts), so :func:`check_schedule`'s properties (one version
per microbatch, the version exists in time, two versions in flight, steps in order, no flush)
hold for the segmented run. A restart at ``start`` (after a drain) is the project's resume:
a fresh warm-up, batch ``start`` still reading ``W(start - 1)``.

The list is periodic in ``k`` with period ``M``, so each segment is the template of the first
steady batch shifted by whole batches (O(M + P) work per batch, not O(t M)).
"""

from __future__ import annotations

from functools import lru_cache

from llm_validation.pipeline.schedule import (
    BACKWARD,
    FORWARD,
    STEP,
    Action,
    schedule_2bw,
    validate_pipeline_shape,
    version_of_batch,
)

__all__ = ["segment_2bw", "drain_2bw", "shift_actions"]


def shift_actions(acts: list[Action], batches: int, microbatches: int) -> list[Action]:
    """``acts`` moved ``batches`` batches later (microbatch ``i -> i + batches*M``, batch
    ``t -> t + batches``, versions recomputed: F/B read ``version_of_batch``, S writes t+1)."""
    out = []
    for a in acts:
        t = a.batch + batches
        if a.kind == STEP:
            out.append(Action(STEP, -1, t, t + 1))
        else:
            out.append(Action(a.kind, a.mb + batches * microbatches, t, version_of_batch(t)))
    return out


def _cut(acts: list[Action]) -> int:
    """Length of the steady prefix: through the pair holding the last forward (its backward
    follows it at once in ``schedule_2bw``) and the step right after, if any."""
    f = max(n for n, a in enumerate(acts) if a.kind == FORWARD)
    if f + 1 >= len(acts) or acts[f + 1].kind != BACKWARD:   # pragma: no cover - M >= P holds
        raise AssertionError("2BW list without a pair after its last forward")
    n = f + 2
    return n + 1 if n < len(acts) and acts[n].kind == STEP else n


@lru_cache(maxsize=256)
def _templates(stage: int, stages: int, microbatches: int) -> tuple[tuple, tuple, tuple]:
    """(segment of the first batch, segment of the second batch, drain after one batch), all
    for ``start = 0``."""
    validate_pipeline_shape(stages, microbatches)
    one = schedule_2bw(stage, stages, microbatches, 1)
    two = schedule_2bw(stage, stages, microbatches, 2)
    c1, c2 = _cut(one), _cut(two)
    if two[:c1] != one[:c1]:   # pragma: no cover - the list is a prefix-stable stream
        raise AssertionError("2BW action lists are not prefix-stable")
    return tuple(one[:c1]), tuple(two[c1:c2]), tuple(one[c1:])


def segment_2bw(stage: int, stages: int, microbatches: int, t: int, start: int = 0) -> list[Action]:
    """The actions of stage ``stage`` that take batch ``t`` in (module docstring); ``start``:
    the batch the schedule (re)started at (``0 <= start <= t``). Needs ``M >= P >= 2``."""
    if not 0 <= start <= t:
        raise ValueError(f"need 0 <= start <= t, got start={start}, t={t}")
    first, steady, _ = _templates(stage, stages, microbatches)
    k = t - start
    base = list(first) if k == 0 else shift_actions(list(steady), k - 1, microbatches)
    return shift_actions(base, start, microbatches)


def drain_2bw(stage: int, stages: int, microbatches: int, batches: int,
              start: int = 0) -> list[Action]:
    """The cool-down after batch ``batches - 1`` (``start < batches``): the last ``w_s``
    backwards and the step of the last batch (empty on the last stage, whose last step is in
    ``segment(batches - 1)``)."""
    if not 0 <= start < batches:
        raise ValueError(f"need 0 <= start < batches, got start={start}, batches={batches}")
    _, _, tail = _templates(stage, stages, microbatches)
    return shift_actions(list(tail), batches - 1, microbatches)
