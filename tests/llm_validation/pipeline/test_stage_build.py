"""One rank's stage: built on the meta device with only its parameters materialised (bitwise
the weights of the whole build), and only its replica's share of each batch read."""

from __future__ import annotations

import pytest
import torch

from llm_validation.config import ModelConfig
from llm_validation.pipeline.stage import StageSetup, build_stage_module
from llm_validation.training.model import Transformer, skip_normal
from tests.llm_validation.pipeline.support import pipe_cfg, small_corpus

#: 8 blocks (the benchmark's depth), small widths; an untied head so it splits.
EIGHT = ModelConfig(name="eight", n_layer=8, d_model=32, n_head=4, n_kv_head=2, d_ff=80,
                    max_seq_len=32, tied=False)


@pytest.mark.parametrize("P", [1, 2, 4])
@pytest.mark.parametrize("chunk", [48, 1 << 20])
def test_meta_build_gives_todays_weights_bitwise(P, chunk):
    """Guards issue 31, point 3: each stage built on the meta device and initialised with the
    other stages' draws skipped (in chunks of 48 values, or one draw per matrix) holds
    exactly the weights of ``Transformer(cfg, seed).split(P)[s]`` (today's build), and none of
    the other stages' parameters."""
    seed = 7
    full = Transformer(EIGHT, seed=seed)
    for s, ref in enumerate(full.split(P)):
        got, n_params = build_stage_module(EIGHT, seed, s, P, skip_chunk=chunk)
        assert n_params == full.num_params()
        a, b = dict(got.named_parameters()), dict(ref.named_parameters())
        assert a.keys() == b.keys()
        for n in b:
            assert not a[n].is_meta and torch.equal(a[n], b[n]), (s, n)
        assert torch.equal(got.rope.cos, ref.rope.cos) and torch.equal(got.rope.sin, ref.rope.sin)
        others = [p for p in got._model_ref[0].parameters() if p.is_meta]
        assert others == []                   # the other stages' blocks are dropped
        x = torch.randint(0, EIGHT.vocab_size, (2, 8)) if s == 0 else torch.randn(2, 8, 32)
        assert torch.equal(got(x), ref(x))


def test_the_initialisation_is_the_formula_of_before():
    """The in-place initialisation (``randn(out=p)``, ``mul_(std)``) gives the weights of the
    formula it replaced, drawn here independently: ``randn(shape, generator) * std`` for every
    matrix in named order, norm gains 1."""
    seed, model = 11, Transformer(EIGHT, seed=11)
    gen = torch.Generator().manual_seed(seed)
    out_std = EIGHT.init_std / (2 * EIGHT.n_layer) ** 0.5
    for name, p in model.named_parameters():
        if p.ndim == 1:
            assert torch.equal(p, torch.ones_like(p))
            continue
        std = out_std if name.endswith(("attn.o.weight", "mlp.down.weight")) else EIGHT.init_std
        assert torch.equal(p, torch.randn(p.shape, generator=gen, dtype=torch.float32) * std), name


def test_skip_normal_advances_the_generator_as_one_draw():
    for n, chunk in [(16, 16), (17, 16), (1000, 48), (4099, 4096), (5, 16)]:
        a, b = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        torch.randn(n, generator=a)
        skip_normal(b, n, chunk)
        assert torch.equal(a.get_state(), b.get_state()), (n, chunk)
    with pytest.raises(ValueError, match="multiple of 16"):
        skip_normal(torch.Generator(), 10, 20)


def test_each_replica_reads_only_its_share(tmp_path):
    """Guards issue 31, point 6: replica d of D = 2 reads B/2 windows of a batch (before: all
    B, then kept half), its microbatches are bitwise those of the whole batch cut into D*M
    chunks, and the next training batch is read ahead when one is taken."""
    M, D = 2, 2
    cfg = pipe_cfg(tmp_path / "run", small_corpus(tmp_path), pipeline="2bw", P=2, M=M,
                   batch_size=4 * D * M, data_parallel=D)
    B = cfg.run.batch_size
    for d in range(D):
        for s, which in ((0, 0), (1, 1)):
            setup = StageSetup(cfg, s, 2, torch.device("cpu"), replica=d, replicas=D)
            whole = setup.train_sampler.batch(3)[which].chunk(D * M)[d * M:(d + 1) * M]
            setup.train_sampler.windows_read = 0
            got = setup.train_microbatches(3)
            assert len(got) == M and all(torch.equal(g, w) for g, w in zip(got, whole))
            assert setup.train_sampler.windows_read == 2 * B // D     # batch 3, and 4 ahead
            ahead = setup.train_microbatches(4)
            want = setup.train_sampler.batch(4)[which].chunk(D * M)[d * M:(d + 1) * M]
            assert all(torch.equal(g, w) for g, w in zip(ahead, want))
            xs, ys = setup.pairs("large", 1)
            big = setup.large_sampler.batch(1)
            parts = M * cfg.run.large_batch_factor
            for got_t, t in ((xs, big[0]), (ys, big[1])):
                want = t.chunk(D * parts)[d * parts:(d + 1) * parts]
                assert all(torch.equal(g, w) for g, w in zip(got_t, want))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_batches_come_from_pinned_memory_without_a_host_sync(tmp_path):  # pragma: no cover
    """GPU part of point 6 (not run here: no GPU): the microbatches land on the GPU from
    pinned host memory with non-blocking copies."""
    cfg = pipe_cfg(tmp_path / "run", small_corpus(tmp_path), pipeline="2bw", P=2, M=2)
    setup = StageSetup(cfg, 0, 2, torch.device("cuda", 0))
    host = setup.train_sampler.batch(0)[0]
    got = setup.train_microbatches(0)
    torch.cuda.synchronize()
    assert all(g.is_cuda for g in got)
    assert torch.equal(torch.cat(got).cpu(), host)
    assert host.contiguous().pin_memory().is_pinned()
