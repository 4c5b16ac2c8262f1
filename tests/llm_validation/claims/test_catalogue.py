"""The catalogue: every claim carries its analysis and thresholds, every threshold an analysis
reads is declared by its claim and recorded in the protocol, and docs/catalogue.md is the
catalogue's own page (regenerated here, not copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

from delaybound.cli import main
from llm_validation.claims.catalogue.registry import CLAIMS, get_claims, thresholds
from llm_validation.claims.decide.analysis import analyse
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.sequential import DEFAULT_POLICY
from llm_validation.claims.plan.scales import get_scale
from llm_validation.claims.record.claim import Claim
from llm_validation.claims.report.protocol import protocol
from tests.llm_validation.claims.scenarios import SCENARIOS, stats_for
from tests.llm_validation.claims.synthetic import plan_for, write_runs

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def thresholds_read(tmp_path_factory) -> dict[str, set[str]]:
    """claim id -> the thresholds its analysis reads, on its passing synthetic runs."""
    read: dict[str, set[str]] = {}
    original = Claim.threshold

    def recording(self, name):
        read.setdefault(self.id, set()).add(name)
        return original(self, name)

    mp = pytest.MonkeyPatch()
    mp.setattr(Claim, "threshold", recording)
    try:
        for cid, claim in CLAIMS.items():
            out = tmp_path_factory.mktemp(cid)
            plan = plan_for(claim)
            write_runs(out, claim, plan, SCENARIOS[cid][0], stats_for(cid, "pass"))
            res = analyse(claim, ClaimData(claim, plan, out))
            assert {s.statement.id for s in res.statements} == \
                {s.id for s in claim.statements}, cid
    finally:
        mp.undo()
    return read


def test_every_claim_has_an_analysis_with_one_check_per_statement(thresholds_read):
    for c in CLAIMS.values():
        assert callable(c.analyse), c.id


#: Thresholds read where the claim is decided across ledgers, not by its per-ledger analysis
#: (none: the size ladder no longer decides agreement checks by an extrapolation in N).
ACROSS_LEDGERS: dict[str, set[str]] = {}


def test_every_threshold_read_is_declared_and_every_declared_one_is_read(thresholds_read):
    for cid, c in CLAIMS.items():
        read = thresholds_read.get(cid, set()) | ACROSS_LEDGERS.get(cid, set())
        assert read == set(c.thresholds), cid


@pytest.mark.parametrize("scale", ["tiny", "n46k"])
def test_every_threshold_is_in_the_protocol(scale):
    s = get_scale(scale)
    doc = protocol(get_claims(s.claims), s, DEFAULT_POLICY, (0, 1, 2))
    for c in CLAIMS.values():
        for name, value in c.thresholds.items():
            assert doc["constants"][name] == value, (c.id, name)
    assert doc["constants"] == thresholds()


def test_an_undeclared_threshold_is_a_clear_error():
    with pytest.raises(KeyError, match="no threshold 'nope'"):
        CLAIMS["horizon"].threshold("nope")


def test_docs_catalogue_is_the_catalogues_own_page(capsys):
    assert main(["reproduce", "--list", "--markdown"]) == 0
    page = capsys.readouterr().out
    committed = (ROOT / "docs" / "catalogue.md").read_text()
    assert page == committed, ("docs/catalogue.md is stale: regenerate it with "
                               "`delaybound reproduce --list --markdown > docs/catalogue.md`")
    for c in CLAIMS.values():
        assert f"`{c.id}`" in page and c.grid in page and c.reason in page, c.id
