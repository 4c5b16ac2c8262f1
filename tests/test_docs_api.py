"""docs/api.md: every ```python block runs as written, in order, in one namespace (the page's
examples are the API's executable documentation), and every public name is documented."""

from __future__ import annotations

import re
from pathlib import Path

import torch

import llm_validation

DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_python_examples_of_docs_api_run(tmp_path, monkeypatch):
    blocks = _blocks()
    assert len(blocks) >= 4
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)            # a tiny model: one thread is fastest
    namespace: dict = {"__name__": "docs_api"}
    try:
        for i, block in enumerate(blocks):
            exec(compile(block, f"{DOC.name}[python block {i}]", "exec"), namespace)
    finally:
        torch.set_num_threads(threads)


def test_every_public_name_is_documented_and_importable():
    text = DOC.read_text()
    for name in llm_validation.__all__:
        obj = getattr(llm_validation, name)
        assert f"`{name}`" in text, name
        assert obj.__doc__ and len(obj.__doc__.strip()) > 40, name
    assert "DelayedOptimizer" in dir(llm_validation)
