"""The lane loops of the GEMM runner's chain kernels stay vectorised (engine/vectors.py):
the loop LLVM emits for hopper's bf16 wgmma in the fp64 formulation works on 16 outputs
per instruction in fp64 (in fp32 where B's tables are read), and the general kernel of its e4m3 wgmma on 16 in 8-bit
integers; the kernel of a unit whose loop plan is scalar (integers over 128 bits) is
reported scalar."""

from __future__ import annotations

import tensorcore_smt as tc
from tensorcore_smt.engine.vectors import loop_vectors
from tensorcore_smt.gemm.compiled import FLOAT_LANES, chain_ir, float_chain_ir


def test_bf16_fp64_chain_kernel_runs_16_outputs_per_vector_instruction():
    p = tc.resolve("hopper", "wgmma.m64n8k16.f32.bf16.bf16")
    ir, vectorize = float_chain_ir(p, 16, 16)
    r = loop_vectors(ir, vectorize)
    assert r.lanes == FLOAT_LANES == 16
    assert r.types.get("16 x double", 0) >= 2 * p.K  # a product and a scaling per term
    assert r.asm.get("zmm", 0) > r.asm.get("scalar", 0)


def test_fp32_table_chain_kernels_run_16_products_per_vector_instruction():
    """With B's tables the fp16 step (own values) and the bf16 step (normalised values)
    form, scale and truncate their products in fp32: one 16 x float multiplication per
    product and per scaling, no fp64 in the products."""
    for instr in ("wgmma.m64n8k16.f32.f16.f16", "wgmma.m64n8k16.f32.bf16.bf16"):
        p = tc.resolve("hopper", instr)
        ir, vectorize = float_chain_ir(p, 16, 16, tables=True)
        r = loop_vectors(ir, vectorize)
        assert r.lanes == FLOAT_LANES, instr
        assert r.types.get("16 x float", 0) >= 2 * p.K, (instr, r.types)
        assert r.types.get("16 x double", 0) < p.K, (instr, r.types)


def test_e4m3_general_chain_kernel_is_vectorised():
    p = tc.resolve("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3")
    ir, vectorize = chain_ir(p, 8, 8)
    assert vectorize
    r = loop_vectors(ir, vectorize)
    assert r.lanes == 16 and r.types.get("16 x i8", 0) > 0


def test_fp64_dmma_chain_kernel_is_scalar():
    p = tc.resolve("ampere", "m8n8k4.f64.f64.f64.f64")
    ir, vectorize = chain_ir(p, 64, 64)
    assert not vectorize
    r = loop_vectors(ir, vectorize)
    assert r.lanes == 1 and not r.types
