"""``delaybound theory``: list/show/check/latex/eval/tune, JSON output, exit codes, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delaybound.cli import main
from delaybound.cmd_theory import parse_assignments

EXAMPLE = ["K=1000", "L=1", "eta=0.01", "alpha=0.1", "beta=0.005", "sigma=0", "rho=1", "tau=1",
           "r0=1"]


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list_json(capsys):
    from theory import THEOREMS

    code, out, _ = run(capsys, "theory", "list", "--json")
    assert code == 0
    rows = json.loads(out)["theorems"]
    assert [r["name"] for r in rows] == list(THEOREMS)
    assert rows[0]["parameters"] == ["eta", "beta"]


def test_show_json_and_text(capsys):
    code, out, _ = run(capsys, "theory", "show", "star_convex_delayed", "--json")
    info = json.loads(out)
    assert code == 0 and info["proof_md"] == "proofs_md/star_convex_delayed.md"
    assert [p["name"] for p in info["parameters"]][:3] == ["K", "L", "eta"]
    assert info["steps"][0]["id"] == "S1" and info["tuning"]
    code, out, _ = run(capsys, "theory", "show", "nonconvex_delayed_gd")
    assert code == 0 and "Condition:" in out and "S9" in out


def test_latex_json(capsys):
    code, out, _ = run(capsys, "theory", "latex", "pl_delay_gap", "--json")
    assert code == 0 and r"\leq" in json.loads(out)["latex"]


def test_eval_example_json(capsys):
    from theory import THEOREMS

    code, out, _ = run(capsys, "theory", "eval", "star_convex_delayed", *EXAMPLE, "--json")
    assert code == 0
    expected = THEOREMS["star_convex_delayed"].evaluate(
        **{k: v for k, v in parse_assignments(EXAMPLE).items()})
    assert json.loads(out) == {"bound": expected}


def test_tune_json(capsys):
    code, out, _ = run(capsys, "theory", "tune", "nonconvex_delayed", "eps=0.1", "L=1",
                       "sigma=1", "rho=2", "tau=1", "Delta0=1", "--json")
    result = json.loads(out)
    assert code == 0 and result["bound"] <= 0.1 and result["K"] == result["parameters"]["K"]


def test_check_json_reports_every_step(capsys):
    code, out, _ = run(capsys, "theory", "check", "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True
    from theory import THEOREMS

    assert [t["name"] for t in report["theorems"]] == list(THEOREMS)
    for theorem in report["theorems"]:
        assert theorem["ok"]
        for step in theorem["steps"]:
            assert {"id", "kind", "status"} <= set(step)
            assert step["status"] == {"algebra": "proved", "analytic": "confirmed"}[step["kind"]]


def test_check_exits_nonzero_when_a_step_fails(capsys, monkeypatch):
    import theory.predicates as preds

    monkeypatch.setitem(preds.PREDICATES, "wd_step_length",
                        lambda **inst: -1.0 + 0 * inst["eta"])
    code, out, _ = run(capsys, "theory", "check", "geometry_weight_decay", "--instances", "3",
                       "--seed", "99", "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    assert [s["status"] for s in report["theorems"][0]["steps"] if s["id"] == "S7"] == ["failed"]


@pytest.mark.parametrize("argv, fragment", [
    (["theory", "eval", "nope", "K=1"], "unknown theorem"),
    (["theory", "show", "nope"], "unknown theorem"),
    (["theory", "eval", "star_convex_delayed", "K"], "expected k=v"),
    (["theory", "eval", "star_convex_delayed", "K=1", "K=2"], "given twice"),
    (["theory", "eval", "star_convex_delayed", "=3"], "missing parameter name"),
    (["theory", "eval", "star_convex_delayed", *EXAMPLE, "gamma=1"], "unexpected parameter"),
    (["theory", "eval", "star_convex_delayed", *EXAMPLE[1:]], "missing parameter"),
    (["theory", "check", "--instances", "0"], "--instances"),
    (["theory", "tune", "geometry_weight_decay", "eps=0.1"], "no tuned corollary"),
])
def test_usage_errors_are_one_line_exit_2(capsys, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and fragment in err and "Traceback" not in err


VALUES = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1.5", "abc", "", "1e999", "True", "None"]),
    st.text(alphabet="0123456789.-+eEx", min_size=1, max_size=6),
)



@given(st.integers(0, len(EXAMPLE) - 1), VALUES)
def test_bad_values_fuzz(index, value):
    """Any value: either a valid evaluation (exit 0) or one line naming the parameter (exit 2)."""
    import contextlib
    import io

    argv = list(EXAMPLE)
    name = argv[index].split("=")[0]
    argv[index] = f"{name}={value}"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["theory", "eval", "star_convex_delayed", *argv, "--json"])
    if code == 0:
        assert "bound" in json.loads(out.getvalue())
    else:
        lines = err.getvalue().strip().splitlines()
        assert code == 2 and len(lines) == 1 and name in lines[0] and "Traceback" not in lines[0]


def test_real_process_bad_input_is_one_line():
    cmd = [sys.executable, "-m", "delaybound", "theory", "eval", "star_convex_delayed",
           *EXAMPLE[:-1], "r0=-1", "--json"]
    bad = subprocess.run(cmd, capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().count("\n") == 0 and "r0=-1" in bad.stderr
