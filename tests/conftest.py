"""Shared pytest configuration: Hypothesis profiles and common fixtures.

Profiles (select with ``HYPOTHESIS_PROFILE=<name>``; ``CI=true`` selects ``ci``):
- ``dev``: quick local iteration (few examples, default deadline off for torch warm-up).
- ``ci``: deterministic (derandomized), no deadline, moderate example counts.
- ``thorough``: many examples for long verification runs; not used by ``make test``.
"""

from __future__ import annotations

import os

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
