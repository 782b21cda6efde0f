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


def test_compiled_gemm_peak_memory_is_result_inputs_and_a_fixed_set():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TCSMT_THREADS": "2"}
    r = subprocess.run(
        [sys.executable, "-m", "tensorcore_smt.gemm.peak", "1500", "1500", "16"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout.strip().splitlines()[-1])
    # 64 bytes per output (the index arrays over all outputs) would be 137 MiB here
    assert m["grown"] <= m["result"] + 2 * m["inputs"] + FIXED, m
