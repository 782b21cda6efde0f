"""The compiled engine's entry point for the API: rows in, d bits out, CPU or GPU."""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..model.params import ModelParams
from .kernel import run_rows


def unit_scale_arrays(p: ModelParams, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Scale factors of 1 for every row (what a block-scaled unit uses when given none;
    model/gdfs.py unit_scales gives the same bits to the other interpreters)."""
    assert p.scale_fmt is not None
    s = p.scale_fmt.spec
    ones = np.full(
        (n, p.n_scales), s.bias << s.mbits, dtype=np.uint8 if s.storage <= 8 else np.uint16
    )
    return ones, ones


def run_compiled(
    p: ModelParams,
    a,
    b,
    c,
    sa=None,
    sb=None,
    device: str | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """d (N,) for checked operand arrays, written into `out` (a contiguous unsigned
    array; None: a new uint64 array) and returned; `device` None or "cpu": this
    machine's cores, "cuda" / "cuda:N": the GPU kernel (engine/cuda.py)."""
    arrays = [a, b, c]
    if p.scale_fmt is not None:
        if sa is None or sb is None:
            sa, sb = unit_scale_arrays(p, len(c))
        arrays += [sa, sb]
    dev = (device or "cpu").strip().lower()
    if dev == "cpu":
        return run_rows(p, arrays, out=out)
    if dev == "cuda" or dev.startswith("cuda:"):
        from .cuda import run_rows_gpu

        return run_rows_gpu(p, arrays, dev, out=out)
    raise UserError(f"engine compiled: unknown device {device!r}; use cpu, cuda or cuda:N")
