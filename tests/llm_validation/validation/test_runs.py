"""Pairing a delayed run with its synchronous partner survives config files written by older
code (fields added since take their defaults) and numerics-neutral bookkeeping fields."""

from __future__ import annotations

import json

from llm_validation.validation.runs import RunRecord, paired_gaps

from tests.llm_validation.validation.synthetic_runs import fake_run


def _strip(run_dir, section, *names):
    p = run_dir / "config.json"
    cfg = json.loads(p.read_text())
    for n in names:
        cfg[section].pop(n)
    p.write_text(json.dumps(cfg))


def test_a_partner_written_by_older_code_still_pairs(tmp_path):
    sync = fake_run(tmp_path / "a", opt="muon", val=2.0, seed=0)
    delayed = fake_run(tmp_path / "b", opt="muon", val=2.25, seed=0, tau=1)
    # the synchronous run predates the boundary and log-interval fields (as the ledger's early
    # runs do); the delayed one logs every 5 steps (bookkeeping)
    _strip(sync, "model", "boundary_dtype", "boundary_stages")
    _strip(sync, "run", "log_interval")
    cfg = json.loads((delayed / "config.json").read_text())
    cfg["run"]["log_interval"] = 5
    (delayed / "config.json").write_text(json.dumps(cfg))
    runs = [RunRecord.load(sync), RunRecord.load(delayed)]
    assert runs[0].condition == runs[1].condition
    assert paired_gaps([runs[1]], runs) == {0: 0.25}
    # a field that changes the training still separates them
    cfg["optim"]["lr"] = cfg["optim"]["lr"] * 2
    (delayed / "config.json").write_text(json.dumps(cfg))
    assert paired_gaps([RunRecord.load(delayed)], runs) == {}
