"""Helpers of the Schedule2BW tests: the example's model, optimizers, the stage worker, the
single-process ``DelayedOptimizer(tau=1)`` reference, and the mutations that must fail."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from llm_validation.pipeline.schedule2bw import Schedule2BW
from llm_validation.pipeline.schedule import BACKWARD
from llm_validation.pipeline.schedule_guards import GradientGuard
from llm_validation.pipeline.weight_versions import WeightVersions
from llm_validation.training.delay import DelayedOptimizer
from llm_validation.training.optim import ChainedOptimizer

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "schedule2bw_encoder.py"
SEED = 0
#: Sequences per microbatch (batch = M x this).
MB_SIZE = 2
ADAMW_LR, MUON_LR = 3e-3, 0.02


def example() -> Any:
    """The example module (the user's model, split, loss and data), loaded from its file."""
    name = "schedule2bw_encoder_example"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def make_optimizer(module: nn.Module, kind: str) -> Any:
    """AdamW on everything, or Muon (torch's) on the encoder blocks' matrices + AdamW on the
    rest (embedding, position, norms, biases, head), chained."""
    if kind == "adamw":
        return torch.optim.AdamW(module.parameters(), lr=ADAMW_LR, weight_decay=0.1)
    hidden = {id(p) for m in module.modules() if isinstance(m, nn.TransformerEncoderLayer)
              for p in m.parameters() if p.ndim == 2}
    mats = [p for p in module.parameters() if id(p) in hidden]
    rest = [p for p in module.parameters() if id(p) not in hidden]
    return ChainedOptimizer(torch.optim.Muon(mats, lr=MUON_LR, weight_decay=0.1),
                            torch.optim.AdamW(rest, lr=ADAMW_LR, weight_decay=0.1))


# ----------------------------------------------------------------------------- mutations
class ReadsNewest(Schedule2BW):
    """Mutation: batch t reads the master's slot (W(t) once step t-1 is taken) instead of
    W(t-1)."""

    def _install(self, batch: int, kind: str) -> None:
        self._versions.install((batch + 1) % 2)


class _NoCopy(WeightVersions):
    @torch.no_grad()
    def advance(self, t: int, in_place: bool) -> None:
        stale, current = self.slots[t % 2], self.slots[(t + 1) % 2]
        self.installed = -1
        if in_place:
            self.slots[t % 2], self.slots[(t + 1) % 2] = current, stale
        else:
            for p, s in zip(self.masters, stale):
                p.data = s.data


class SkipsCopy(Schedule2BW):
    """Mutation: the slot of W(t-1) does not receive W(t) before the step (the step starts
    from W(t-1))."""

    def _make_versions(self, module, next_batch, previous):
        return _NoCopy(module, next_batch, previous)


class _DataSwap(WeightVersions):
    def install(self, k: int) -> None:
        with torch.no_grad():
            for p, w in zip(self.masters, self.slots[k]):
                p.data = w.data
                if isinstance(p.grad, GradientGuard):     # gradients accumulate on p here
                    p.grad = None
        self.installed = k

    def restore(self) -> None:
        pass

    def take_grads(self, k: int) -> list:
        out = [p.grad for p in self.masters]
        for p in self.masters:
            p.grad = None
        return out


class SwapsData(Schedule2BW):
    """Mutation: versions applied by swapping the masters' ``p.data`` (autograd saves the
    masters, gradients on them) instead of installing the version's own leaves."""

    def _make_versions(self, module, next_batch, previous):
        return _DataSwap(module, next_batch, previous)


class RecomputeReadsMaster(Schedule2BW):
    """Mutation: the module holds the master weights during each backward, so a recompute
    (activation checkpointing) reads the master instead of the version its forward read."""

    def _install(self, batch: int, kind: str) -> None:
        if kind == BACKWARD:
            for p in self._versions.masters:   # no guard: the gradients may land here
                p.grad = None
            self._versions.restore()
        else:
            self._versions.install(batch % 2)


def lr_decay(optimizer: Any, c: dict) -> Any:
    """``lr / (1 + step)`` when the config asks for a scheduler (``lr_decay``), else None."""
    if not c.get("lr_decay"):
        return None
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))


MUTATIONS = {None: Schedule2BW, "reads_newest": ReadsNewest, "skips_copy": SkipsCopy,
             "swaps_data": SwapsData, "recompute_reads_master": RecomputeReadsMaster}


def configs(P: int, steps: int) -> list[dict]:
    """AdamW and Muon, lam in {0, 1}, M in {P, 2P}."""
    return [{"name": f"{o}-lam{lam}-M{M}", "optim": o, "lam": float(lam), "M": M, "steps": steps}
            for o in ("adamw", "muon") for lam in (0, 1) for M in (P, 2 * P)]


# --------------------------------------------------------------- activation checkpointing
#: Prefix torch's ``checkpoint_wrapper`` puts before the wrapped block's parameter names.
WRAPPED = "_checkpoint_wrapped_module."


def _save_matmuls(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """Selective checkpointing policy: keep the matmuls' outputs, recompute the rest."""
    from torch.utils.checkpoint import CheckpointPolicy

    keep = op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
                  torch.ops.aten.bmm.default)
    return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE


def apply_ac(module: nn.Module, kind: str | None) -> None:
    """Activation checkpointing on every encoder block of ``module``: ``full`` (non-reentrant
    ``torch.utils.checkpoint`` around the block's forward), ``wrapper`` (torch's
    ``checkpoint_wrapper``, as torchtitan applies it), ``selective`` (per-op: matmuls saved,
    the rest recomputed); None: nothing."""
    import functools

    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    if kind is None:
        return
    for name, block in list(module.named_children()):
        if not isinstance(block, nn.TransformerEncoderLayer):
            continue
        if kind == "wrapper":
            module._modules[name] = checkpoint_wrapper(block)
            continue
        extra = {} if kind == "full" else {"context_fn": functools.partial(
            create_selective_checkpoint_contexts, _save_matmuls)}
        block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False,
                                          **extra)


def replica_batches(ex: Any, c: dict, replica: int, steps: int | None = None) -> Any:
    """Replica ``replica``'s batches (replica 0: the single-pipeline batches)."""
    return ex.batches(c["steps"] if steps is None else steps, c["M"] * MB_SIZE, seed=1 + replica)


def build_schedule(ctx: Any, c: dict, seed: int = SEED) -> tuple:
    """(module, schedule, base optimizer, lr scheduler) of this rank for config ``c``."""
    from torch.distributed.pipelining import PipelineStage

    ex = example()
    s, P = ctx.mesh.stage, ctx.mesh.stages
    dev = torch.device("cuda", ctx.local_rank) if c.get("cuda") else torch.device("cpu")
    module = ex.split(ex.build_model(seed), s, P).to(dev)
    apply_ac(module, c.get("ac"))
    stage = PipelineStage(module, s, P, dev, group=ctx.mesh.pp_group)
    base = make_optimizer(module, c["optim"])
    decay = lr_decay(base, c)
    sched = MUTATIONS[c.get("mutation")](
        stage, c["M"], ex.loss_fn, optimizer=base, ef_lambda=c["lam"], lr_scheduler=decay,
        scale_grads=c.get("scale_grads", True), max_norm=c.get("max_norm", 0.0),
        dp_group=ctx.mesh.dp_group if ctx.mesh.replicas > 1 else None)
    return module, sched, base, decay


def train_steps(ctx: Any, sched: Any, batches: Any, c: dict, first: int = 0) -> tuple:
    """Run the batches (numbered from ``first``) through ``sched``: (losses, evals)."""
    ex = example()
    s, P = ctx.mesh.stage, ctx.mesh.stages
    dev = torch.device("cuda", ctx.local_rank) if c.get("cuda") else torch.device("cpu")
    losses, evals = [], []
    sched.probed = []
    for t, (x, y) in enumerate(batches, start=first):
        x, y, got = x.to(dev), y.to(dev), []
        if s == 0:
            sched.step(x)
        elif s == P - 1:
            sched.step(target=y, losses=got)
        else:
            sched.step()
        if got:
            losses.append(torch.stack(got))
        if c.get("flush_at") == t + 1:        # evaluate at a drain, then go on
            sched.finish()
            x, y = (v.to(dev) for v in next(ex.batches(1, c["M"] * MB_SIZE, seed=7)))
            ev = sched.eval(x) if s == 0 else sched.eval(target=y) if s == P - 1 \
                else sched.eval()
            evals.append(torch.stack(ev) if ev else None)
        if c.get("save_at") == t:             # a checkpoint between two step() calls
            save(c["dir"], sched)
        if t + 1 in c.get("probe_sends", ()):
            sched.probed.append(sched.pending_sends)
    sched.finish()
    return losses, evals


def result(ctx: Any, module: nn.Module, sched: Any, losses: list, evals: list) -> dict:
    return {"stage": ctx.mesh.stage, "replica": ctx.mesh.replica,
            "losses": [v.cpu() for v in losses], "evals": [None if v is None else v.cpu()
                                                        for v in evals],
            "weights": {n.replace(WRAPPED, ""): p.detach().cpu().clone()
                        for n, p in module.named_parameters()},
            "weight_bytes": sched.weight_bytes(), "param_bytes": sched.param_bytes(),
            "pending_sends": sched.probed}


def stage_worker(ctx: Any, cfgs: list[dict], out_dir: str) -> None:
    """One rank (spawned by ``processes.spawn_stages``): every config in turn, each with a
    fresh ``PipelineStage`` + schedule; writes ``rank<r>.pt`` with per-config losses (last
    stage), evaluations, final weights and weight bytes. A config with ``resume_at = k``
    trains again from a checkpoint taken after batch k, in fresh objects built from
    another seed, and is stored under ``<name>-resumed``."""
    torch.set_num_threads(1)
    ex = example()
    results = {}
    for c in cfgs:
        if "save_at" in c:
            c = {**c, "dir": str(Path(out_dir) / f"ckpt-{c['name']}")}
        module, sched, _, _ = build_schedule(ctx, c)
        losses, evals = train_steps(ctx, sched, replica_batches(ex, c, ctx.mesh.replica), c)
        results[c["name"]] = result(ctx, module, sched, losses, evals)
        if "save_at" in c:                    # resume in fresh objects from another seed
            k = c["save_at"]
            module, sched, base, decay = build_schedule(ctx, c, seed=SEED + 1)
            load(c["dir"], sched)
            rest = list(replica_batches(ex, c, ctx.mesh.replica))[k + 1:]
            losses, evals = train_steps(ctx, sched, rest, {**c, "save_at": None}, first=k + 1)
            results[c["name"] + "-resumed"] = result(ctx, module, sched, losses, evals)
    torch.save(results, Path(out_dir) / f"rank{ctx.rank}.pt")


def _states(sched: Any) -> dict:
    """What a trainer saves: model and optimizer (DCP's name-keyed forms), the scheduler, and
    the schedule (Stateful)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(sched._stage.submod, sched.optimizer)
    return {"model": model_sd, "optim": optim_sd, "lr": sched.lr_scheduler, "schedule": sched}


def save(path: str, sched: Any) -> None:
    import torch.distributed.checkpoint as dcp

    dcp.save(_states(sched), checkpoint_id=path)


def load(path: str, sched: Any) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    states = _states(sched)
    dcp.load(states, checkpoint_id=path)
    set_state_dict(sched._stage.submod, sched.optimizer, model_state_dict=states["model"],
                   optim_state_dict=states["optim"])


def example_worker(ctx: Any, argv: list[str], out_dir: str) -> None:
    """One rank running the example's both-schedules body (``run_both``) on ``argv``; the
    last stage writes ``example.json``."""
    import json

    ex = example()
    out = ex.run_both(ctx.rank, ctx.world, ex.parse_args(argv))
    if ctx.rank == ctx.world - 1:
        (Path(out_dir) / "example.json").write_text(json.dumps(out))


def tokens_loss(logits: torch.Tensor, target: torch.Tensor,
                global_valid_tokens: int) -> torch.Tensor:
    """torchtitan's loss: the summed cross-entropy over the batch's token count."""
    import torch.nn.functional as F

    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                           reduction="sum") / global_valid_tokens


def reference(c: dict) -> dict:
    """The single-process run of ``c``: the whole model, ``DelayedOptimizer(tau=1, lam,
    grad_clip=max_norm)``, microbatch losses summed into the gradients in order, divided by
    M (torch's scale_grads); with D replicas, each replica's sum / M, then their mean."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ex = example()
        model = ex.build_model(SEED)
        base = make_optimizer(model, c["optim"])
        opt = DelayedOptimizer(base, tau=1, ef_lambda=c["lam"],
                               grad_clip=c.get("max_norm", 0.0))
        decay = lr_decay(base, c)
        M, D, losses, evals = c["M"], c.get("D", 1), [], []
        assert D in (1, 2), "the reference averages at most two replicas"
        lossf = tokens_loss if c.get("loss") == "tokens" else \
            (lambda out, y, _tokens: ex.loss_fn(out, y))
        norms = []
        scale = c.get("scale_grads", True)
        data = zip(*[replica_batches(ex, c, d) for d in range(D)])
        for t, per_replica in enumerate(data):
            sums, ls = [], []
            with opt.delayed_weights():
                for x, y in per_replica:
                    for xj, yj in zip(torch.tensor_split(x, M), torch.tensor_split(y, M)):
                        loss = lossf(model(xj), yj, x.numel())
                        loss.backward()
                        ls.append(loss.detach())
                    if D > 1:
                        sums.append([p.grad.div(M) if scale else p.grad.clone()
                                     for p in model.parameters()])
                        model.zero_grad(set_to_none=True)
            with torch.no_grad():
                for i, p in enumerate(model.parameters()):
                    if D > 1:
                        p.grad = (sums[0][i] + sums[1][i]).div_(D)
                    elif p.grad is not None and scale:
                        p.grad.div_(M)
            opt.step()
            opt.zero_grad()
            norms.append(opt.last_grad_norm)
            if decay is not None:
                decay.step()
            losses.append(torch.stack(ls))
            if c.get("flush_at") == t + 1:
                x, y = next(ex.batches(1, M * MB_SIZE, seed=7))
                with torch.no_grad():
                    evals.append(torch.stack([ex.loss_fn(model(xj), yj) for xj, yj in
                                              zip(torch.tensor_split(x, M),
                                                  torch.tensor_split(y, M))]))
        return {"losses": losses, "evals": evals, "grad_norms": norms,
                "weights": {n: p.detach().clone() for n, p in model.named_parameters()}}
    finally:
        torch.set_num_threads(threads)


def gather(out_dir: Path, P: int) -> dict[str, dict]:
    """Per config: the last stages' losses (replicas concatenated per batch, in replica
    order) and evaluations, replica 0's weights of every stage merged, whether every replica
    ended with the same weights, and each rank's weight copies and pending sends."""
    ranks = [torch.load(p) for p in sorted(Path(out_dir).glob("rank*.pt"))]
    out = {}
    for name in ranks[0]:
        rs = [r[name] for r in ranks]
        last = sorted((r for r in rs if r["stage"] == P - 1), key=lambda r: r["replica"])
        weights, agree = {}, True
        for r in rs:
            if r["replica"] == 0:
                weights.update(r["weights"])
        for r in rs:
            agree &= all(torch.equal(v, weights[n]) for n, v in r["weights"].items())
        out[name] = {"losses": [torch.cat(ls) for ls in zip(*[r["losses"] for r in last])],
                     "evals": last[0]["evals"], "weights": weights, "replicas_agree": agree,
                     "copies": [r["weight_bytes"] / r["param_bytes"] for r in rs],
                     "pending_sends": [r["pending_sends"] for r in rs]}
    return out


def equal_runs(got: dict, ref: dict) -> bool:
    """Losses, evaluations and final weights bitwise equal."""
    return (len(got["losses"]) == len(ref["losses"])
            and all(torch.equal(a, b) for a, b in zip(got["losses"], ref["losses"]))
            and len(got["evals"]) == len(ref["evals"])
            and all(torch.equal(a, b) for a, b in zip(got["evals"], ref["evals"]))
            and set(got["weights"]) == set(ref["weights"])
            and all(torch.equal(got["weights"][n], ref["weights"][n]) for n in ref["weights"]))
