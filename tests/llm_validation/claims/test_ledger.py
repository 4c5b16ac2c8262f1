"""The ledger on synthetic runs: claims.json / claims.md / figures, every verdict recomputable
from claims.json alone, the per-run table, and a second invocation that trains nothing."""

from __future__ import annotations

import json

import pytest

from llm_validation.claims.decide.checks import KINDS, recheck
from llm_validation.claims.report.ledger import RUNS_DIR, assemble, measured_cost, write_ledger
from llm_validation.claims.plan.plan import build_plan, execute
from llm_validation.claims.catalogue.registry import get_claims
from llm_validation.claims.plan.scales import get_scale
from llm_validation.config import preset
from tests.llm_validation.claims.scenarios import SCENARIOS, stats_for
from tests.llm_validation.claims.synthetic import write_runs

IDS = ("adamw-vs-muon", "ef-halves-gap", "horizon")
#: One claim per check kind (besides ``side``/``all``/``most`` that every claim has): margin
#: kinds, group kinds, divergence; and the theory-only claim 17.
KIND_IDS = ("adamw-vs-muon", "ef-halves-gap", "momentum-direction", "weight-decay", "dcasgd",
            "beta2", "grad-level-ef", "sync-phases", "alignment")
#: Keys the per-run table promises to ``delaybound advise`` (docs/reproduce.md).
RUN_KEYS = {"optimizer", "mode", "tau", "lam", "lr", "batch_size", "seq_len", "steps",
            "tokens_per_step", "seed", "status", "final_val_loss", "best_val_loss",
            "val_curve", "partner", "lag", "stats", "n_params"}


def _ledger(tmp_path, ids=IDS, which=None):
    claims = get_claims(ids)
    plan = build_plan(claims, get_scale("tiny"), seeds=(0, 1, 2))
    for i, c in enumerate(claims):
        w = which or ("pass", "fail")[i % 2]
        write_runs(tmp_path / RUNS_DIR, c, plan, SCENARIOS[c.id][0 if w == "pass" else 1],
                   stats_for(c.id, w))
    return plan


def _walk(check):
    yield check
    for p in check["parts"]:
        yield from _walk(p)


def test_finished_runs_are_reused_not_retrained(tmp_path):
    plan = _ledger(tmp_path, which="pass")
    summary = execute(plan, tmp_path / RUNS_DIR, jobs=0, progress=False)
    assert summary.ran == 0 and summary.reused == len(plan.runs) and not summary.errors
    index = json.loads((tmp_path / RUNS_DIR / "index.json").read_text())
    assert {r["status"] for r in index["runs"]} == {"skipped"}


def test_claims_json_and_markdown(tmp_path):
    plan = _ledger(tmp_path, which="pass")
    results = assemble(plan, tmp_path)
    doc = write_ledger(plan, results, tmp_path)
    saved = json.loads((tmp_path / "claims.json").read_text())
    assert [c["id"] for c in saved["claims"]] == list(IDS) == [r.id for r in results]
    assert saved["counts"] == doc["counts"] and saved["settings"]["seeds"] == [0, 1, 2]
    first = saved["claims"][0]
    assert first["result"]["status"] == "pass" and first["reason"] and first["grid"]
    st = first["result"]["statements"]
    assert [s["id"] for s in st] == ["1a", "1b", "T1"] and st[0]["quote"]
    assert st[0]["check"]["parts"][0]["interval"]["n"] == 3
    assert st[0]["check"]["parts"][0]["samples"].keys() == {"0", "1", "2"}
    arm = first["result"]["arms"]["muon/2bw"]
    assert set(arm["gap"]) == set(arm["lag_steps"]) == set(arm["final_val"]) == {"0", "1", "2"}
    md = (tmp_path / "claims.md").read_text()
    for r in results:
        assert f"## {get_claims([r.id])[0].number}. {r.id}" in md
        assert (tmp_path / r.plot).is_file() and f"]({r.plot})" in md
    assert "# The project's theory on the same runs" in md and "why this grid:" in md
    assert "lag (steps)" in md and "Claim rule:" in md


def test_the_measured_cost_sums_the_finished_runs_process_times(tmp_path):
    runs = tmp_path / RUNS_DIR
    # a: continued, its process_s covers both invocations; b: no process_s (counted from wall)
    for name, status, steps, wall, process in (
            ("a", "completed", 50, 30.0, 45.0), ("b", "diverged", 7, 12.5, None),
            ("c", "running", 20, 1000.0, None), ("d", "error", 3, 7.0, None),
            ("g", "completed", 40, 9.0, None)):   # g: short of its 50 steps
        (runs / name).mkdir(parents=True)
        (runs / name / "config.json").write_text(json.dumps({"run": {"steps": 50}}))
        (runs / name / "summary.json").write_text(json.dumps({"status": status, "steps": steps,
                                                              "wall_time_s": wall,
                                                              "process_s": process}))
    (runs / "e").mkdir()
    (runs / "e" / "config.json").write_text(json.dumps({"run": {"steps": 50}}))
    (runs / "e" / "summary.json").write_text('{"status": "compl')     # killed mid-write
    (runs / "f").mkdir()                                               # never finished
    m = measured_cost(runs)
    assert (m["runs"], m["process_s"], m["estimated"]) == (2, 57.5, 1)
    assert "1 run(s) whose summary did not record it" in m["note"]
    assert measured_cost(tmp_path / "nowhere")["runs"] == 0
    # in the ledger: claims.json's budget and claims.md's run line
    plan = _ledger(tmp_path, which="pass")
    for r in sorted(p for p in runs.iterdir() if p.name not in set("abcdefg")):
        summ = json.loads((r / "summary.json").read_text())
        (r / "summary.json").write_text(json.dumps({**summ, "wall_time_s": 60.0,
                                                    "process_s": 60.0}))
    doc = write_ledger(plan, assemble(plan, tmp_path, figures=False), tmp_path)
    n = doc["budget"]["measured"]["runs"]
    assert n == len(plan.runs) + 2
    assert doc["budget"]["measured"]["process_s"] == pytest.approx(60.0 * (n - 2) + 57.5)
    minutes = round((60.0 * (n - 2) + 57.5) / 60)
    assert f"measured {minutes} over the {n} finished runs" in (tmp_path / "claims.md").read_text()


def test_every_check_kind_is_recomputed_from_claims_json_alone(tmp_path):
    plan = _ledger(tmp_path, KIND_IDS)
    write_ledger(plan, assemble(plan, tmp_path, figures=False), tmp_path)
    saved = json.loads((tmp_path / "claims.json").read_text())
    seen: dict[str, set[str]] = {}
    for claim in saved["claims"]:
        for st in claim["result"]["statements"]:
            for chk in _walk(st["check"]):
                assert recheck(chk) == chk["status"], (claim["id"], chk["label"])
                seen.setdefault(chk["kind"], set()).add(chk["status"])
                if chk["status"] == "inconclusive" and chk["kind"] != "divergence":
                    assert chk["seeds_needed"] and set(chk["seeds_needed"]) == {"50%", "80%"}
    assert set(seen) == set(KINDS), set(KINDS) - set(seen)
    assert {"pass", "fail"} <= set().union(*seen.values())
    assert saved["theory_claims"] == ["sync-phases"]
    assert saved["statement_counts"]["theory"] and saved["statement_counts"]["paper"]


def test_a_tampered_input_changes_the_recomputed_verdict(tmp_path):
    """recheck really rebuilds the contrast from the per-seed inputs (it can disagree)."""
    plan = _ledger(tmp_path, ("adamw-vs-muon",), which="pass")
    write_ledger(plan, assemble(plan, tmp_path, figures=False), tmp_path)
    saved = json.loads((tmp_path / "claims.json").read_text())
    chk = saved["claims"][0]["result"]["statements"][0]["check"]["parts"][0]
    assert recheck(chk) == "pass"
    chk["inputs"]["gap Muon"] = {s: 5.0 for s in chk["inputs"]["gap Muon"]}
    assert recheck(chk) == "fail"


def test_the_per_run_table(tmp_path):
    plan = _ledger(tmp_path, ("adamw-vs-muon",), which="pass")
    write_ledger(plan, assemble(plan, tmp_path, figures=False), tmp_path)
    runs = json.loads((tmp_path / "claims.json").read_text())["runs"]
    assert len(runs) == len(plan.runs)
    for name, rec in runs.items():
        assert RUN_KEYS <= set(rec), name
        if rec["mode"] == "sync":
            assert rec["partner"] is None and rec["lag"] is None
        else:
            assert runs[rec["partner"]]["seed"] == rec["seed"]
            assert set(rec["lag"]) >= {"steps", "fraction", "gap_fraction"}
        assert rec["val_curve"][-1][0] == rec["steps"]
        assert rec["n_params"] == preset("tiny").n_params()         # the runs' model section


def test_the_ledger_decides_at_the_seeds_policys_level(tmp_path):
    """assemble decides every check at SeedPolicy.level_at(seeds) (97.5% at 3 seeds under
    the default Bonferroni split), records it, and the verdicts differ from 95% where an
    interval sits between the two (policy=None: 95%)."""
    from llm_validation.claims.decide.sequential import DEFAULT_POLICY, SeedPolicy

    plan = _ledger(tmp_path, KIND_IDS)
    wired = assemble(plan, tmp_path, figures=False, family=False)
    plain = assemble(plan, tmp_path, figures=False, policy=None, family=False)
    level = DEFAULT_POLICY.level_at(3)
    assert level == DEFAULT_POLICY.level1 == 0.975
    for r in wired:
        # a claim's own look: its seeds (claim 16 runs the seeds its detection power needs)
        own = DEFAULT_POLICY.level_at(len(plan.seeds_of(r.id)))
        assert own == level or len(plan.seeds_of(r.id)) > 3, r.id
        for s in r.statements:
            stack = [s.check]
            while stack:
                c = stack.pop()
                stack.extend(c.parts)
                assert c.params["level"] == own, (r.id, c.label)
                if c.interval is not None and c.interval.n >= 2:
                    assert c.interval.level == own
    widths = [(a.check.interval.hi - a.check.interval.lo, b.check.interval.hi - b.check.interval.lo)
              for rw, rp in zip(wired, plain) for a, b in zip(rw.statements, rp.statements)
              if a.check.interval is not None and a.check.interval.n >= 2]
    assert widths and all(w > p for w, p in widths)
    loose = assemble(plan, tmp_path, figures=False, policy=SeedPolicy(split=0.999),
                     family=False)
    loose_policy = SeedPolicy(split=0.999)
    assert all(c.params["level"] == pytest.approx(loose_policy.level_at(len(plan.seeds_of(r.id))))
               for r in loose for s in r.statements for c in [s.check])
    assert any(c.params["level"] == pytest.approx(1 - 0.05 * 0.999)
               for r in loose for s in r.statements for c in [s.check])


def test_family_decided_checks_record_holm_and_the_per_check_reading(tmp_path):
    """With the family on (the default), a leaf the family decided carries its raw and
    adjusted p-values and decides at a level at least the per-check one; an undecided leaf keeps
    the per-check level; each statement keeps its per-check and BH statuses beside."""
    from llm_validation.claims.decide.sequential import DEFAULT_POLICY
    plan = _ledger(tmp_path, KIND_IDS)
    level = DEFAULT_POLICY.level_at(3)
    decided = 0
    for r in assemble(plan, tmp_path, figures=False):
        for s in r.statements:
            assert s.per_check in ("pass", "fail", "inconclusive") and s.fdr
            stack = [s.check]
            while stack:
                c = stack.pop()
                stack.extend(c.parts)
                if c.parts or "p_raw" not in c.params:
                    continue
                assert c.params["level"] >= level - 1e-12
                if c.status != "inconclusive":
                    decided += 1
                    assert c.params["p_adj"] <= 0.05  # Holm's last rejection decides at 97.5%
    assert decided


def test_claims_md_names_the_level_its_checks_decide_at(tmp_path):
    """Every interval in a check table names its level (97.5% per check under the default
    policy, Holm's higher level for a check the family decided, 95% without a policy), so the
    page never says 95% beside a 97.5% decision."""
    import re
    plan = _ledger(tmp_path, ("adamw-vs-muon",), which="pass")
    for policy, allowed in (("default", lambda x: x >= 97.5), (None, lambda x: x == 95.0)):
        kw = {} if policy == "default" else {"policy": None, "family": False}
        write_ledger(plan, assemble(plan, tmp_path, figures=False, **kw), tmp_path)
        text = (tmp_path / "claims.md").read_text()
        rows = [ln for ln in text.splitlines() if re.match(r"\| .* \| (side|all|most) \|", ln)]
        levels = [float(m) for ln in rows for m in re.findall(r"\] \(([0-9.]+)%\)", ln)]
        assert levels and all(allowed(x) for x in levels), levels


def test_every_delayed_arm_has_its_gap_in_the_arm_table(tmp_path):
    """A delayed arm's gap is paired with the claim's own synchronous partner arm by seed,
    whatever the runs' condition labels: DC-ASGD's arms (condition 'dcasgd ...', partner the
    plain synchronous run) get a gap like every other arm (they had none before)."""
    plan = _ledger(tmp_path, ("dcasgd",), which="pass")
    for r in assemble(plan, tmp_path, figures=False):
        for key, arm in r.arms.items():
            if not arm["sync"]:
                assert arm["intervals"].get("gap"), (r.id, key)
                assert len(arm["gap"]) == 3, (r.id, key)
