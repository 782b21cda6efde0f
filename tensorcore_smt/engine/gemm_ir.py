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
from .kernel_ir import KERNEL, container
from .loops import LoopPlan, loop_metadata
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


def chain_tiled_module(
    root: Term,
    K: int,
    wa: int,
    wb: int,
    ca: int,
    cb: int,
    w_acc: int,
    plan: LoopPlan = LoopPlan(tiled=True),
    tile: int = 64,
) -> str:
    """`chain_module` for LLVM's loop vectoriser (arguments alike): outputs in tiles of
    `tile`, the accumulators of a tile in a stack buffer; for each k-block the tile's
    operands are gathered into per-variable stack buffers, then the step body runs over
    the tile reading consecutive entries with plain vector loads (`plan.lanes` SIMD
    lanes forced on that loop, engine/loops.py)."""
    ta, tb = container(wa), container(wb)
    T = f"i{w_acc}"
    allocas = [f"  %accbuf = alloca [{tile} x {T}], align 64"]
    fill = ["  %fo = add i64 %o0, %fi"]
    for stem, c, bt, idx_arr in (("a", ca, ta, "ia"), ("b", cb, tb, "ib")):
        fill += [
            f"  %f{stem}p = getelementptr inbounds i64, ptr %{idx_arr}, i64 %fo",
            f"  %f{stem}i = load i64, ptr %f{stem}p, align 8",
            f"  %f{stem}r = mul i64 %f{stem}i, %Kp",
            f"  %f{stem}b = add i64 %f{stem}r, %jk",
        ]
        for k in range(K):
            allocas.append(f"  %buf{stem}{k} = alloca [{tile} x i{bt}], align 64")
            fill += [
                f"  %f{stem}x{k} = add i64 %f{stem}b, {k}",
                f"  %f{stem}q{k} = getelementptr inbounds i{c}, ptr %{stem.upper()}, "
                f"i64 %f{stem}x{k}",
                f"  %f{stem}v{k} = load i{c}, ptr %f{stem}q{k}, align {c // 8}",
            ]
            v = f"%f{stem}v{k}"
            if bt < c:
                fill.append(f"  %f{stem}t{k} = trunc i{c} {v} to i{bt}")
                v = f"%f{stem}t{k}"
            fill += [
                f"  %f{stem}s{k} = getelementptr inbounds [{tile} x i{bt}], "
                f"ptr %buf{stem}{k}, i64 0, i64 %fi",
                f"  store i{bt} {v}, ptr %f{stem}s{k}, align {bt // 8}",
            ]

    def load(t: Term, body: Body) -> str:
        stem, k = variable_slot(t.params[0])
        if stem == "acc":
            ptr = body.emit(f"getelementptr inbounds [{tile} x {T}], ptr %accbuf, i64 0, i64 %ci")
            return body.emit(f"load {T}, ptr {ptr}")
        w, bt = (wa, ta) if stem == "a" else (wb, tb)
        ptr = body.emit(
            f"getelementptr inbounds [{tile} x i{bt}], ptr %buf{stem}{k}, i64 0, i64 %ci"
        )
        v = body.emit(f"load i{bt}, ptr {ptr}, align {bt // 8}")
        return body.emit(f"trunc i{bt} {v} to i{w}") if w < bt else v

    body = Body(load)
    (d,) = body.lower([root])
    acc_in = f"trunc i64 %iw to {T}" if w_acc < 64 else "add i64 %iw, 0"
    acc_out = f"zext {T} %wv to i64" if w_acc < 64 else "add i64 %wv, 0"
    back, metadata = loop_metadata(plan, "br i1 %cdone, label %stepend, label %compute")
    lines = [
        f"define void @{KERNEL}(i64 %lo, i64 %hi, ptr noalias readonly %A, "
        "ptr noalias readonly %ia, ptr noalias readonly %B, ptr noalias readonly %ib, "
        "i64 %Kp, ptr noalias readonly %blocks, i64 %nb, ptr noalias readonly %accin, "
        "ptr noalias %accout) {",
        "entry:",
        *allocas,
        "  %empty = icmp uge i64 %lo, %hi",
        "  br i1 %empty, label %exit, label %tile",
        "tile:",
        "  %o0 = phi i64 [ %lo, %entry ], [ %o0next, %wloop ]",
        "  %rem = sub i64 %hi, %o0",
        f"  %short = icmp ult i64 %rem, {tile}",
        f"  %nt = select i1 %short, i64 %rem, i64 {tile}",
        "  br label %init",
        "init:",
        "  %ii = phi i64 [ 0, %tile ], [ %iinext, %init ]",
        "  %io = add i64 %o0, %ii",
        "  %ip = getelementptr inbounds i64, ptr %accin, i64 %io",
        "  %iw = load i64, ptr %ip, align 8",
        f"  %iv = {acc_in}",
        f"  %iq = getelementptr inbounds [{tile} x {T}], ptr %accbuf, i64 0, i64 %ii",
        f"  store {T} %iv, ptr %iq",
        "  %iinext = add nuw i64 %ii, 1",
        "  %idone = icmp eq i64 %iinext, %nt",
        "  br i1 %idone, label %steps, label %init",
        "steps:",
        "  %none = icmp eq i64 %nb, 0",
        "  br i1 %none, label %wstart, label %stephead",
        "stephead:",
        "  %t = phi i64 [ 0, %steps ], [ %tnext, %stepend ]",
        "  %jp = getelementptr inbounds i64, ptr %blocks, i64 %t",
        "  %j = load i64, ptr %jp, align 8",
        f"  %jk = mul i64 %j, {K}",
        "  br label %fill",
        "fill:",
        "  %fi = phi i64 [ 0, %stephead ], [ %finext, %fill ]",
        *fill,
        "  %finext = add nuw i64 %fi, 1",
        "  %fdone = icmp eq i64 %finext, %nt",
        "  br i1 %fdone, label %compute, label %fill",
        "compute:",
        "  %ci = phi i64 [ 0, %fill ], [ %cinext, %compute ]",
        *body.lines,
        f"  %cq = getelementptr inbounds [{tile} x {T}], ptr %accbuf, i64 0, i64 %ci",
        f"  store {T} {d}, ptr %cq",
        "  %cinext = add nuw i64 %ci, 1",
        "  %cdone = icmp eq i64 %cinext, %nt",
        f"  {back}",
        "stepend:",
        "  %tnext = add nuw i64 %t, 1",
        "  %tdone = icmp eq i64 %tnext, %nb",
        "  br i1 %tdone, label %wstart, label %stephead",
        "wstart:",
        "  br label %wloop0",
        "wloop0:",
        "  %wi = phi i64 [ 0, %wstart ], [ %winext, %wloop0 ]",
        f"  %wq = getelementptr inbounds [{tile} x {T}], ptr %accbuf, i64 0, i64 %wi",
        f"  %wv = load {T}, ptr %wq",
        f"  %ww = {acc_out}",
        "  %wo = add i64 %o0, %wi",
        "  %wp = getelementptr inbounds i64, ptr %accout, i64 %wo",
        "  store i64 %ww, ptr %wp, align 8",
        "  %winext = add nuw i64 %wi, 1",
        "  %wdone = icmp eq i64 %winext, %nt",
        "  br i1 %wdone, label %wloop, label %wloop0",
        "wloop:",
        "  %o0next = add i64 %o0, %nt",
        "  %tilesdone = icmp uge i64 %o0next, %hi",
        "  br i1 %tilesdone, label %exit, label %tile",
        "exit:",
        "  ret void",
        "}",
        *metadata,
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
