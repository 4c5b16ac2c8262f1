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


# ------------------------------------------------------------------------------ the runs
def stage_worker(ctx: Any, cfgs: list[dict], out_dir: str) -> None:
    """One rank (spawned by ``processes.spawn_stages``): every config in turn, each with a
    fresh ``PipelineStage`` + schedule; writes ``rank<r>.pt`` with per-config losses (last
    stage), final weights and weight bytes."""
    from torch.distributed.pipelining import PipelineStage

    torch.set_num_threads(1)
    ex = example()
    rank, P = ctx.rank, ctx.world
    results = {}
    for c in cfgs:
        dev = torch.device("cuda", ctx.local_rank) if c.get("cuda") else torch.device("cpu")
        module = ex.split(ex.build_model(SEED), rank, P).to(dev)
        stage = PipelineStage(module, rank, P, dev, group=ctx.mesh.pp_group)
        base = make_optimizer(module, c["optim"])
        sched = MUTATIONS[c.get("mutation")](stage, c["M"], ex.loss_fn, optimizer=base,
                                             ef_lambda=c["lam"],
                                             lr_scheduler=lr_decay(base, c),
                                             scale_grads=c.get("scale_grads", True))
        losses, evals = [], []
        for t, (x, y) in enumerate(ex.batches(c["steps"], c["M"] * MB_SIZE)):
            x, y = x.to(dev), y.to(dev)
            got = []
            if rank == 0:
                sched.step(x)
            elif rank == P - 1:
                sched.step(target=y, losses=got)
            else:
                sched.step()
            if got:
                losses.append(torch.stack(got))
            if c.get("flush_at") == t + 1:        # evaluate at a drain, then go on
                sched.finish()
                x, y = (v.to(dev) for v in next(ex.batches(1, c["M"] * MB_SIZE, seed=7)))
                ev = sched.eval(x) if rank == 0 else sched.eval(target=y) if rank == P - 1 \
                    else sched.eval()
                evals.append(torch.stack(ev) if ev else None)
        sched.finish()
        results[c["name"]] = {"losses": [v.cpu() for v in losses if isinstance(v, torch.Tensor)],
                              "evals": [None if v is None else v.cpu() for v in evals],
                              "weights": {n: p.detach().cpu().clone()
                                          for n, p in module.named_parameters()},
                              "weight_bytes": sched.weight_bytes(),
                              "param_bytes": sched.param_bytes()}
    torch.save(results, Path(out_dir) / f"rank{rank}.pt")


def example_worker(ctx: Any, argv: list[str], out_dir: str) -> None:
    """One rank running the example's both-schedules body (``run_both``) on ``argv``; the
    last stage writes ``example.json``."""
    import json

    ex = example()
    out = ex.run_both(ctx.rank, ctx.world, ex.parse_args(argv))
    if ctx.rank == ctx.world - 1:
        (Path(out_dir) / "example.json").write_text(json.dumps(out))


def reference(c: dict) -> dict:
    """The single-process run of ``c``: the whole model, ``DelayedOptimizer(tau=1, lam)``,
    microbatch losses summed into the gradients in order, divided by M (torch's scale_grads)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ex = example()
        model = ex.build_model(SEED)
        base = make_optimizer(model, c["optim"])
        opt = DelayedOptimizer(base, tau=1, ef_lambda=c["lam"])
        decay = lr_decay(base, c)
        M, losses, evals = c["M"], [], []
        for t, (x, y) in enumerate(ex.batches(c["steps"], M * MB_SIZE)):
            with opt.delayed_weights():
                ls = []
                for xj, yj in zip(torch.tensor_split(x, M), torch.tensor_split(y, M)):
                    loss = ex.loss_fn(model(xj), yj)
                    loss.backward()
                    ls.append(loss.detach())
            with torch.no_grad():
                for p in model.parameters():
                    if p.grad is not None and c.get("scale_grads", True):
                        p.grad.div_(M)
            opt.step()
            opt.zero_grad()
            if decay is not None:
                decay.step()
            losses.append(torch.stack(ls))
            if c.get("flush_at") == t + 1:
                x, y = next(ex.batches(1, M * MB_SIZE, seed=7))
                with torch.no_grad():
                    evals.append(torch.stack([ex.loss_fn(model(xj), yj) for xj, yj in
                                              zip(torch.tensor_split(x, M),
                                                  torch.tensor_split(y, M))]))
        return {"losses": losses, "evals": evals,
                "weights": {n: p.detach().clone() for n, p in model.named_parameters()}}
    finally:
        torch.set_num_threads(threads)


def gather(out_dir: Path, P: int) -> dict[str, dict]:
    """Per config: the last stage's losses and evaluations, every stage's weights merged."""
    ranks = [torch.load(out_dir / f"rank{r}.pt") for r in range(P)]
    out = {}
    for name in ranks[0]:
        weights = {}
        for r in ranks:
            weights.update(r[name]["weights"])
        out[name] = {"losses": ranks[-1][name]["losses"], "evals": ranks[-1][name]["evals"],
                     "weights": weights,
                     "copies": [r[name]["weight_bytes"] / r[name]["param_bytes"] for r in ranks]}
    return out


def equal_runs(got: dict, ref: dict) -> bool:
    """Losses, evaluations and final weights bitwise equal."""
    return (len(got["losses"]) == len(ref["losses"])
            and all(torch.equal(a, b) for a, b in zip(got["losses"], ref["losses"]))
            and len(got["evals"]) == len(ref["evals"])
            and all(torch.equal(a, b) for a, b in zip(got["evals"], ref["evals"]))
            and set(got["weights"]) == set(ref["weights"])
            and all(torch.equal(got["weights"][n], ref["weights"][n]) for n in ref["weights"]))
