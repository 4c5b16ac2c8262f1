"""Original PipeDream (weight stashing without 2BW's double buffering) in the emulator: stage s
of P reads weights P - 1 - s steps old. ``DelayConfig(stage_taus=pipedream_taus(P))`` gives one
tau per parameter group (``build_optimizer(..., param_stage=...)`` splits groups by stage, as
``train`` does); this test watches the weights the wrapper actually exposes inside
``delayed_weights()`` and checks each stage's delay against the recorded trajectory."""

from __future__ import annotations

import pytest
import torch

from llm_validation.config import OptimConfig, pipedream_taus
from llm_validation.training.delay import DelayedOptimizer
from llm_validation.training.model import Transformer, lm_loss
from llm_validation.training.optim import build_optimizer
from tests.llm_validation.helpers import MICRO, make_batches


@pytest.mark.parametrize("P", [2, 3])
def test_pipedream_stage_delays_are_p_minus_1_minus_s(P):
    model = Transformer(MICRO, seed=0)
    stage_of = {id(p): s for s, st in enumerate(model.split(P)) for p in st.parameters()}
    base = build_optimizer(model, OptimConfig(name="adamw", lr=1e-2, schedule="constant"),
                           param_stage=stage_of)
    taus = pipedream_taus(P)
    opt = DelayedOptimizer(base, tau=max(taus), group_taus=[taus[g["stage"]] for g in base.param_groups])
    params = opt.params
    stage = [stage_of[id(p)] for p in params]
    history = [[p.detach().clone() for p in params]]            # W(0), W(1), ...
    steps = 6
    for t, batch in enumerate(make_batches(steps)):
        with opt.delayed_weights():
            seen = [p.detach().clone() for p in params]           # what the gradient reads
            lm_loss(model(batch[:, :-1]), batch[:, 1:]).backward()
        for i, w in enumerate(seen):
            tau = P - 1 - stage[i]
            assert torch.equal(w, history[max(t - tau, 0)][i]), (t, stage[i], tau)
        opt.step()
        opt.zero_grad()
        history.append([p.detach().clone() for p in params])
    # the weights move, so the check above tells the delays apart (W(t - tau) != W(t))
    last = [history[steps - 1 - (P - 1 - s)] for s in range(P)]
    for s in range(P - 1):
        i = stage.index(s)
        assert not torch.equal(last[s][i], history[steps - 1][i])
    assert sorted(set(stage)) == list(range(P))
