"""LLVM IR of the GEMM runner's kernels: a chain of instruction steps, and maps.

chain: for each output o in [lo, hi): acc = acc_in[o]; for each k-block j listed in
`blocks`: acc = mma_step(a row ia[o], b column ib[o], block j, acc); acc_out[o] = acc.
The step body is the DAG of one instruction (variables a0.., b0.., acc) emitted once
inside an LLVM loop over the blocks, so a chain of any length is one kernel; the
lanes of the vectorised loop are consecutive outputs of a row of D (SIMD lanes across
N). Elements are of the format's container type.

map: out[o] = f(x0[o], x1[o], ...) on uint64 arrays, for the promotion, split
combination and epilogue steps.
"""

from __future__ import annotations

from collections.abc import Callable

from ..bv.symbolic import Term
from .dag import variable_slot
from .kernel_ir import KERNEL, row_loop, store_d
from .loops import LoopPlan, loop_metadata
from .lower import Body


def chain_rows_module(
    root: Term,
    K: int,
    wa: int,
    wb: int,
    ca: int,
    cb: int,
    w_acc: int,
    plan: LoopPlan = LoopPlan(tiled=True),
    promote: tuple[Term, int] | None = None,
    tile: int = 64,
    group: int = 1,
    step: Callable[..., str] | None = None,
    declarations: tuple[str, ...] = (),
    extra_params: tuple[str, ...] = (),
) -> str:
    """The chain kernel with SIMD lanes across N: `void tcsmt_kernel(i64 lo, i64 hi, ptr A,
    ptr ia, ptr B, ptr ib, i64 Kp, i64 NB, ptr blocks, ptr ends, i64 nc, ptr acc_in,
    ptr acc_out)`; A (rows, Kp): element k of row r at r * Kp + k; B K-major, (Kp, NB):
    element k of column n at k * NB + n; ia, ib, blocks, ends: i64; acc: u64.

    The k-blocks `blocks` form `nc` chains, chain c ending before position ends[c].
    Without `promote` there is one chain (nc = 1) starting from acc_in. With `promote` =
    (DAG of variables x0 = the promoted sum of `w` bits and x1 = a chain's result, its
    width), every chain starts from 0 and its result is added into the promoted sum by
    the DAG when the chain ends (a schedule's promotion every n blocks), the sum starting
    from 0; acc_out gets the promoted sum. So one kernel runs a split's whole schedule.

    Outputs are taken in runs of at most `tile` that share their row of A and have
    consecutive columns of B (a row of D; a run of one where the indices say otherwise,
    so any output order is computed right). In a run every a_k is one value: its loads
    and every DAG node that depends on A alone do not change across the lanes, so LLVM
    hoists them out of the lane loop (computed once per run and k-block instead of once
    per product), and the b_k of consecutive lanes are consecutive in B (plain vector
    loads, no gather). The accumulators of a run stay in stack buffers. Up to `group`
    runs that follow each other with the same columns of B (other rows of D, checked
    lane by lane like a run) form a group: each k-block is run for every run of the
    group in turn, so its block of B is read from memory once and from cache for the
    others (bf16 64 x 9728 x 2560, one core: 1.6 -> 2.5 G MAC per CPU s with 8).

    `step`: instead of lowering `root`, `step(body, operand, index)` emits the step's
    body and returns d's value, `operand(stem, k)` giving a_k, b_k or acc (stem "acc",
    k 0) as loaded from A, B and the accumulators, `index(stem, k)` the element index of
    a_k in A or of b_k in B (for tables of its own, passed as `extra_params`, pointer
    parameters after acc_out); `declarations`: the functions it calls
    (engine/float_fda.py)."""
    T = f"i{w_acc}"
    buf = tile * group  # accumulators of a group of runs
    P = f"i{promote[1]}" if promote else T  # the type written to acc_out

    def load(t: Term, body: Body) -> str:
        return operand(body, *variable_slot(t.params[0]))

    def index(body: Body, stem: str, k: int) -> str:
        """The element index of a_k in A or b_k in B for lane %ci."""
        if stem == "a":
            return body.emit(f"add i64 %abase, {k}") if k else "%abase"
        row = body.emit(f"add i64 %jk, {k}") if k else "%jk"
        start = body.emit(f"mul i64 {row}, %NB")
        col = body.emit(f"add i64 {start}, %ib0")
        return body.emit(f"add i64 {col}, %ci")

    def operand(body: Body, stem: str, k: int) -> str:
        if stem == "acc":
            ptr = body.emit(f"getelementptr inbounds [{buf} x {T}], ptr %accbuf, i64 0, i64 %cix")
            return body.emit(f"load {T}, ptr {ptr}")
        idx = index(body, stem, k)
        c, w, arr = (ca, wa, "%A") if stem == "a" else (cb, wb, "%B")
        ptr = body.emit(f"getelementptr inbounds i{c}, ptr {arr}, i64 {idx}")
        v = body.emit(f"load i{c}, ptr {ptr}, align {c // 8}")
        return body.emit(f"trunc i{c} {v} to i{w}") if w < c else v

    body = Body(load)
    if step is None:
        (d,) = body.lower([root])
    else:
        loaded: dict[tuple[str, int], str] = {}

        def once(stem: str, k: int) -> str:
            if (stem, k) not in loaded:
                loaded[stem, k] = operand(body, stem, k)
            return loaded[stem, k]

        d = step(body, once, lambda stem, k: index(body, stem, k))
    back, metadata = loop_metadata(plan, "br i1 %cdone, label %growend, label %compute")

    def to_i64(v: str, ty: str) -> str:
        return f"zext {ty} {v} to i64" if ty != "i64" else f"add i64 {v}, 0"

    if promote:
        prom_root, _ = promote

        def load_p(t: Term, pb: Body) -> str:
            _, i = variable_slot(t.params[0])
            arr, ty = ("%sumbuf", P) if i == 0 else ("%accbuf", T)
            ptr = pb.emit(f"getelementptr inbounds [{buf} x {ty}], ptr {arr}, i64 0, i64 %pi")
            return pb.emit(f"load {ty}, ptr {ptr}")

        pbody = Body(load_p, prefix="p")
        (ps,) = pbody.lower([prom_root])
        init = [  # the promoted sums start from 0
            f"  %iq = getelementptr inbounds [{buf} x {P}], ptr %sumbuf, i64 0, i64 %ii",
            f"  store {P} 0, ptr %iq",
        ]
        chain_start = [  # every chain starts from 0
            "  br label %zero",
            "zero:",
            "  %zi = phi i64 [ 0, %chainhead ], [ %zinext, %zero ]",
            f"  %zq = getelementptr inbounds [{buf} x {T}], ptr %accbuf, i64 0, i64 %zi",
            f"  store {T} 0, ptr %zq",
            "  %zinext = add nuw i64 %zi, 1",
            "  %zdone = icmp eq i64 %zinext, %nall",
            "  br i1 %zdone, label %chainbody, label %zero",
            "chainbody:",
        ]
        chain_end = [
            "  br label %promote",
            "promote:",
            "  %pi = phi i64 [ 0, %chainend ], [ %pinext, %promote ]",
            *pbody.lines,
            f"  %pq = getelementptr inbounds [{buf} x {P}], ptr %sumbuf, i64 0, i64 %pi",
            f"  store {P} {ps}, ptr %pq",
            "  %pinext = add nuw i64 %pi, 1",
            "  %pdone = icmp eq i64 %pinext, %nall",
            "  br i1 %pdone, label %chainnext, label %promote",
            "chainnext:",
        ]
        out_buf = "%sumbuf"
    else:
        acc_in = f"trunc i64 %iw to {T}" if w_acc < 64 else "add i64 %iw, 0"
        init = [
            "  %io = add i64 %o0, %ii",
            "  %ip = getelementptr inbounds i64, ptr %accin, i64 %io",
            "  %iw = load i64, ptr %ip, align 8",
            f"  %iv = {acc_in}",
            f"  %iq = getelementptr inbounds [{buf} x {T}], ptr %accbuf, i64 0, i64 %ii",
            f"  store {T} %iv, ptr %iq",
        ]
        chain_start = ["  br label %chainbody", "chainbody:"]
        chain_end = ["  br label %chainnext", "chainnext:"]
        out_buf = "%accbuf"
    called = dict.fromkeys([*declarations, *body.declarations])
    if promote:
        called.update(pbody.declarations)
    lines = [
        *called,
        f"define void @{KERNEL}(i64 %lo, i64 %hi, ptr noalias readonly %A, "
        "ptr noalias readonly %ia, ptr noalias readonly %B, ptr noalias readonly %ib, "
        "i64 %Kp, i64 %NB, ptr noalias readonly %blocks, ptr noalias readonly %ends, "
        "i64 %nc, ptr noalias readonly %accin, ptr noalias %accout"
        + "".join(f", ptr noalias readonly %{x}" for x in extra_params)
        + ") {",
        "entry:",
        f"  %accbuf = alloca [{buf} x {T}], align 64",
        *([f"  %sumbuf = alloca [{buf} x {P}], align 64"] if promote else []),
        "  %empty = icmp uge i64 %lo, %hi",
        "  br i1 %empty, label %exit, label %tile",
        "tile:",
        "  %o0 = phi i64 [ %lo, %entry ], [ %o0next, %wloop ]",
        "  %iap0 = getelementptr inbounds i64, ptr %ia, i64 %o0",
        "  %ia0 = load i64, ptr %iap0, align 8",
        "  %ibp0 = getelementptr inbounds i64, ptr %ib, i64 %o0",
        "  %ib0 = load i64, ptr %ibp0, align 8",
        "  %rem = sub i64 %hi, %o0",
        f"  %short = icmp ult i64 %rem, {tile}",
        f"  %nt0 = select i1 %short, i64 %rem, i64 {tile}",
        "  br label %run",
        "run:",
        "  %nt = phi i64 [ 1, %tile ], [ %rnext, %runcheck ]",
        "  %rfull = icmp uge i64 %nt, %nt0",
        "  br i1 %rfull, label %group0, label %runcheck",
        "runcheck:",
        "  %ro = add i64 %o0, %nt",
        "  %riap = getelementptr inbounds i64, ptr %ia, i64 %ro",
        "  %riav = load i64, ptr %riap, align 8",
        "  %ribp = getelementptr inbounds i64, ptr %ib, i64 %ro",
        "  %ribv = load i64, ptr %ribp, align 8",
        "  %rwant = add i64 %ib0, %nt",
        "  %rsa = icmp eq i64 %riav, %ia0",
        "  %rsb = icmp eq i64 %ribv, %rwant",
        "  %rsame = and i1 %rsa, %rsb",
        "  %rnext = add nuw i64 %nt, 1",
        "  br i1 %rsame, label %run, label %group0",
        "group0:",  # the runs that follow with the same columns (other rows of A)
        "  br label %group",
        "group:",
        "  %g1 = phi i64 [ 1, %group0 ], [ %g1next, %gnextblk ]",
        f"  %gfull = icmp uge i64 %g1, {group}",
        "  br i1 %gfull, label %gdone, label %gtry",
        "gtry:",
        "  %g1start = mul i64 %g1, %nt",
        "  %g1o = add i64 %o0, %g1start",
        "  %g1last = add i64 %g1o, %nt",
        "  %g1fits = icmp ule i64 %g1last, %hi",
        "  br i1 %g1fits, label %gscan0, label %gdone",
        "gscan0:",
        "  %g1iap = getelementptr inbounds i64, ptr %ia, i64 %g1o",
        "  %g1ia = load i64, ptr %g1iap, align 8",
        "  br label %gscan",
        "gscan:",
        "  %gl = phi i64 [ 0, %gscan0 ], [ %glnext, %gscanok ]",
        "  %glo = add i64 %g1o, %gl",
        "  %gliap = getelementptr inbounds i64, ptr %ia, i64 %glo",
        "  %glia = load i64, ptr %gliap, align 8",
        "  %glibp = getelementptr inbounds i64, ptr %ib, i64 %glo",
        "  %glib = load i64, ptr %glibp, align 8",
        "  %glwant = add i64 %ib0, %gl",
        "  %glsa = icmp eq i64 %glia, %g1ia",
        "  %glsb = icmp eq i64 %glib, %glwant",
        "  %glok = and i1 %glsa, %glsb",
        "  %glnext = add nuw i64 %gl, 1",
        "  br i1 %glok, label %gscanok, label %gdone",
        "gscanok:",
        "  %gldone = icmp eq i64 %glnext, %nt",
        "  br i1 %gldone, label %gnextblk, label %gscan",
        "gnextblk:",
        "  %g1next = add nuw i64 %g1, 1",
        "  br label %group",
        "gdone:",
        "  %nruns = phi i64 [ %g1, %group ], [ %g1, %gtry ], [ %g1, %gscan ]",
        "  %nall = mul i64 %nruns, %nt",
        "  br label %init",
        "init:",
        "  %ii = phi i64 [ 0, %gdone ], [ %iinext, %init ]",
        *init,
        "  %iinext = add nuw i64 %ii, 1",
        "  %idone = icmp eq i64 %iinext, %nall",
        "  br i1 %idone, label %chains, label %init",
        "chains:",
        "  %nochain = icmp eq i64 %nc, 0",
        "  br i1 %nochain, label %wstart, label %chainhead",
        "chainhead:",
        "  %cc = phi i64 [ 0, %chains ], [ %ccnext, %chainnext ]",
        "  %t0 = phi i64 [ 0, %chains ], [ %tend, %chainnext ]",
        "  %endp = getelementptr inbounds i64, ptr %ends, i64 %cc",
        "  %tend = load i64, ptr %endp, align 8",
        *chain_start,
        "  %emptychain = icmp uge i64 %t0, %tend",
        "  br i1 %emptychain, label %chainend, label %stephead",
        "stephead:",
        "  %t = phi i64 [ %t0, %chainbody ], [ %tnext, %stepend ]",
        "  %jp = getelementptr inbounds i64, ptr %blocks, i64 %t",
        "  %j = load i64, ptr %jp, align 8",
        f"  %jk = mul i64 %j, {K}",
        "  br label %grow",
        "grow:",  # each run of the group on this k-block: B's block stays in cache
        "  %g = phi i64 [ 0, %stephead ], [ %gnext, %growend ]",
        "  %gbase = mul i64 %g, %nt",
        "  %gao = add i64 %o0, %gbase",
        "  %gaip = getelementptr inbounds i64, ptr %ia, i64 %gao",
        "  %gai = load i64, ptr %gaip, align 8",
        "  %garow = mul i64 %gai, %Kp",
        "  %abase = add i64 %garow, %jk",
        "  br label %compute",
        "compute:",
        "  %ci = phi i64 [ 0, %grow ], [ %cinext, %compute ]",
        "  %cix = add i64 %gbase, %ci",
        *body.lines,
        f"  %cq = getelementptr inbounds [{buf} x {T}], ptr %accbuf, i64 0, i64 %cix",
        f"  store {T} {d}, ptr %cq",
        "  %cinext = add nuw i64 %ci, 1",
        "  %cdone = icmp eq i64 %cinext, %nt",
        f"  {back}",
        "growend:",
        "  %gnext = add nuw i64 %g, 1",
        "  %gend = icmp eq i64 %gnext, %nruns",
        "  br i1 %gend, label %stepend, label %grow",
        "stepend:",
        "  %tnext = add nuw i64 %t, 1",
        "  %tdone = icmp eq i64 %tnext, %tend",
        "  br i1 %tdone, label %chainend, label %stephead",
        "chainend:",
        *chain_end,
        "  %ccnext = add nuw i64 %cc, 1",
        "  %ccdone = icmp eq i64 %ccnext, %nc",
        "  br i1 %ccdone, label %wstart, label %chainhead",
        "wstart:",
        "  br label %wloop0",
        "wloop0:",
        "  %wi = phi i64 [ 0, %wstart ], [ %winext, %wloop0 ]",
        f"  %wq = getelementptr inbounds [{buf} x {P}], ptr {out_buf}, i64 0, i64 %wi",
        f"  %wv = load {P}, ptr %wq",
        f"  %ww = {to_i64('%wv', P)}",
        "  %wo = add i64 %o0, %wi",
        "  %wp = getelementptr inbounds i64, ptr %accout, i64 %wo",
        "  store i64 %ww, ptr %wp, align 8",
        "  %winext = add nuw i64 %wi, 1",
        "  %wdone = icmp eq i64 %winext, %nall",
        "  br i1 %wdone, label %wloop, label %wloop0",
        "wloop:",
        "  %o0next = add i64 %o0, %nall",
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
    store_d(body, d, root.width, 64)
    return row_loop(
        ", ".join(f"ptr noalias readonly %x{i}" for i in range(len(widths))),
        body.lines,
        tuple(body.declarations),
    )
