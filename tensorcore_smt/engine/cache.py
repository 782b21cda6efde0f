"""The kernel cache on disk: object code keyed by everything machine code depends on.

A key covers the model parameters (their full record), the kernel kind and argument
types, the tool version, a digest of the source the DAG is built from (bv/, model/,
spec/formats.py, engine/), llvmlite's version and the CPU (name and features). A hit is
loaded without building the DAG or running LLVM. The folder is $TCSMT_CACHE, else
~/.cache/tensorcore-smt; files are written whole (rename) so concurrent processes never
read half a kernel.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from functools import cache
from pathlib import Path

from ..version import __version__

_SOURCES = ("bv", "model", "engine", "spec/formats.py")


def cache_dir() -> Path:
    """Where kernels are kept ($TCSMT_CACHE, else ~/.cache/tensorcore-smt/kernels)."""
    env = os.environ.get("TCSMT_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "tensorcore-smt"
    return base / "kernels"


@cache
def source_digest() -> str:
    """SHA-256 of the package source a kernel's DAG and lowering come from."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for rel in _SOURCES:
        p = root / rel
        files = sorted(p.rglob("*.py")) if p.is_dir() else [p]
        for f in files:
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def key(*parts: str) -> str:
    """The cache key of a kernel described by `parts` (plus version and source digest)."""
    text = "\n".join((__version__, source_digest(), *parts))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def has(k: str, suffix: str = ".o") -> bool:
    """Whether bytes are stored under key `k`."""
    return (cache_dir() / (k + suffix)).is_file()


def get(k: str, suffix: str = ".o") -> bytes | None:
    """The stored bytes for key `k`, or None."""
    try:
        return (cache_dir() / (k + suffix)).read_bytes()
    except OSError:
        return None


def put(k: str, data: bytes, suffix: str = ".o") -> None:
    """Store `data` under key `k`; a cache that cannot be written is skipped silently
    (the kernel is then compiled again next time, nothing else changes)."""
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, d / (k + suffix))
    except OSError:
        pass
