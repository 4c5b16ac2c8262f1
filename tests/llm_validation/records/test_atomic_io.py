"""A full disk during a metrics row, a JSON file or a checkpoint: one OSError naming the file
and ENOSPC, no temporary file left, the earlier rows and files intact (a small tmpfs; skipped
with the reason where none can be mounted)."""

from __future__ import annotations

import errno
import json
import warnings

import pytest
import torch

from llm_validation.records.atomic_io import describe, torch_save, write_json
from llm_validation.rundir import MetricsWriter, TruncatedMetricsWarning, read_metrics
from tests.llm_validation.disk_helpers import tmpfs

#: Size of the filesystem filled up (tmpfs rounds to pages; small enough to fill in ms).
SIZE = "64k"


def _fill(path) -> None:
    """Fill the filesystem holding ``path`` to the last byte."""
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_metrics_row_on_a_full_disk(tmp_path):
    with tmpfs(tmp_path / "d", SIZE) as d:
        m = MetricsWriter(d / "metrics.jsonl")
        for step in range(3):
            m.write({"step": step, "loss": 1.0, "kind": "train"})
        _fill(d / "ballast")
        with pytest.raises(OSError) as info:
            for step in range(3, 10_000):
                m.write({"step": step, "loss": 1.0, "kind": "train"})
        m.close()                        # the failed row's rest is not reported a second time
        exc = info.value
        assert exc.errno == errno.ENOSPC and exc.filename == str(d / "metrics.jsonl")
        assert describe(exc).endswith("metrics.jsonl: no space left on device (ENOSPC)")
        with warnings.catch_warnings():      # a partial last row is skipped (with a warning)
            warnings.simplefilter("ignore", TruncatedMetricsWarning)
            rows = read_metrics(d)
        assert [r["step"] for r in rows] == list(range(len(rows))) and len(rows) >= 3


def test_json_and_checkpoint_on_a_full_disk_keep_the_old_file(tmp_path):
    with tmpfs(tmp_path / "d", SIZE) as d:
        write_json(d / "summary.json", {"status": "old"})
        _fill(d / "ballast")
        with pytest.raises(OSError) as info:
            write_json(d / "summary.json", {"status": "new", "pad": "x" * 100_000})
        assert info.value.errno == errno.ENOSPC
        assert info.value.filename == str(d / "summary.json")
        assert json.loads((d / "summary.json").read_text()) == {"status": "old"}
        with pytest.raises(OSError) as info:
            torch_save(d / "step_00000001.pt", {"w": torch.zeros(100_000)})
        assert info.value.errno == errno.ENOSPC
        assert not list(d.glob("*.tmp")) and not (d / "step_00000001.pt").exists()
