"""Every proof step is proved (algebra) or confirmed (analytic); proofs_md and code agree; a
wrong step is caught."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sympy

from theory import THEOREMS
from theory.decide import le
from theory.proof import TOL, Proof, Step

ROOT = Path(__file__).resolve().parents[2]
HEADING = re.compile(r"^### (S\d+)\b.*\*\((algebra|analytic)[^)]*\)\*\s*$")


def _md_steps(theorem) -> list[tuple[str, str]]:
    text = (ROOT / theorem.proof_md).read_text(encoding="utf-8")
    steps = []
    for line in text.splitlines():
        if line.startswith("### S"):
            match = HEADING.match(line)
            assert match, f"{theorem.proof_md}: malformed step heading {line!r}"
            steps.append((match.group(1), match.group(2)))
    return steps


@pytest.mark.parametrize("name", list(THEOREMS))
def test_no_step_fails(proof_reports, name):
    report = proof_reports[name]
    failed = [(s.id, s.detail) for s in report.steps if s.status == "failed"]
    assert report.ok and not failed, failed
    for step, result in zip(THEOREMS[name].proof.steps, report.steps):
        assert result.status == ("proved" if step.kind == "algebra" else "confirmed")
        if step.kind == "analytic":
            assert result.min_slack >= -TOL


@pytest.mark.parametrize("name", list(THEOREMS))
def test_markdown_ids_and_kinds_match_the_encoded_proof(name):
    theorem = THEOREMS[name]
    encoded = [(s.id, s.kind) for s in theorem.proof.steps]
    assert _md_steps(theorem) == encoded


@pytest.mark.parametrize("name", list(THEOREMS))
def test_module_and_markdown_name_each_other(name):
    theorem = THEOREMS[name]
    md = (ROOT / theorem.proof_md).read_text(encoding="utf-8")
    module_src = (ROOT / theorem.module).read_text(encoding="utf-8")
    assert theorem.module in md
    assert theorem.proof_md in module_src
    assert f"({Path(theorem.proof_md).name})" in (ROOT / "proofs_md/README.md").read_text()


def test_every_proof_uses_both_kinds_and_all_geometries():
    for theorem in THEOREMS.values():
        kinds = {s.kind for s in theorem.proof.steps}
        assert kinds == {"algebra", "analytic"}, theorem.name
    geometries = {g for th in THEOREMS.values() for s in th.proof.steps if s.kind == "analytic"
                  for g in s.geometries}
    assert {"l2", "linf", "spectral"} <= geometries


def test_a_false_algebra_step_fails():
    x = sympy.Symbol("x", positive=True)
    proof = Proof(theorem="t", steps=(
        Step(id="S1", claim="x <= x/2", justification="wrong", kind="algebra",
             obligations=(le("wrong", x, x / 2),)),))
    report = proof.check()
    assert not report.ok and report.steps[0].status == "failed"


def _step_claim_1p5_eta(original, inst):  # ||x_{k+1} - x_k|| <= 1.5 eta
    return original(**inst) - 0.5 * inst["eta"]


def _recursion_without_smoothness_term(original, inst):  # drop the 2 L eta^2 term
    return original(**inst) - 2 * inst["L"] * inst["eta"] ** 2


def _momentum_error_with_half_the_noise(original, inst):  # claim with sigma/2
    return original(**{**inst, "sigma": inst["sigma"] / 2})


@pytest.mark.parametrize("predicate, options, mutate", [
    ("wd_step_length", {}, _step_claim_1p5_eta),
    ("star_convex_one_step", {}, _recursion_without_smoothness_term),
    ("momentum_error_lemma", {"weight_decay": True}, _momentum_error_with_half_the_noise),
])
def test_a_too_strong_analytic_claim_fails(monkeypatch, predicate, options, mutate):
    """A stronger (false) version of a claim is caught by check(): the instances reach the
    worst cases."""
    import theory.predicates as preds

    original = preds.PREDICATES[predicate]
    monkeypatch.setitem(preds.PREDICATES, predicate, lambda **inst: mutate(original, inst))
    proof = Proof(theorem="t", steps=(
        Step(id="S1", claim="too strong", justification="test", kind="analytic",
             predicate=predicate, options=options),))
    report = proof.check(instances=16)
    assert report.steps[0].status == "failed", report.steps[0].detail


def test_check_is_deterministic():
    theorem = THEOREMS["geometry_weight_decay"]
    first = theorem.proof.check(instances=8, seed=3, use_cache=False).to_dict()
    second = theorem.proof.check(instances=8, seed=3, use_cache=False).to_dict()
    for a, b in zip(first["steps"], second["steps"]):
        assert (a["status"], a["min_slack"]) == (b["status"], b["min_slack"])


def test_step_validation():
    with pytest.raises(ValueError):
        Step(id="X1", claim="", justification="", kind="algebra", obligations=())
    with pytest.raises(ValueError):
        Step(id="S1", claim="", justification="", kind="analytic", predicate="no_such_predicate")
    with pytest.raises(ValueError):
        Proof(theorem="t", steps=(Step(id="S2", claim="", justification="", kind="analytic",
                                       predicate="wd_step_length"),))
