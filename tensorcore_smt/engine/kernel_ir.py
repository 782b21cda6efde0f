"""LLVM IR modules around the lowered body of one instruction's DAG.

A kernel computes d for rows [lo, hi) of row arrays laid out as the numpy interpreter
takes them: a, b (N, K), c (N,), sa, sb (N, n_scales), each of the unsigned integer type
that holds its format's bit patterns (`container`), d into a uint64 array (N,).
The CPU module wraps the straight-line body in a loop over rows; the GPU module
(NVPTX) runs one row per thread. Both come from the same body text.
"""

from __future__ import annotations

from .dag import InstrDag, variable_slot
from .lower import Body

KERNEL = "tcsmt_kernel"


def container(width: int) -> int:
    """Bits of the unsigned integer type an operand of `width` bits is stored in."""
    for c in (8, 16, 32, 64):
        if width <= c:
            return c
    raise ValueError(f"no array type holds {width}-bit operands")


def _body(dag: InstrDag, containers: tuple[int, ...]) -> list[str]:
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
    if dag.width > 64:
        raise ValueError(f"d of {dag.width} bits does not fit the uint64 output")
    if dag.width < 64:
        d = body.emit(f"zext i{dag.width} {d} to i64")
    out = body.emit("getelementptr inbounds i64, ptr %out, i64 %row")
    body.lines.append(f"  store i64 {d}, ptr {out}, align 8")
    return body.lines


def _params(dag: InstrDag) -> str:
    return ", ".join(f"ptr noalias readonly %{o.name}" for o in dag.operands)


def default_containers(dag: InstrDag) -> tuple[int, ...]:
    """The narrowest array element (bits) for each operand of the kernel."""
    return tuple(container(o.width) for o in dag.operands)


def cpu_module(dag: InstrDag, containers: tuple[int, ...]) -> str:
    """`void tcsmt_kernel(i64 lo, i64 hi, ptr a, ptr b, ptr c[, ptr sa, ptr sb], ptr out)`;
    `containers`: bits of each operand array's elements (8, 16, 32 or 64)."""
    lines = [
        f"define void @{KERNEL}(i64 %lo, i64 %hi, {_params(dag)}, ptr noalias %out) {{",
        "entry:",
        "  %empty = icmp uge i64 %lo, %hi",
        "  br i1 %empty, label %exit, label %loop",
        "loop:",
        "  %row = phi i64 [ %lo, %entry ], [ %next, %loop ]",
        *_body(dag, containers),
        "  %next = add nuw i64 %row, 1",
        "  %done = icmp eq i64 %next, %hi",
        "  br i1 %done, label %exit, label %loop",
        "exit:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"


def nvptx_module(dag: InstrDag, containers: tuple[int, ...]) -> str:
    """The same body as a CUDA kernel: one row per thread, rows [0, n)
    (`void tcsmt_kernel(i64 n, ptr a, ptr b, ptr c[, ptr sa, ptr sb], ptr out)`; global
    pointers, the kernel marked by `!nvvm.annotations`, NVVM IR specification)."""
    lines = [
        'target triple = "nvptx64-nvidia-cuda"',
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
        *_body(dag, containers),
        "  br label %exit",
        "exit:",
        "  ret void",
        "}",
        "!nvvm.annotations = !{!0}",
        f'!0 = !{{ptr @{KERNEL}, !"kernel", i32 1}}',
    ]
    return "\n".join(lines) + "\n"
