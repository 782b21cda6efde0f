"""LLVM: optimise IR (O3), emit host object code, load object code with MCJIT.

llvmlite (numba's LLVM binding) is the only compiler: IR text in, machine code out.
Object code is what the disk cache stores (engine/cache.py), so a kernel compiled once is
only loaded afterwards. Code is generated for this CPU (its name and features are part of
the cache key).
"""

from __future__ import annotations

import threading
from functools import cache

import llvmlite
import llvmlite.binding as llvm

_LOCK = threading.Lock()
_ENGINES: list = []  # MCJIT engines whose code is in use: kept alive for the process


@cache
def _host_machine():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    features = llvm.get_host_cpu_features().flatten()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=features, opt=3, reloc="default", jit=True
    )


def host_id() -> str:
    """What machine code depends on: LLVM's version, the triple, the CPU and its features."""
    return "|".join(
        (
            llvmlite.__version__,
            llvm.get_process_triple(),
            llvm.get_host_cpu_name(),
            llvm.get_host_cpu_features().flatten(),
        )
    )


def optimise(ir: str, tm=None, vectorize: bool = True) -> llvm.ModuleRef:
    """Parse, verify and run the O3 pipeline (without the SLP vectoriser) on `ir` for
    target machine `tm` (host); `vectorize`: let the loop vectoriser work on the row loop."""
    tm = tm or _host_machine()
    mod = llvm.parse_assembly(ir)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = vectorize
    # No SLP vectoriser: on the straight-line DAG of ada's sparse FP8 unit expanded to
    # K = 64 it once left IR on which LLVM's instruction selection aborted the process
    # (SelectionDAGBuilder::setValue "Already set a value for this node!", llvmlite 0.50).
    # Today's DAG of that unit compiles with it, but the chain kernels gain nothing
    # measurable from it (docs/engine.md), so the risk is not taken.
    pto.slp_vectorization = False
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def compile_object(ir: str, vectorize: bool = True) -> bytes:
    """Host object code of the IR module, optimised at O3."""
    with _LOCK:
        return _host_machine().emit_object(optimise(ir, vectorize=vectorize))


def load(obj: bytes, symbol: str) -> int:
    """Load object code into a new MCJIT engine and return `symbol`'s address."""
    with _LOCK:
        tm = _host_machine()
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
        addr = engine.get_function_address(symbol)
        if not addr:
            raise RuntimeError(f"symbol {symbol} missing from compiled object code")
        _ENGINES.append(engine)
        return addr
