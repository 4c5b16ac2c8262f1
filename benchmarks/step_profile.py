"""A short torch.profiler summary of a few training steps: where a step's time goes.

:func:`profile_steps` runs ``step()`` ``steps`` times under ``torch.profiler`` (CPU activity,
and CUDA activity on a CUDA device) and returns a small JSON-ready summary:

- ``top_ops``: the operators (CPU) or kernels (CUDA) with the largest self time, with their
  calls and share of the profiled wall time;
- ``in_ops_share`` (CPU): the self time of all operators over the wall time; the rest is the
  host's own work between operators (Python, the framework, allocation): host-bound time;
- ``device_busy_share``, ``device_gaps`` (CUDA): the union of the kernels' intervals over the
  window from the first kernel's start to the last one's end, and the idle gaps between
  kernels: their count, total and the largest, and how many are longer than
  :data:`GAP_US`: on a GPU a gap is time the device waited for the host to launch work.

:func:`format_summary` renders it as a few lines of text. ``benchmarks/bench_delay.py
--profile`` calls both in the same run as its timing.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile

__all__ = ["profile_steps", "format_summary", "GAP_US", "TOP"]

#: An idle gap between two kernels longer than this (microseconds) counts as host-bound:
#: a kernel launch costs ~5 us, so a longer wait means the host was late with the next one.
GAP_US = 10.0
#: Operators / kernels listed.
TOP = 12


def _self_time_us(avg: Any, device: bool) -> float:
    if device:
        return float(getattr(avg, "self_device_time_total", 0.0)
                     or getattr(avg, "self_cuda_time_total", 0.0))
    return float(avg.self_cpu_time_total)


def _device_gaps(events: Any) -> dict[str, Any]:
    """Busy share and idle gaps of the device timeline (union of kernel intervals)."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in events
                   if e.device_type == torch.autograd.DeviceType.CUDA
                   and e.time_range.end > e.time_range.start)
    if not spans:
        return {"device_busy_share": None, "device_gaps": None}
    busy, gaps = 0.0, []
    cur_s, cur_e = spans[0]
    for s, e in spans[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            gaps.append(s - cur_e)
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    window = spans[-1][1] - spans[0][0]
    long = [g for g in gaps if g > GAP_US]
    return {"device_busy_share": busy / window if window > 0 else None,
            "device_gaps": {"count": len(gaps), "total_ms": sum(gaps) / 1e3,
                            "largest_ms": max(gaps, default=0.0) / 1e3,
                            f"over_{GAP_US:g}us": len(long),
                            f"over_{GAP_US:g}us_total_ms": sum(long) / 1e3}}


def profile_steps(step: Callable[[], Any], steps: int, device: torch.device) -> dict[str, Any]:
    """Profile ``steps`` calls of ``step`` (already warmed up) on ``device`` (module
    docstring)."""
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize(device)
        wall_us = (time.perf_counter() - t0) * 1e6
    averages = prof.key_averages()
    rows = sorted(((a.key, _self_time_us(a, cuda), a.count) for a in averages),
                  key=lambda r: -r[1])
    rows = [r for r in rows if r[1] > 0][:TOP]
    out: dict[str, Any] = {
        "steps": steps, "device": str(device), "wall_ms_per_step": wall_us / 1e3 / steps,
        "kind": "cuda kernels" if cuda else "cpu operators",
        "top_ops": [{"name": k, "self_ms_per_step": t / 1e3 / steps, "calls_per_step":
                     c / steps, "share_of_wall": t / wall_us} for k, t, c in rows]}
    if cuda:
        out.update(_device_gaps(prof.events()))
    else:
        in_ops = sum(_self_time_us(a, False) for a in averages)
        out["in_ops_share"] = in_ops / wall_us
    return out


def format_summary(summary: dict[str, Any]) -> str:
    """A few lines of text: the top operators / kernels and the host-bound figure."""
    lines = [f"profile: {summary['steps']} steps on {summary['device']}, "
             f"{summary['wall_ms_per_step']:.2f} ms/step; top {summary['kind']} by self time:"]
    for r in summary["top_ops"]:
        lines.append(f"  {r['self_ms_per_step']:9.3f} ms/step {100 * r['share_of_wall']:5.1f}% "
                     f"x{r['calls_per_step']:g}  {r['name'][:70]}")
    if "in_ops_share" in summary:
        lines.append(f"  inside operators {100 * summary['in_ops_share']:.1f}% of wall; the rest "
                     "is host work between them (Python, framework, allocation)")
    elif summary.get("device_busy_share") is not None:
        g = summary["device_gaps"]
        lines.append(f"  device busy {100 * summary['device_busy_share']:.1f}% of the kernel "
                     f"window; {g['count']} idle gaps, {g['total_ms']:.2f} ms in all, "
                     f"{g[f'over_{GAP_US:g}us']} over {GAP_US:g} us (host-bound), largest "
                     f"{g['largest_ms']:.3f} ms")
    return "\n".join(lines)
