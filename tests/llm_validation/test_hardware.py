"""The Newton-Schulz dtype resolution: CPU flags decide ``auto``; configs record the result."""

from __future__ import annotations

import pytest

from llm_validation import hardware
from llm_validation.config import DIGEST_LEGACY, OptimConfig, RunConfig, TrainConfig
from llm_validation.hardware import (
    _parse_flags,
    cpu_flags,
    cpu_has_fast_bf16,
    resolve_ns_dtype,
)

X86_AVX512 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw\n"
X86_BF16 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile\n"
ARM_BF16 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


def test_flags_are_parsed_from_x86_and_arm_cpuinfo():
    assert "avx512f" in _parse_flags(X86_AVX512)
    assert not cpu_has_fast_bf16(_parse_flags(X86_AVX512))
    assert cpu_has_fast_bf16(_parse_flags(X86_BF16))
    assert cpu_has_fast_bf16(_parse_flags(ARM_BF16))


def test_auto_resolves_from_the_flags_and_the_device():
    slow, fast = _parse_flags(X86_AVX512), _parse_flags(X86_BF16)
    assert resolve_ns_dtype("auto", "cpu", flags=slow) == "float32"
    assert resolve_ns_dtype("auto", "cpu", flags=fast) == "bfloat16"
    assert resolve_ns_dtype("auto", "cuda", flags=slow) == "bfloat16"
    for fixed in ("bfloat16", "float32"):
        assert resolve_ns_dtype(fixed, "cpu", flags=slow) == fixed
    with pytest.raises(ValueError, match="ns_dtype"):
        resolve_ns_dtype("float16", "cpu")


def test_unreadable_cpuinfo_means_no_fast_bf16(tmp_path):
    assert cpu_flags(str(tmp_path / "missing")) == frozenset()
    assert resolve_ns_dtype("auto", "cpu", flags=frozenset()) == "float32"


def test_train_config_records_the_resolved_dtype(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_flags", lambda path=None: _parse_flags(X86_AVX512))
    cfg = TrainConfig(optim=OptimConfig(name="muon", ns_dtype="auto"), run=RunConfig())
    assert cfg.optim.ns_dtype == "float32"
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    monkeypatch.setattr(hardware, "cpu_flags", lambda path=None: _parse_flags(X86_BF16))
    cfg = TrainConfig(optim=OptimConfig(name="muon", ns_dtype="auto"), run=RunConfig())
    assert cfg.optim.ns_dtype == "bfloat16"


def test_default_is_the_libraries_dtype_and_digest_neutral():
    assert OptimConfig().ns_dtype == "bfloat16" == DIGEST_LEGACY["optim.ns_dtype"]
    with pytest.raises(ValueError, match="ns_dtype"):
        OptimConfig(ns_dtype="half")
