"""What the machine offers a run: whether bfloat16 matrix products are fast here.

Muon and NorMuon orthogonalise their momentum with Newton-Schulz, a chain of matrix products
that ``torch.optim.Muon`` and ``pytorch_optimizer.NorMuon`` run in bfloat16. On a GPU with
tensor cores and on a CPU with native bfloat16 instructions (x86 ``avx512_bf16`` or
``amx_bf16``, ARM ``bf16``) that is the fast choice; on a CPU without them (AVX2 or AVX-512
without BF16) torch emulates bfloat16 products by widening each element, and a 128x512 product
costs 3.5x (AVX-512, this machine) to ~35x (AVX2) its float32 twin. :func:`resolve_ns_dtype`
turns the config choice ``auto`` into ``float32`` on such CPUs and ``bfloat16`` elsewhere.

The decision reads the CPU's feature flags (``/proc/cpuinfo``), not a timing, so one machine
always resolves ``auto`` the same way (a run's name and config do not depend on the load of
the moment). Where the flags cannot be read (not Linux) ``auto`` means ``float32``: it is
never slow, only less faithful to the bfloat16 reference (docs/performance.md gives the
difference).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

__all__ = [
    "BF16_CPU_FLAGS",
    "NS_DTYPES",
    "cpu_flags",
    "cpu_has_fast_bf16",
    "resolve_ns_dtype",
]

#: CPU feature flags that give native bfloat16 matrix products (x86 AVX512-BF16 and AMX-BF16;
#: ARMv8.6 BF16, listed as ``bf16`` in the ``Features`` line).
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
#: Newton-Schulz dtypes a config may name: ``auto`` (resolved by :func:`resolve_ns_dtype`),
#: ``bfloat16`` (torch's and pytorch_optimizer's own choice) or ``float32``.
NS_DTYPES = ("auto", "bfloat16", "float32")
#: Where Linux lists the CPU's feature flags.
_CPUINFO = Path("/proc/cpuinfo")


def _parse_flags(text: str) -> frozenset[str]:
    """The feature flags of a ``/proc/cpuinfo`` text (x86 ``flags``, ARM ``Features``)."""
    out: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            out.update(value.split())
    return frozenset(out)


@lru_cache(maxsize=None)
def cpu_flags(path: str | None = None) -> frozenset[str]:
    """This CPU's feature flags (empty when ``/proc/cpuinfo`` cannot be read)."""
    try:
        return _parse_flags(Path(path or _CPUINFO).read_text(errors="replace"))
    except OSError:
        return frozenset()


def cpu_has_fast_bf16(flags: frozenset[str] | None = None) -> bool:
    """True when the CPU (or the given flags) has native bfloat16 matrix instructions."""
    return bool((cpu_flags() if flags is None else flags) & BF16_CPU_FLAGS)


def _device_kind(device: str) -> str:
    """``cpu`` or ``cuda`` for a config device (``auto`` asks torch whether CUDA is there)."""
    if device == "auto":
        import torch  # only this case needs torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cuda" if str(device).startswith("cuda") else "cpu"


def resolve_ns_dtype(ns_dtype: str, device: str = "cpu", *,
                     flags: frozenset[str] | None = None) -> str:
    """The Newton-Schulz dtype a run uses: ``ns_dtype`` itself unless it is ``auto``; ``auto``
    is ``bfloat16`` on CUDA and on a CPU with :data:`BF16_CPU_FLAGS`, else ``float32``."""
    if ns_dtype not in NS_DTYPES:
        raise ValueError(f"ns_dtype={ns_dtype!r} is not one of {list(NS_DTYPES)}")
    if ns_dtype != "auto":
        return ns_dtype
    if _device_kind(device) == "cuda":
        return "bfloat16"
    return "bfloat16" if cpu_has_fast_bf16(flags) else "float32"
