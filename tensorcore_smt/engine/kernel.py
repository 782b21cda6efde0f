"""CPU kernels: one instruction's DAG compiled for this machine, run on every core.

`cpu_kernel(p, containers)` returns the compiled kernel (from this process's table, the
disk cache, or LLVM). `run_rows` splits the rows across threads; each thread calls the
machine code through ctypes, which releases the GIL for the call (ctypes documentation,
"foreign functions": CFUNCTYPE functions run without the GIL), so the threads compute in
parallel.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..bv.dtypes import UNSIGNED
from ..model.params import ModelParams
from . import cache, jit
from .dag import Operand, instruction_dag, operands
from .kernel_ir import KERNEL, container, cpu_module, cpu_tiled_module
from .loops import loop_plan

MIN_ROWS_PER_THREAD = 4096
"""Below this many rows per thread, the calling thread runs the rows alone."""


@dataclass(frozen=True)
class CpuKernel:
    """Machine code computing d for rows [lo, hi) of the operand arrays."""

    p: ModelParams
    operands: tuple[Operand, ...]
    containers: tuple[int, ...]
    out_bits: int
    fn: object  # ctypes function (lo, hi, *operand pointers, out pointer)


_KERNELS: dict[tuple, CpuKernel] = {}
_LOCK = threading.Lock()


def _disk_key(p: ModelParams, containers: tuple[int, ...], out_bits: int) -> str:
    return cache.key("cpu", repr(p), repr(containers), f"out{out_bits}", jit.host_id())


def is_ready(p: ModelParams, arrays: list[np.ndarray | None], out_bits: int = 64) -> bool:
    """Whether the kernel for `p` on arrays of these element types, writing `out_bits`-bit
    results, is compiled already (in this process, or in the disk cache)."""
    containers = _containers(p, arrays)
    if (p, containers, out_bits) in _KERNELS:
        return True
    return cache.has(_disk_key(p, containers, out_bits))


def machine_code(disk_key: str, make: Callable[[], tuple[str, bool]]) -> int:
    """The address of KERNEL in object code from the disk cache under `disk_key`, or
    compiled from `make()` = (IR text, whether to vectorise the row loop) and stored."""
    obj = cache.get(disk_key)
    if obj is None:
        ir, vectorize = make()
        obj = jit.compile_object(ir, vectorize)
        cache.put(disk_key, obj)
    return jit.load(obj, KERNEL)


def cpu_kernel(
    p: ModelParams, containers: tuple[int, ...] | None = None, out_bits: int = 64
) -> CpuKernel:
    """The compiled kernel of `p` for operand arrays of `containers` bits per element
    (None: the narrowest that holds each operand's bit patterns), writing d into an
    array of `out_bits`-bit elements."""
    ops = operands(p)
    containers = containers or tuple(container(o.width) for o in ops)
    mem_key = (p, containers, out_bits)
    with _LOCK:
        k = _KERNELS.get(mem_key)
        if k is not None:
            return k

        def make() -> tuple[str, bool]:
            dag = instruction_dag(p)
            plan = loop_plan(dag.root, dag.nodes)
            if plan.tiled:
                return cpu_tiled_module(dag, containers, plan, out_bits), True
            return cpu_module(dag, containers, out_bits), False

        addr = machine_code(_disk_key(p, containers, out_bits), make)
        proto = ctypes.CFUNCTYPE(
            None, ctypes.c_int64, ctypes.c_int64, *[ctypes.c_void_p] * (len(ops) + 1)
        )
        k = CpuKernel(p, ops, containers, out_bits, proto(addr))
        _KERNELS[mem_key] = k
        return k


def threads() -> int:
    """Worker threads: $TCSMT_THREADS, else the cores this process may run on."""
    env = os.environ.get("TCSMT_THREADS")
    if env:
        return max(1, int(env))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_POOL: ThreadPoolExecutor | None = None


def _pool(n: int) -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None or _POOL._max_workers < n:  # noqa: SLF001 - grow to the asked width
        _POOL = ThreadPoolExecutor(max_workers=n, thread_name_prefix="tcsmt-kernel")
    return _POOL


def _as_container(x: np.ndarray, width: int) -> np.ndarray:
    """`x` as a C-contiguous unsigned array of `_element_bits` bits per element: the
    array itself when its type already holds `width` bits (no copy; signed arrays, whose
    values the API has checked to be non-negative, are viewed as unsigned), else a copy."""
    x = np.asarray(x)
    dt = UNSIGNED[_element_bits(x, width)]
    if x.dtype.itemsize == np.dtype(dt).itemsize and x.dtype.kind in "ui":
        return np.ascontiguousarray(x).view(dt)
    return np.ascontiguousarray(x, dtype=dt)


def _element_bits(x: np.ndarray, width: int) -> int:
    """Bits per element of the array `_as_container` makes of `x`."""
    dt = np.asarray(x).dtype
    bits = dt.itemsize * 8
    if dt.kind in "ui" and bits >= width and bits in UNSIGNED:
        return bits
    return container(width)


def _containers(p: ModelParams, arrays: list[np.ndarray | None]) -> tuple[int, ...]:
    """Element bits of each operand array (an absent one: the narrowest that holds it)."""
    ops = operands(p)
    arrays = list(arrays) + [None] * (len(ops) - len(arrays))
    return tuple(
        container(o.width) if x is None else _element_bits(x, o.width) for x, o in zip(arrays, ops)
    )


def run_rows(
    p: ModelParams,
    arrays: list[np.ndarray],
    n_threads: int | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """d (one per row) for operand arrays a (N, K), b (N, K), c (N,)[, sa, sb
    (N, n_scales)] already checked for shape and range, read as they are (no copy when
    they are contiguous unsigned arrays). `out`: a contiguous unsigned (N,) array the
    kernel writes d into (None: a new uint64 array); returned."""
    ops = operands(p)
    if len(arrays) != len(ops):
        raise ValueError(f"expected {len(ops)} operand arrays, got {len(arrays)}")
    arrs = [_as_container(x, o.width) for x, o in zip(arrays, ops)]
    n = arrs[0].shape[0]
    if out is None:
        out = np.empty(n, dtype=np.uint64)
    if out.dtype.kind != "u" or out.shape != (n,) or not out.flags.c_contiguous:
        raise ValueError(f"out: expected a contiguous unsigned ({n},) array")
    k = cpu_kernel(p, tuple(a.dtype.itemsize * 8 for a in arrs), out.dtype.itemsize * 8)
    ptrs = [a.ctypes.data for a in arrs] + [out.ctypes.data]
    t = min(n_threads or threads(), max(1, n // MIN_ROWS_PER_THREAD))
    if t <= 1:
        k.fn(0, n, *ptrs)
        return out
    bounds = [n * i // t for i in range(t + 1)]
    jobs = [_pool(t).submit(k.fn, lo, hi, *ptrs) for lo, hi in zip(bounds, bounds[1:])]
    for j in jobs:
        j.result()
    return out
