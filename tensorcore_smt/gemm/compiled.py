"""The compiled GEMM runner: element.py's step functions compiled by the engine
(tensorcore_smt/engine), the Plan driven.

`run_gemm` is the runner gemm/emulate.py calls (its `compiled_runner` documents the
contract). Each step function of gemm/element.py is run once on the symbolic interpreter
and compiled: the instruction step (mma_step) as a chain kernel that loops over a chain's
k-blocks, lanes across N (gemm_ir.chain_rows_module), the fp32 promotion,
split-K combination and epilogue as elementwise kernels. The Plan is walked by
element.fold_plan, the walk element.accumulate uses too, with C joining where
element.c_joins and element.c_format say; all arithmetic is the compiled model code,
and tests check the result against element.py on numpy bit for bit.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable

import numpy as np

from ..bv.core import BV
from ..bv.dtypes import UNSIGNED
from ..engine import cache, float_fda, ieee_fma, jit
from ..engine.dag import KernelBackend
from ..engine.gemm_ir import chain_rows_module, map_module
from ..engine.kernel import _LOCK as _KERNEL_LOCK
from ..engine.kernel import machine_code, threads
from ..engine.kernel_ir import container
from ..engine.loops import LoopPlan, loop_plan
from ..engine.tiles import run_tiles
from ..formats import Format
from ..model.params import ModelParams
from .element import (
    Epilogue,
    acc_format,
    c_format,
    c_joins,
    combine,
    epilogue,
    fold_plan,
    join_partial,
    mma_step,
    promote_add,
    round_operand,
    round_partial,
    rounds_operands,
    scale_operand,
)
from .outputs import OutputGrid, Outputs
from .plan import Plan
from .schedule import OperandRound, Schedule

_FUNCS: dict[tuple, Callable] = {}
_LOCK = threading.Lock()
MIN_OUTPUTS_PER_THREAD = 2048
RUN = 256
"""Outputs of a row of D that the chain kernel takes together (its lane loop's trip
count at most): A's decoding, hoisted out of the lane loop, is done once per run and
k-block. Measured on one core (best CPU time of 5, load about 3): bf16 250 x 2560 x
2048 (fp64 formulation) 1.8 G MAC/s with runs of 64, 2.2 with 256 or 1,024; e4m3 64 x
1920 x 2048 with promotion every 128 (general kernel) 2.2 -> 2.6."""
GROUP = 8
"""Runs of the same columns of B (rows of D) that the chain kernel takes together, each
k-block of B read once for all of them (gemm_ir `group`); the runner hands a tile's
outputs over column panel by column panel so that such runs follow each other."""


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


def chain_ir(p: ModelParams, ca: int, cb: int, promote: tuple | None = None) -> tuple[str, bool]:
    """(IR, whether to vectorise) of the chain kernel of instruction `p`
    (gemm_ir.chain_rows_module) for operand tables of ca, cb bits per element, its lane
    loop vectorised as engine/loops.py decides from the step DAG; `promote` = (d format,
    promoted format): each chain's result is added into a promoted sum by
    element.promote_add inside the kernel."""
    s = KernelBackend()
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    a = [s.var(f"a{k}", wa) for k in range(p.K)]
    b = [s.var(f"b{k}", wb) for k in range(p.K)]
    d = mma_step(p, a, b, s.var("acc", wc))
    plan = loop_plan(d.v, s.node_count())
    prom = _promotion(p, promote)
    ir = chain_rows_module(d.v, p.K, wa, wb, ca, cb, wc, plan, prom, tile=RUN, group=GROUP)
    return ir, plan.tiled


def _chain_fn(p: ModelParams, ca: int, cb: int, promote: tuple | None = None):
    """The ctypes function of `chain_ir`'s kernel."""
    # lo, hi | A, ia, B, ib, Kp, NB, blocks, ends, nc, acc_in, acc_out
    return _compiled(
        ("chain-rows", p, ca, cb, promote, RUN, GROUP),
        lambda: chain_ir(p, ca, cb, promote),
        11,
        ints=(4, 5, 8),
    )


FLOAT_LANES = 16
"""SIMD lanes of the fp64 formulation's chain kernel (two 512-bit registers of fp64):
bf16 64 x 1024 x 2560 on one core 1.5x the general kernel's rate with 16, 1.2x with 8.
Again with the max/min pass 1 (the kernel alone on one thread, 64 x 2560 x 2048, best of
11 runs interleaved, load about 4.6, G MAC per CPU s): fp16 with B's tables 2.88 with
8 lanes, 3.19 / 3.04 with 16, 2.70 with 32; bf16 without tables 2.70 with 8, 2.92 /
2.86 with 16, 2.99 with 32 (within the runs' spread). With the products in fp32 (16
lanes one 512-bit register; load 3.5): fp16 4.16 with 16, 4.25 with 32; e4m3 (64 x 1920
x 2048) 5.00 / 5.14 with 16, 4.62 with 32, 4.83 with 64."""
FLOAT_MIN_BITS = 16
"""Operand width from which the fp64 formulation runs: measured on one core (runs of
both kernels interleaved, load average about 10): bf16 1.5x and fp16 1.3x the general
kernel's rate, e4m3 (64 x 1024 x 1920, promotion every 128) 0.83x: the general kernel's
16 lanes of 8- and 16-bit integers beat its 16 of fp64 there. Again with B's tables
and the max/min pass 1, products still in fp64 (tc.matmul on hopper/cublas-fp8, both
threads, best CPU time of 3 interleaved, load 4.7-4.9, G MAC per CPU s, general / fp64
with tables): 64 x 1024 x 1920 2.74 / 2.13, 256 x 1920 x 2048 2.78 / 2.41, 1024 x 1920
x 2048 2.66 / 2.34. With the products in fp32 (`float_tables`) and B's rows padded
(`row_length`), best of 5 interleaved, load 3.2-3.3: 64 x 1024 x 1920 2.75 / 3.11, 128
x 1024 x 1920 2.87 / 3.72; at 32 x 5760 x 1920 (unpadded) 2.73 / 2.28. So 8-bit
operands take the fp64 formulation only with tables (`FLOAT_TABLE_ROWS` rows of D per
column of B or more), the general kernel otherwise."""


FLOAT_TABLE_ROWS = 64
"""Rows of D per column of B from which the fp64 formulation reads B's decoding from
tables and forms the products in fp32 from the operands' own values (`float_tables`:
fp16, FP8). The kernel alone (one thread, 64 x 1920 x 2048 e4m3, 64 x 2560 x 2048 fp16,
best of 11 interleaved, load 2.9-3.2, G MAC per CPU s, tables with fp64 / fp32
products): e4m3 3.37 / 5.45, fp16 3.60 / 4.53; without tables (bits decoded per
product) e4m3 2.49, fp16 2.48. Through tc.matmul (both threads, best CPU time of 3,
interleaved, load 2.5-3.4; fp64 without tables / with tables and fp32 products): fp16
1024^3 2.31 / 3.52, 64 x 2560 x 2560 2.35 / 2.70, 250 x 9728 x 2560 2.41 / 2.81 (making
B's 25 M table entries: 0.37-0.44 of its 2.2 CPU s)."""
NORMALISED_TABLE_ROWS = 200
"""The same for bf16, whose products fit fp32 only from normalised operands
(float_fda.tables_normalised), a smaller gain set against the same cost of making the
tables: tc.matmul, both threads, best CPU time of 3-4 interleaved, load 2.4-3.6, G MAC
per CPU s, without / with tables: 128 x 9728 x 2560 2.65 / 2.22 (tables 0.29-0.38 CPU
s), 250 x 9728 x 2560 2.53 / 2.70 and 2.49 / 2.49 (tables 0.10-0.55 CPU s), 1024 x 2560
x 2560 2.51 / 2.89 and 2.46 / 2.98; the kernel alone (one thread, 64 x 9744 x 2560, B's
tables with fp64 / normalised fp32 products) 3.46 / 3.78, decoding B's bits about
2.9."""


def float_tables(p: ModelParams, n_outputs: int, n_columns: int) -> bool:
    """Whether the fp64 formulation's chain kernel (for unit `p`, where float_fda.applies)
    reads B's values and term exponents from tables made once per GEMM
    (float_fda.operand_tables: K x N work, 6 bytes per element of B against 1 or 2) and
    forms the products in fp32: from the operands' own values where
    float_fda.fp32_reasons allows (fp16, FP8) and the GEMM has at least
    FLOAT_TABLE_ROWS rows of D per column of B, from normalised ones
    (float_fda.tables_normalised: bf16) from NORMALISED_TABLE_ROWS rows. 8-bit operands
    run this kernel too (FLOAT_MIN_BITS keeps them off the fp64 one)."""
    if not float_fda.fp32_reasons(p):
        return n_outputs >= FLOAT_TABLE_ROWS * n_columns
    return float_fda.tables_normalised(p) and n_outputs >= NORMALISED_TABLE_ROWS * n_columns


def _promotion(p: ModelParams, promote: tuple | None) -> tuple | None:
    """The kernel's promotion node (element.promote_add of a chain's result into the
    promoted sum) for `promote` = (d format, promoted format), or None."""
    if promote is None:
        return None
    s = KernelBackend()
    d_fmt, af = promote
    x0, x1 = s.var("x0", af.spec.storage), s.var("x1", d_fmt.spec.storage)
    return (promote_add(x0, x1, d_fmt, af, p).v, af.spec.storage)


def _stepped_chain_ir(
    p: ModelParams,
    ca: int,
    cb: int,
    promote: tuple | None,
    emit,
    declarations,
    lanes: int,
    extra: tuple[str, ...] = (),
) -> tuple[str, bool]:
    """`chain_ir` with the instruction step emitted by `emit(p, body, operand, acc_ty)`
    (a formulation proved equal to the model's step for the units it applies to) on
    `lanes` SIMD lanes, the intrinsics it calls in `declarations`; with `extra` (names
    of tables laid out as B, pointer parameters after acc_out) `emit` also gets the
    index function (gemm_ir `index`) to read them."""
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage

    def step(body, operand, index):
        if extra:
            return emit(p, body, operand, f"i{wc}", index)
        return emit(p, body, operand, f"i{wc}")

    plan = LoopPlan(tiled=True, lanes=lanes)
    ir = chain_rows_module(
        None, p.K, wa, wb, ca, cb, wc, plan, _promotion(p, promote), tile=RUN, group=GROUP,
        step=step, declarations=tuple(declarations), extra_params=extra,
    )  # fmt: skip
    return ir, True


def float_chain_ir(
    p: ModelParams, ca: int, cb: int, promote: tuple | None = None, tables: bool = False
) -> tuple[str, bool]:
    """`chain_ir` with the instruction step in the fp64 formulation of
    engine/float_fda.py (for units where float_fda.applies, on finite operands);
    `tables`: B's values and exponents read from float_fda.operand_tables (two more
    pointer parameters, float_fda.B_TABLES) instead of decoded from its bits."""
    extra = float_fda.B_TABLES if tables else ()
    return _stepped_chain_ir(
        p, ca, cb, promote, float_fda.emit_step, float_fda.DECLARATIONS, FLOAT_LANES, extra
    )


def _float_chain_fn(
    p: ModelParams, ca: int, cb: int, promote: tuple | None = None, tables: bool = False
):
    """The ctypes function of `float_chain_ir`'s kernel."""
    return _compiled(
        ("chain-rows-fp64", p, ca, cb, promote, RUN, GROUP, tables),
        lambda: float_chain_ir(p, ca, cb, promote, tables),
        13 if tables else 11,
        ints=(4, 5, 8),
    )


FMA_LANES = 16
"""SIMD lanes of the binary32 fma chain kernel (one 512-bit register of fp32)."""


def fma_chain_ir(
    p: ModelParams, ca: int, cb: int, promote: tuple | None = None
) -> tuple[str, bool]:
    """`chain_ir` with the instruction step as LLVM's llvm.fma.f32 (engine/ieee_fma.py,
    for units where ieee_fma.applies)."""
    return _stepped_chain_ir(
        p, ca, cb, promote, ieee_fma.emit_step, ieee_fma.DECLARATIONS, FMA_LANES
    )


def _fma_chain_fn(p: ModelParams, ca: int, cb: int, promote: tuple | None = None):
    """The ctypes function of `fma_chain_ir`'s kernel."""
    return _compiled(
        ("chain-rows-fma32", p, ca, cb, promote, RUN, GROUP),
        lambda: fma_chain_ir(p, ca, cb, promote),
        11,
        ints=(4, 5, 8),
    )


def _map_fn(parts: tuple, widths: list[int], build: Callable[[list[BV]], BV]):
    """An elementwise kernel out = build(x0, x1, ...) on uint64 arrays."""

    def make() -> tuple[str, bool]:
        s = KernelBackend()
        xs = [s.var(f"x{i}", w) for i, w in enumerate(widths)]
        return map_module(build(xs).v, widths), False

    return _compiled(("map", *parts, tuple(widths)), make, len(widths) + 1)


TILE_STEPS = 1 << 20
"""Instruction steps per tile (outputs x steps per output): tens of milliseconds on a
core for most instructions, so an interrupt stops the runner that quickly."""
MAX_TILE = 1 << 17
"""Outputs per tile at most: the runner's working set (a few uint64 arrays of a tile per
worker) is bounded by it, whatever M x N is."""
MIN_TILE = 64


def tile_outputs(n: int, steps: int, n_threads: int, row: int = 0) -> int:
    """Outputs per tile for `n` outputs of `steps` instruction steps each: about
    TILE_STEPS steps, at least MIN_TILE and at
    most MAX_TILE outputs, small enough that every thread gets one, and a multiple of
    RUN when it holds one; `row`: outputs per row of D (0: not a grid), a tile then
    holds GROUP rows where MAX_TILE allows."""
    t = max(MIN_TILE, min(MAX_TILE, TILE_STEPS // max(1, steps)))
    if row and t < GROUP * row <= MAX_TILE:
        t = GROUP * row
    t = min(t, -(-n // max(1, n_threads)))
    if t >= RUN:  # whole runs: a tile edge inside a row cuts a run, whose tail is scalar
        t -= t % RUN
    return max(1, t)


def panel_order(ia: np.ndarray, ib: np.ndarray) -> np.ndarray | None:
    """The order in which the chain kernel takes a tile's outputs: column panel of RUN
    columns by column panel, within a panel row by row (columns ascending), so that the
    runs of a panel's rows follow each other and share B's k-blocks (GROUP); None when
    the tile reads one row of A (its row-major order is that order)."""
    if len(ia) < 2 or ia.min() == ia.max():
        return None
    return np.lexsort((ib, ia, ib // RUN))


def _map(fn, inputs: list[np.ndarray]) -> np.ndarray:
    """out[o] = fn(inputs[0][o], ...) over uint64 arrays, on the calling thread."""
    n = len(inputs[0])
    out = np.empty(n, dtype=np.uint64)
    fn(0, n, *[x.ctypes.data for x in inputs], out.ctypes.data)
    return out


ROW_PAD = 16
"""Columns added to B's rows in the chain kernel's copy where their number is a multiple
of 256 (`row_length`)."""


def row_length(n: int) -> int:
    """Elements per row of B (and of its tables) as the chain kernel reads it: n, or n +
    ROW_PAD where n is a multiple of 256. A k-block reads 16 or 32 rows of B at once, and
    rows a multiple of 512 bytes apart fall on a few cache sets and alias 4 KB apart
    (the kernel alone, one thread, G MAC per CPU s: e4m3 with fp32 products 64 x N x
    2048 at N = 1024, 1,040, 1,536, 2,048 2.21, 5.61, 3.71, 1.97; bf16 64 x N x 2560
    at N = 2,048, 2,064 2.70, 3.04)."""
    return n + ROW_PAD if n % 256 == 0 else n


class _Tables:
    """Operands for the chain kernel: A (rows, K_padded) and B as given, (K_padded,
    columns), contiguous, of the format's container type."""

    def __init__(self, p: ModelParams, a_table, b_table) -> None:
        self.Kp, n = b_table.shape
        self.NB = row_length(n)
        self.A = np.ascontiguousarray(a_table.T, dtype=UNSIGNED[container(p.a_fmt.spec.storage)])
        bt = UNSIGNED[container(p.b_fmt.spec.storage)]
        if self.NB == n:
            self.B = np.ascontiguousarray(b_table, dtype=bt)
        else:  # columns past n: zeros (finite), never an output's
            self.B = np.zeros((self.Kp, self.NB), dtype=bt)
            self.B[:, :n] = b_table
        self.bits = (self.A.dtype.itemsize * 8, self.B.dtype.itemsize * 8)
        self.extra: tuple[np.ndarray, ...] = ()
        """Tables laid out as B that the kernel reads after acc_out (float_fda.B_TABLES)."""

    def run(self, fn, chains: tuple[np.ndarray, np.ndarray], ia, ib, acc0) -> np.ndarray:
        """The chain kernel `fn` over `chains` (k-block list, chain ends) for the outputs
        reading rows ia of A and columns ib of B, from accumulators acc0 (uint64)."""
        bl, ends = chains
        out = np.empty(len(ia), dtype=np.uint64)
        fn(
            0, len(ia), self.A.ctypes.data, ia.ctypes.data, self.B.ctypes.data,
            ib.ctypes.data, self.Kp, self.NB, bl.ctypes.data, ends.ctypes.data, len(ends),
            acc0.ctypes.data, out.ctypes.data, *[x.ctypes.data for x in self.extra],
        )  # fmt: skip
        return out


def _rounded_table(
    table: np.ndarray,
    fmt: Format,
    mode: OperandRound,
    alpha: int | None = None,
    ep_fmt: Format | None = None,
    p: ModelParams | None = None,
) -> np.ndarray:
    """An operand table as the unit reads it (element.rounded_operands: scaled by `alpha`
    first when given, element.scale_operand, then element.round_operand; compiled as an
    elementwise kernel), once per operand rather than once per product."""
    rounds = mode != OperandRound.TRUNCATE and rounds_operands(fmt)
    if alpha is None and not rounds:
        return table
    w = fmt.spec.storage

    def read(v: list) -> BV:
        x = v[0]
        if alpha is not None:
            assert ep_fmt is not None and p is not None
            x = scale_operand(x, fmt, alpha, ep_fmt, p)
        return round_operand(x, fmt, mode)

    fn = _map_fn(("read-operand", fmt, mode, alpha, ep_fmt, p), [w], read)
    flat = np.ascontiguousarray(table, dtype=np.uint64).reshape(-1)
    return _map(fn, [flat]).reshape(table.shape).astype(table.dtype)


def _chains(chains) -> tuple[np.ndarray, np.ndarray]:
    """A split's chains as the chain kernel's (k-blocks, chain ends) arrays."""
    bl = np.asarray([j for c in chains for j in c], dtype=np.int64)
    return bl, np.cumsum([len(c) for c in chains], dtype=np.int64)


def run_gemm(
    p: ModelParams,
    plan: Plan,
    schedule: Schedule,
    a_table: np.ndarray,
    b_table: np.ndarray,
    outputs: Outputs,
    c_bits: np.ndarray | None,
    c_fmt: Format | None,
    out: np.ndarray,
) -> None:
    """Fill `out` (len(outputs),) unsigned with the output bits: output o is
    element.element on a_table[:, ia[o]], b_table[:, ib[o]], c_bits[o] (see
    gemm/emulate.py compiled_runner). The outputs are computed in tiles on worker
    threads (engine/tiles.py): memory beyond the operands, C and `out` is a few arrays
    per tile, and a Ctrl-C stops the workers after their current tile. `p` is what
    GemmHypothesis.params gives: not block-scaled, c and d in one format."""
    if p.scale_fmt is not None or p.c_fmt != p.d_fmt:
        # GemmHypothesis.params refuses both before a plan is made: never reached by matmul
        raise ValueError("run_gemm: a block-scaled unit, or c in another format than d")
    ep = Epilogue.of(schedule, p, plan, c_bits is not None)
    if ep.reads_ab:
        a_table = _rounded_table(a_table, p.a_fmt, plan.operand_round, ep.scale_a, ep.ep_fmt, p)
        b_table = _rounded_table(b_table, p.b_fmt, plan.operand_round, ep.scale_b, ep.ep_fmt, p)
    t = _Tables(p, a_table, b_table)
    d_fmt, af = p.d_fmt, acc_format(p)
    cf = c_fmt or c_format(p, schedule)
    # every kernel made (compiled or loaded) before any tile runs; alpha = 0 reads
    # neither A nor B (element.element): no chain kernel at all
    fns = {}  # promoted -> chain kernel
    if ep.reads_ab:
        chain_fn = _chain_fn
        narrow = min(p.a_fmt.spec.storage, p.b_fmt.spec.storage) < FLOAT_MIN_BITS
        kept = ieee_fma.subnormals_kept()  # both read fp32 subnormals through the FPU
        fast = kept and float_fda.applies(p)
        tables = fast and float_tables(p, len(outputs), t.NB)
        fast = (
            fast
            and (tables or not narrow)
            and all(float_fda.finite_table(x, f) for x, f in ((t.A, p.a_fmt), (t.B, p.b_fmt)))
        )
        if fast and tables:
            normalised = float_fda.tables_normalised(p)  # b 2^-e_b, or b's own value
            t.extra = float_fda.operand_tables(t.B, p.b_fmt, normalised)
            chain_fn = functools.partial(_float_chain_fn, tables=True)
        elif fast:
            chain_fn = _float_chain_fn
        elif kept and ieee_fma.applies(p):
            chain_fn = _fma_chain_fn
        for promoted in sorted({sp.promoted for sp in plan.splits}):
            prom = (d_fmt, af) if promoted else None
            fns[promoted] = chain_fn(p, *t.bits, promote=prom)
    chains = [_chains(sp.chains if sp.promoted else sp.chains[:1]) for sp in plan.splits]

    def combine_fn(fx: Format, fy: Format, rf: Format):
        return _map_fn(
            ("combine", fx, fy, rf, p),
            [fx.spec.storage, fy.spec.storage],
            lambda v: combine(v[0], v[1], fx, fy, rf, p),
        )

    out_fmt = ep.out_fmt

    def round_fn(fx: Format):
        return _map_fn(
            ("round-partial", fx, out_fmt, ep.saturate, p),
            [fx.spec.storage],
            lambda v: round_partial(v[0], fx, out_fmt, ep.saturate, p),
        )

    pb = ep.partial_beta
    c_partial = c_bits is not None and pb is not None

    def join_fn(fx: Format):
        return _map_fn(
            ("join-partial", fx, cf, pb, af, p),
            [fx.spec.storage, cf.spec.storage],
            lambda v: join_partial(v[0], fx, v[1], cf, pb, af, p),
        )

    def made(x, fx: Format, y, fy: Format, rf: Format) -> None:
        combine_fn(fx, fy, rf)  # compiled (or loaded) now, before any tile runs
        return None

    def made_round(x, fx: Format) -> None:
        round_fn(fx)
        return None

    def made_join(x, fx: Format) -> None:
        join_fn(fx)
        return None

    acc_fmt = af
    if ep.reads_ab:
        acc_fmt = fold_plan(
            plan,
            p,
            lambda s, sp, seed: None,
            made,
            out_fmt,
            made_round,
            made_join if c_partial else None,
            lambda f: None,
        )[1]
    c_term = ep.beta is not None
    ep_fn = None
    if not ep.identity(acc_fmt):
        widths = [acc_fmt.spec.storage] + ([cf.spec.storage] if c_term else [])
        ep_fn = _map_fn(
            ("epilogue", p, acc_fmt, cf if c_term else None, ep),
            widths,
            lambda v: epilogue(v[0], acc_fmt, v[1] if c_term else None, cf, ep, p),
        )

    def work(lo: int, hi: int) -> None:
        zero = np.zeros(hi - lo, dtype=np.uint64)
        c = None if c_bits is None else np.ascontiguousarray(c_bits[lo:hi], dtype=np.uint64)
        order = None
        if ep.reads_ab:
            ia, ib = outputs.rows(lo, hi)
            order = panel_order(ia, ib)
            if order is not None:
                ia, ib = ia[order], ib[order]
                c = None if c is None else c[order]

            def split(s: int, sp, seed: np.ndarray | None) -> np.ndarray:
                acc0 = c if c_joins(plan, s, c is not None) else zero
                return t.run(fns[sp.promoted], chains[s], ia, ib, acc0 if seed is None else seed)

            join = None
            if c_partial:

                def join(x, fx: Format):
                    return _map(join_fn(fx), [x, c])

            acc, _ = fold_plan(
                plan,
                p,
                split,
                lambda x, fx, y, fy, rf: _map(combine_fn(fx, fy, rf), [x, y]),
                out_fmt,
                lambda x, fx: _map(round_fn(fx), [x]),
                join,
                lambda f: zero,
            )
        else:
            acc = zero
        if ep_fn is not None:
            acc = _map(ep_fn, [acc] + ([c] if c_term else []))
        if order is not None:
            out[lo + order] = acc
        else:
            out[lo:hi] = acc

    n = len(outputs)
    n_threads = min(threads(), max(1, n // MIN_OUTPUTS_PER_THREAD))
    row = outputs.N if isinstance(outputs, OutputGrid) else 0
    run_tiles(n, tile_outputs(n, plan.steps(), n_threads, row), work, n_threads)
