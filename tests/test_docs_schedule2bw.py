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
    (diff,) = _blocks("diff")
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
