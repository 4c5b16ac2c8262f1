"""The delay-law design meets the structural rules it promises, and the rule check bites."""

from __future__ import annotations

import math

import pytest

from llm_validation.config import preset
from llm_validation.delay_law import design
from llm_validation.delay_law.batch_laws import DEEPSEEK, STEP_LAW, steps_at


def test_the_design_breaks_no_rule():
    assert design.check_design() == []


def test_the_rule_check_bites(monkeypatch):
    monkeypatch.setattr(design, "SIZES", design.SIZES[:3])
    problems = design.check_design()
    assert any("span 10x" in p for p in problems)
    monkeypatch.setattr(design, "SIZES", ("n46k", "n113k", "n267k", "n485k"))
    monkeypatch.setattr(design, "LR_SEEDS", (3, 100))
    assert any("overlap" in p for p in design.check_design())


def test_every_cell_trains_twenty_tokens_per_parameter():
    for c in design.cells():
        tokens = c.batch * design.SEQ_LEN * c.steps
        assert tokens == pytest.approx(20 * preset(c.size).n_params(), rel=0.05), c.name


def test_the_paper_law_reproduces_the_issue_numbers_at_smollm():
    # DeepSeek LLM's law at SmolLM-135M, 20:1: ~2.9e5 tokens a batch, ~9.3k steps;
    # Step Law: ~19k steps
    steps, batch = steps_at(DEEPSEEK, 134_515_008)
    assert batch == pytest.approx(2.9e5, rel=0.02) and steps == pytest.approx(9.3e3, rel=0.02)
    assert steps_at(STEP_LAW, 134_515_008)[0] == pytest.approx(1.9e4, rel=0.03)


def test_cost_adds_up():
    c = design.cost()
    assert c["total"] == pytest.approx(sum(v for k, v in c.items() if k != "total"))
    assert all(c[s] > 0 for s in design.SIZES)
    assert c[design.SIZES[-1]] > c[design.SIZES[0]]
