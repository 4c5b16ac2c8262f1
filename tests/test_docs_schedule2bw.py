"""docs/schedule2bw.md's code runs as written.

The page's ``python`` blocks are the example's two training loops (examples/
schedule2bw_encoder.py, verbatim); its ``diff`` block is their difference. Here the blocks are
executed from the page's text on two gloo processes (with the example's model, data and loss)
and must give the example's own losses; the diff's lines must be the loops' lines.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

from llm_validation.pipeline.watchdog import Deadlines
from llm_validation.pipeline.processes import spawn_stages
from tests.llm_validation.pipeline.schedule2bw_support import example

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "schedule2bw.md"
ARGS = ["--microbatches", "2", "--steps", "5"]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)


def docs_worker(ctx: Any, code: list[str], out_dir: str) -> None:
    """Run the page's loops (defined from its text) and the example's, on this rank."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage

    torch.set_num_threads(1)
    ex = example()
    args = ex.parse_args(ARGS)
    page = dict(vars(ex))
    for block in code:
        exec(compile(block, str(DOC), "exec"), page)
    out = {}
    for source, ns in (("doc", page), ("example", vars(ex))):
        for name in ("1f1b", "2bw"):
            module = ex.split(ex.build_model(args.seed), ctx.rank, ctx.world)
            stage = PipelineStage(module, ctx.rank, ctx.world, torch.device("cpu"))
            dist.barrier()
            out[f"{source}-{name}"] = ns[f"train_{name}"](
                stage, module, args.steps, args.microbatches,
                args.microbatches * args.microbatch_size, args.lr)
    if ctx.rank == ctx.world - 1:
        (Path(out_dir) / "curves.json").write_text(json.dumps(out))


def test_the_python_blocks_are_the_examples_loops():
    ex = example()
    assert _blocks("python") == [inspect.getsource(ex.train_1f1b),
                                 inspect.getsource(ex.train_2bw)]


def test_the_diff_is_the_difference_of_the_loops():
    ex = example()
    before = set(inspect.getsource(ex.train_1f1b).splitlines())
    imports = {line for line in Path(ex.__file__).read_text().splitlines()
               if line.startswith(("from ", "import "))}
    after = set(inspect.getsource(ex.train_2bw).splitlines()) | imports
    diff = _blocks("diff")[0]                         # the second: against torchtitan
    lines = diff.splitlines()
    assert len(lines) == 7                                   # "seven lines"
    for line in lines:
        assert line[0] in "+-", line
        assert line[1:] in (before - after if line[0] == "-" else after - before), line


def test_the_python_blocks_run_and_give_the_examples_losses(tmp_path):
    spawn_stages(docs_worker, (_blocks("python"), str(tmp_path)), world=2, run_dir=tmp_path,
                 backend="gloo", deadlines=Deadlines(hang_s=60.0))
    out = json.loads((tmp_path / "curves.json").read_text())
    for name in ("1f1b", "2bw"):
        assert len(out[f"doc-{name}"]) == 5
        assert out[f"doc-{name}"] == out[f"example-{name}"]


def titan_docs_worker(ctx: Any, code: str, out_dir: str) -> None:
    """The page's torchtitan-style ``build_2bw`` and ``train_step`` on this rank: the
    example's model on the meta device, its seed weights loaded as the init."""
    import torch
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import get_schedule_class

    from tests.llm_validation.pipeline.schedule2bw_support import SEED, replica_batches
    from tests.llm_validation.pipeline.test_schedule2bw_titan import CFG, tokens_loss

    torch.set_num_threads(1)
    ex, s, P = example(), ctx.rank, ctx.world
    page = {"torch": torch, "PipelineStage": PipelineStage,
            "get_schedule_class": get_schedule_class}
    exec(compile(code, str(DOC), "exec"), page)
    import llm_validation.pipeline.schedule2bw  # noqa: F401  (registers "2BW")

    with torch.device("meta"):
        part = ex.split(ex.build_model(SEED), s, P)
    weights = ex.split(ex.build_model(SEED), s, P).state_dict()
    stage, schedule = page["build_2bw"](part, s, P, None, CFG["M"], tokens_loss,
                                        lambda m: m.load_state_dict(weights))
    curve = []
    for x, y in replica_batches(ex, CFG, 0):
        loss = page["train_step"](stage, schedule, x, y, CFG["M"])
        if loss is not None:
            curve.append(loss)
    schedule.finish()
    if stage.is_last:
        torch.save(curve, Path(out_dir) / "titan.pt")


def test_the_torchtitan_style_functions_run_and_equal_the_emulator(tmp_path):
    import torch

    from tests.llm_validation.pipeline.schedule2bw_support import reference
    from tests.llm_validation.pipeline.test_schedule2bw_titan import CFG

    (code,) = _blocks("py")
    spawn_stages(titan_docs_worker, (code, str(tmp_path)), world=2, run_dir=tmp_path,
                 backend="gloo", deadlines=Deadlines(hang_s=60.0))
    got = torch.load(tmp_path / "titan.pt")
    ref = reference(CFG)["losses"]
    assert len(got) == len(ref) == CFG["steps"]
    assert all(torch.equal(a, b.sum()) for a, b in zip(got, ref))
