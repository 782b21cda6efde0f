"""The local CPU as an oracle: ``cpu:avx512bf16`` runs x86 VDPBF16PS on the rows.

One row is one fp32 lane of the instruction (the preset `x86-avx512bf16`, K = 2): its
a pair (a0, a1) is the lane's two bf16 of src1 (a0 the low, even element), b likewise of
src2, c the lane's fp32 of srcdest. A tiny LLVM IR function calls the intrinsic
``llvm.x86.avx512bf16.dpbf16ps.512`` (16 lanes, ``<32 x bfloat>`` operands in LLVM 17
and later, ``<32 x i16>`` before) over blocks of 16 rows; llvmlite compiles it once per
process for this CPU and the rows are run through it with numpy arrays.

Where the CPU lacks AVX512_BF16 (LLVM's host features, which the JIT targets, say so)
the oracle is refused with one line before anything is compiled: LLVM aborts the
process on an instruction the target cannot select.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from ..formats import Format
from ..model.params import ModelParams
from ..validation.oracle_base import Oracle, OracleError

LANES = 16
"""fp32 lanes of the 512-bit VDPBF16PS: rows per call of the intrinsic."""

INTRINSIC = "llvm.x86.avx512bf16.dpbf16ps.512"
SYMBOL = "tcsmt_dpbf16ps"
NEEDS = ("avx512f", "avx512bf16")
"""LLVM feature names the 512-bit form needs (CPUID AVX512F and AVX512_BF16)."""


def _llvm():
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


def bf16_vector_type() -> str:
    """How this LLVM spells the intrinsic's bf16 operands: ``<32 x bfloat>`` from LLVM 17,
    ``<32 x i16>`` before."""
    return "<32 x bfloat>" if _llvm().llvm_version_info[0] >= 17 else "<32 x i16>"


def kernel_ir(bf16: str | None = None) -> str:
    """IR of ``void tcsmt_dpbf16ps(ptr c, ptr a, ptr b, ptr d, i64 blocks)``: for each
    block of 16 lanes, d = VDPBF16PS(c, a, b) (c, d: 16 fp32; a, b: 32 bf16 each)."""
    v = bf16 or bf16_vector_type()
    return f"""
declare <16 x float> @{INTRINSIC}(<16 x float>, {v}, {v})

define void @{SYMBOL}(ptr %c, ptr %a, ptr %b, ptr %d, i64 %blocks) {{
entry:
  %none = icmp eq i64 %blocks, 0
  br i1 %none, label %done, label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %off = mul i64 %i, 16
  %pc = getelementptr float, ptr %c, i64 %off
  %pd = getelementptr float, ptr %d, i64 %off
  %off2 = mul i64 %i, 32
  %pa = getelementptr i16, ptr %a, i64 %off2
  %pb = getelementptr i16, ptr %b, i64 %off2
  %vc = load <16 x float>, ptr %pc, align 4
  %va = load {v}, ptr %pa, align 2
  %vb = load {v}, ptr %pb, align 2
  %r = call <16 x float> @{INTRINSIC}(<16 x float> %vc, {v} %va, {v} %vb)
  store <16 x float> %r, ptr %pd, align 4
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %blocks
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def missing_features() -> list[str]:
    """The features of `NEEDS` this CPU lacks (LLVM's host feature list)."""
    feats = _llvm().get_host_cpu_features()
    return [f for f in NEEDS if not feats.get(f, False)]


def assembly(cpu: str = "znver4") -> str:
    """The kernel's assembly for `cpu` (any x86 CPU LLVM knows, whatever this machine
    is): shows that the IR lowers to vdpbf16ps without running it."""
    llvm = _llvm()
    target = llvm.Target.from_triple("x86_64-unknown-linux-gnu")
    tm = target.create_target_machine(cpu=cpu, opt=2)
    mod = llvm.parse_assembly(kernel_ir())
    mod.triple = tm.triple
    mod.verify()
    return tm.emit_assembly(mod)


_ENGINES: list = []


@cache
def _kernel():
    """The compiled kernel for this CPU (compiled once per process)."""
    llvm = _llvm()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    tm = target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=llvm.get_host_cpu_features().flatten(),
        opt=2,
        jit=True,
    )
    mod = llvm.parse_assembly(kernel_ir())
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    _ENGINES.append(engine)  # the code lives as long as its engine
    ptr = ctypes.c_void_p
    proto = ctypes.CFUNCTYPE(None, ptr, ptr, ptr, ptr, ctypes.c_int64)
    return proto(engine.get_function_address(SYMBOL))


def run_lanes(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """d bits of VDPBF16PS for rows (a, b: (N, 2) bf16 bits, c: (N,) fp32 bits), 16 rows a
    call of the instruction, the last block padded with zeros."""
    n = len(c)
    blocks = -(-n // LANES)
    av = np.zeros((blocks * LANES, 2), dtype=np.uint16)
    bv = np.zeros((blocks * LANES, 2), dtype=np.uint16)
    cv = np.zeros(blocks * LANES, dtype=np.uint32)
    av[:n] = np.asarray(a, dtype=np.uint64).astype(np.uint16)
    bv[:n] = np.asarray(b, dtype=np.uint64).astype(np.uint16)
    cv[:n] = np.asarray(c, dtype=np.uint64).astype(np.uint32)
    dv = np.zeros_like(cv)
    if blocks:
        _kernel()(cv.ctypes.data, av.ctypes.data, bv.ctypes.data, dv.ctypes.data, blocks)
    return dv[:n].astype(np.uint64)


@dataclass
class CpuOracle(Oracle):
    """The local CPU's VDPBF16PS, one row a lane."""

    lanes: int = field(default=LANES)

    def _answer(self, a, b, c) -> np.ndarray:
        return run_lanes(a, b, c)


SHAPE = (2, Format.BF16, Format.BF16, Format.FP32, Format.FP32)
"""K and the a, b, c, d formats of one VDPBF16PS lane."""


def make_cpu_oracle(spec: str, arg: str, p: ModelParams, arch: str, instr: str) -> Oracle:
    """``cpu:avx512bf16``: OracleError (one line) for another unit name, an instruction of
    another shape, or a CPU without AVX512_BF16."""
    unit = arg or "avx512bf16"
    if unit != "avx512bf16":
        raise OracleError(f"oracle {spec!r}: unknown CPU unit {unit!r}; known: avx512bf16")
    if (p.K, p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt) != SHAPE:
        raise OracleError(
            f"oracle {spec!r}: VDPBF16PS lanes take 2 bf16 pairs and fp32 c and d; "
            f"{arch} {instr} takes other operands (use --arch x86-avx512bf16)"
        )
    missing = missing_features()
    if missing:
        raise OracleError(
            f"oracle {spec!r}: this CPU ({_llvm().get_host_cpu_name()}) lacks "
            f"{', '.join(missing)}: VDPBF16PS cannot run here"
        )
    return CpuOracle(spec, p)
