"""Row stream 2's operand composition compiled by LLVM (the compiled engine's JIT and disk
cache): the same bits as `rows._block`, in one pass over the random words instead of
about forty numpy passes.

`rows._operand` draws the random words and the per-row parameters (that is the stream);
what is compiled is only the arithmetic that turns them into bit patterns, written here
once more as LLVM IR from `rows._block`'s rules, so tests/test_hardware.py checks the two
bit for bit on every operand format. Where no kernel can be built (llvmlite missing),
`compose` returns None and rows.py composes with numpy.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..bv.dtypes import unsigned_holding
from ..formats import FormatSpec, Specials

PARAMS = 8
"""int32 fields per row: base, span, sub_at, zero_at, first, second (-1: none), special
row, bits row."""

_FUNCS: dict[tuple, object] = {}
_LOCK = threading.Lock()


def _ir(s: FormatSpec, off_shift: int, off_bits: int, coin_shift: int, coin2: int) -> str:
    """`void KERNEL(i64 lo, i64 hi, i64 k, ptr raw, ptr ctl, ptr par, ptr out)`: rows
    lo..hi-1 of k operands each, composed as rows._block does, stored in the narrowest
    unsigned type of the format."""
    from ..engine.kernel_ir import KERNEL

    P = "i64" if s.storage > 32 else "i32"
    ones = (1 << s.mbits) - 1
    top = (1 << s.ebits) - 1
    hi_f = top - 1 if s.specials == Specials.IEEE else top
    ieee, fn = s.specials == Specials.IEEE, s.specials == Specials.FN
    smask = (1 << s.storage) - 1
    smask_txt = str(smask - (1 << 64)) if smask >= 1 << 63 else str(smask)
    L = []
    e = L.append
    e(f"define void @{KERNEL}(i64 %lo, i64 %hi, i64 %k, ptr noalias readonly %raw, ")
    L[-1] += "ptr noalias readonly %ctl, ptr noalias readonly %par, ptr noalias %out) {"
    e("entry:")
    e("  %empty = icmp sge i64 %lo, %hi")
    e("  br i1 %empty, label %exit, label %row")
    e("row:")
    e("  %r = phi i64 [ %lo, %entry ], [ %rnext, %rowend ]")
    e(f"  %pi = mul i64 %r, {PARAMS}")
    names = ("base", "span", "subat", "zeroat", "first", "second", "specrow", "bitsrow")
    for i, nm in enumerate(names):
        e(f"  %pp{i} = getelementptr inbounds i32, ptr %par, i64 %pi")
        if i:
            e(f"  %pq{i} = getelementptr inbounds i32, ptr %pp{i}, i64 {i}")
            e(f"  %{nm} = load i32, ptr %pq{i}, align 4")
        else:
            e(f"  %{nm} = load i32, ptr %pp{i}, align 4")
    e("  %spec1 = icmp ne i32 %specrow, 0")
    e("  %bits1 = icmp ne i32 %bitsrow, 0")
    e("  %e0 = mul i64 %r, %k")
    e("  br label %col")
    e("col:")
    e("  %j = phi i64 [ 0, %row ], [ %jnext, %col ]")
    e("  %j32 = trunc i64 %j to i32")
    e("  %ei = add i64 %e0, %j")
    e("  %cp = getelementptr inbounds i32, ptr %ctl, i64 %ei")
    e("  %c = load i32, ptr %cp, align 4")
    e(f"  %wp = getelementptr inbounds {P}, ptr %raw, i64 %ei")
    e(f"  %w = load {P}, ptr %wp")
    e(f"  %c1 = lshr i32 %c, {off_shift}")
    e(f"  %u = and i32 %c1, {(1 << off_bits) - 1}")
    e("  %us = mul i32 %u, %span")
    e(f"  %ush = ashr i32 %us, {off_bits}")
    e("  %f0 = add i32 %ush, %base")
    e("  %lt1 = icmp slt i32 %f0, 1")
    e("  %f1 = select i1 %lt1, i32 1, i32 %f0")
    e(f"  %gthi = icmp sgt i32 %f1, {hi_f}")
    e(f"  %f2 = select i1 %gthi, i32 {hi_f}, i32 %f1")
    e(f"  %m0 = and {P} %w, {ones}")
    if fn:  # the top binade's all-ones mantissa is NaN: one less
        e(f"  %isf = icmp eq i32 %f2, {hi_f}")
        e(f"  %ism = icmp eq {P} %m0, {ones}")
        e("  %both = and i1 %isf, %ism")
        e(f"  %dec = zext i1 %both to {P}")
        e(f"  %m1 = sub {P} %m0, %dec")
    else:
        e(f"  %m1 = or {P} %m0, 0")
    e(f"  %c17 = lshr i32 %c, {coin_shift}")
    e("  %coin = and i32 %c17, 255")
    e("  %zero = icmp ult i32 %coin, %zeroat")
    e("  %sub = icmp ult i32 %coin, %subat")
    e("  %sz = or i1 %sub, %zero")
    e("  %f3 = select i1 %sz, i32 0, i32 %f2")
    e(f"  %mz = icmp eq {P} %m1, 0")
    e("  %subz = and i1 %sub, %mz")
    e(f"  %m2 = select i1 %subz, {P} 1, {P} %m1")
    e(f"  %m3 = select i1 %zero, {P} 0, {P} %m2")
    e("  %s0 = and i32 %c, 1")
    if s.specials == Specials.FNUZ:  # -0 is the NaN: zeros are +0
        e("  %s1 = select i1 %zero, i32 0, i32 %s0")
    else:
        e("  %s1 = or i32 %s0, 0")
    e("  %isfirst = icmp eq i32 %j32, %first")
    e("  %issecond = icmp eq i32 %j32, %second")
    e("  %pos = or i1 %isfirst, %issecond")
    e("  %special = and i1 %pos, %spec1")
    if ieee or fn:
        e(f"  %f4 = select i1 %special, i32 {top}, i32 %f3")
        if ieee:  # Inf, or a NaN with a random non-zero payload
            e(f"  %mz2 = icmp eq {P} %m3, 0")
            e(f"  %nan0 = select i1 %mz2, {P} 1, {P} %m3")
            e(f"  %cb = and i32 %c, {coin2}")
            e("  %isinf = icmp ne i32 %cb, 0")
            e(f"  %nan = select i1 %isinf, {P} 0, {P} %nan0")
            e(f"  %m4 = select i1 %special, {P} %nan, {P} %m3")
        else:  # FN: only all-ones is NaN
            e(f"  %m4 = select i1 %special, {P} {ones}, {P} %m3")
    else:
        e("  %f4 = or i32 %f3, 0")
        e(f"  %m4 = or {P} %m3, 0")
    e(f"  %fz = zext i32 %f4 to {P}" if P == "i64" else "  %fz = or i32 %f4, 0")
    e(f"  %fs = shl {P} %fz, {s.mbits}")
    e(f"  %b0 = or {P} %fs, %m4")
    if s.signed:
        e(f"  %sg = zext i32 %s1 to {P}" if P == "i64" else "  %sg = or i32 %s1, 0")
        e(f"  %ss = shl {P} %sg, {s.ebits + s.mbits}")
        e(f"  %b1 = or {P} %b0, %ss")
    else:
        e(f"  %b1 = or {P} %b0, 0")
    e(f"  %b2 = shl {P} %b1, {s.ignored_low}")
    e("  %b64 = zext i32 %b2 to i64" if P == "i32" else "  %b64 = or i64 %b2, 0")
    if not (ieee or fn):  # the pattern of -0 (fnuz: the NaN)
        e(f"  %b3 = select i1 %special, i64 {1 << (s.storage - 1)}, i64 %b64")
    else:
        e("  %b3 = or i64 %b64, 0")
    e("  %wz = zext i32 %w to i64" if P == "i32" else "  %wz = or i64 %w, 0")
    e(f"  %wm = and i64 %wz, {smask_txt}")
    e("  %o = select i1 %bits1, i64 %wm, i64 %b3")
    ob = _out_bits(s)
    if ob < 64:
        e(f"  %ot = trunc i64 %o to i{ob}")
    else:
        e("  %ot = or i64 %o, 0")
    e(f"  %op = getelementptr inbounds i{ob}, ptr %out, i64 %ei")
    e(f"  store i{ob} %ot, ptr %op, align {ob // 8}")
    e("  %jnext = add i64 %j, 1")
    e("  %jdone = icmp eq i64 %jnext, %k")
    e("  br i1 %jdone, label %rowend, label %col")
    e("rowend:")
    e("  %rnext = add i64 %r, 1")
    e("  %rdone = icmp eq i64 %rnext, %hi")
    e("  br i1 %rdone, label %exit, label %row")
    e("exit:")
    e("  ret void")
    e("}")
    return "\n".join(L) + "\n"


def _out_bits(s: FormatSpec) -> int:
    """Bits per element of the output array: the narrowest unsigned type of the format."""
    return unsigned_holding(s.storage).itemsize * 8


def _function(s: FormatSpec, layout: tuple[int, int, int, int]):
    """The ctypes function of the kernel for format `s` (compiled once, cached on disk)."""
    parts = (repr(s), repr(layout))
    with _LOCK:
        fn = _FUNCS.get(parts)
    if fn is not None:
        return fn
    from ..engine import cache, jit
    from ..engine.kernel import machine_code

    key = cache.key("rows", *parts, jit.host_id())
    addr = machine_code(key, lambda: (_ir(s, *layout), True))
    args = [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 4
    fn = ctypes.CFUNCTYPE(None, *args)(addr)
    with _LOCK:
        _FUNCS[parts] = fn
    return fn


def compose(s: FormatSpec, raw, ctl, par: np.ndarray, layout) -> np.ndarray | None:
    """The (n, k) bit patterns (the narrowest unsigned dtype of the format) of random
    words `raw`, `ctl` (n, k) with per-row parameters `par` (n, PARAMS) int32; None where
    no kernel can be built."""
    try:
        fn = _function(s, layout)
    except ImportError:  # no llvmlite: rows.py composes with numpy
        return None
    n, k = raw.shape
    raw, ctl = np.ascontiguousarray(raw), np.ascontiguousarray(ctl)
    par = np.ascontiguousarray(par, dtype=np.int32)
    out = np.empty((n, k), dtype=unsigned_holding(s.storage))
    if n:
        fn(0, n, k, raw.ctypes.data, ctl.ctypes.data, par.ctypes.data, out.ctypes.data)
    return out


__all__ = ["PARAMS", "compose"]
