"""The delay-law ledger end to end on fake runs of a shortened design: lr choice, the
held-out gate, predictions, verdicts, the chosen law and the paper's setting."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path

import pytest

from llm_validation.delay_law import design, ledger, runs
from tests.llm_validation.delay_law.fake_runs import frontier_loss, write_run

#: Where the end-to-end test leaves the fake ledger's figures for a look.
FIGURE_COPY = Path(tempfile.gettempdir()) / "delay_law_e2e"
#: The fake cost law: the lag falls as steps^-0.5 and does not depend on N.
BASE = {"adamw/2bw": 0.6, "adamw/2bw+ef": 0.25, "muon/2bw": 0.15, "muon/2bw+ef": 0.05}


def _lag(arm: str, steps: int, seed: int) -> float:
    return BASE[arm] * (steps / 40) ** -0.5 * (1 + 0.02 * (seed - 1.5))


@pytest.fixture
def short_design(monkeypatch):
    monkeypatch.setattr(design, "SHARED_STEPS", 40)
    monkeypatch.setattr(design, "LONG_STEPS", 160)
    monkeypatch.setattr(design, "steps_at", lambda law, n, tpp, seq: (80, 0))
    monkeypatch.setattr(design, "batch_sequences", lambda size, steps: 2)


def _fake_phase(out, phase, lrs=None):
    for r in runs.phase_runs(phase, lrs):
        steps = r.cfg.run.steps
        if r.kind == "lr":
            final = frontier_loss(steps, r.seed, r.optimizer) + 0.1 * math.log(r.lr_multiple) ** 2
        elif r.mode == "sync":
            final = frontier_loss(steps, r.seed, r.optimizer)
            if r.kind == "arm":          # B / B_simple falls with the step count, as the lag
                write_run(out / "runs", r, final, rho=(steps / 40) ** -1.0 * (1 + 0.1 * r.seed))
                continue
        else:
            cell_steps = round(steps / r.fraction)
            lag = _lag(f"{r.optimizer}/{r.mode}", cell_steps, r.seed)
            final = frontier_loss(cell_steps * (1 - lag), r.seed, r.optimizer)
        write_run(out / "runs", r, final)


def test_ledger_end_to_end(tmp_path, short_design, monkeypatch):
    """Every phase on fake runs; the figures are kept in /tmp/delay_law_e2e for a look."""
    profiles = [design.LrProfile(size=p.size, optimizer=p.optimizer, steps=40)
                for p in design.lr_profiles()]
    monkeypatch.setattr(design, "lr_profiles", lambda: tuple(profiles))
    monkeypatch.setattr(runs.design, "lr_profiles", lambda: tuple(profiles))
    assert ledger.status(tmp_path)["next"] == "run --phase lr"
    _fake_phase(tmp_path, "lr")
    ledger._choose_lrs(tmp_path)
    st = ledger.status(tmp_path)
    assert st["phases"]["lr"]["finished"] == st["phases"]["lr"]["runs"] > 0
    assert st["phases"]["train"]["finished"] == 0 and st["next"] == "run --phase train"
    assert (tmp_path / "figures" / ledger.LR_FIGURE).stat().st_size > 10_000
    lrs = ledger.read_lrs(tmp_path)
    assert lrs["n46k"]["adamw"] == pytest.approx(runs.LR_CENTRES["n46k"]["adamw"])
    with pytest.raises(FileNotFoundError, match="predictions"):
        ledger.run_phase("held-out", tmp_path)
    # no prediction from part of the training cells (here: none of them)
    with pytest.raises(ledger.TrainingIncomplete, match="finish the 'train' phase"):
        ledger.write_predictions(tmp_path)
    partial = ledger.write_predictions(tmp_path, allow_missing=True)
    assert len(partial["train_missing"]) == len(runs.phase_runs("train", lrs))
    _fake_phase(tmp_path, "train", lrs)
    assert ledger.status(tmp_path)["next"].startswith("predict again")   # the partial file
    (tmp_path / ledger.PREDICTIONS_FILE).unlink()
    assert ledger.status(tmp_path)["next"] == "predict, then commit predictions.json"
    preds = ledger.write_predictions(tmp_path)
    assert preds["train_missing"] == []
    assert ledger.status(tmp_path)["next"] == "run --phase held-out"
    held = [c.name for c in design.cells() if c.held_out]
    assert preds["held_out"] == held
    steps_law = preds["laws"]["adamw/2bw:lag:steps"]["predictions"]
    for name in held:
        cell = next(c for c in design.cells() if c.name == name)
        assert steps_law[name]["estimate"] == pytest.approx(
            _lag("adamw/2bw", cell.steps, 1.5), rel=0.05)
    _fake_phase(tmp_path, "held-out", lrs)
    doc = ledger.assemble(tmp_path)
    assert json.loads((tmp_path / ledger.LEDGER_FILE).read_text())["laws"]
    assert doc["missing"] == {}
    check = doc["predictions_check"]        # the committed predictions are the ones scored
    assert check["committed"] and check["differ"] == [] and check["compared"] > 0
    assert check["written_at"] == preds["written_at"] and check["started_before"] == []
    # mutation: predictions dated after the held-out runs name every one of them
    later = ledger.runs_started_before(tmp_path, "2999-01-01T00:00:00+00:00")
    assert len(later) == len(runs.phase_runs("held-out", lrs)) > 0
    assert doc["laws"]["adamw/2bw:lag"]["chosen"] == "steps"
    st = doc["statements"]
    assert st["P1"]["status"] == "pass" and st["P2a"]["status"] == "pass"
    assert st["N-adamw"]["status"] == "inconclusive"       # the lag does not depend on N
    assert st["S-adamw"]["status"] == "pass" and st["S-adamw"]["mean"] < 0
    assert doc["exponents"]["adamw"]["lo"] <= 0 <= doc["exponents"]["adamw"]["hi"] or \
        abs(doc["exponents"]["adamw"]["estimate"]) < 1e-9
    md = (tmp_path / "ledger.md").read_text()
    assert "| P1 | paper | **pass**" in md and "lag_vs_steps.png" in md
    assert "reproduce all" in md and "no held-out run started before that" in md
    noise = doc["noise_scale"]["adamw/2bw"]["sets"]
    assert noise["rho"]["r2"] > 0.9 and noise["rho"]["held_out"] is not None
    assert "## Exploratory: the batch over its noise scale (not in the protocol)" in md
    for fig in ("lag_vs_size.png", "lag_vs_lr.png"):
        assert (tmp_path / "figures" / fig).stat().st_size > 10_000
        assert f"figures/{fig}" in md
    shutil.copytree(tmp_path / "figures", FIGURE_COPY, dirs_exist_ok=True)
    paper = doc["paper"]["adamw/2bw"]["models"]["SmolLM-135M"]
    assert paper["predictions"]["deepseek"]["steps"] == pytest.approx(9257, rel=0.01)
    gap = doc["paper_gap_share"]["adamw/2bw"]
    assert gap["law"] == doc["laws"]["adamw/2bw:gap_share"]["chosen"]
    g = gap["models"]["SmolLM-135M"]["deepseek"]
    assert g["steps"] == paper["predictions"]["deepseek"]["steps"]
    assert g["lo"] <= g["share"] <= g["hi"]
    assert "## Exploratory: the gap share at the paper's setting" in md
