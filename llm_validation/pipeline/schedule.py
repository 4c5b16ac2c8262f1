"""The PipeDream-2BW schedule: steady-state 1F1B with no flush between optimizer steps.

Algorithm (one list of actions per stage; microbatches numbered globally, ``i = t*M + j``):
    stage ``s`` of ``P`` runs ``w_s = P - 1 - s`` warm-up forwards, then pairs
    ``(F(k + w_s), B(k))`` for ``k = 0, 1, ...``, then ``w_s`` cool-down backwards. After the
    backward of the last microbatch of batch ``t`` (``B(t*M + M - 1)``) the stage takes its one
    optimizer step of batch ``t``. The stream of microbatches never stops at a batch boundary:
    warm-up forwards happen only at the very start and cool-down backwards only at the very end.

Weight versions. Batch ``t`` uses ``W(t-1)`` (``W(-1) = W(0)``) for both the forward and the
backward of each of its microbatches, on every stage, so the gradient is the whole model's
``grad f(W(t-1))`` and every stage applies ``W(t+1) = W(t) - u(grad f(W(t-1)))``:
- why not ``W(t)``: on stage ``s < P-1`` the first forward of batch ``t`` is in pair
  ``t*M - w_s`` while ``W(t)`` appears only after the step in pair ``t*M - 1``, later
  (``w_s >= 1``). A consistent gradient needs one version on all stages, hence ``W(t-1)``.
- why ``W(t-1)`` is there in time: it is made by the step in pair ``(t-1)*M - 1``, before the first
  forward of batch ``t`` (pair ``t*M - w_s``) as soon as ``M >= w_s``; the worst stage is
  ``s = 0`` (``w_0 = P - 1``), so ``M >= P - 1`` suffices (:func:`min_microbatches`; the
  action lists and the simulator accept it) and the runtime's ``M >= P`` leaves one microbatch
  of margin.
- why two versions suffice: stage ``s`` holds at most ``w_s + 1 <= P`` microbatches in flight
  (forwarded, not yet backwarded), a run of consecutive indices that touches at most two batches
  when ``P <= M + 1``. Those two batches use ``W(t-1)`` and ``W(t)``; the optimizer's master copy
  ``W(t+1)`` is written after the last backward of batch ``t``, when ``W(t-1)`` is no longer used,
  so its buffer is recycled for batch ``t + 2``.

Everything here is pure (lists of small tuples); :func:`check_schedule` replays a schedule and
asserts these properties, so the tests prove them for every (P, M) they try.

Reference: Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training" (PipeDream-2BW),
ICML 2021, Section 3.1 (weight update semantics ``W(t+1) = W(t) - nu * grad f(W(t-1))``).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "Action",
    "FORWARD",
    "BACKWARD",
    "STEP",
    "warmup_forwards",
    "version_of_batch",
    "validate_pipeline_shape",
    "min_microbatches",
    "STEP_PLACEMENTS",
    "step_reader",
    "schedule_2bw",
    "check_schedule",
]

FORWARD = "F"
BACKWARD = "B"
STEP = "S"
#: Where STEP t goes in a stage's list: ``backward``, right after ``B(tM + M - 1)`` (the
#: batch's last backward); ``forward``, right after ``F((t+1)M + P - 1)`` (pair
#: ``(t+1)M + s`` on stage ``s``: the first forward that stage 0 runs after its last backward
#: of batch t, and so every stage's later action is causally after every stage finished batch
#: t's gradient: what a step that reduces over the whole pipeline, global-norm clipping,
#: needs). Both precede ``F((t+2)M)``, the first read of ``W(t+1)`` (needs ``M >= P`` for
#: ``forward``): :func:`check_schedule` replays them.
STEP_PLACEMENTS = ("backward", "forward")


class Action(NamedTuple):
    """One schedule action: ``kind`` in {F, B, S}; ``mb`` the global microbatch index (F/B) or
    -1 (S); ``batch`` the optimizer step / batch index ``t``; ``version`` the index ``v`` of the
    weights ``W(v)`` the action reads (F/B) or writes (S: ``W(t+1)``)."""

    kind: str
    mb: int
    batch: int
    version: int


def warmup_forwards(stage: int, stages: int) -> int:
    """``w_s = P - 1 - s``: forwards stage ``s`` runs before its first backward."""
    return stages - 1 - stage


def version_of_batch(t: int) -> int:
    """Index of the weights batch ``t`` uses: ``max(t - 1, 0)`` (``W(-1) = W(0)``)."""
    if t < 0:
        raise ValueError(f"batch index t must be >= 0, got {t}")
    return max(t - 1, 0)


def min_microbatches(stages: int) -> int:
    """The fewest microbatches per batch for which the 2BW schedule is valid with two weight
    versions: ``P - 1`` (module docstring: ``W(t-1)`` exists in time iff ``M >= w_0 = P - 1``,
    and ``w_s + 1 <= P <= M + 1`` microbatches in flight touch at most two batches);
    :func:`check_schedule` replays it."""
    return stages - 1


def validate_pipeline_shape(stages: int, microbatches: int) -> None:
    """Raise ``ValueError`` unless ``P >= 2`` and ``M >= P`` (the 2BW requirement)."""
    if not isinstance(stages, int) or isinstance(stages, bool) or stages < 2:
        raise ValueError(f"stages must be an integer >= 2 for a pipeline, got {stages!r}")
    if not isinstance(microbatches, int) or isinstance(microbatches, bool) or microbatches < stages:
        raise ValueError(
            f"microbatches must be an integer >= stages (PipeDream-2BW needs M >= P so that two "
            f"weight versions suffice), got microbatches={microbatches!r} with stages={stages}"
        )


def step_reader(t: int, microbatches: int) -> int:
    """The first microbatch that reads ``W(t+1)``, written by STEP t: ``(t+2)M`` (batch t+2
    reads ``W(t+1)``). On stage ``s`` its forward is in pair ``(t+2)M - w_s``, at least
    ``M - w_s + 1 >= 2`` pairs after the last backward of batch t (``M >= P``): STEP t may run
    anywhere in between (the slack :data:`STEP_PLACEMENTS` uses)."""
    return (t + 2) * microbatches


def schedule_2bw(stage: int, stages: int, microbatches: int, batches: int, start: int = 0,
                 step_after: str = "backward") -> list[Action]:
    """The action list of ``stage`` for batches ``start .. batches-1`` (``start > 0``: a resume,
    which starts with a fresh warm-up; the numbers computed do not change). ``step_after``:
    where each STEP goes (:data:`STEP_PLACEMENTS`; a step with no such forward left, the
    run's last, follows its batch's last backward).

    Assumptions: ``P >= 2``, ``M >= min_microbatches(P) = P - 1`` (checked; ``M >= P`` for
    ``step_after="forward"``), ``0 <= stage < stages``, ``0 <= start <= batches``.
    Guarantee: :func:`check_schedule` holds (each microbatch is forwarded then backwarded once with
    one version; one step per batch after its last backward and before the first read of the
    version it writes; no flush between batches).
    """
    if not isinstance(stages, int) or isinstance(stages, bool) or stages < 2:
        raise ValueError(f"stages must be an integer >= 2 for a pipeline, got {stages!r}")
    if (not isinstance(microbatches, int) or isinstance(microbatches, bool)
            or microbatches < max(1, min_microbatches(stages))):
        raise ValueError(f"2BW with two weight versions needs microbatches >= stages - 1, got "
                         f"microbatches={microbatches!r} with stages={stages}")
    if not 0 <= stage < stages:
        raise ValueError(f"stage must be in [0, {stages - 1}], got {stage}")
    if not 0 <= start <= batches:
        raise ValueError(f"need 0 <= start <= batches, got start={start}, batches={batches}")
    if step_after not in STEP_PLACEMENTS:
        raise ValueError(f"step_after={step_after!r} is not one of {list(STEP_PLACEMENTS)}")
    if step_after == "forward" and microbatches < stages:
        raise ValueError(f"step_after='forward' needs microbatches >= stages (F((t+1)M + P - 1) "
                         f"must precede F((t+2)M)), got M={microbatches}, P={stages}")
    first, end = start * microbatches, batches * microbatches  # global microbatch range
    w = min(warmup_forwards(stage, stages), end - first)
    acts: list[Action] = []

    pending: list[int] = []                  # batches whose last backward ran, step not yet

    def fwd(i: int) -> list[Action]:
        t = i // microbatches
        out = [Action(FORWARD, i, t, version_of_batch(t))]
        if step_after == "forward" and pending and i == (pending[0] + 1) * microbatches \
                + stages - 1:
            u = pending.pop(0)
            out.append(Action(STEP, -1, u, u + 1))
        return out

    def bwd(i: int) -> list[Action]:
        t = i // microbatches
        out = [Action(BACKWARD, i, t, version_of_batch(t))]
        if i % microbatches == microbatches - 1:
            pending.append(t)
            if step_after == "backward" or (t + 1) * microbatches + stages - 1 >= end:
                u = pending.pop(0)             # no such forward left: after the backward
                out.append(Action(STEP, -1, u, u + 1))
        return out

    for i in range(first, first + w):
        acts.extend(fwd(i))
    for k in range(first, end):
        if k + w < end:
            acts.extend(fwd(k + w))
        acts.extend(bwd(k))
    assert not pending, pending
    return acts


def check_schedule(stage: int, stages: int, microbatches: int, batches: int, start: int = 0,
                   step_after: str = "backward") -> dict:
    """Replay a schedule and assert the 2BW invariants; return counts for tests.

    Checks: every microbatch of ``start..batches-1`` is forwarded once and later backwarded once,
    both with ``W(version_of_batch(t))``; that version exists on this stage (made by an earlier
    step, or loaded at start) when first read; the steps come in order ``t = start, ...``, each
    after the last backward of its batch; no more than two versions are read by microbatches in
    flight; forwards happen before any cool-down backward (no flush between batches); with
    ``step_after="forward"`` every STEP t but the run's last comes after ``F((t+1)M + P - 1)``
    (after stage 0's last backward of batch t, causally) and before ``F((t+2)M)``.
    Returns ``{"max_in_flight": ..., "max_versions_in_flight": ..., "steps": ...,
    "step_lag": ...}`` (``step_lag``: the most actions between a batch's last backward and its
    step).
    """
    acts = schedule_2bw(stage, stages, microbatches, batches, start, step_after)
    at = {(a.kind, a.mb): n for n, a in enumerate(acts) if a.kind != STEP}
    lag = 0
    have = {version_of_batch(start), start}  # versions present at (re)start: W(start-1), W(start)
    in_flight: dict[int, int] = {}
    done_f: set[int] = set()
    done_b: set[int] = set()
    next_step = start
    max_in_flight = max_versions = 0
    last_fwd_pos = max((n for n, a in enumerate(acts) if a.kind == FORWARD), default=-1)
    for n, a in enumerate(acts):
        if a.kind == FORWARD:
            assert a.mb not in done_f, f"microbatch {a.mb} forwarded twice"
            assert a.version in have, f"F({a.mb}) needs W({a.version}) before it exists"
            done_f.add(a.mb)
            in_flight[a.mb] = a.version
        elif a.kind == BACKWARD:
            assert a.mb in in_flight, f"B({a.mb}) before its forward"
            assert in_flight.pop(a.mb) == a.version, f"B({a.mb}) uses another version than F"
            done_b.add(a.mb)
        else:
            assert a.batch == next_step, f"step {a.batch} out of order (expected {next_step})"
            last = a.batch * microbatches + microbatches - 1
            assert last in done_b, f"step {a.batch} before the backward of microbatch {last}"
            assert a.version == a.batch + 1
            first_read = step_reader(a.batch, microbatches)
            assert at.get((FORWARD, first_read), len(acts)) > n, \
                f"step {a.batch} after F({first_read}), which reads W({a.version})"
            lag = max(lag, n - at[(BACKWARD, last)] - 1)
            if step_after == "forward" and a.batch < batches - 1:
                trigger = (a.batch + 1) * microbatches + stages - 1
                assert acts[n - 1] == (FORWARD, trigger, trigger // microbatches,
                                       version_of_batch(trigger // microbatches)), \
                    f"step {a.batch} is not right after F({trigger})"
            have.add(a.version)
            next_step += 1
        max_in_flight = max(max_in_flight, len(in_flight))
        max_versions = max(max_versions, len(set(in_flight.values())))
        # a flush at a batch boundary would show as a step with nothing in flight while forwards
        # remain; 1F1B without flush keeps w_s = P-1-s microbatches in flight there
        ahead = warmup_forwards(stage, stages) + (step_after == "forward")
        if a.kind == STEP and n < last_fwd_pos and ahead > 0:
            assert len(in_flight) == ahead, (
                f"stage {stage} flushed the pipeline at step {a.batch}"
            )
    expected = set(range(start * microbatches, batches * microbatches))
    assert done_f == expected and done_b == expected, "not every microbatch ran exactly once"
    assert next_step == batches, "missing optimizer steps"
    return {
        "max_in_flight": max_in_flight,
        "max_versions_in_flight": max_versions,
        "steps": batches - start,
        "step_lag": lag,
    }
