"""Config dataclasses: validation messages, JSON round-trip, presets, vocabulary resolution."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from llm_validation.config import (
    DataConfig,
    DelayConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
    pipedream_taus,
    preset,
)
from llm_validation.training.model import Transformer


def test_json_round_trip_with_every_section_changed():
    cfg = TrainConfig(model=preset("small"), data=DataConfig(seq_len=64, val_fraction=0.2),
                      optim=OptimConfig(name="muon", lr=0.02, aux_lr=3e-3, schedule="linear"),
                      delay=DelayConfig(tau=2, ef_lambda=0.5, ef_level="grad",
                                        stage_taus=(2, 1, 0)),
                      run=RunConfig(steps=7, batch_size=6, microbatches=3, out_dir="x"))
    again = TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    assert again.delay.stage_taus == (2, 1, 0)


def test_from_dict_rejects_unknown_keys():
    d = TrainConfig().to_dict()
    d["optim"]["learning_rate"] = 1.0
    with pytest.raises(ValueError, match="learning_rate"):
        TrainConfig.from_dict(d)
    with pytest.raises(ValueError, match="bogus"):
        TrainConfig.from_dict({"bogus": {}})


@pytest.mark.parametrize("make,field", [
    (lambda: DelayConfig(tau=-1), "tau"),
    (lambda: DelayConfig(ef_lambda=float("nan")), "ef_lambda"),
    (lambda: DelayConfig(ef_level="weights"), "ef_level"),
    (lambda: DelayConfig(tau=1, stage_taus=(2, 1, 0)), "tau"),
    (lambda: OptimConfig(name="lamb"), "name"),
    (lambda: OptimConfig(lr=0.0), "lr"),
    (lambda: OptimConfig(momentum=1.0), "momentum"),
    (lambda: RunConfig(microbatches=0), "microbatches"),
    (lambda: RunConfig(batch_size=6, microbatches=4), "batch_size"),
    (lambda: RunConfig(pipeline="2bw", stages=1), "stages"),
    (lambda: DataConfig(seq_len=0), "seq_len"),
    (lambda: ModelConfig(d_model=30, n_head=4), "d_model"),
    (lambda: ModelConfig(n_head=4, n_kv_head=3), "n_kv_head"),
])
def test_validation_names_the_field(make, field):
    with pytest.raises((ValueError, TypeError), match=field):
        make()


def test_int_fields_reject_floats_and_bools():
    with pytest.raises(TypeError, match="steps"):
        RunConfig(steps=1.5)
    with pytest.raises(TypeError, match="tau"):
        DelayConfig(tau=True)


def test_cross_section_checks():
    with pytest.raises(ValueError, match="tau=1"):
        TrainConfig(run=RunConfig(pipeline="2bw", stages=2))
    with pytest.raises(ValueError, match="synchronous"):
        TrainConfig(delay=DelayConfig(tau=1), run=RunConfig(pipeline="gpipe", stages=2))
    with pytest.raises(ValueError, match="max_seq_len"):
        TrainConfig(data=DataConfig(seq_len=4096))
    with pytest.raises(ValueError, match="untied"):
        TrainConfig(model=preset("smollm-135m"), data=DataConfig(path="x.bin"),
                    delay=DelayConfig(tau=1), run=RunConfig(pipeline="2bw", stages=2))
    with pytest.raises(ValueError, match="preset"):
        preset("gpt-5")


def test_byte_level_data_sets_the_vocabulary():
    cfg = TrainConfig(model=preset("smollm-135m"))
    assert cfg.model.vocab_size == 256
    shards = TrainConfig(model=preset("smollm-135m"), data=DataConfig(path="d/train_*.bin"))
    assert shards.model.vocab_size == 49152


@pytest.mark.parametrize("name,count", [("smollm-135m", 134_515_008),
                                        ("smollm-360m", 361_821_120)])
def test_smollm_presets_have_the_published_parameter_counts(name, count):
    cfg = preset(name)
    assert cfg.n_params() == count
    with torch.device("meta"):
        assert Transformer(cfg).num_params() == count


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_closed_form_count_matches_the_model(name):
    cfg = preset(name)
    assert Transformer(cfg).num_params() == cfg.n_params()
    assert not cfg.tied


def test_tiny_is_about_a_million_parameters():
    assert 0.8e6 <= preset("tiny").n_params() <= 1.3e6


def test_pipedream_taus():
    assert pipedream_taus(4) == (3, 2, 1, 0)
    assert pipedream_taus(1) == (0,)
    with pytest.raises(ValueError):
        pipedream_taus(0)


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunConfig().steps = 3


def test_compute_boundaries_follow_the_pipeline_and_keep_old_digests():
    from llm_validation.config import DIGEST_LEGACY

    compute = ModelConfig(boundary_dtype="compute", n_layer=4)
    pipe = TrainConfig(model=compute, delay=DelayConfig(tau=1),
                       run=RunConfig(pipeline="2bw", stages=2, microbatches=2, batch_size=4))
    assert pipe.model.boundary_stages == 2                    # the rounding follows the stages
    with pytest.raises(ValueError, match="boundary_stages=3 must equal RunConfig.stages=2"):
        TrainConfig(model=ModelConfig(boundary_dtype="compute", boundary_stages=3, n_layer=4),
                    delay=DelayConfig(tau=1), run=RunConfig(pipeline="2bw", stages=2, microbatches=2, batch_size=4))
    emulated = TrainConfig(model=ModelConfig(boundary_dtype="compute", boundary_stages=2))
    assert emulated.model.boundary_stages == 2                # the emulator takes it as given
    assert TrainConfig.from_dict(pipe.to_dict()) == pipe
    # the defaults are left out of run-name digests, so committed ledgers keep their names
    assert {f"model.{k}": getattr(ModelConfig(), k) for k in ("boundary_dtype",
            "boundary_stages")}.items() <= DIGEST_LEGACY.items()
