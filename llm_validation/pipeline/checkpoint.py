"""Sharded checkpoints of a P x D run with ``torch.distributed.checkpoint`` (DCP).

Layout (one DCP checkpoint per stage, written collectively by that stage's D replicas)::

    checkpoints/step_<N>/stage<s>/.metadata        DCP metadata (written last, atomically)
    (tensor keys: g/params/<full model parameter name>/<field>, see pipeline.reshard)
    checkpoints/step_<N>/stage<s>/__<d>_0.distcp   what replica d of stage s wrote
    checkpoints/step_<N>/COMPLETE                  "P D": every stage's .metadata exists

Why one DCP checkpoint per stage and not one per run: DCP's save is a collective over its
process group, and in 2BW the stages reach step N at different times (stage P-1 first, stage 0
last, each one waiting for the next stage's gradients); a collective over all ranks inside the
step would deadlock with that order. The D replicas of one stage reach step N together, so each
stage saves collectively over its own dp group (``mesh.dp_control``, gloo) and stage 0 of
replica 0 writes ``COMPLETE`` once every stage's ``.metadata`` exists.

What is saved: the stage's state is the same on all D replicas (their gradients are averaged
before every step, so weights, optimizer state, EF buffers and statistics state are bitwise
equal; :func:`llm_validation.pipeline.replicas.Replicas.check_identical` checks a checksum
before each save). Those tensors go under the same keys on every replica and DCP's planner
writes each of them once, balancing the bytes over the replicas: each rank writes its part.
What differs per rank (RNG states) and the non-tensor skeleton go into one small pickled blob
per replica (key ``meta/replica<d>``). Loading (:func:`load_global`) reads, from every stage
of the saved grid, the tensors of this rank's parameters (by their global names), allocated
from the DCP metadata (same shapes, dtypes, bits: resume is bitwise on CPU), so a run
continues on another P x D (:mod:`llm_validation.pipeline.reshard`).

A run killed mid-save leaves a stage without ``.metadata`` and the step without
``COMPLETE``: only complete checkpoints are resumed; the newest :data:`KEEP_CHECKPOINTS`
complete ones are kept. A complete one damaged afterwards (a truncated or lost shard, an
unreadable metadata or state blob: :func:`damage`) is skipped on resume for the newest intact
one (:func:`newest_intact`), and the launcher removes the skipped ones before the run
rewrites them.
"""

from __future__ import annotations

import io
import pickle
import re
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from llm_validation.pipeline.reshard import merge, tensor_wanted
from llm_validation.rundir import KEEP_CHECKPOINTS, RunPaths

__all__ = ["COMPLETE", "METADATA", "ckpt_dir", "stage_dir", "save_stage_checkpoint",
           "mark_complete", "grid_of", "latest_complete", "damage", "newest_intact",
           "drop_checkpoints_after", "load_global", "loadable",
           "flatten", "unflatten"]

COMPLETE = "COMPLETE"
#: The file DCP writes last (atomically) into a checkpoint directory.
METADATA = ".metadata"
_STEP_DIR = re.compile(r"^step_(\d+)$")
_REF = "__dcp_tensor__"


def ckpt_dir(paths: RunPaths, step: int) -> Path:
    """Directory of the checkpoint taken after ``step`` optimizer steps."""
    return paths.checkpoints / f"step_{step:08d}"


def stage_dir(paths: RunPaths, step: int, stage: int) -> Path:
    """The DCP checkpoint of one stage (all its replicas) at ``step``."""
    return ckpt_dir(paths, step) / f"stage{stage}"


# ------------------------------------------------------------------------ nested <-> flat
def flatten(obj: Any, prefix: str = "s") -> tuple[Any, dict[str, Tensor]]:
    """(skeleton, tensors): every tensor of a nested dict/list/tuple replaced by a reference
    to its key in ``tensors`` (keys are the paths, ``prefix/a/0/b``); everything else kept."""
    flat: dict[str, Tensor] = {}

    def walk(x: Any, path: str) -> Any:
        if isinstance(x, Tensor):
            flat[path] = x.detach()
            return {_REF: path}
        if isinstance(x, dict):
            return {k: walk(v, f"{path}/{k}") for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            out = [walk(v, f"{path}/{i}") for i, v in enumerate(x)]
            return out if isinstance(x, list) else tuple(out)
        return x

    return walk(obj, prefix), flat


def unflatten(skeleton: Any, tensors: dict[str, Tensor], device: torch.device) -> Any:
    """Inverse of :func:`flatten` (tensors moved to ``device``)."""
    if isinstance(skeleton, dict):
        if set(skeleton) == {_REF}:
            return tensors[skeleton[_REF]].to(device)
        return {k: unflatten(v, tensors, device) for k, v in skeleton.items()}
    if isinstance(skeleton, list):
        return [unflatten(v, tensors, device) for v in skeleton]
    if isinstance(skeleton, tuple):
        return tuple(unflatten(v, tensors, device) for v in skeleton)
    return skeleton


# ---------------------------------------------------------------------------------- save
def save_stage_checkpoint(paths: RunPaths, step: int, stage: int, replica: int,
                          shared: dict[str, Any], own: dict[str, Any], group: Any) -> Path:
    """Collective over ``group`` (the stage's D replicas): save ``shared`` (equal on every
    replica: each tensor written once) and ``own`` (this replica's, e.g. RNG states)."""
    import torch.distributed.checkpoint as dcp

    d = stage_dir(paths, step, stage)
    d.mkdir(parents=True, exist_ok=True)
    skeleton, flat = flatten(shared)
    blob = io.BytesIO(pickle.dumps({"skeleton": skeleton, "own": own}))
    state: dict[str, Any] = {**flat, f"meta/replica{replica}": blob}
    dcp.save(state, storage_writer=dcp.FileSystemWriter(d), process_group=group)
    return d


def mark_complete(paths: RunPaths, step: int, stages: int, replicas: int, wait_s: float) -> None:
    """Rank 0: once every stage's DCP ``.metadata`` of ``step`` exists (waiting up to
    ``wait_s``; on one machine they already do, see the runtime's ordering), write ``COMPLETE``
    atomically and delete older checkpoints beyond the newest :data:`KEEP_CHECKPOINTS`
    complete ones, and any incomplete one older than this."""
    d = ckpt_dir(paths, step)
    deadline = time.monotonic() + wait_s

    def missing() -> list[int]:
        return [s for s in range(stages) if not (stage_dir(paths, step, s) / METADATA).exists()]

    gone = missing()
    while gone and time.monotonic() < deadline:
        time.sleep(0.02)
        gone = missing()
    if gone:
        raise RuntimeError(f"checkpoint {d}: stages {gone} did not finish saving within {wait_s} s "
                           "(several machines need a shared run directory)")
    tmp = d / f".{COMPLETE}.tmp"
    tmp.write_text(f"{stages} {replicas}\n")
    tmp.replace(d / COMPLETE)
    complete, stale = [], []
    for child in paths.checkpoints.iterdir():
        m = _STEP_DIR.match(child.name)
        if m and child.is_dir():
            (complete if (child / COMPLETE).exists() else stale).append((int(m.group(1)), child))
    for _, old in sorted(complete)[:-KEEP_CHECKPOINTS]:
        shutil.rmtree(old, ignore_errors=True)
    for n, old in stale:
        if n < step:
            shutil.rmtree(old, ignore_errors=True)


def grid_of(directory: Path) -> tuple[int, int]:
    """``(P, D)`` a complete checkpoint was saved with (its ``COMPLETE`` marker)."""
    fields = (Path(directory) / COMPLETE).read_text().split()
    if not fields:
        raise ValueError(f"checkpoint {directory}: empty {COMPLETE} marker")
    return int(fields[0]), int(fields[1]) if len(fields) > 1 else 1


def latest_complete(paths: RunPaths) -> tuple[int, Path] | None:
    """``(step, dir)`` of the newest complete checkpoint, whatever P x D saved it (keys are
    global: :mod:`llm_validation.pipeline.reshard`; :func:`grid_of` tells its grid)."""
    if not paths.checkpoints.is_dir():
        return None
    found = [(int(m.group(1)), child) for child in paths.checkpoints.iterdir()
             if (m := _STEP_DIR.match(child.name)) and (child / COMPLETE).exists()]
    return max(found) if found else None


def damage(directory: Path) -> str | None:
    """What makes a complete checkpoint ``directory`` unloadable (None: intact): a missing or
    unreadable ``COMPLETE`` marker or stage ``.metadata``, a shard file shorter than the bytes
    its metadata places in it (truncated, or gone), or a replica's pickled blob that does not
    load. Reads the metadata and the small blobs, not the tensors: a flipped bit inside tensor
    bytes is not seen (DCP keeps no checksums)."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.api import CheckpointException   # a BaseException

    directory = Path(directory)
    try:
        P, D = grid_of(directory)
    except (OSError, ValueError, IndexError) as exc:
        return f"its {COMPLETE} marker is unreadable ({type(exc).__name__})"
    for s in range(P):
        path = directory / f"stage{s}"
        try:
            storage = FileSystemReader(path).read_metadata().storage_data or {}
        except Exception as exc:  # noqa: BLE001 - any unreadable metadata: damaged
            return f"stage {s}: its {METADATA} is unreadable ({type(exc).__name__})"
        sizes: dict[str, int] = {}
        for info in storage.values():
            f = path / info.relative_path
            if info.relative_path not in sizes:
                sizes[info.relative_path] = f.stat().st_size if f.is_file() else -1
            if sizes[info.relative_path] < info.offset + info.length:
                return (f"stage {s}: {info.relative_path} is "
                        f"{'missing' if sizes[info.relative_path] < 0 else 'truncated'}")
        for d in range(D):
            try:
                _read_stage(path, set(), f"meta/replica{d}")
            except (Exception, CheckpointException) as exc:  # noqa: BLE001 - unreadable: damaged
                return f"stage {s}: the state of replica {d} does not load ({type(exc).__name__})"
    return None


def newest_intact(paths: RunPaths) -> tuple[int, Path] | None:
    """``(step, dir)`` of the newest complete checkpoint that is not damaged (:func:`damage`),
    as ``rundir.newest_intact_checkpoint`` is for the emulator: a damaged newer one is skipped
    with one warning line on stderr naming it, what is wrong and the checkpoint used instead
    (:data:`KEEP_CHECKPOINTS` keeps an older complete one for this)."""
    if not paths.checkpoints.is_dir():
        return None
    found = sorted(((int(m.group(1)), child) for child in paths.checkpoints.iterdir()
                    if (m := _STEP_DIR.match(child.name)) and (child / COMPLETE).exists()),
                   reverse=True)
    for i, (step, d) in enumerate(found):
        what = damage(d)
        if what is None:
            return step, d
        older = found[i + 1][1].name if i + 1 < len(found) else "none left"
        print(f"warning: checkpoint {d} is damaged ({what}); trying the next older one "
              f"({older})", file=sys.stderr, flush=True)
    return None


def loadable(paths: RunPaths, step: int) -> str | None:
    """Why this rank cannot resume from the checkpoint of ``step`` as it sees the run
    directory (no ``COMPLETE`` marker, or :func:`damage`), or None (step 0: nothing to load)."""
    if step == 0:
        return None
    d = ckpt_dir(paths, step)
    if not (d / COMPLETE).is_file():
        return f"{d} has no {COMPLETE} marker here"
    what = damage(d)
    return None if what is None else f"{d} is damaged ({what})"


def drop_checkpoints_after(paths: RunPaths, step: int) -> None:
    """Remove the checkpoint directories of steps after ``step`` (a resume from ``step``:
    they are incomplete or damaged, and the run writes those steps again)."""
    if not paths.checkpoints.is_dir():
        return
    for child in paths.checkpoints.iterdir():
        m = _STEP_DIR.match(child.name)
        if m and child.is_dir() and int(m.group(1)) > step:
            shutil.rmtree(child, ignore_errors=True)


# ---------------------------------------------------------------------------------- load
def _read_stage(path: Path, names: set[str], meta_key: str) -> tuple[dict[str, Any], Any]:
    """(tensors of ``names``, the pickled blob ``meta_key``) of one stage's DCP checkpoint;
    reads without collectives, only the tensors this rank needs."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    if not (path / METADATA).is_file():
        raise FileNotFoundError(f"checkpoint not found: {path / METADATA}")
    reader = dcp.FileSystemReader(path)
    state: dict[str, Any] = {}
    for key, md in reader.read_metadata().state_dict_metadata.items():
        if isinstance(md, TensorStorageMetadata) and tensor_wanted(key, names):
            state[key] = torch.empty(md.size, dtype=md.properties.dtype)
        elif key == meta_key:
            state[key] = io.BytesIO()
    if meta_key not in state:
        raise ValueError(f"checkpoint {path} holds no {meta_key}")
    with warnings.catch_warnings():   # no_dist: DCP warns that it assumes one process
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(state, storage_reader=dcp.FileSystemReader(path), no_dist=True)
    blob = state.pop(meta_key)
    blob.seek(0)
    return state, pickle.loads(blob.read())


def load_global(directory: Path, names: list[str], stage: int, replica: int,
                device: torch.device) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(global form restricted to names, own)`` from a complete checkpoint ``directory``
    (``checkpoints/step_<N>``) saved on any grid: the parameters ``names`` (full model's
    names) from whichever stages hold them; ``own`` (RNG, positions) of the same stage and
    replica if the grid had them, else of stage 0, replica 0."""
    P, D = grid_of(directory)
    wanted = set(names)
    parts, own = [], None
    for s in range(P):
        mine = s == stage and replica < D and stage < P
        key = f"meta/replica{replica if mine else 0}"
        tensors, meta = _read_stage(Path(directory) / f"stage{s}", wanted, key)
        skeleton = meta["skeleton"]
        skeleton["params"] = {n: v for n, v in skeleton["params"].items() if n in wanted}
        parts.append(unflatten(skeleton, tensors, device))
        if mine or (own is None and s == 0):
            own = meta["own"]
    return merge(parts), own
