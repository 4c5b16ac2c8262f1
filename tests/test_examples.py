"""examples/nanogpt_delay.py on two models this project did not write: a model of
``torch.nn.TransformerEncoderLayer`` blocks and a Hugging Face ``transformers`` Llama built from a
small config. Each trains sync / 2BW / 2BW + EF over 3 seeds through ``StatsRecorder``, and
``delaybound validate`` gives verdicts whose statistics were all measured."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from delaybound.cli import main as cli
from llm_validation import read_metrics

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "nanogpt_delay.py"
#: The verdicts that read statistics the recorder promises (validation/assumptions.py,
#: bounds.py) and the EF gain: none may say "not measured" on the example's runs.
STAT_VERDICTS = ("smoothness", "star_convexity", "noise", "momentum_error", "ef_criterion",
                 "ef_gain", "star_convex_delay_term")
#: Statistics every run records at some step (the pair, drift, fresh-update, noise and
#: momentum-error statistics of training/stats.py).
PROMISED = ("grad_norm", "grad_dual_norm", "update_norm", "update_primal_norm",
            "cos_consecutive_update", "ef_drift", "cos_delayed_fresh", "rel_err_delayed_fresh",
            "grad_noise_var", "smoothness_est", "star_convex_slack", "momentum_error")
SEEDS, STEPS = 3, 24     # 3 seeds: real pass / fail verdicts; 24 steps: a quarter holds 3 stats


def _example():
    spec = importlib.util.spec_from_file_location("nanogpt_delay", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("model", ["encoder", "hf-llama"])
def test_example_on_a_foreign_model_validates(tmp_path, capsys, one_thread, model):
    if model == "hf-llama":
        pytest.importorskip("transformers", reason="the test extra: pip install -e '.[test]'")
    report = _example().main(["--model", model, "--out", str(tmp_path), "--seeds", str(SEEDS),
                              "--steps", str(STEPS)])
    assert len(report.runs) == 3 * SEEDS
    assert all(r["status"] == "completed" for r in report.runs)
    for run in sorted(tmp_path.iterdir()):
        rows = [r for r in read_metrics(run) if r["kind"] == "train"]
        assert len(rows) == STEPS
        missing = [k for k in PROMISED if all(r[k] is None for r in rows)]
        assert not missing, (run.name, missing)
    checked = [v for v in report.verdicts if v.id.split("[")[0] in STAT_VERDICTS]
    assert len(checked) == len(STAT_VERDICTS)
    for v in checked:
        assert "not measured" not in v.reason, (v.id, v.reason)
        assert v.n_seeds == SEEDS and v.measured, v.id
    # the command line reads the same directories and gives the same verdicts
    capsys.readouterr()
    assert cli(["validate", str(tmp_path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [(v["id"], v["status"]) for v in printed["verdicts"]] == \
        [(v.id, v.status) for v in report.verdicts]


def test_example_with_lion_gets_its_own_answer_and_ef_share(tmp_path, one_thread):
    """The example with Lion (no AdamW, no Muon): a per-optimizer verdict with the gap, the lag
    and EF's share of the gap (docs/validation.md shows this run)."""
    report = _example().main(["--optimizer", "lion", "--out", str(tmp_path), "--seeds",
                              str(SEEDS), "--steps", str(STEPS)])
    v = report.get("delay_cost[lion]")
    assert v.n_seeds == SEEDS and "not measured" not in v.reason
    share = v.measured["EF (lam = 1) share of the gap removed"]
    assert share.n == SEEDS and share.method == "fieller"
    assert "EF removes" in v.measured["answer"]
    assert {"lion"} == {r["optimizer"] for r in report.runs}
