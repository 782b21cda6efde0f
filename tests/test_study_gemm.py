"""bench/study_gemm.py end to end on its smallest configuration: the files it writes and
properties of what it computed (not of what it prints)."""

import hashlib
import importlib
import json
import sys
from pathlib import Path

import matplotlib  # noqa: F401 - the test extra: the study draws its figures
import numpy as np

from tensorcore_smt import matmul

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_study():
    """bench/study_gemm.py as a module (bench/ is a folder of scripts, not a package)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("study_gemm")


def test_quick_study(tmp_path):
    study = load_study()
    assert study.main(["--quick", "--out", str(tmp_path)]) == 0
    md = (tmp_path / "gemm.md").read_text()
    data = json.loads((tmp_path / "gemm" / "study.json").read_text())
    assert "## 1. Error against K" in md and "## 2. Sun et al." in md
    # matplotlib is in the test extra: the figures are always drawn under test
    for name in ("ksweep_median_ulps.png", "ksweep_normwise_rel.png", "sun_chain.png"):
        assert (tmp_path / "gemm" / name).stat().st_size > 1000
        assert f"gemm/{name}" in md

    ks = data["ksweep"]
    all_rows = ks["rows"]
    rows = {(r["kind"], r["schedule"], r["K"]): r for r in all_rows if r["arch"] == "hopper"}
    kmax, kmin = max(ks["ks"]), min(ks["ks"])
    # Hopper FP8 wgmma accumulates with F = 13: one chain over a long K errs more than
    # chains of 128 promoted into fp32 (cuBLAS's default), by every measure.
    s, p = rows[("fp8", "serial", kmax)], rows[("fp8", "serial[promote=128]", kmax)]
    assert s["normwise_rel"] > 2 * p["normwise_rel"]
    assert s["median_ulps"] > p["median_ulps"] and s["max_ulps"] > p["max_ulps"]
    # Blackwell's FP8 (F = 25) chained serially errs less than Hopper's (F = 13)
    bw = {(r["kind"], r["schedule"], r["K"]): r for r in all_rows if r["arch"] == "blackwell"}
    assert bw[("fp8", "serial", kmax)]["normwise_rel"] < s["normwise_rel"]
    # the same fp16 unit on both: computed once, the same bits reported for both
    assert bw[("fp16", "serial", kmax)]["d_sha256"] == rows[("fp16", "serial", kmax)]["d_sha256"]
    # the serial sweep continues each K's chain from the previous D: the same bits as one
    # direct call over the whole K
    k16 = study.kind("fp8")
    A = study.draw(k16, k16.dtype, (ks["M"], kmax), s["seeds"][0])
    B = study.draw(k16, k16.dtype, (kmax, ks["N"]), s["seeds"][1])
    D = matmul("hopper", A, B, schedule="serial", instr=s["instr"])
    assert hashlib.sha256(study.bits(D).tobytes()).hexdigest()[:16] == s["d_sha256"]
    # K <= 128 is one chain either way: the same bits.
    a, b = rows[("fp8", "serial", kmin)], rows[("fp8", "serial[promote=128]", kmin)]
    assert a["d_sha256"] == b["d_sha256"]
    # errors are against the exact product: a 32-term fp16 dot product on a unit with
    # F = 25 is within a few ulps, never exact everywhere and never off by much
    f = rows[("fp16", "serial", kmin)]
    assert 0 < f["median_ulps"] < 4 and np.isfinite(f["max_ulps"]) and f["nonfinite"] == 0

    sun = data["sun"]["tables"]
    # low-precision data: products are exact (Tables 12, 13, 15), and a unit computing wide
    # then rounding once to fp16 matches fp16(CPU fp32) exactly (Table 14)
    for t in ("12", "13", "15"):
        assert sun[t]["results"]["low"]["CPU_FP32"][0]["mean"] == 0
    assert all(c["mean"] == 0 for c in sun["14"]["results"]["low"]["CPU_FP32 cvt FP16"])
    # fp32 data converted: errors at the conversion's level, bf16 above fp16
    assert (
        sun["12"]["results"]["fp32"]["CPU_FP32"][0]["mean"]
        > 4 * sun["13"]["results"]["fp32"]["CPU_FP32"][0]["mean"]
    )
    # TF32 fed unrounded fp32 bits (truncated by the unit) errs more than rounded TF32
    t15 = sun["15"]["results"]
    assert t15["fp32 (raw bits)"]["CPU_FP32"][0]["mean"] > t15["fp32"]["CPU_FP32"][0]["mean"]
    chain = data["sun"]["chain"]
    for c in chain.values():
        assert c["finite_mean"][-1] > c["finite_mean"][0]  # errors grow along the chain
