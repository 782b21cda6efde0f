"""The kernel cache on disk: object code keyed by everything machine code depends on.

A key covers the model parameters (their full record), the kernel kind and argument
types, the tool version, a digest of the source kernels are generated from, llvmlite's
version and the CPU (name and features). That source is found, not listed: the kernel
generators (engine/, gemm/compiled.py and validation/rows_kernel.py) and every package
module they import, directly or through other modules, at module level or inside
functions (model/, bv/, gemm/'s element and plan code, formats.py, ...), with the
`__init__.py` of each subpackage on the way; an edit to any of them changes every key.
A hit is loaded without building the DAG or running LLVM. The folder is $TCSMT_CACHE,
else ~/.cache/tensorcore-smt; files are written whole (rename) so concurrent processes
never read half a kernel.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from functools import cache
from pathlib import Path

from ..version import __version__

_ROOT = Path(__file__).resolve().parent.parent
_GENERATORS = ("engine", "gemm/compiled.py", "validation/rows_kernel.py")
"""Where kernels are generated (relative to the package): the closure of their imports is
the source a kernel depends on."""


def cache_dir() -> Path:
    """Where kernels are kept ($TCSMT_CACHE, else ~/.cache/tensorcore-smt/kernels)."""
    env = os.environ.get("TCSMT_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "tensorcore-smt"
    return base / "kernels"


def _module_file(parts: tuple[str, ...]) -> Path | None:
    """The file of package module `parts` (relative to the package root), or None."""
    base = _ROOT.joinpath(*parts)
    for f in (base / "__init__.py", base.with_suffix(".py")):
        if parts and f.is_file():
            return f
    return None


_IMPORT = re.compile(
    rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)"
    rb"|import[ \t]+([^\n#;]*))",
    re.M,
)
"""An import statement at the start of a line, at any depth (regular expressions, not
ast: parsing every file would cost a fifth of a second per process). A line in a string
that reads like an import can only add a file, never lose one."""


def _names(text: bytes) -> list[str]:
    """The imported names of `a as b, c` or `(a, b as c,)`."""
    return [n.split()[0] for n in text.decode().strip("()").split(",") if n.split()]


def _imported(f: Path) -> set[Path]:
    """The package modules `f` imports (anywhere in it), with the `__init__.py` of each
    subpackage on the way."""
    here = f.relative_to(_ROOT).parent.parts
    wanted: set[tuple[str, ...]] = set()
    for dots, module, names, plain in _IMPORT.findall(f.read_bytes()):
        if plain:  # import tensorcore_smt.x.y [as z], ...
            for name in _names(plain):
                top, *rest = name.split(".")
                if top == _ROOT.name:
                    wanted.add(tuple(rest))
            continue
        mod = tuple(module.decode().split(".")) if module else ()
        if dots:
            up = len(dots) - 1
            if up > len(here):
                continue
            target = here[: len(here) - up] + mod
        elif mod[:1] == (_ROOT.name,):
            target = mod[1:]
        else:
            continue
        wanted.add(target)
        wanted.update(target + (n,) for n in _names(names))  # names may be submodules
    out = set()
    for parts in wanted:
        for i in range(1, len(parts) + 1):
            m = _module_file(parts[:i])
            if m is not None:
                out.add(m)
    return out


def kernel_sources() -> list[Path]:
    """Every package source file a generated kernel depends on: the generators and the
    closure of their package imports (sorted)."""
    todo = []
    for rel in _GENERATORS:
        p = _ROOT / rel
        todo += sorted(p.rglob("*.py")) if p.is_dir() else [p]
        parts = Path(rel).with_suffix("").parts
        todo += [m for i in range(1, len(parts)) if (m := _module_file(parts[:i]))]
    seen: set[Path] = set()
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo += _imported(f) - seen
    return sorted(seen)


@cache
def source_digest() -> str:
    """SHA-256 of the package source kernels are generated from (`kernel_sources`)."""
    h = hashlib.sha256()
    for f in kernel_sources():
        h.update(str(f.relative_to(_ROOT)).encode())
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
