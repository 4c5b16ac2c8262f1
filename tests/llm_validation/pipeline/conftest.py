"""Fixtures the pipeline tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def pipeline_env(monkeypatch):
    """The pipeline's environment knobs at their test settings, whatever the shell has: each
    rank on one CPU thread (``DELAYBOUND_PIPE_THREADS=1``: the ranks share the machine's
    cores, and the emulated reference runs on one thread too), no injected fault
    (``DELAYBOUND_PIPE_FAULT``) and the default data-parallel reduction
    (``DELAYBOUND_DP_REDUCE`` unset). A test module uses it with
    ``pytestmark = pytest.mark.usefixtures("pipeline_env")`` or from its own fixture."""
    monkeypatch.setenv("DELAYBOUND_PIPE_THREADS", "1")
    monkeypatch.delenv("DELAYBOUND_PIPE_FAULT", raising=False)
    monkeypatch.delenv("DELAYBOUND_DP_REDUCE", raising=False)
