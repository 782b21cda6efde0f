"""The compiled engine: the model's symbolic DAG lowered to LLVM IR and compiled.

A fourth interpreter of the one algorithm (docs/engine.md). Modules, one job each:
  dag.py        the symbolic DAG of one instruction (model.dot_add on KernelBackend:
                a count of leading zeros is one node)
  lower.py      QF_BV terms -> LLVM IR instructions
  kernel_ir.py  the body wrapped as a CPU row loop or an NVPTX kernel
  loops.py      how a loop is vectorised (SIMD lanes), chosen from the DAG
  jit.py        LLVM O3, host object code, MCJIT loading
  cache.py      the kernel cache on disk
  kernel.py     CPU kernels and the row split across threads
  ptx.py        PTX text for sm_90 from the same IR
  cuda.py       the GPU launch through the CUDA driver (optional `cuda` extra)
  gemm_ir.py    the GEMM runner's kernels: chains with lanes across N, elementwise maps
                (the runner itself, which walks a GEMM plan, is gemm/compiled.py)
  float_fda.py  the fp64 formulation of a class of fused dot-add units
  ieee_fma.py   binary32 fma chains (FFMA, fp32 MFMA) as llvm.fma.f32
  vectors.py    what LLVM's vectorisers made of a kernel's lane loop
  choice.py     the Engine enum and the default engine per batch
  run.py        the API's entry point
"""

from .choice import ENGINES, Engine, default_engine, parse_engine
from .kernel import cpu_kernel, is_ready, run_rows
from .run import run_compiled

__all__ = [
    "ENGINES",
    "Engine",
    "cpu_kernel",
    "default_engine",
    "is_ready",
    "parse_engine",
    "run_compiled",
    "run_rows",
]
