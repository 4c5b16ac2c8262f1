"""Atomic file writes that leave nothing behind when the disk is full or read-only.

Every file a run or a sweep writes whole (``config.json``, ``summary.json``, ``index.json``,
checkpoints, the rewritten ``metrics.jsonl``, reports) goes to ``NAME.tmp`` first and is renamed
over ``NAME`` only when complete (``os.replace``: atomic on POSIX), so a reader sees the old file
or the new one, never half of one. When the write fails (``ENOSPC`` on a full disk, ``EDQUOT``,
``EROFS`` on a read-only mount, ``EACCES``, or anything else) the temporary file is removed
before the error propagates, so a failed checkpoint does not keep the disk full, and the
earlier files are untouched. The error is an ``OSError`` naming the file and its errno
(:func:`disk_error`); the CLI prints it as one line (:func:`describe`) and exits 2.
"""

from __future__ import annotations

import errno as errno_mod
import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Mapping

__all__ = ["atomic_write", "write_text", "write_json", "read_json", "torch_save", "disk_error", "describe",
           "clean_json", "DISK_ERRNOS"]

#: errnos that no run can get past on the same disk (a sweep stops on them): full disk, quota,
#: read-only filesystem, no permission, an I/O error of the device.
DISK_ERRNOS = frozenset({errno_mod.ENOSPC, errno_mod.EDQUOT, errno_mod.EROFS, errno_mod.EACCES,
                         errno_mod.EPERM, errno_mod.EIO})


def clean_json(x: Any) -> Any:
    """``x`` with NaN and infinities replaced by None (strict JSON)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): clean_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean_json(v) for v in x]
    return x


def disk_error(exc: OSError, path: str | Path) -> OSError:
    """``exc`` as an ``OSError`` of the same errno that names ``path`` (the file being written;
    torch's and the buffered writers' errors often carry no file name)."""
    if exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))


def describe(exc: OSError) -> str:
    """One line for an I/O error: ``PATH: reason (ERRNO)``."""
    name = errno_mod.errorcode.get(exc.errno or 0, "")
    what = (exc.strerror or type(exc).__name__).lower()
    where = f"{exc.filename}: " if exc.filename is not None else ""
    return f"{where}{what}" + (f" ({name})" if name else "")


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """``write(tmp)`` then rename ``tmp`` over ``path``; on any failure ``tmp`` is removed and an
    ``OSError`` is re-raised naming ``path`` (:func:`disk_error`)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        os_exc = _os_error_in(exc)
        if os_exc is not None:
            raise disk_error(os_exc, path) from None
        raise
    return path


def _os_error_in(exc: BaseException) -> OSError | None:
    """The first ``OSError`` in ``exc``'s chain (torch wraps a failed write of its zip writer
    in a RuntimeError whose context is the ENOSPC), or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: str | Path, obj: Any) -> None:
    """Strict JSON (NaN/inf -> null), written atomically."""
    write_text(path, json.dumps(clean_json(obj), indent=2, sort_keys=False) + "\n")


def read_json(path: str | Path) -> Any:
    """The JSON object in ``path``; a file that is not JSON is a ``ValueError`` naming the file,
    the line and column, and what the parser expected there."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                         f"{exc.msg})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not valid JSON (not UTF-8 text)") from None


def torch_save(path: str | Path, payload: Mapping[str, Any]) -> Path:
    """``torch.save(payload)`` to ``path`` atomically, through a Python file object so that a
    full disk surfaces as ``OSError(ENOSPC)`` (torch's own writer reports a bare RuntimeError)."""
    import torch

    def save(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            torch.save(dict(payload), f)
    return atomic_write(path, save)
