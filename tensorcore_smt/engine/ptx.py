"""PTX for NVIDIA GPUs from the same IR, by llvmlite's NVPTX back end (no nvcc).

The kernel module (kernel_ir.nvptx_module: one row per thread, marked as a kernel by
`!nvvm.annotations`) is optimised at O3 for the `nvptx64-nvidia-cuda` target and printed
as PTX for the asked architecture (sm_90 by default: Hopper). The CUDA driver JIT-compiles
PTX when it loads the module (CUDA Driver API, cuModuleLoadData). PTX text is cached on
disk like CPU object code.
"""

from __future__ import annotations

import threading
from functools import cache

import llvmlite.binding as llvm

from ..model.params import ModelParams
from . import cache as disk
from .dag import instruction_dag, operands
from .jit import optimise
from .kernel_ir import container, nvptx_module

TRIPLE = "nvptx64-nvidia-cuda"
_LOCK = threading.Lock()


@cache
def _machine(sm: str):
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=sm, opt=3)


def ptx_for(
    p: ModelParams,
    sm: str = "sm_90",
    containers: tuple[int, ...] | None = None,
    out_bits: int = 64,
) -> str:
    """PTX text of the kernel of `p` for GPU architecture `sm`, storing d as `out_bits`-bit
    words (from the disk cache when made before)."""
    containers = containers or tuple(container(o.width) for o in operands(p))
    k = disk.key(
        "ptx", sm, repr(p), repr(containers), str(out_bits), llvm.llvm_version_info.__repr__()
    )
    hit = disk.get(k, ".ptx")
    if hit is not None:
        return hit.decode()
    with _LOCK:
        tm = _machine(sm)
        mod = optimise(nvptx_module(instruction_dag(p), containers, out_bits), tm)
        text = tm.emit_assembly(mod)
    disk.put(k, text.encode(), ".ptx")
    return text
