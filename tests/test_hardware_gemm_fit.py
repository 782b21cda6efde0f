"""`tcsmt hardware fit-gemm`: the GEMM hypotheses that reproduce torch's GEMMs recorded on
an H100 (results/hardware/h100/gemm), replayed from FIT.json against the recordings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt.cli import main
from tensorcore_smt.hardware.gemm_fit import OUT_DTYPE, fit_gemm, load_candidates
from tensorcore_smt.hardware.recordings import CALLS, Kind, inputs

GEMM = Path(__file__).resolve().parents[1] / "results" / "hardware" / "h100" / "gemm"
FIT = json.loads((GEMM / "FIT.json").read_text())
BY_CALL = {c.name: c for c in CALLS}


def _fitted(call: str, shape: str) -> dict:
    entry = next(c for c in FIT["calls"] if c["call"] == call)
    return next(s for s in entry["shapes"] if s["shape"] == shape)


def _mismatches(call: str, shape: str, hyp: str) -> int:
    """Kept elements of the recorded D that `hyp` does not reproduce bit for bit."""
    c = BY_CALL[call]
    z = np.load(GEMM / f"{call}.npz")
    seed = json.loads(str(z["meta"]))["seed"]
    kind, m, n, k = shape.split("_")
    a, b = inputs(Kind(kind), c.fmt, int(m), int(n), int(k), seed)
    rows, cols, d = z[f"{shape}_rows"], z[f"{shape}_cols"], z[f"{shape}_d"]
    instr = next(x for x in FIT["calls"] if x["call"] == call)["instr"]
    got = tc.matmul(hyp, a[rows], b[:, cols], out_dtype=OUT_DTYPE[c.out], instr=instr)
    return int((np.ascontiguousarray(got).view(d.dtype) != d).sum())


def test_fit_covers_every_recorded_shape():
    assert {c["call"] for c in FIT["calls"]} == {c.name for c in CALLS}
    for entry in FIT["calls"]:
        z = np.load(GEMM / f"{entry['call']}.npz")
        shapes = [s["shape"] for s in json.loads(str(z["meta"]))["shapes"]]
        assert [s["shape"] for s in entry["shapes"]] == shapes
        for s in entry["shapes"]:
            assert (s["fit"] is None) == (s["reproduced"] == 0)
            assert s["fit"] is not None or s["mismatches"] > 0


@pytest.mark.parametrize(
    "call,shape",
    [
        ("fp16", "random_64_64_256"),
        ("bf16-f32out", "random_16_64_32"),
        ("tf32", "random_64_64_256"),
        ("fp32", "random_16_16_32"),
        ("e4m3-f32out", "random_16_16_1024"),
        ("e4m3-bf16out-fast", "random_16_16_1024"),
        ("fp16-f32out", "pairs_32_32_32"),
    ],
)
def test_fitted_hypothesis_reproduces_the_recording(call, shape):
    s = _fitted(call, shape)
    assert s["fit"] is not None and _mismatches(call, shape, s["fit"]) == 0


def test_small_mn_large_k_needs_the_fitted_split():
    """cuBLAS splits K for 16x16 outputs over K = 4096: one chain misses every element,
    the fitted split schedule reproduces them all."""
    call, shape = "fp16-f32out", "random_16_16_4096"
    s = _fitted(call, shape)
    assert "split_k=" in s["fit"]
    assert _mismatches(call, shape, "hopper/serial") == s["kept"] == 256
    assert _mismatches(call, shape, s["fit"]) == 0


def test_fit_gemm_writes_the_report(tmp_path):
    (tmp_path / "gemm").mkdir()
    (tmp_path / "gemm" / "fp16.npz").symlink_to(GEMM / "fp16.npz")
    rep = fit_gemm(tmp_path, shapes=("random_16_16_32", "pairs_32_32_32"))
    [entry] = rep["calls"]
    assert [s["fit"] for s in entry["shapes"]] == ["hopper/serial"] * 2
    assert all(s["reproduced"] >= 1 for s in entry["shapes"])
    assert json.loads((tmp_path / "gemm" / "FIT.json").read_text()) == rep
    assert (
        "| fp16 | wgmma.m64n8k16.f32.f16.f16 | 2 | 2 | — |"
        in (tmp_path / "gemm" / "FIT.md").read_text()
    )


def test_candidates_are_ordered_simplest_first():
    table = load_candidates()
    assert set(table) >= {"fp16", "bf16", "tf32", "fp32", "e4m3"}
    for cands in table.values():
        assert cands[0].text == "hopper/serial"
    assert [c.text for c in table["e4m3"][1:5]] == [
        f"hopper/serial[promote={p}]" for p in (32, 64, 128, 256)
    ]
    assert table["fp32"][0].instr == "fma.rn.f32"


@pytest.mark.parametrize("make", ["missing", "empty", "bad-call"])
def test_cli_bad_folder_is_one_line(tmp_path, make):
    args = ["hardware", "fit-gemm", str(tmp_path / "nowhere")]
    if make != "missing":
        (tmp_path / "gemm").mkdir()
        args = ["hardware", "fit-gemm", str(tmp_path)]
    if make == "bad-call":
        (tmp_path / "gemm" / "fp16.npz").symlink_to(GEMM / "fp16.npz")
        args += ["--call", "fp8"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1 and "tcsmt: error:" in r.output
    assert "Traceback" not in r.output
