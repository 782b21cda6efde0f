"""Peak memory of one compiled GEMM, measured in the process that runs this module.

`python -m tensorcore_smt.gemm.peak M N K` multiplies random fp16 M x K and K x N
matrices on the Hopper model with the compiled engine (kernels made beforehand on a
small product) and prints one JSON line: the peak of the allocations made during the
call (tracemalloc, which numpy reports its arrays to), the growth of ru_maxrss (0 when
an earlier transient peak, such as loading the kernels, was higher), and the sizes of
the result and the inputs. The benchmark and the memory test both run it in a fresh
process, so nothing else the caller allocated counts.
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


if __name__ == "__main__":
    print(json.dumps(measure(*map(int, sys.argv[1:4]))))
