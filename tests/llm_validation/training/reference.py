"""Hand-written reference loops of DelayedOptimizer's rules (THEORY.md "Algorithms" and the
corrections), with the full weight history kept explicitly: helpers for the tests, not tests."""

from __future__ import annotations

import torch

from llm_validation.config import OptimConfig
from llm_validation.training.model import Transformer
from llm_validation.training.optim import build_optimizer
from tests.llm_validation.helpers import MICRO, loss_fn

#: lr per optimizer: large enough that consecutive weights differ clearly at every step.
LR = {"adamw": 1e-2, "muon": 2e-2, "sgd": 0.5, "normuon": 2e-2, "soap": 1e-2, "lion": 1e-3,
      "adan": 1e-2, "nadamw": 1e-2}


def ocfg(name: str, **kw) -> OptimConfig:
    """Constant-lr config of optimizer ``name`` with weight decay (so decay is exercised)."""
    return OptimConfig(name=name, lr=LR[name], schedule="constant", weight_decay=0.1, **kw)


def fresh(name: str, seed: int = 0, param_stage_p: int | None = None, **kw):
    """(micro model, its base optimizer); per-stage groups when ``param_stage_p`` is given."""
    model = Transformer(MICRO, seed=seed)
    stage = None
    if param_stage_p is not None:
        stage = {id(p): s for s, st in enumerate(model.split(param_stage_p))
                 for p in st.parameters()}
    return model, build_optimizer(model, ocfg(name, **kw), param_stage=stage)


def run_wrapped(model, opt, batches) -> None:
    """The usage protocol of DelayedOptimizer over ``batches``."""
    for b in batches:
        with opt.delayed_weights():
            loss_fn(model, b).backward()
        opt.step()
        opt.zero_grad()


def reference(model, base, batches, taus_per_param, *, lam=0.0, level="update", sync=(0, 0),
              dc=0.0, gamma=0.0) -> list[list[torch.Tensor]]:
    """W(t+1) from W(t) written out step by step; returns the history [W(0), ..., W(N)].

    Step t: tau_p(t) = 0 in the first ``sync[0]`` and last ``sync[1]`` of the N steps, else
    tau_p; gradient at W(max(t - tau_p(t), 0)); DC-ASGD ``g + dc g g (W(t) - read)``;
    gradient-level EF ``(1 + lam) g_t - lam g_{t-1}``; base step on W(t); update-level EF
    ``+ lam (v_t - v_{t-1})`` or the look-ahead ``d = gamma d + (1 - gamma) v``,
    ``W(t+1) = W_base + gamma (d - v)``.
    """
    params = [p for g in base.param_groups for p in g["params"]]
    history = [[p.detach().clone() for p in params]]            # history[j] = W(j)
    v_prev = [torch.zeros_like(p) for p in params]
    d = [torch.zeros_like(p) for p in params]
    g_prev = None
    n = len(batches)
    for t, b in enumerate(batches):
        current = [p.detach().clone() for p in params]
        eff = [0 if t < sync[0] or t >= n - sync[1] else tau for tau in taus_per_param]
        read = [history[max(t - e, 0)][i] for i, e in enumerate(eff)]
        with torch.no_grad():
            for p, r in zip(params, read):
                p.copy_(r)                                       # read point, W(-k) = W(0)
        loss_fn(model, b).backward()
        with torch.no_grad():
            for p, c in zip(params, current):
                p.copy_(c)
            if dc:
                for p, r in zip(params, read):
                    p.grad.copy_(p.grad + dc * p.grad * p.grad * (p - r))
            if level == "grad" and lam > 0:
                raw = [p.grad.clone() for p in params]
                if g_prev is not None:
                    for p, gp in zip(params, g_prev):
                        p.grad.copy_(p.grad + lam * (p.grad - gp))   # (1+lam) g_t - lam g_{t-1}
                g_prev = raw
        base.step()
        base.zero_grad()
        with torch.no_grad():
            if level == "update" and lam > 0:
                for p, c, vp in zip(params, current, v_prev):
                    v = p - c                                      # v_t = W_base - W(t)
                    p.copy_(p + lam * (v - vp))                    # + lam (v_t - v_{t-1})
                    vp.copy_(v)
            if gamma:
                for p, c, di in zip(params, current, d):
                    v = p - c
                    di.copy_(gamma * di + (1 - gamma) * v)
                    p.copy_(p + gamma * (di - v))
        history.append([p.detach().clone() for p in params])
    return history
