"""Shared pytest configuration: Hypothesis profiles and common fixtures.

Profiles (select with ``HYPOTHESIS_PROFILE=<name>``; ``CI=true`` selects ``ci``):
- ``dev``: quick local iteration (few examples, default deadline off for torch warm-up).
- ``ci``: deterministic (derandomized), no deadline, moderate example counts.
- ``thorough``: many examples for long verification runs; not used by ``make test``.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=25, deadline=None)
settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

_default = "ci" if os.environ.get("CI", "").lower() == "true" else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default))


@pytest.fixture
def one_thread():
    """One torch thread for the test, restored afterwards: the tiny models are fastest so,
    above all on a loaded machine, and a run repeats bitwise only within one thread count
    (a compiled CPU run, ``training.compiled``; the recorder against the project's loop).
    torch is imported here, not at the top: the suites without it start without it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
