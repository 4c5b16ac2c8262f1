"""A hand-written profile.json (the schema of llm_validation.simulation.profile) for the tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def hand_profile(**top: Any) -> dict[str, Any]:
    """Three stages of a 2BW run, M = 4, 512-token microbatches; stage 2 measured I and W."""
    stages = [
        {"stage": 0, "forward_s": 0.010, "backward_s": 0.020, "step_s": 0.004,
         "send_wait_s": 0.001, "recv_wait_s": 0.003, "activation_bytes": 1e6, "samples": 40},
        {"stage": 1, "forward_s": 0.011, "backward_s": 0.022, "step_s": 0.004,
         "send_wait_s": 0.002, "recv_wait_s": 0.002, "activation_bytes": 2e6, "samples": 40},
        {"stage": 2, "forward_s": 0.014, "backward_s": 0.030, "step_s": 0.005,
         "send_wait_s": 0.0, "recv_wait_s": 0.001, "activation_bytes": 0,
         "backward_input_s": 0.012, "backward_weight_s": 0.018, "samples": 40},
    ]
    d = {"schema": "delaybound.profile", "version": 1, "schedule": "2bw", "stages": 3,
         "microbatches": 4, "microbatch_tokens": 512, "data_parallel": 1, "per_stage": stages}
    d.update(top)
    return d


def write_hand_profile(run_dir: Path, **top: Any) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "profile.json"
    path.write_text(json.dumps(hand_profile(**top), indent=2))
    return path
