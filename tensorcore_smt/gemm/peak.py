"""Peak memory of one compiled GEMM, or of measuring its errors, in the process that
runs this module.

`python -m tensorcore_smt.gemm.peak M N K` multiplies random fp16 M x K and K x N
matrices on the Hopper model with the compiled engine (kernels made beforehand on a
small product) and prints one JSON line: the peak of the allocations made during the
call (tracemalloc, which numpy reports its arrays to), the growth of ru_maxrss (0 when
an earlier transient peak, such as loading the kernels, was higher), and the sizes of
the result and the inputs. The benchmark and the memory test both run it in a fresh
process, so nothing else the caller allocated counts.

`python -m tensorcore_smt.gemm.peak M N K errors [OUTPUTS]` does the same for the error
measurement of that GEMM's output (gemm/measure.py: against the exact product and
against fp64, in tiles of OUTPUTS outputs, by default its BLOCK_OUTPUTS): the peak
during the measurement alone, the result being D, and also `figures` (the error
figures, to compare runs) and `per_output` (the bytes per output the measurement
keeps: ulps and relative errors, fp64, of each of its two comparisons).
"""

from __future__ import annotations

import json
import resource
import sys
import tracemalloc

import numpy as np


def measure(M: int, N: int, K: int) -> dict:
    """{grown, rss_grown, result, inputs} in bytes for an M x N x K compiled GEMM."""
    import tensorcore_smt as tc

    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    tc.matmul("hopper", A[:64], B[:, :64], engine="compiled")  # kernels made beforehand
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    D = tc.matmul("hopper", A, B, engine="compiled")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "grown": peak,
        "rss_grown": (after - before) * 1024,
        "result": D.nbytes,
        "inputs": A.nbytes + B.nbytes,
    }


def measure_errors(M: int, N: int, K: int, outputs: int | None = None) -> dict:
    """{grown, rss_grown, result, inputs, per_output, figures} for measuring the errors
    of an M x N x K compiled GEMM (the GEMM itself not counted)."""
    import tensorcore_smt as tc

    from .measure import measure_errors as errors

    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    info: list = []
    D = tc.matmul("hopper", A, B, engine="compiled", run_info=info)
    errors(info[0], A[:8], B[:, :8], None, D[:8, :8])  # imports and first calls beforehand
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    exact, fp64, why_exact, why_fp64 = errors(info[0], A, B, None, D, outputs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert exact is not None and fp64 is not None, (why_exact, why_fp64)
    return {
        "grown": peak,
        "rss_grown": (after - before) * 1024,
        "result": D.nbytes,
        "inputs": A.nbytes + B.nbytes,
        "per_output": 4 * 8,
        "figures": {"exact": exact.as_dict(), "fp64": fp64.as_dict()},
    }


if __name__ == "__main__":
    shape = tuple(map(int, sys.argv[1:4]))
    if sys.argv[4:5] == ["errors"]:
        rest = sys.argv[5:6]
        print(json.dumps(measure_errors(*shape, int(rest[0]) if rest else None)))
    else:
        print(json.dumps(measure(*shape)))
