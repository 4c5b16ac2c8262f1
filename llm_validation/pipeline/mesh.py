"""The P x D process grid of a run: a 2-D ``torch.distributed`` device mesh ("dp", "pp").

A run with ``P`` pipeline stages and ``D`` data-parallel replicas has ``P * D`` ranks laid out
row-major on the mesh ``(D, P)``::

                 pp = 0     pp = 1    ...   pp = P-1
    dp = 0       rank 0     rank 1          rank P-1         <- replica 0: one whole pipeline
    dp = 1       rank P     rank P+1        rank 2P-1        <- replica 1
    ...
    dp = D-1     rank (D-1)P ...            rank DP-1

    rank = replica * P + stage

A row ("pp" group) is one pipeline: activations and their gradients travel along it. A column
("dp" group) holds the D replicas of one stage: they see disjoint parts of every batch and
average their gradients before the step (:mod:`llm_validation.pipeline.replicas`). Under
``torchrun`` with ``--nproc-per-node P`` each node holds whole pipelines (p2p inside a node,
one gradient all-reduce per step between nodes).

Process groups every rank holds (created in the same order on every rank):

- ``pp_group`` / ``dp_group``: the mesh's own groups (gloo on CPU, NCCL on GPUs);
- ``side_group``: a second group per pipeline row for the side passes (evaluation, the
  statistics' extra gradients), so their messages never match receives of the training stream;
- ``dp_control``: a gloo group per column for small CPU messages (microbatch losses, scalar
  statistics) and the collective checkpoint of that stage;
- ``control_group``: a gloo group over all ranks (statistics to rank 0, results, barriers).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

__all__ = ["Mesh", "rank_of", "coords", "rank_label", "build_mesh", "MESH_DIMS"]

#: Names of the mesh dimensions, outer first.
MESH_DIMS = ("dp", "pp")


def rank_of(replica: int, stage: int, stages: int) -> int:
    """Global rank of ``stage`` in ``replica`` (row-major mesh)."""
    return replica * stages + stage


def coords(rank: int, stages: int) -> tuple[int, int]:
    """``(replica, stage)`` of a global rank."""
    return divmod(rank, stages)


def rank_label(rank: int, stages: int, replicas: int) -> str:
    """How errors name a rank: ``stage s`` when D = 1, else ``stage s of replica d (rank r)``."""
    if replicas == 1:
        return f"stage {rank}"
    d, s = coords(rank, stages)
    return f"stage {s} of replica {d} (rank {rank})"


@dataclass(frozen=True)
class Mesh:
    """This rank's place on the (dp, pp) mesh and its process groups (module docstring)."""

    rank: int
    stages: int
    """P: ranks per pipeline row."""
    replicas: int
    """D: rows (data-parallel replicas)."""
    device_mesh: Any
    """The ``torch.distributed.device_mesh.DeviceMesh`` of shape (D, P)."""
    pp_group: Any
    dp_group: Any
    side_group: Any
    dp_control: Any

    @property
    def stage(self) -> int:
        return coords(self.rank, self.stages)[1]

    @property
    def replica(self) -> int:
        return coords(self.rank, self.stages)[0]

    @property
    def pp_ranks(self) -> tuple[int, ...]:
        """Global ranks of the stages of this rank's pipeline, stage order."""
        return tuple(rank_of(self.replica, s, self.stages) for s in range(self.stages))

    @property
    def dp_ranks(self) -> tuple[int, ...]:
        """Global ranks of the replicas of this rank's stage, replica order."""
        return tuple(rank_of(d, self.stage, self.stages) for d in range(self.replicas))

    def label(self, rank: int | None = None) -> str:
        return rank_label(self.rank if rank is None else rank, self.stages, self.replicas)


def build_mesh(rank: int, world: int, stages: int, backend: str,
               timeout: datetime.timedelta) -> Mesh:
    """Create the mesh and the extra groups (after ``init_process_group``; every rank calls
    this with the same arguments). ``world`` must be a multiple of ``stages``."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    if stages < 1 or world % stages:
        raise ValueError(f"world size {world} is not a multiple of the stage count {stages}")
    replicas = world // stages
    device_type = "cuda" if backend == "nccl" else "cpu"
    mesh = init_device_mesh(device_type, (replicas, stages), mesh_dim_names=MESH_DIMS)
    d, s = coords(rank, stages)
    side = dp_control = None
    for r in range(replicas):     # every rank creates every group, in the same order
        g = dist.new_group([rank_of(r, k, stages) for k in range(stages)], backend=backend,
                           timeout=timeout)
        side = g if r == d else side
    for k in range(stages):
        g = dist.new_group([rank_of(r, k, stages) for r in range(replicas)], backend="gloo",
                           timeout=timeout)
        dp_control = g if k == s else dp_control
    return Mesh(rank=rank, stages=stages, replicas=replicas, device_mesh=mesh,
                pp_group=mesh.get_group("pp"), dp_group=mesh.get_group("dp"), side_group=side,
                dp_control=dp_control)
