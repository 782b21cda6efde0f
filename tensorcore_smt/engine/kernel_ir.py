"""LLVM IR modules around the lowered body of one instruction's DAG.

A kernel computes d for rows [lo, hi) of row arrays laid out as the numpy interpreter
takes them: a, b (N, K), c (N,), sa, sb (N, n_scales), each of an unsigned integer type
at least as wide as its format's bit patterns (the caller's arrays as they are: the
element width of each is part of the kernel), d into an unsigned array (N,) of
`out_bits` bits (the narrowest that holds d, or uint64).
The CPU module wraps the straight-line body in a loop over rows; the GPU module
(NVPTX) runs one row per thread. Both come from the same body text.
"""

from __future__ import annotations

from ..bv.dtypes import unsigned_holding
from .dag import InstrDag, variable_slot
from .loops import LoopPlan, loop_metadata
from .lower import Body

KERNEL = "tcsmt_kernel"


def container(width: int) -> int:
    """Bits of the narrowest unsigned integer type an operand of `width` bits fits in
    (bv/dtypes.py; ValueError beyond 64)."""
    return unsigned_holding(width).itemsize * 8


def store_d(body: Body, d: str, width: int, out_bits: int, row: str = "%row") -> None:
    """Emit the store of the `width`-bit result `d` into element `row` of the output array
    %out of `out_bits`-bit elements (zero-extended)."""
    if width > out_bits:
        raise ValueError(f"d of {width} bits does not fit a {out_bits}-bit output")
    if width < out_bits:
        d = body.emit(f"zext i{width} {d} to i{out_bits}")
    ptr = body.emit(f"getelementptr inbounds i{out_bits}, ptr %out, i64 {row}")
    body.lines.append(f"  store i{out_bits} {d}, ptr {ptr}, align {out_bits // 8}")


def row_loop(params: str, body: list[str], declarations: tuple[str, ...] = ()) -> str:
    """`void tcsmt_kernel(i64 lo, i64 hi, <params>, ptr out)`: the `body` lines (which
    read and write row %row) run for every row in [lo, hi); `declarations`: the
    intrinsics they call."""
    lines = [
        *declarations,
        f"define void @{KERNEL}(i64 %lo, i64 %hi, {params}, ptr noalias %out) {{",
        "entry:",
        "  %empty = icmp uge i64 %lo, %hi",
        "  br i1 %empty, label %exit, label %loop",
        "loop:",
        "  %row = phi i64 [ %lo, %entry ], [ %next, %loop ]",
        *body,
        "  %next = add nuw i64 %row, 1",
        "  %done = icmp eq i64 %next, %hi",
        "  br i1 %done, label %exit, label %loop",
        "exit:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _body(dag: InstrDag, containers: tuple[int, ...], out_bits: int = 64) -> Body:
    """Loads of the row's operands, the DAG, and the store of d (row index %row)."""
    by_name = {o.name: (o, c) for o, c in zip(dag.operands, containers)}

    def load(t, body: Body) -> str:
        stem, col = variable_slot(t.params[0])
        o, c = by_name[stem]
        idx = "%row"
        if o.count:
            idx = body.emit(f"mul i64 %row, {o.count}")
            idx = body.emit(f"add i64 {idx}, {col}") if col else idx
        ptr = body.emit(f"getelementptr inbounds i{c}, ptr %{stem}, i64 {idx}")
        v = body.emit(f"load i{c}, ptr {ptr}, align {c // 8}")
        return body.emit(f"trunc i{c} {v} to i{o.width}") if o.width < c else v

    body = Body(load)
    (d,) = body.lower([dag.root])
    store_d(body, d, dag.width, out_bits)
    return body


def _params(dag: InstrDag) -> str:
    return ", ".join(f"ptr noalias readonly %{o.name}" for o in dag.operands)


def default_containers(dag: InstrDag) -> tuple[int, ...]:
    """The narrowest array element (bits) for each operand of the kernel."""
    return tuple(container(o.width) for o in dag.operands)


def cpu_module(dag: InstrDag, containers: tuple[int, ...], out_bits: int = 64) -> str:
    """`void tcsmt_kernel(i64 lo, i64 hi, ptr a, ptr b, ptr c[, ptr sa, ptr sb], ptr out)`;
    `containers`: bits of each operand array's elements (8, 16, 32 or 64); `out_bits`:
    bits of the output array's elements."""
    body = _body(dag, containers, out_bits)
    return row_loop(_params(dag), body.lines, tuple(body.declarations))


TILE = 64
"""Rows per tile of the vectorised CPU kernel."""


def cpu_tiled_module(
    dag: InstrDag,
    containers: tuple[int, ...],
    plan: LoopPlan = LoopPlan(tiled=True),
    out_bits: int = 64,
) -> str:
    """The CPU kernel of `cpu_module` for LLVM's loop vectoriser: rows in tiles of TILE,
    each tile's operands first copied column by column into stack buffers (one per
    variable, of the narrowest type that holds it), then the body run over the tile
    reading the buffers, so the vectorised body loads consecutive rows with plain vector
    loads instead of gathers across the row-major arrays. `plan.lanes`: SIMD lanes forced
    on the body's loop (engine/loops.py)."""
    by_name = {o.name: (o, c) for o, c in zip(dag.operands, containers)}
    names = sorted((t for t in _variables(dag)), key=lambda t: variable_slot(t.params[0]))
    allocas, fill = [], []
    buf_of: dict[str, tuple[str, int]] = {}
    for i, t in enumerate(names):
        stem, col = variable_slot(t.params[0])
        o, c = by_name[stem]
        bt = container(o.width)
        buf = f"%buf{i}"
        buf_of[t.params[0]] = (buf, bt)
        allocas.append(f"  {buf} = alloca [{TILE} x i{bt}], align 64")
        idx = "%frow"
        if o.count:
            fill.append(f"  %fi{i}a = mul i64 %frow, {o.count}")
            idx = f"%fi{i}a"
            if col:
                fill.append(f"  %fi{i}b = add i64 {idx}, {col}")
                idx = f"%fi{i}b"
        fill += [
            f"  %fp{i} = getelementptr inbounds i{c}, ptr %{stem}, i64 {idx}",
            f"  %fv{i} = load i{c}, ptr %fp{i}, align {c // 8}",
        ]
        v = f"%fv{i}"
        if bt < c:
            fill.append(f"  %ft{i} = trunc i{c} {v} to i{bt}")
            v = f"%ft{i}"
        fill += [
            f"  %fq{i} = getelementptr inbounds [{TILE} x i{bt}], ptr {buf}, i64 0, i64 %fi",
            f"  store i{bt} {v}, ptr %fq{i}, align {bt // 8}",
        ]

    def load(t, body: Body) -> str:
        o, _ = by_name[variable_slot(t.params[0])[0]]
        buf, bt = buf_of[t.params[0]]
        ptr = body.emit(f"getelementptr inbounds [{TILE} x i{bt}], ptr {buf}, i64 0, i64 %ci")
        v = body.emit(f"load i{bt}, ptr {ptr}, align {bt // 8}")
        return body.emit(f"trunc i{bt} {v} to i{o.width}") if o.width < bt else v

    body = Body(load)
    (d,) = body.lower([dag.root])
    store_d(body, d, dag.width, out_bits, "%orow")
    back, metadata = loop_metadata(plan, "br i1 %cdone, label %tileend, label %compute")
    lines = [
        *body.declarations,
        f"define void @{KERNEL}(i64 %lo, i64 %hi, {_params(dag)}, ptr noalias %out) {{",
        "entry:",
        *allocas,
        "  %empty = icmp uge i64 %lo, %hi",
        "  br i1 %empty, label %exit, label %tile",
        "tile:",
        "  %r0 = phi i64 [ %lo, %entry ], [ %r0next, %tileend ]",
        "  %rem = sub i64 %hi, %r0",
        f"  %short = icmp ult i64 %rem, {TILE}",
        f"  %nt = select i1 %short, i64 %rem, i64 {TILE}",
        "  br label %fill",
        "fill:",
        "  %fi = phi i64 [ 0, %tile ], [ %finext, %fill ]",
        "  %frow = add i64 %r0, %fi",
        *fill,
        "  %finext = add nuw i64 %fi, 1",
        "  %fdone = icmp eq i64 %finext, %nt",
        "  br i1 %fdone, label %compute, label %fill",
        "compute:",
        "  %ci = phi i64 [ 0, %fill ], [ %cinext, %compute ]",
        "  %orow = add i64 %r0, %ci",
        *body.lines,
        "  %cinext = add nuw i64 %ci, 1",
        "  %cdone = icmp eq i64 %cinext, %nt",
        f"  {back}",
        "tileend:",
        "  %r0next = add i64 %r0, %nt",
        "  %tdone = icmp uge i64 %r0next, %hi",
        "  br i1 %tdone, label %exit, label %tile",
        "exit:",
        "  ret void",
        "}",
        *metadata,
    ]
    return "\n".join(lines) + "\n"


def _variables(dag: InstrDag) -> list:
    """The variable nodes of the DAG (inputs the kernel reads)."""
    from ..bv.dag import post_order

    return [t for t in post_order([dag.root]) if t.op == "var"]


def nvptx_module(dag: InstrDag, containers: tuple[int, ...], out_bits: int = 64) -> str:
    """The same body as a CUDA kernel: one row per thread, rows [0, n)
    (`void tcsmt_kernel(i64 n, ptr a, ptr b, ptr c[, ptr sa, ptr sb], ptr out)`; global
    pointers, the kernel marked by `!nvvm.annotations`, NVVM IR specification)."""
    body = _body(dag, containers, out_bits)
    lines = [
        'target triple = "nvptx64-nvidia-cuda"',
        *body.declarations,
        "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
        "declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()",
        "declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()",
        f"define void @{KERNEL}(i64 %n, {_params(dag)}, ptr noalias %out) {{",
        "entry:",
        "  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
        "  %cta = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()",
        "  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()",
        "  %cta64 = zext i32 %cta to i64",
        "  %ntid64 = zext i32 %ntid to i64",
        "  %tid64 = zext i32 %tid to i64",
        "  %base = mul i64 %cta64, %ntid64",
        "  %row = add i64 %base, %tid64",
        "  %inside = icmp ult i64 %row, %n",
        "  br i1 %inside, label %body, label %exit",
        "body:",
        *body.lines,
        "  br label %exit",
        "exit:",
        "  ret void",
        "}",
        "!nvvm.annotations = !{!0}",
        f'!0 = !{{ptr @{KERNEL}, !"kernel", i32 1}}',
    ]
    return "\n".join(lines) + "\n"
