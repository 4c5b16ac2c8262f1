"""Durations of every simulated action: unit costs, FLOP-based costs from the model shape, or costs
measured by a profiled run.

Cost model (one replica; all ``D`` data-parallel replicas run the same schedule in lock step):
- compute: per virtual stage ``k`` a forward ``F_k``, a backward ``B_k`` and its zero-bubble parts
  ``I_k + W_k`` (input and weight gradients);
- point-to-point: a message across the boundary between stages ``k`` and ``k+1`` (an activation
  forward, its gradient backward, same size) takes ``latency + bytes / bandwidth``; each directed
  link carries one message at a time (FIFO). ``overlap_p2p``: the sender goes on computing while
  its message travels (asynchronous send); otherwise it blocks until delivery;
- optimizer step: ``step_d`` on device ``d``, preceded by the ring all-reduce of the device's
  gradients over the ``D`` replicas, ``2 (D-1)/D * bytes / bandwidth + 2 (D-1) * latency``
  (Patarasuk and Yuan 2009). ``overlap_allreduce``: all-reduce and update run beside the compute
  (a second stream), and only an action that reads the new weights waits for them; otherwise the
  device runs them in order, blocking.

Unit costs (``--unit-costs``): one device's forward of one microbatch takes 1, its backward 1
(``I = W = 1/2``), everything else 0; with ``v`` chunks a chunk's forward takes ``1/v``.

FLOP costs: ``F_k = tokens * flops_k / (gpu_tflops * 1e12)`` with the per-token FLOPs of
:mod:`.shapes`; ``B_k = 2 F_k``, ``I_k = W_k = F_k``; the step streams weights, gradient and
optimizer state through memory once (:func:`step_bytes_per_param`) at ``hbm_gbps`` GB/s.
``gpu_tflops`` is the *sustained* rate of the kernels (peak times the achieved utilisation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llm_validation.simulation.profile import Profile
from llm_validation.simulation.schedules import Plan
from llm_validation.simulation.shapes import StageShape

__all__ = ["VStageCost", "Costs", "Hardware", "unit_costs", "model_costs", "profile_costs",
           "ring_allreduce_time", "message_time", "step_bytes_per_param", "OPTIMIZER_STATES",
           "optimizer_states"]

#: Bytes of a float32 weight, gradient and optimizer-state element (the runtime's master dtype).
FP32_BYTES = 4
#: Optimizer state tensors per parameter: (on hidden matrices, on everything else). Adan keeps
#: three moments and the previous gradient; Muon-like optimizers keep one momentum on hidden
#: matrices and AdamW's two moments elsewhere; SOAP's Kronecker factors are not counted.
OPTIMIZER_STATES = {"adamw": (2, 2), "nadamw": (2, 2), "sgd": (1, 1), "lion": (1, 1),
                    "adan": (4, 4), "soap": (2, 2), "muon": (1, 2), "normuon": (1, 2)}


def optimizer_states(name: str) -> tuple[int, int]:
    """(state tensors per hidden-matrix parameter, per other parameter) of optimizer ``name``."""
    if name not in OPTIMIZER_STATES:
        raise ValueError(f"optimizer {name!r} has no state model; known: {sorted(OPTIMIZER_STATES)}")
    return OPTIMIZER_STATES[name]


def _check(where: str, value: float, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
            or value < 0 or (positive and value <= 0) or math.isinf(value):
        need = "> 0" if positive else ">= 0"
        raise ValueError(f"{where}={value!r} must be a finite number {need}")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class VStageCost:
    """Compute durations of one virtual stage for one microbatch."""

    forward: float
    """F: forward."""
    backward: float
    """B: full backward."""
    backward_input: float
    """I: input-gradient part (ZB-H1)."""
    backward_weight: float
    """W: weight-gradient part (ZB-H1)."""

    def __post_init__(self) -> None:
        for name in ("forward", "backward", "backward_input", "backward_weight"):
            object.__setattr__(self, name, _check(f"cost {name}", getattr(self, name), True))


@dataclass(frozen=True, kw_only=True)
class Costs:
    """Every duration the engine needs (see the module docstring)."""

    vstages: tuple[VStageCost, ...]
    """Per virtual stage, K = P v entries."""
    step: tuple[float, ...]
    """Optimizer update per device (P entries)."""
    allreduce: tuple[float, ...]
    """Data-parallel gradient all-reduce per device (P entries; 0 without replicas)."""
    boundary: tuple[float, ...]
    """Transfer time (bytes / bandwidth) of one message across boundary k -> k+1 (K-1 entries)."""
    latency: float = 0.0
    """Per-message latency added to every point-to-point transfer."""
    overlap_p2p: bool = True
    """Asynchronous sends (the sender does not wait for delivery)."""
    overlap_allreduce: bool = False
    """All-reduce and update beside the compute stream (see the module docstring)."""
    time_unit: str = "tick"
    """``tick`` (unit costs) or ``s`` (seconds)."""
    microbatch_tokens: int | None = None
    """Tokens per microbatch (None: tokens/s is not defined)."""
    data_parallel: int = 1
    """Replicas D (tokens/s counts all of them)."""
    flush: tuple[float, ...] = ()
    """Per device, what a step costs more when it ends a metrics flush (the host read of the
    buffered rows, the divergence verdict, the rows message; stage 0 writes the rows); empty:
    none (the runtime: :mod:`llm_validation.training.flush`)."""
    flush_interval: int = 1
    """Steps between flushes (``RunConfig.log_interval``; the last step always flushes)."""
    clip: bool = False
    """Each step waits for the model's gradient norm: every device's last backward of the
    batch, then a reduction of ``clip_latency`` (global-norm clipping on a pipeline)."""
    clip_latency: float = 0.0
    """Time of that reduction once every device has contributed."""

    def __post_init__(self) -> None:
        for name in ("vstages", "step", "allreduce", "boundary"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        K, P = len(self.vstages), len(self.step)
        if not K or not P or len(self.allreduce) != P or len(self.boundary) != K - 1:
            raise ValueError(f"Costs: need K >= 1 stage costs, P step and all-reduce costs and "
                             f"K-1 boundaries; got K={K}, P={P}, allreduce={len(self.allreduce)},"
                             f" boundary={len(self.boundary)}")
        for name in ("step", "allreduce", "boundary"):
            object.__setattr__(self, name, tuple(_check(f"cost {name}", x)
                                                 for x in getattr(self, name)))
        object.__setattr__(self, "latency", _check("cost latency", self.latency))
        object.__setattr__(self, "clip_latency", _check("cost clip_latency", self.clip_latency))
        object.__setattr__(self, "flush", tuple(_check("cost flush", x) for x in self.flush))
        if self.flush and len(self.flush) != P:
            raise ValueError(f"Costs: {len(self.flush)} flush costs for {P} devices")
        if isinstance(self.flush_interval, bool) or not isinstance(self.flush_interval, int) \
                or self.flush_interval < 1:
            raise ValueError(f"Costs.flush_interval={self.flush_interval!r} must be an int >= 1")
        if self.time_unit not in ("tick", "s"):
            raise ValueError(f"Costs.time_unit={self.time_unit!r} must be 'tick' or 's'")
        if self.microbatch_tokens is not None and (
                isinstance(self.microbatch_tokens, bool) or not isinstance(self.microbatch_tokens, int)
                or self.microbatch_tokens < 1):
            raise ValueError(f"Costs.microbatch_tokens={self.microbatch_tokens!r} must be >= 1")
        if isinstance(self.data_parallel, bool) or not isinstance(self.data_parallel, int) \
                or self.data_parallel < 1:
            raise ValueError(f"Costs.data_parallel={self.data_parallel!r} must be an int >= 1")

    def fits(self, plan: Plan) -> None:
        """Raise ``ValueError`` unless these costs have one entry per stage of ``plan``."""
        if len(self.vstages) != plan.vstages or len(self.step) != plan.stages:
            raise ValueError(f"costs for {len(self.vstages)} virtual stages on {len(self.step)} "
                             f"devices do not fit a plan of {plan.vstages} on {plan.stages}")


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """The machine of a FLOP-based projection."""

    gpu_tflops: float
    """Sustained TFLOP/s of one GPU on the model's kernels (peak x utilisation)."""
    link_gbps: float
    """Point-to-point link between neighbouring stages, gigabits per second."""
    link_latency_us: float = 5.0
    """Latency of one point-to-point message, microseconds."""
    dp_gbps: float | None = None
    """Per-GPU bandwidth of the data-parallel all-reduce ring, Gb/s (None: ``link_gbps``)."""
    dp_latency_us: float | None = None
    """Latency of one ring step, microseconds (None: ``link_latency_us``)."""
    hbm_gbps: float = 2000.0
    """GPU memory bandwidth for the optimizer step, gigabytes (not bits) per second."""

    def __post_init__(self) -> None:
        _check("gpu_tflops", self.gpu_tflops, True)
        _check("link_gbps", self.link_gbps, True)
        _check("link_latency_us", self.link_latency_us)
        _check("hbm_gbps", self.hbm_gbps, True)
        if self.dp_gbps is not None:
            _check("dp_gbps", self.dp_gbps, True)
        if self.dp_latency_us is not None:
            _check("dp_latency_us", self.dp_latency_us)

    @property
    def link_bytes_per_s(self) -> float:
        return self.link_gbps * 1e9 / 8

    @property
    def dp_bytes_per_s(self) -> float:
        return (self.dp_gbps if self.dp_gbps is not None else self.link_gbps) * 1e9 / 8

    @property
    def latency_s(self) -> float:
        return self.link_latency_us * 1e-6

    @property
    def dp_latency_s(self) -> float:
        lat = self.dp_latency_us if self.dp_latency_us is not None else self.link_latency_us
        return lat * 1e-6


def ring_allreduce_time(nbytes: float, replicas: int, bytes_per_s: float, latency_s: float) -> float:
    """Ring all-reduce of ``nbytes`` over ``replicas``: ``2(D-1)/D * nbytes / bw + 2(D-1) lat``."""
    if replicas <= 1:
        return 0.0
    return 2 * (replicas - 1) / replicas * nbytes / bytes_per_s + 2 * (replicas - 1) * latency_s


def message_time(nbytes: float, bytes_per_s: float) -> float:
    """Transfer (serialisation) time of one message; the latency is added by the engine."""
    return nbytes / bytes_per_s


def step_bytes_per_param(states: float) -> float:
    """Bytes one optimizer step moves per parameter: read and write the weight, read the
    gradient, read and write each of ``states`` state tensors (all float32)."""
    return FP32_BYTES * (2 + 1 + 2 * states)


def unit_costs(plan: Plan) -> Costs:
    """Unit costs for ``plan`` (see the module docstring)."""
    f = 1.0 / plan.chunks
    one = VStageCost(forward=f, backward=f, backward_input=f / 2, backward_weight=f / 2)
    return Costs(vstages=(one,) * plan.vstages, step=(0.0,) * plan.stages,
                 allreduce=(0.0,) * plan.stages, boundary=(0.0,) * (plan.vstages - 1))


def _per_device(plan: Plan, per_vstage: list[float]) -> list[float]:
    out = [0.0] * plan.stages
    for k, x in enumerate(per_vstage):
        out[plan.device_of(k)] += x
    return out


def model_costs(plan: Plan, shapes: list[StageShape], hw: Hardware, *, microbatch_tokens: int,
                data_parallel: int = 1, optimizer: str = "adamw", ef: bool = False,
                overlap_p2p: bool = True, overlap_allreduce: bool = False,
                flush_s: float = 0.0, flush_interval: int = 1, clip: bool = False) -> Costs:
    """FLOP-based costs of ``plan`` from the virtual stages' ``shapes`` on hardware ``hw``.
    2BW's step also copies ``W(t)`` into the buffer of ``W(t-1)`` (the runtime's slot copy:
    one float32 read and write per parameter at ``hbm_gbps``); ``flush_s`` per flush every
    ``flush_interval`` steps; ``clip``: global-norm clipping (a reduction over the pipeline,
    one link latency per stage hop)."""
    if len(shapes) != plan.vstages:
        raise ValueError(f"{len(shapes)} stage shapes for {plan.vstages} virtual stages")
    flops = hw.gpu_tflops * 1e12
    vst = []
    for sh in shapes:
        f = microbatch_tokens * sh.forward_flops_per_token / flops
        vst.append(VStageCost(forward=f, backward=2 * f, backward_input=f, backward_weight=f))
    on_matrix, other = optimizer_states(optimizer)
    step_bytes = [step_bytes_per_param(on_matrix + ef) * sh.matrix_params
                  + step_bytes_per_param(other + ef) * (sh.params - sh.matrix_params)
                  for sh in shapes]
    if plan.schedule == "2bw":          # the slot copy W(t) -> buffer of W(t-1)
        step_bytes = [b + 2 * FP32_BYTES * sh.params for b, sh in zip(step_bytes, shapes)]
    step = [b / (hw.hbm_gbps * 1e9) for b in _per_device(plan, step_bytes)]
    grads = _per_device(plan, [FP32_BYTES * sh.params for sh in shapes])
    allreduce = [ring_allreduce_time(g, data_parallel, hw.dp_bytes_per_s, hw.dp_latency_s)
                 for g in grads]
    boundary = [message_time(microbatch_tokens * sh.message_bytes_per_token, hw.link_bytes_per_s)
                for sh in shapes[:-1]]
    return Costs(vstages=tuple(vst), step=tuple(step), allreduce=tuple(allreduce),
                 boundary=tuple(boundary), latency=hw.latency_s, overlap_p2p=overlap_p2p,
                 overlap_allreduce=overlap_allreduce, time_unit="s",
                 microbatch_tokens=microbatch_tokens, data_parallel=data_parallel,
                 flush=(flush_s,) * plan.stages, flush_interval=flush_interval, clip=clip,
                 clip_latency=2 * (plan.stages - 1) * hw.latency_s if clip else 0.0)


def profile_costs(plan: Plan, profile: Profile, *, link: Hardware | None = None,
                  data_parallel: int | None = None, grad_bytes: list[float] | None = None,
                  overlap_p2p: bool = True, overlap_allreduce: bool = False) -> Costs:
    """Costs measured by a profiled run (see :mod:`.profile` for how each field is used): the
    step without the flush (``step_s``, the slot copy and any clipping wait included; plus
    ``side_s``, the side passes that follow it), the flush apart (``flush_s``, every ``log_interval`` steps of the run), clipping when the run
    clipped.

    ``link``: when given, messages take ``latency + activation_bytes / bandwidth`` instead of
    the measured send wait. ``data_parallel`` larger than the profiled run's adds the ring
    all-reduce of ``grad_bytes`` (per device, required then) on ``link``'s data-parallel
    bandwidth; the measured ``step_s`` already holds the profiled run's own all-reduce.
    """
    if plan.stages != profile.stages:
        raise ValueError(f"the profile has {profile.stages} stages; simulate it with --stages "
                         f"{profile.stages} (got {plan.stages})")
    if plan.chunks != 1:
        raise ValueError("a profile measures whole stages; interleaved chunks need --model costs")
    vst = []
    for p in profile.per_stage:
        bi = p.backward_input_s if p.backward_input_s is not None else p.backward_s / 2
        bw = p.backward_weight_s if p.backward_weight_s is not None else p.backward_s / 2
        vst.append(VStageCost(forward=p.forward_s, backward=p.backward_s, backward_input=bi,
                              backward_weight=bw))
    if link is not None:
        boundary = [message_time(p.activation_bytes, link.link_bytes_per_s)
                    for p in profile.per_stage[:-1]]
        latency = link.latency_s
    else:
        boundary = [p.send_wait_s for p in profile.per_stage[:-1]]
        latency = 0.0
    D = profile.data_parallel if data_parallel is None else data_parallel
    allreduce = [0.0] * plan.stages
    if D != profile.data_parallel:
        if D < profile.data_parallel:
            raise ValueError(f"--data-parallel {D} is below the profiled run's "
                             f"{profile.data_parallel}: its step time already holds that "
                             "all-reduce")
        if link is None or grad_bytes is None:
            raise ValueError("more replicas than the profiled run need --link-gbps (the "
                             "all-reduce bandwidth) and the run's model shape")
        allreduce = [ring_allreduce_time(g, D, link.dp_bytes_per_s, link.dp_latency_s)
                     - ring_allreduce_time(g, profile.data_parallel, link.dp_bytes_per_s,
                                           link.dp_latency_s) for g in grad_bytes]
    return Costs(vstages=tuple(vst),
                 step=tuple(p.step_s + (p.side_s or 0.0) for p in profile.per_stage),
                 allreduce=tuple(allreduce), boundary=tuple(boundary), latency=latency,
                 overlap_p2p=overlap_p2p, overlap_allreduce=overlap_allreduce, time_unit="s",
                 microbatch_tokens=profile.microbatch_tokens, data_parallel=D,
                 flush=tuple(p.flush_s or 0.0 for p in profile.per_stage),
                 flush_interval=profile.log_interval, clip=profile.grad_clip > 0)
