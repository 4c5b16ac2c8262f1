"""`delaybound delay-law protocol`: written once, never replaced by other rules; the decision
code's digest re-recorded (rules unchanged) with one line saying so."""

from __future__ import annotations

import json

from delaybound.cli import main
from llm_validation.delay_law import protocol


def test_protocol_is_written_once_and_never_replaced_by_other_rules(tmp_path, capsys,
                                                                      monkeypatch):
    out = tmp_path / "ledger"
    assert main(["delay-law", "protocol", "--out", str(out)]) == 0
    first = json.loads((out / "protocol.json").read_text())
    assert "commit it before any run" in capsys.readouterr().out

    assert main(["delay-law", "protocol", "--out", str(out)]) == 0
    assert "already recorded" in capsys.readouterr().out

    monkeypatch.setattr(protocol, "code_digest", lambda: "0" * 64)   # the code moved on
    assert main(["delay-law", "protocol", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "rules unchanged, decision code re-recorded" in said and first["code_digest"][:12] in said
    again = json.loads((out / "protocol.json").read_text())
    assert again["digest"] == first["digest"] and again["code_digest"] == "0" * 64

    other = dict(first, digest="f" * 64)                              # a folder of other rules
    (out / "protocol.json").write_text(json.dumps(other))
    assert main(["delay-law", "protocol", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "never replaced" in err and len(err.strip().splitlines()) == 1
    assert json.loads((out / "protocol.json").read_text())["digest"] == "f" * 64


def test_status_says_where_the_ledger_stands_and_what_comes_next(tmp_path, capsys):
    out = tmp_path / "ledger"
    assert main(["delay-law", "protocol", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["delay-law", "status", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "lr           0 /   64 runs finished" in text and "train     waits on" in text
    assert "next: delaybound delay-law run --phase lr" in text
    assert main(["delay-law", "status", "--out", str(out), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["phases"]["lr"] == {"runs": 64, "finished": 0, "started": 0,
                                  "process_minutes": 0.0, "estimated": 0}
    assert main(["delay-law", "status", "--out", str(tmp_path / "none")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_pack_keeps_finished_runs_without_checkpoints(tmp_path, capsys):
    """`pack` writes the phase's finished runs, file times kept, and leaves out checkpoints,
    the folder lock and unfinished runs; unpacked, the runs read back as finished."""
    import os
    import tarfile

    from llm_validation.delay_law.runs import phase_runs
    from llm_validation.validation.runs import is_complete
    from tests.llm_validation.delay_law.fake_runs import write_run
    out = tmp_path / "ledger"
    assert main(["delay-law", "protocol", "--out", str(out)]) == 0
    lr = phase_runs("lr", None)
    done = write_run(out / "runs", lr[0], 1.5)
    (done / "checkpoints").mkdir()
    (done / "checkpoints" / "step_00000500.pt").write_bytes(b"x" * 1000)
    (done / ".lock").write_text("123")
    os.utime(done / "config.json", (1_000_000_000, 1_000_000_000))
    (write_run(out / "runs", lr[1], 1.5) / "summary.json").unlink()     # started, unfinished
    (out / "runs" / "unrelated-run").mkdir()
    capsys.readouterr()
    assert main(["delay-law", "pack", "--out", str(out), "--phase", "lr"]) == 0
    assert f"1 of {len(lr)} lr runs" in capsys.readouterr().out
    with tarfile.open(out / "runs-lr.tar.xz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert all(m.startswith(f"runs/{done.name}") for m in members)
        assert not any("checkpoints" in m or m.endswith(".lock") for m in members)
        assert members[f"runs/{done.name}/config.json"].mtime == 1_000_000_000
        tar.extractall(tmp_path / "unpacked", filter="data")
    assert is_complete(tmp_path / "unpacked" / "runs" / done.name)
    assert main(["delay-law", "pack", "--out", str(out)]) == 2       # no phase: one line
