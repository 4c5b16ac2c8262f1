"""profile.json: a hand-written file parses, round-trips, and every malformed field is a
one-line ValueError naming the file and the field."""

from __future__ import annotations

import json

import pytest

from llm_validation.simulation.profile import Profile, read_profile, write_profile
from tests.llm_validation.simulation.profiles import hand_profile, write_hand_profile


def test_hand_written_profile_round_trips(tmp_path):
    write_hand_profile(tmp_path / "run", note="kept")
    prof = read_profile(tmp_path / "run")
    assert (prof.schedule, prof.stages, prof.microbatches, prof.microbatch_tokens) == \
        ("2bw", 3, 4, 512)
    assert prof.per_stage[2].backward_weight_s == 0.018 and prof.per_stage[0].samples == 40
    assert prof.extra == {"note": "kept"}
    (tmp_path / "copy").mkdir()
    write_profile(tmp_path / "copy", prof)
    again = read_profile(tmp_path / "copy")
    assert again == prof
    assert json.loads((tmp_path / "copy" / "profile.json").read_text())["schema"] == \
        "delaybound.profile"


@pytest.mark.parametrize("change,match", [
    (lambda d: d.update(version=2), "version 1"),
    (lambda d: d.pop("microbatch_tokens"), "missing keys"),
    (lambda d: d["per_stage"][1].update(forward_s=0), "forward_s"),
    (lambda d: d["per_stage"][1].update(step_s=-1), "step_s"),
    (lambda d: d["per_stage"][0].pop("send_wait_s"), "misses"),
    (lambda d: d["per_stage"].reverse(), "in order"),
    (lambda d: d["per_stage"][2].pop("backward_weight_s"), "give both"),
    (lambda d: d.update(stages=4), "stages 0..3"),
    (lambda d: d.update(microbatches=0), "microbatches"),
])
def test_malformed_profiles_are_refused(change, match):
    d = hand_profile()
    change(d)
    with pytest.raises(ValueError, match=match) as err:
        Profile.from_dict(d, where="RUN/profile.json")
    assert "RUN/profile.json" in str(err.value) and "\n" not in str(err.value)


def test_missing_files_say_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such run directory"):
        read_profile(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="--profile"):
        read_profile(tmp_path)
    (tmp_path / "profile.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_profile(tmp_path)


def test_the_profile_schema_is_torch_free():
    """The simulator reads profile.json (its file name, schema and version defined once, in
    simulation/profile.py) without importing torch; the pipeline's profiler writes them."""
    import subprocess
    import sys
    code = ("import sys, llm_validation.simulation.profile as p; "
            "assert 'torch' not in sys.modules, 'torch imported'; print(p.PROFILE_SCHEMA)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    from llm_validation.pipeline import profile as writer
    assert writer.PROFILE_SCHEMA == out.stdout.strip() and writer.PROFILE_FILE == "profile.json"
