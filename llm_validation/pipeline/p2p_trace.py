"""The kind of every point-to-point op a rank posts, and the check that both ends agree.

NCCL rule: PyTorch posts ``batch_isend_irecv`` ops inside an NCCL group (coalesced) and plain
``isend``/``irecv`` on their own. Without eager initialisation (``device_id`` at
``init_process_group``) the two kinds even run on different communicators (plain p2p lazily
creates a two-rank communicator per pair), so a message sent with one kind and received with
the other never matches: the run hangs. Gloo matches both kinds on one group, so a CPU run
cannot show the defect by running; this module shows it by recording.

Algorithm: :func:`install` wraps ``torch.distributed.isend/irecv/send/recv`` and
``batch_isend_irecv`` in this process (the wrappers replace the originals in both
``torch.distributed`` and ``torch.distributed.distributed_c10d``, so ``P2POp``'s own check and
torch's pipelining schedules see them too). Each op is recorded as
``{"op": "send"|"recv", "kind": "batched"|"plain", "origin": "torch"|"delaybound", "peer":
global rank, "group": group name, "backend": ..., "numel": ...}`` in posting order (``origin``
``torch``: posted inside ``torch.distributed.pipelining``, the GPipe / 1F1B baselines); a thread-local flag set while
``batch_isend_irecv`` runs tells the kinds apart. :func:`mismatches` pairs the n-th send
``a -> b`` on a group with the n-th receive at ``b`` from ``a`` on that group (the order in
which gloo and NCCL match them) and lists every pair whose kinds differ, and every stream
whose send and receive counts differ.

Activation (tests, diagnosis): ``DELAYBOUND_P2P_TRACE=DIR`` makes every rank write
``DIR/p2p_rank<r>.jsonl`` when its worker body returns or fails
(:func:`llm_validation.pipeline.processes.run_worker`).
"""

from __future__ import annotations

import json
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

__all__ = ["TRACE_ENV", "BATCHED", "PLAIN", "TORCH", "DELAYBOUND", "install", "uninstall", "records", "write",
           "read_traces", "mismatches"]

#: The environment variable naming the trace directory.
TRACE_ENV = "DELAYBOUND_P2P_TRACE"
BATCHED, PLAIN = "batched", "plain"
#: Who posted an op: torch's ``torch.distributed.pipelining`` schedules (GPipe / 1F1B) or ours.
TORCH, DELAYBOUND = "torch", "delaybound"
_TORCH_SCHEDULES = "torch/distributed/pipelining/"

_state: dict[str, Any] = {"originals": None, "records": []}
_local = threading.local()


def _group_info(group: Any) -> tuple[str, str]:
    import torch.distributed as dist

    g = group if group is not None else dist.distributed_c10d._get_default_group()
    try:
        backend = str(dist.get_backend(g))
    except Exception:  # pragma: no cover - a group being torn down
        backend = "?"
    return g.group_name, backend


def _global_peer(group: Any, peer: int | None, group_peer: int | None) -> int:
    import torch.distributed as dist

    if group_peer is not None and group is not None:
        return dist.get_global_rank(group, group_peer)
    return int(peer if peer is not None else group_peer)


def _origin() -> str:
    """``torch`` for an op posted by torch's pipelining schedules, else ``delaybound``."""
    frame = sys._getframe(2)
    while frame is not None:
        if _TORCH_SCHEDULES in frame.f_code.co_filename.replace("\\", "/"):
            return TORCH
        frame = frame.f_back
    return DELAYBOUND


def _record(op: str, tensor: Any, peer: int | None, group: Any, group_peer: int | None) -> None:
    name, backend = _group_info(group)
    _state["records"].append({
        "op": op, "kind": BATCHED if getattr(_local, "batched", False) else PLAIN,
        "origin": _origin(),
        "peer": _global_peer(group, peer, group_peer), "group": name, "backend": backend,
        "numel": int(tensor.numel())})


def _wrap_p2p(fn: Callable, op: str, peer_kw: str) -> Callable:
    group_kw = f"group_{peer_kw}"

    def wrapper(tensor, *args, **kwargs):
        peer = args[0] if args else kwargs.get(peer_kw)
        group = args[1] if len(args) > 1 else kwargs.get("group")
        _record(op, tensor, peer, group, kwargs.get(group_kw))
        return fn(tensor, *args, **kwargs)

    wrapper.__wrapped__ = fn
    return wrapper


def _wrap_batch(fn: Callable) -> Callable:
    def wrapper(p2p_op_list):
        outer = getattr(_local, "batched", False)
        _local.batched = True
        try:
            return fn(p2p_op_list)
        finally:
            _local.batched = outer

    wrapper.__wrapped__ = fn
    return wrapper


def install() -> None:
    """Record every p2p op of this process from now on (idempotent)."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    if _state["originals"] is not None:
        return
    names = ("isend", "irecv", "send", "recv", "batch_isend_irecv")
    originals = {n: getattr(c10d, n) for n in names}
    wrapped = {"isend": _wrap_p2p(originals["isend"], "send", "dst"),
               "irecv": _wrap_p2p(originals["irecv"], "recv", "src"),
               "send": _wrap_p2p(originals["send"], "send", "dst"),
               "recv": _wrap_p2p(originals["recv"], "recv", "src"),
               "batch_isend_irecv": _wrap_batch(originals["batch_isend_irecv"])}
    for n, f in wrapped.items():
        setattr(c10d, n, f)
        setattr(dist, n, f)
    _state["originals"] = originals
    _state["records"] = []


def uninstall() -> None:
    """Restore torch's functions (the records are kept)."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    originals = _state["originals"]
    if originals is None:
        return
    for n, f in originals.items():
        setattr(c10d, n, f)
        setattr(dist, n, f)
    _state["originals"] = None


def records() -> list[dict[str, Any]]:
    """This process's records, in posting order."""
    return list(_state["records"])


def write(directory: str | Path, rank: int) -> Path:
    """Write this process's records to ``directory/p2p_rank<rank>.jsonl``."""
    path = Path(directory) / f"p2p_rank{rank}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in _state["records"]))
    return path


def read_traces(directory: str | Path) -> dict[int, list[dict[str, Any]]]:
    """Every rank's records from a trace directory."""
    out = {}
    for path in sorted(Path(directory).glob("p2p_rank*.jsonl")):
        rank = int(path.stem.removeprefix("p2p_rank"))
        out[rank] = [json.loads(line) for line in path.read_text().splitlines() if line]
    return out


def mismatches(traces: dict[int, list[dict[str, Any]]]) -> list[str]:
    """Every message whose sender and receiver posted different kinds, and every stream
    (sender, receiver, group) with unequal send and receive counts (module docstring)."""
    sends: dict[tuple, list[dict]] = defaultdict(list)
    recvs: dict[tuple, list[dict]] = defaultdict(list)
    for rank, recs in traces.items():
        for r in recs:
            if r["op"] == "send":
                sends[(rank, r["peer"], r["group"])].append(r)
            else:
                recvs[(r["peer"], rank, r["group"])].append(r)
    out = []
    for key in sorted(set(sends) | set(recvs)):
        a, b = sends.get(key, []), recvs.get(key, [])
        src, dst, group = key
        if len(a) != len(b):
            out.append(f"rank {src} -> rank {dst} on group {group}: {len(a)} sends, "
                       f"{len(b)} receives")
        for i, (s, r) in enumerate(zip(a, b)):
            if s["kind"] != r["kind"]:
                out.append(f"message {i} rank {src} -> rank {dst} on group {group} "
                           f"({s['backend']}): sent {s['kind']}, received {r['kind']}")
    return out
