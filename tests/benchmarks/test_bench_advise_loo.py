"""``bench_advise_loo.py``'s held-out cells on a synthetic designed ledger whose true law is
known."""

from __future__ import annotations

import json

from benchmarks.bench_advise_loo import main
from llm_validation.advice.cell_choice import KINDS
from tests.llm_validation.advice.synthetic_ledger import pair_records, write_ledger
from tests.llm_validation.advice.test_cell_choice import BATCH_TOKENS, SEEDS, SIZES, true_g


def test_bench_scores_every_kind_on_a_designed_ledger(tmp_path, capsys):
    recs = []
    for n in SIZES[:3]:
        for t in (500, 1000, 2000):
            for s in SEEDS[:3]:
                recs.append(pair_records(opt="muon", T=t, seed=s, g=true_g(t, 1.0),
                                         n_params=n, batch=BATCH_TOKENS // t))
    for r in (0.5, 2.0):
        for s in SEEDS[:3]:
            recs.append(pair_records(opt="muon", T=1000, seed=s, g=true_g(1000, r),
                                     n_params=SIZES[0], lr=1e-3 * r, batch=16))
    assert main(["--json", "--ledger", str(write_ledger(tmp_path / "led", recs))]) == 0
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert all("skipped" not in cells["share"][k] for k in KINDS)
    assert cells["choice"]["law"] == "size_steps_lr" and set(cells["goal"]) == set(KINDS)
    assert all(v["met"] for v in cells["goal"].values())
    assert "_rows" not in cells["share"]["batch"]
