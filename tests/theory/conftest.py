"""Shared fixtures of the theory tests: every proof is checked once per session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def proof_reports():
    """name -> ProofReport of ``THEOREMS[name].proof.check()`` (default instances and seed)."""
    from theory import THEOREMS

    return {name: th.proof.check() for name, th in THEOREMS.items()}
