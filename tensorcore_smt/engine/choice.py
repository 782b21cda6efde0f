"""Which interpreter runs a batch of rows: the `engine=` argument and its default.

Measured on this project's 2-core machine (bench/bench_engine.py, results/engine.md):
once an instruction's kernel is compiled (in this process or in the disk cache) the
compiled engine is faster than numpy from one row on (a call costs microseconds, numpy's
interpreter a few milliseconds per batch whatever its size). Compiling costs 0.2-2 s per
kernel, which numpy spends on roughly a million rows: a kernel not yet compiled is only
compiled for batches of at least COMPILE_ROWS rows. identify's pools (a few thousand rows
on each of many hypotheses) thus stay on numpy unless the kernels are already cached,
and validate's and the GEMM level's big batches compile once and run compiled.

numpy also pays a fixed cost per pass over a batch (its interpreter walks the model's
operations in Python: about 5 ms a pass, what it spends on some 8,000 rows). The GEMM
level makes one pass per instruction step and chunk of outputs, so a GEMM of few
outputs and many steps (16 outputs by 62,500 steps) costs numpy minutes for a million
row-steps: the choice weighs rows and passes together (numpy_cost).
"""

from __future__ import annotations

import os
from enum import Enum

from ..errors import UserError


class Engine(Enum):
    """An interpreter of the one model for batches of rows."""

    NUMPY = "numpy"  # bv/vector.py
    COMPILED = "compiled"  # the DAG compiled by LLVM (this package)
    TORCH = "torch"  # bv/xp.py on torch tensors (CPU or CUDA)


ENGINES = tuple(e.value for e in Engine)

COMPILE_ROWS = 1 << 20
"""Rows from which compiling a kernel not yet cached pays for itself (about 1 s of LLVM
against numpy's 1-8 M rows/s on the measured instructions)."""


def parse_engine(value: str | Engine | None) -> Engine | None:
    """An Engine from its name (None stays None: the default is chosen per batch)."""
    if value is None or isinstance(value, Engine):
        return value
    try:
        return Engine(str(value).strip().lower())
    except ValueError:
        raise UserError(f"engine: unknown engine {value!r}; known: {', '.join(ENGINES)}") from None


PASS_ROWS = 1 << 13
"""numpy's fixed cost of one pass over a batch, in rows (about 5 ms against its 1.6 M
row-steps/s on a GEMM on the measured machine)."""


def numpy_cost(rows: int, passes: int = 1) -> int:
    """numpy's cost of `rows` rows of work done in `passes` passes, in rows: the work
    plus each pass's fixed cost."""
    return rows + passes * PASS_ROWS


def default_engine(ready: bool, rows: int, passes: int = 1) -> Engine:
    """The engine for a batch of `rows` rows (for a GEMM: outputs x instruction steps)
    that numpy would run in `passes` passes (a GEMM: its steps times its chunks of
    outputs) on this machine's CPU when none is asked for: $TCSMT_ENGINE when set (numpy or compiled; the test suite sets numpy so that
    tests of the vector interpreter test it whatever kernels are cached), else the faster
    one, `ready` telling whether the kernel is already compiled (memory or disk cache):
    compiled once numpy's cost (numpy_cost) reaches COMPILE_ROWS."""
    env = os.environ.get("TCSMT_ENGINE")
    if env:
        allowed = f"{Engine.NUMPY.value} or {Engine.COMPILED.value}"
        try:
            e = parse_engine(env)
        except UserError:
            raise UserError(
                f"environment variable TCSMT_ENGINE={env!r} is not an engine; allowed: "
                f"{allowed} (or unset it)"
            ) from None
        if e == Engine.TORCH:
            raise UserError(
                f"environment variable TCSMT_ENGINE=torch needs a device; allowed: {allowed}"
            )
        assert e is not None
        return e
    if ready or numpy_cost(rows, passes) >= COMPILE_ROWS:
        return Engine.COMPILED
    return Engine.NUMPY
