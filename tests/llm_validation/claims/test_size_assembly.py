"""The size ladder across the 20:1 ledgers: read from per-size folders, fitted, written."""

from __future__ import annotations

import json

from delaybound.cli import main
from llm_validation.claims.plan.plan import build_plan
from llm_validation.claims.catalogue.registry import CLAIMS
from llm_validation.claims.catalogue.size import SIZE_LADDER_SEEDS
from llm_validation.claims.plan.scales import SIZE_LADDER
from llm_validation.claims.report.size_ladder import assemble_size_ladder, read_size_ladder
from llm_validation.config import preset
from llm_validation.records.atomic_io import write_json
from tests.llm_validation.claims.synthetic import write_runs

#: Muon's synthetic gap at the smallest size, and the exponent it shrinks with in N.
MUON_GAP, EXPONENT = 0.2, -0.5


def _ledgers(root, scales=SIZE_LADDER):
    claim = CLAIMS["size-ladder"]
    n0 = preset(scales[0].model).n_params()
    for scale in scales:
        folder = root / scale.name
        folder.mkdir(parents=True)
        write_json(folder / "lr_sweep.json",
                   {"optimizers": {o: {"lr": lr} for o, lr in scale.lrs.items()}})
        plan = build_plan([claim], scale, seeds=tuple(range(SIZE_LADDER_SEEDS)))
        f = (preset(scale.model).n_params() / n0) ** EXPONENT
        gaps = {"adamw/2bw": 4 * MUON_GAP * f, "adamw/2bw+ef": MUON_GAP * f,
                "muon/2bw": MUON_GAP * f, "muon/2bw+ef": 0.3 * MUON_GAP * f}
        write_runs(folder / "runs", claim, plan, gaps)


def test_reads_every_size_and_seed(tmp_path):
    _ledgers(tmp_path)
    data, missing = read_size_ladder(tmp_path)
    assert not missing
    assert data.sizes == tuple(preset(s.model).n_params() for s in SIZE_LADDER)
    for n in data.sizes:
        assert len(data.values("muon/2bw", "lag_fraction")[n]) == SIZE_LADDER_SEEDS


def test_a_shrinking_gap_has_a_negative_exponent_and_the_files_are_written(tmp_path):
    _ledgers(tmp_path)
    doc = assemble_size_ladder(tmp_path)
    gap_fit = doc["fits"]["muon/2bw"]["gap_fraction"]
    assert json.dumps(gap_fit)  # serialisable
    md = (tmp_path / "size_ladder.md").read_text()
    # the ladder's steps grow with N: its exponents are named so, nothing is extrapolated
    assert "EXTRAPOLATION" not in md and "SmolLM-135M, N =" not in md
    assert "step-and-size exponent" in md and "| size exponent" not in md
    assert "docs/delay_law.md" in md and doc["checks"] == []
    assert all(not f["extrapolations"] for by_q in doc["fits"].values() for f in by_q.values())
    assert doc["steps"] == {s.name: s.steps for s in SIZE_LADDER}
    assert (tmp_path / "figures" / "size-ladder.png").stat().st_size > 10_000
    fits = doc["fits"]["muon/2bw"]["gap_fraction"]["fit"]
    assert fits["interval"]["hi"] < 0            # the gap shrinks with N


def test_a_missing_size_is_named(tmp_path):
    _ledgers(tmp_path, SIZE_LADDER[:2])
    _, missing = read_size_ladder(tmp_path)
    assert any(SIZE_LADDER[2].name in m for m in missing)


def test_cli_size_ladder(tmp_path, capsys):
    _ledgers(tmp_path)
    assert main(["reproduce", "--size-ladder", str(tmp_path)]) == 0
    assert "size_ladder.md" in capsys.readouterr().out
    assert main(["reproduce", "--size-ladder", str(tmp_path / "nope")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_list_json_shows_the_20tpp_scales_and_the_size_ladder_claim_with_costs(capsys):
    for scale in SIZE_LADDER:
        assert main(["reproduce", "--list", "--json", "--scale", scale.name]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["scales"][scale.name]["tokens_per_param"] == 20.0
        ladder = next(c for c in doc["claims"] if c["id"] == "size-ladder")
        assert ladder["runs_needed"] > 0 and ladder["estimated_process_s"] > 0
        assert doc["estimated_process_s"] > 0


def test_the_y_range_shows_the_drawn_values_and_clips_a_wider_extrapolation():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from llm_validation.claims.sizes.markdown import _MARGIN_DECADES, _y_range
    fig, ax = plt.subplots()
    ax.set_yscale("log")
    assert _y_range(ax, [1.0, 10.0], [0.5, 20.0], [3.0]) is False
    assert ax.get_ylim() == (1.0 / 10 ** _MARGIN_DECADES, 10.0 * 10 ** _MARGIN_DECADES)
    assert _y_range(ax, [1.0, 10.0], [1e-6, 20.0], []) is True     # the low end is clipped
    plt.close(fig)
