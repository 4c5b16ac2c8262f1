"""The unit-tick timeline of the 2BW schedule: the test oracle of the pipeline simulator.

:func:`simulate_times` replays :func:`~llm_validation.pipeline.schedule.schedule_2bw` with every
F and B one tick and free messages; :func:`schedule_timeline` draws it as the ASCII chart of
docs/pipeline.md. The simulator (``llm_validation.simulation.engine``) must reproduce both
exactly with unit costs (``tests/llm_validation/simulation/test_engine.py``), and the no-flush
property of the schedule is measured on it (``test_schedule.py``).
"""

from __future__ import annotations

from llm_validation.pipeline.schedule import BACKWARD, FORWARD, STEP, Action, schedule_2bw

__all__ = ["simulate_times", "schedule_timeline"]


def simulate_times(stages: int, microbatches: int, batches: int) -> list[list[tuple[Action, int]]]:
    """Start tick of every F/B action when each F and each B takes one tick, messages take no
    time and a stage runs its actions in order: ``F(i)`` on ``s`` waits for ``F(i)`` on ``s-1``,
    ``B(i)`` on ``s`` for ``B(i)`` on ``s+1``. Returns per stage ``[(action, start_tick), ...]``
    (steps take zero ticks and share the tick of the backward before them)."""
    plans = [schedule_2bw(s, stages, microbatches, batches) for s in range(stages)]
    done: dict[tuple[str, int, int], int] = {}  # (kind, mb, stage) -> end tick
    pos = [0] * stages
    clock = [0] * stages
    out: list[list[tuple[Action, int]]] = [[] for _ in range(stages)]
    remaining = sum(len(p) for p in plans)
    while remaining:
        progressed = False
        for s in range(stages):
            while pos[s] < len(plans[s]):
                a = plans[s][pos[s]]
                if a.kind == STEP:
                    out[s].append((a, clock[s] - 1))
                else:
                    dep = None
                    if a.kind == FORWARD and s > 0:
                        dep = (FORWARD, a.mb, s - 1)
                    elif a.kind == BACKWARD and s < stages - 1:
                        dep = (BACKWARD, a.mb, s + 1)
                    if dep is not None and dep not in done:
                        break
                    start = max(clock[s], done[dep] if dep is not None else 0)
                    clock[s] = start + 1
                    done[(a.kind, a.mb, s)] = clock[s]
                    out[s].append((a, start))
                pos[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover - would mean the schedule deadlocks
            raise RuntimeError("schedule deadlocks")
    return out


def schedule_timeline(stages: int, microbatches: int, batches: int) -> str:
    """ASCII timeline from :func:`simulate_times`: one row per stage, one column per tick;
    ``a3`` = forward of microbatch 3 of batch 'a' (batch 0 'a', 1 'b', ...), ``A3`` = its backward
    (with ``W(t-1)``: batches a and b read W(0), c reads W(1), ...), ``|`` = the optimizer step
    that writes ``W(t+1)``, ``.`` = idle."""
    timed = simulate_times(stages, microbatches, batches)
    width = 1 + max(t for row in timed for _, t in row)
    rows = []
    for s, row in enumerate(timed):
        cells = [" . "] * width
        for a, t in row:
            letter = chr(ord("a") + a.batch % 26)
            if a.kind == FORWARD:
                cells[t] = f"{letter}{a.mb % microbatches} "
            elif a.kind == BACKWARD:
                cells[t] = f"{letter.upper()}{a.mb % microbatches} "
            else:
                cells[t] = cells[t][:2] + "|"
        rows.append(f"stage {s}: " + "".join(cells).rstrip())
    return "\n".join(rows)
