"""The compiled GEMM's memory: beyond its result and inputs, a fixed working set (the
outputs are computed in tiles; no per-output index arrays over all of M x N). The same
for measuring its errors: the exact products are wide integers of one tile at a time."""

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


FIXED_ERRORS = 32 << 20
"""The working set of the error measurement beyond its inputs and results (tiles of
BLOCK_OUTPUTS = 32768 outputs take about 20 MiB)."""


def _peak(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TCSMT_THREADS": "2"}
    r = subprocess.run(
        [sys.executable, "-m", "tensorcore_smt.gemm.peak", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_error_measurement_peak_memory_is_results_inputs_and_a_fixed_set():
    M = N = 512
    m = _peak(str(M), str(N), "64", "errors")
    # what it keeps (ulps and relative errors of both comparisons) and as much again in
    # passing (the fp64 product, the normwise terms)
    per_output = 2 * m["per_output"] * M * N
    bound = FIXED_ERRORS + m["result"] + 8 * m["inputs"] + per_output
    assert m["grown"] <= bound, m
    # one tile for all of D (the wide integers of every output at once) exceeds it
    whole = _peak(str(M), str(N), "64", "errors", str(M * N))
    assert whole["grown"] > bound and whole["figures"] == m["figures"], whole


OPERAND_TABLES = 3
"""Bytes of operand tables per byte of the operands: B's values (fp32) and exponents
(int16) for the table kernels (engine/float_fda.py), 6 bytes per 2-byte element."""


def test_compiled_gemm_peak_memory_is_result_inputs_and_a_fixed_set():
    m = _peak("1500", "1500", "16")
    # 64 bytes per output (the index arrays over all outputs) would be 137 MiB here
    assert m["grown"] <= m["result"] + (2 + OPERAND_TABLES) * m["inputs"] + FIXED, m
