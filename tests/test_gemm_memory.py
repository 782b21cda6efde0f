"""The compiled GEMM's memory: beyond its result and inputs, a fixed working set (the
outputs are computed in tiles; no per-output index arrays over all of M x N)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXED = 16 << 20
"""The working set allowed beyond result and inputs (tiles of 16384 outputs per thread
take about 1 MiB)."""

PROGRAM = """
import json, resource, tracemalloc
import numpy as np
import tensorcore_smt as tc
rng = np.random.default_rng(0)
A = rng.standard_normal((1500, 16)).astype(np.float16)
B = rng.standard_normal((16, 1500)).astype(np.float16)
tc.matmul("hopper", A[:64], B[:, :64], engine="compiled")  # kernels made beforehand
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
D = tc.matmul("hopper", A, B, engine="compiled")
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"grown": peak, "rss_grown": (after - before) * 1024, "result": D.nbytes,
                  "inputs": A.nbytes + B.nbytes}))
"""


def test_compiled_gemm_peak_memory_is_result_inputs_and_a_fixed_set():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TCSMT_THREADS": "2"}
    r = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout.strip().splitlines()[-1])
    # 64 bytes per output (the index arrays over all outputs) would be 137 MiB here
    assert m["grown"] <= m["result"] + 2 * m["inputs"] + FIXED, m
