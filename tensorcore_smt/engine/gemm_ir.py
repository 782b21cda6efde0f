"""LLVM IR of the GEMM runner's kernels: a chain of instruction steps, and maps.

chain: for each output o in [lo, hi): acc = acc_in[o]; for each k-block j listed in
`blocks`: acc = mma_step(a row ia[o], b column ib[o], block j, acc); acc_out[o] = acc.
The step body is the DAG of one instruction (variables a0.., b0.., acc) emitted once
inside an LLVM loop over the blocks, so a chain of any length is one kernel and the
accumulator stays in a register. Operand rows are contiguous: A (rows, K_padded) and
B^T (columns, K_padded), elements of the format's container type.

map: out[o] = f(x0[o], x1[o], ...) on uint64 arrays, for the promotion, split
combination and epilogue steps.
"""

from __future__ import annotations

from ..bv.symbolic import Term
from .dag import variable_slot
from .kernel_ir import KERNEL
from .lower import Body


def chain_module(root: Term, K: int, wa: int, wb: int, ca: int, cb: int, w_acc: int) -> str:
    """`void tcsmt_kernel(i64 lo, i64 hi, ptr A, ptr ia, ptr B, ptr ib, i64 Kp,
    ptr blocks, i64 n_blocks, ptr acc_in, ptr acc_out)` (ia, ib, blocks: i64; acc: u64)."""

    def load(t: Term, body: Body) -> str:
        stem, k = variable_slot(t.params[0])
        if stem == "acc":
            return "%acc"
        c, w, base = (ca, wa, "%abase") if stem == "a" else (cb, wb, "%bbase")
        idx = body.emit(f"add i64 {base}, {k}") if k else base
        ptr = body.emit(f"getelementptr inbounds i{c}, ptr %{stem.upper()}, i64 {idx}")
        v = body.emit(f"load i{c}, ptr {ptr}, align {c // 8}")
        return body.emit(f"trunc i{c} {v} to i{w}") if w < c else v

    body = Body(load)
    (d,) = body.lower([root])
    T = f"i{w_acc}"
    acc0 = f"trunc i64 %accw to {T}" if w_acc < 64 else "add i64 %accw, 0"
    dout = f"zext {T} %accf to i64" if w_acc < 64 else "add i64 %accf, 0"
    lines = [
        f"define void @{KERNEL}(i64 %lo, i64 %hi, ptr noalias readonly %A, "
        "ptr noalias readonly %ia, ptr noalias readonly %B, ptr noalias readonly %ib, "
        "i64 %Kp, ptr noalias readonly %blocks, i64 %nb, ptr noalias readonly %accin, "
        "ptr noalias %accout) {",
        "entry:",
        "  %empty = icmp uge i64 %lo, %hi",
        "  br i1 %empty, label %exit, label %row",
        "row:",
        "  %o = phi i64 [ %lo, %entry ], [ %onext, %rowend ]",
        "  %iap = getelementptr inbounds i64, ptr %ia, i64 %o",
        "  %iav = load i64, ptr %iap, align 8",
        "  %ibp = getelementptr inbounds i64, ptr %ib, i64 %o",
        "  %ibv = load i64, ptr %ibp, align 8",
        "  %arow = mul i64 %iav, %Kp",
        "  %brow = mul i64 %ibv, %Kp",
        "  %accp = getelementptr inbounds i64, ptr %accin, i64 %o",
        "  %accw = load i64, ptr %accp, align 8",
        f"  %acc0 = {acc0}",
        "  %none = icmp eq i64 %nb, 0",
        "  br i1 %none, label %rowend, label %step",
        "step:",
        "  %t = phi i64 [ 0, %row ], [ %tnext, %step ]",
        f"  %acc = phi {T} [ %acc0, %row ], [ {d}, %step ]",
        "  %jp = getelementptr inbounds i64, ptr %blocks, i64 %t",
        "  %j = load i64, ptr %jp, align 8",
        f"  %jk = mul i64 %j, {K}",
        "  %abase = add i64 %arow, %jk",
        "  %bbase = add i64 %brow, %jk",
        *body.lines,
        "  %tnext = add nuw i64 %t, 1",
        "  %tdone = icmp eq i64 %tnext, %nb",
        "  br i1 %tdone, label %rowend, label %step",
        "rowend:",
        f"  %accf = phi {T} [ %acc0, %row ], [ {d}, %step ]",
        f"  %dw = {dout}",
        "  %outp = getelementptr inbounds i64, ptr %accout, i64 %o",
        "  store i64 %dw, ptr %outp, align 8",
        "  %onext = add nuw i64 %o, 1",
        "  %done = icmp eq i64 %onext, %hi",
        "  br i1 %done, label %exit, label %row",
        "exit:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"


def map_module(root: Term, widths: list[int]) -> str:
    """`void tcsmt_kernel(i64 lo, i64 hi, ptr x0, ..., ptr out)`, all arrays u64: out[o] =
    the DAG `root` of variables x0.. (of `widths` bits) on row o."""

    def load(t: Term, body: Body) -> str:
        _, i = variable_slot(t.params[0])
        ptr = body.emit(f"getelementptr inbounds i64, ptr %x{i}, i64 %row")
        v = body.emit(f"load i64, ptr {ptr}, align 8")
        return body.emit(f"trunc i64 {v} to i{widths[i]}") if widths[i] < 64 else v

    body = Body(load)
    (d,) = body.lower([root])
    if root.width < 64:
        d = body.emit(f"zext i{root.width} {d} to i64")
    params = ", ".join(f"ptr noalias readonly %x{i}" for i in range(len(widths)))
    lines = [
        f"define void @{KERNEL}(i64 %lo, i64 %hi, {params}, ptr noalias %out) {{",
        "entry:",
        "  %empty = icmp uge i64 %lo, %hi",
        "  br i1 %empty, label %exit, label %loop",
        "loop:",
        "  %row = phi i64 [ %lo, %entry ], [ %next, %loop ]",
        *body.lines,
        "  %outp = getelementptr inbounds i64, ptr %out, i64 %row",
        f"  store i64 {d}, ptr %outp, align 8",
        "  %next = add nuw i64 %row, 1",
        "  %done = icmp eq i64 %next, %hi",
        "  br i1 %done, label %exit, label %loop",
        "exit:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"
