"""The one-command re-run's score table and acceptance line, on a synthetic three-size pilot."""

from __future__ import annotations

from benchmarks import advise_rerun
from llm_validation.advice.transfer_choice import transfer_summary
from tests.llm_validation.advice.synthetic_pairs import make_pairs


def test_scores_table_and_acceptance():
    pts = [(round(tpp * N / 1024), N, 1.0 / tpp) for N in (10_000, 100_000, 1_000_000)
           for tpp in (5, 10, 20)]
    t = transfer_summary(make_pairs(pts)[1])
    a = t["acceptance"]
    assert a["measurable"] and a["law"] == "tokens_per_param" and a["hits"] == a["pairs"] == 3
    assert a["met"] and t["sizes"] == [10_000, 100_000, 1_000_000]
    md = "\n".join(advise_rerun.scores_markdown(t))
    assert "| largest_size (N=1,000,000) | tokens_per_param | 3 / 3 | 3 |" in md
    assert "advise uses **tokens_per_param**" in md and "goal 80%: met" in md
    assert "| largest_size (N=1,000,000) | seed_reference (not a law) | 0 / 3 | 0 |" in md
    assert "Seed scatter: each held-out pair predicted by its own arm's other seeds hits 0/3." in md
    assert ("Confirmation fold (did not choose the law): tokens_per_param predicts N=100,000 "
            "from N=10,000 within a factor 2 on 3/3 pairs (100%)." in md)
    one = transfer_summary(make_pairs([(T, 1000, 0.1) for T in (100, 200)])[1])
    one_md = "\n".join(advise_rerun.scores_markdown(one))
    assert "Acceptance not measurable: one model size" in one_md
    assert "Confirmation fold: skipped (needs three model sizes (the pilot has 1))." in one_md


def test_cells_table_choice_and_goal():
    from llm_validation.advice.cell_choice import cell_summary
    from llm_validation.advice.pilot import pairs
    from tests.llm_validation.advice.test_cell_choice import _design
    md = "\n".join(advise_rerun.cells_markdown(cell_summary(pairs(_design()))))
    assert "| lr (2 folds) | size_steps_lr | 8 / 8 | 8 | 0.00 |" in md
    assert "The held-out cells choose **size_steps_lr**" in md
    assert "- size: 100% of 16 transferable pairs within x2, seed reference 100%, goal 90%: met" in md
    one = [p for p in pairs(_design(lr_cells=False)) if p.horizon == 1000]
    assert "do not decide" in "\n".join(advise_rerun.cells_markdown(cell_summary(one)))


def test_rerun_refuses_a_missing_pilot_folder(tmp_path, capsys):
    """``--pilot`` reads a folder of run directories; a wrong path is one line and exit 2."""
    assert advise_rerun.main(["--pilot", str(tmp_path / "no-such-runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--pilot: no such folder" in err[0]
