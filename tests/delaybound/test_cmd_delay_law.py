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
                                  "process_minutes": 0.0}
    assert main(["delay-law", "status", "--out", str(tmp_path / "none")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
