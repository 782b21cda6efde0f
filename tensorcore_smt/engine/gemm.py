"""The compiled GEMM runner: element.py's step functions compiled, the Plan driven.

`run_gemm` is the hook gemm/emulate.py calls (its `compiled_runner` documents the
contract). Each step function of gemm/element.py is run once on the symbolic interpreter
and compiled: the instruction step (mma_step) as a chain kernel that loops over a chain's
k-blocks, lanes across N (gemm_ir.chain_rows_module), the fp32 promotion,
split-K combination and epilogue as elementwise kernels. This module only walks the
Plan (which chains, which promotions, which combination tree, where C joins) the way
element.accumulate and element.element do; all arithmetic is the compiled model code,
and tests check the result against element.py on numpy bit for bit.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import numpy as np

from ..bv.core import BV
from ..bv.symbolic import SymbolicBackend
from ..gemm.element import (
    Epilogue,
    acc_format,
    c_format,
    canonical_nan,
    combine,
    element,
    epilogue,
    mma_step,
    promote_add,
)
from ..gemm.plan import Plan, Tree
from ..gemm.schedule import Schedule
from ..model.params import ModelParams
from ..spec.formats import Format
from . import cache, jit
from .gemm_ir import chain_rows_module, map_module
from .kernel import _LOCK as _KERNEL_LOCK
from .kernel import _pool, machine_code, threads
from .kernel_ir import container
from .loops import loop_plan

_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_FUNCS: dict[tuple, Callable] = {}
_LOCK = threading.Lock()
MIN_OUTPUTS_PER_THREAD = 2048


def _compiled(
    parts: tuple, make: Callable[[], tuple[str, bool]], n_ptrs: int, ints: tuple[int, ...] = ()
):
    """The ctypes function of the kernel described by `parts` (a memory and disk key),
    made by `make()` = (IR, vectorise) on a miss. Arguments: lo, hi, then pointers, with
    the argument positions in `ints` (after lo, hi) passed as 64-bit integers."""
    with _LOCK:
        fn = _FUNCS.get(parts)
        if fn is not None:
            return fn
    with _KERNEL_LOCK:
        addr = machine_code(cache.key("gemm", *map(repr, parts), jit.host_id()), make)
    types = [ctypes.c_int64 if i in ints else ctypes.c_void_p for i in range(n_ptrs)]
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, *types)(addr)
    with _LOCK:
        _FUNCS[parts] = fn
    return fn


def _chain_fn(p: ModelParams, ca: int, cb: int, promote: tuple | None = None):
    """The chain kernel of instruction `p` (gemm_ir.chain_rows_module) for operand tables
    of ca, cb bits per element, its lane loop vectorised as engine/loops.py decides from
    the step DAG; `promote` = (d format, promoted format, NaN): each chain's result is
    added into a promoted sum by element.promote_add inside the kernel."""

    def make() -> tuple[str, bool]:
        s = SymbolicBackend()
        wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
        a = [s.var(f"a{k}", wa) for k in range(p.K)]
        b = [s.var(f"b{k}", wb) for k in range(p.K)]
        d = mma_step(p, a, b, s.var("acc", wc))
        plan = loop_plan(d.v, s.node_count())
        prom = None
        if promote is not None:
            d_fmt, af, nan = promote
            x0, x1 = s.var("x0", af.spec.storage), s.var("x1", d_fmt.spec.storage)
            prom = (promote_add(x0, x1, d_fmt, af, nan).v, af.spec.storage)
        return chain_rows_module(d.v, p.K, wa, wb, ca, cb, wc, plan, prom), plan.tiled

    # lo, hi | A, ia, B, ib, Kp, NB, blocks, ends, nc, acc_in, acc_out
    return _compiled(("chain-rows", p, ca, cb, promote), make, 11, ints=(4, 5, 8))


def _map_fn(parts: tuple, widths: list[int], build: Callable[[list[BV]], BV]):
    """An elementwise kernel out = build(x0, x1, ...) on uint64 arrays."""

    def make() -> tuple[str, bool]:
        s = SymbolicBackend()
        xs = [s.var(f"x{i}", w) for i, w in enumerate(widths)]
        return map_module(build(xs).v, widths), False

    return _compiled(("map", *parts, tuple(widths)), make, len(widths) + 1)


def _split_rows(n: int, call: Callable[[int, int], None]) -> None:
    """call(lo, hi) over [0, n) in one piece per thread (outside the GIL)."""
    t = min(threads(), max(1, n // MIN_OUTPUTS_PER_THREAD))
    if t <= 1:
        call(0, n)
        return
    bounds = [n * i // t for i in range(t + 1)]
    for j in [_pool(t).submit(call, lo, hi) for lo, hi in zip(bounds, bounds[1:])]:
        j.result()


def _map(fn, inputs: list[np.ndarray]) -> np.ndarray:
    n = len(inputs[0])
    out = np.empty(n, dtype=np.uint64)
    ptrs = [x.ctypes.data for x in inputs] + [out.ctypes.data]
    _split_rows(n, lambda lo, hi: fn(lo, hi, *ptrs))
    return out


class _Tables:
    """Operands for the chain kernel: A (rows, K_padded) and B as given, (K_padded,
    columns), contiguous, of the format's container type, and each output's row and
    column."""

    def __init__(self, p: ModelParams, a_table, a_idx, b_table, b_idx) -> None:
        self.Kp, self.NB = b_table.shape
        self.A = np.ascontiguousarray(a_table.T, dtype=_UINT[container(p.a_fmt.spec.storage)])
        self.B = np.ascontiguousarray(b_table, dtype=_UINT[container(p.b_fmt.spec.storage)])
        self.ia = np.ascontiguousarray(a_idx, dtype=np.int64)
        self.ib = np.ascontiguousarray(b_idx, dtype=np.int64)
        self.bits = (self.A.dtype.itemsize * 8, self.B.dtype.itemsize * 8)

    def run(self, fn, chains: list[tuple[int, ...]], acc0: np.ndarray) -> np.ndarray:
        """The chain kernel `fn` over `chains` (k-block lists) from accumulators acc0
        (uint64, one per output)."""
        bl = np.asarray([j for c in chains for j in c], dtype=np.int64)
        ends = np.cumsum([len(c) for c in chains], dtype=np.int64)
        out = np.empty(len(self.ia), dtype=np.uint64)
        args = (self.A.ctypes.data, self.ia.ctypes.data, self.B.ctypes.data, self.ib.ctypes.data)
        rest = (self.Kp, self.NB, bl.ctypes.data, ends.ctypes.data, len(ends))
        ptrs = (acc0.ctypes.data, out.ctypes.data)
        _split_rows(len(out), lambda lo, hi: fn(lo, hi, *args, *rest, *ptrs))
        return out


def run_gemm(
    p: ModelParams,
    plan: Plan,
    schedule: Schedule,
    a_table: np.ndarray,
    a_idx: np.ndarray,
    b_table: np.ndarray,
    b_idx: np.ndarray,
    c_bits: np.ndarray | None,
    c_fmt: Format | None,
) -> np.ndarray:
    """Output bits (n_out,) uint64: output o is element.element on a_table[:, a_idx[o]],
    b_table[:, b_idx[o]], c_bits[o] (see gemm/emulate.py compiled_runner)."""
    if p.scale_fmt is not None or p.c_fmt.spec.storage != p.d_fmt.spec.storage:
        return _run_numpy(p, plan, schedule, a_table, a_idx, b_table, b_idx, c_bits, c_fmt)
    n = len(a_idx)
    t = _Tables(p, a_table, a_idx, b_table, b_idx)
    d_fmt, af = p.d_fmt, acc_format(p)
    nan = canonical_nan(af, p)
    zero = np.zeros(n, dtype=np.uint64)
    c64 = None if c_bits is None else np.ascontiguousarray(c_bits, dtype=np.uint64)
    ep = Epilogue.of(schedule, p, plan, c64 is not None)
    if not ep.reads_ab:  # alpha = 0: A and B are not read (element.element)
        return _epilogue(zero, af, ep, p, c64, c_fmt)
    partials: list[tuple[np.ndarray, Format]] = []
    for s, sp in enumerate(plan.splits):
        if not sp.promoted:  # element.accumulate: one chain, C as acc_0 of split 0
            acc0 = c64 if (plan.c_in_chain and s == 0 and c64 is not None) else zero
            partials.append((t.run(_chain_fn(p, *t.bits), [sp.chains[0]], acc0), d_fmt))
            continue
        # each chain from 0, its result promoted into a sum from 0, in the one kernel
        fn = _chain_fn(p, *t.bits, promote=(d_fmt, af, nan))
        partials.append((t.run(fn, list(sp.chains), zero), af))

    def reduce(tree: Tree) -> tuple[np.ndarray, Format]:
        if isinstance(tree, int):
            return partials[tree]
        (x, fx), (y, fy) = reduce(tree[0]), reduce(tree[1])
        fn = _map_fn(
            ("combine", fx, fy, af, nan),
            [fx.spec.storage, fy.spec.storage],
            lambda v: combine(v[0], v[1], fx, fy, af, nan),
        )
        return _map(fn, [x, y]), af

    acc, acc_fmt = partials[0] if len(partials) == 1 else reduce(plan.combine)
    return _epilogue(acc, acc_fmt, ep, p, c64, c_fmt)


def _epilogue(
    acc: np.ndarray,
    acc_fmt: Format,
    ep: Epilogue,
    p: ModelParams,
    c64: np.ndarray | None,
    c_fmt: Format | None,
) -> np.ndarray:
    """element.epilogue compiled as an elementwise kernel over the accumulators (and C
    where it has a term)."""
    c_term = ep.beta is not None
    if ep.identity(acc_fmt):
        return acc
    cf = c_fmt or ep.out_fmt
    widths = [acc_fmt.spec.storage] + ([cf.spec.storage] if c_term else [])
    fn = _map_fn(
        ("epilogue", p, acc_fmt, cf if c_term else None, ep),
        widths,
        lambda v: epilogue(v[0], acc_fmt, v[1] if c_term else None, cf, ep, p),
    )
    return _map(fn, [acc] + ([c64] if c_term else []))


def _run_numpy(p, plan, schedule, a_table, a_idx, b_table, b_idx, c_bits, c_fmt):
    """element.element on the numpy interpreter, for the forms the chain kernel does not
    take (block-scaled units, a c format of another width than d)."""
    from ..bv.vector import VECTOR

    n = len(a_idx)
    out = np.empty(n, dtype=np.uint64)
    wa, wb = p.a_fmt.spec.storage, p.b_fmt.spec.storage
    for lo in range(0, n, 1 << 15):
        hi = min(n, lo + (1 << 15))
        a = [
            BV(VECTOR, VECTOR.lanes(a_table[k][a_idx[lo:hi]], wa), wa) for k in range(len(a_table))
        ]
        b = [
            BV(VECTOR, VECTOR.lanes(b_table[k][b_idx[lo:hi]], wb), wb) for k in range(len(b_table))
        ]
        c = None
        if c_bits is not None:
            w = (c_fmt or c_format(p, schedule)).spec.storage
            c = BV(VECTOR, VECTOR.lanes(c_bits[lo:hi], w), w)
        d = element(a, b, c, p, plan, schedule, c_fmt)
        out[lo:hi] = np.asarray(d.v, dtype=np.uint64)
    return out
