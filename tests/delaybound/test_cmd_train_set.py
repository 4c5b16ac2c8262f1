"""`delaybound train --set`: any config field by its dotted path, through the config's one
override (`TrainConfig.with_fields`); the named flags are frozen (new knobs come through --set)."""

from __future__ import annotations

import pytest

from delaybound.cli import build_parser, main
from delaybound.cmd_train import config_from_args
from llm_validation.config import TrainConfig, field_value, set_field

#: train's named flags, frozen: a new knob is a config field reached by ``--set``. A flag added
#: here needs a reason a dotted path cannot serve (a choice list, a file, a mode): --compile and
#: --checkpoint-minutes are the modes users look for by name, --tensorboard a folder, no field.
FROZEN_FLAGS = frozenset({
    "--aux-lr", "--batch-size", "--beta1", "--beta2", "--boundary-dtype", "--boundary-stages",
    "--checkpoint-interval", "--checkpoint-minutes", "--compile", "--config", "--correction", "--correction-coef", "--data",
    "--data-format", "--data-parallel", "--delay", "--deterministic", "--device", "--dtype",
    "--ef", "--ef-level", "--eval-batches", "--eval-interval", "--final-eval-batches",
    "--grad-clip", "--help", "--json", "--log-interval", "--lr", "--microbatches",
    "--min-lr-ratio", "--model-config", "--momentum", "--momentum-error-interval",
    "--ns-dtype", "--optimizer", "--out", "--pipedream", "--pipeline", "--preset", "--profile",
    "--quiet", "--resume", "--schedule", "--seed", "--seq-len", "--set", "--stage-taus",
    "--stages", "--stats-interval", "--steps", "--sync-cooldown", "--sync-start", "--tensorboard", "--tied",
    "--untied", "--val-data", "--vocab-size", "--warmup", "--weight-decay",
    "--wsd-decay-fraction"})


def _train_parser():
    sub = [a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction"]
    return sub[0].choices["train"]


def _cfg(*argv: str):
    return config_from_args(_train_parser().parse_args(["--out", "runs/x", *argv]))


def test_train_flags_are_frozen():
    flags = {o for a in _train_parser()._actions for o in a.option_strings if o.startswith("--")}
    assert flags == FROZEN_FLAGS, (f"new: {sorted(flags - FROZEN_FLAGS)}, gone: "
                                   f"{sorted(FROZEN_FLAGS - flags)}")


def test_set_reaches_any_field_and_wins_over_the_named_flag():
    cfg = _cfg("--beta2", "0.95", "--set", "optim.beta2=0.99", "--set", "run.log_interval=7",
               "--set", "muon:optim.momentum=0.5")
    assert cfg.optim.beta2 == 0.99 and cfg.run.log_interval == 7
    assert cfg.optim.momentum == TrainConfig().optim.momentum     # not muon: left alone
    assert _cfg("--optimizer", "muon", "--set", "muon:optim.momentum=0.5").optim.momentum == 0.5


@pytest.mark.parametrize("text,needle", [("optim.no_such=1", "not a config field"),
                                         ("nosection.x=1", "no section"),
                                         ("optim.beta2", "section.field=value")])
def test_a_bad_set_is_one_line_exit_2(tmp_path, capsys, text, needle):
    code = main(["train", "--steps", "1", "--out", str(tmp_path / "r"), "--set", text])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_with_fields_validates_once_and_names_the_path():
    base = TrainConfig()
    cfg = base.with_fields({"run.steps": 10, "optim.beta2": 0.9})
    assert cfg.run.steps == 10 and cfg.optim.beta2 == 0.9
    assert base.with_fields([("run.steps", 3), ("run.steps", 4)]).run.steps == 4   # in order
    with pytest.raises(KeyError, match="optim.nope is not a config field"):
        base.with_fields({"optim.nope": 1})
    with pytest.raises(ValueError):                       # the whole config is validated
        base.with_fields({"run.microbatches": 0})
    d = base.to_dict()
    set_field(d, "delay.stage_taus", (2, 1))
    assert d["delay"]["stage_taus"] == [2, 1] and field_value(d, "delay.stage_taus") == [2, 1]
