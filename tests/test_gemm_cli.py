"""`tcsmt gemm`: the report (instruction, schedule, errors against the exact product),
--compare, --json, --out, .npy inputs, and one-line errors with exit code 2."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_report_names_instruction_schedule_and_errors():
    r = run("gemm", "--arch", "hopper", "--random", "8,8,64", "--dtype", "e4m3")
    assert r.exit_code == 0, r.output
    assert "wgmma.m64n8k32.f32.e4m3.e4m3" in r.output
    for key in ("shape", "schedule", "seconds", "MAC/s", "vs exact", "vs fp64", "median"):
        assert key in r.output


def test_json_compare_and_out(tmp_path):
    out = tmp_path / "d.npy"
    r = run(
        "gemm",
        "--arch",
        "hopper",
        "--random",
        "16,16,256",
        "--dtype",
        "e4m3",
        "--json",
        "--compare",
        "hopper/serial[promote=128]",
        "--out",
        str(out),
        "--seed",
        "3",
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    first, second = doc["runs"]
    assert first["instruction"] == second["instruction"] == "wgmma.m64n8k32.f32.e4m3.e4m3"
    assert second["schedule"] == "serial[promote=128]" and second["differ_from_first"] > 0
    assert first["exact"]["max_ulps"] >= first["exact"]["median_ulps"] >= 0
    # --out holds the first hypothesis' D, as tc.matmul computes it on the same matrices
    rng = np.random.default_rng(3)
    from tensorcore_smt.formats import Format
    from tensorcore_smt.gemm.measure import Dist, random_matrix

    A = random_matrix((16, 256), Format.E4M3, Dist.NORMAL, rng)
    B = random_matrix((256, 16), Format.E4M3, Dist.NORMAL, rng)
    assert (np.load(out) == tc.matmul("hopper", A, B)).all()


def test_npy_inputs_and_exact_error_zero_when_exact(tmp_path):
    # small integers: every product and partial sum is exact, so D equals the exact product
    A = np.arange(-8, 8, dtype=np.float16).reshape(2, 8)
    B = np.ones((8, 3), dtype=np.float16)
    C = np.full((2, 3), 0.5, dtype=np.float32)
    for name, x in (("a", A), ("b", B), ("c", C)):
        np.save(tmp_path / f"{name}.npy", x)
    r = run(
        "gemm",
        "--arch",
        "ampere",
        "--a",
        str(tmp_path / "a.npy"),
        "--b",
        str(tmp_path / "b.npy"),
        "--c",
        str(tmp_path / "c.npy"),
        "--json",
    )
    assert r.exit_code == 0, r.output
    e = json.loads(r.output)["runs"][0]["exact"]
    assert e["max_ulps"] == 0 and e["max_rel"] == 0
    # bf16 patterns stored as uint16 are read with --dtype
    np.save(tmp_path / "a16.npy", A.astype(ml_dtypes.bfloat16).view(np.uint16))
    np.save(tmp_path / "b16.npy", B.astype(ml_dtypes.bfloat16).view(np.uint16))
    r = run(
        "gemm",
        "--arch",
        "ampere",
        "--a",
        str(tmp_path / "a16.npy"),
        "--b",
        str(tmp_path / "b16.npy"),
        "--dtype",
        "bf16",
    )
    assert r.exit_code == 0 and "m16n8k16.f32.bf16.bf16.f32" in r.output


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--arch", "hopper/nosuch", "--random", "4,4,16"], "unknown schedule"),
        (["--arch", "nowhere", "--random", "4,4,16"], "unknown architecture"),
        (["--arch", "hopper/serial[promote=0]", "--random", "4,4,16"], "promote=0"),
        (["--arch", "hopper/serial[split_k=4]", "--random", "4,4,64"], "split_k=4"),
        (["--arch", "hopper/serial[promote=100]", "--random", "4,4,256"], "promote=100"),
        (["--arch", "hopper", "--random", "4,4"], "M,N,K"),
        (["--arch", "hopper", "--random", "4,0,16"], ">= 1"),
        (["--arch", "hopper", "--random", "4,4,16", "--dtype", "int8"], "--dtype"),
        (["--arch", "volta", "--random", "4,4,16", "--dtype", "bf16"], "volta has no"),
        (["--arch", "hopper"], "--random"),
        (["--arch", "hopper", "--a", "/nonexistent.npy", "--b", "x"], "no such file"),
        (["--arch", "hopper", "--random", "4,4,16", "--dist", "cauchy"], "--dist"),
        (["--arch", "hopper", "--a", "x.npy", "--b", "y.npy", "--k-sweep"], "--k-sweep"),
    ],
)
def test_bad_input_one_line_exit_2(args, needle):
    r = run("gemm", *args)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.output


def test_bad_shapes_in_files(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((2, 8), np.float16))
    np.save(tmp_path / "b.npy", np.zeros((9, 3), np.float16))
    np.save(tmp_path / "i.npy", np.zeros((8, 3), np.int32))
    r = run(
        "gemm", "--arch", "hopper", "--a", str(tmp_path / "a.npy"), "--b", str(tmp_path / "b.npy")
    )
    assert r.exit_code == 2 and "inner dimensions" in r.output
    r = run(
        "gemm", "--arch", "hopper", "--a", str(tmp_path / "a.npy"), "--b", str(tmp_path / "i.npy")
    )
    # int32 is a GEMM dtype (s32 accumulators), but no instruction takes fp16 times s32
    assert r.exit_code == 2 and "no GEMM instruction for fp16.s32 inputs" in r.output


def test_exact_reference_includes_alpha_beta_and_c(tmp_path):
    """Small integers keep every step exact, so D equals the exact alpha*A*B + beta*C
    (beta unset: 1), wherever C joins: 0 ulp."""
    A = np.arange(-8, 8, dtype=np.float16).reshape(2, 8)
    B = np.ones((8, 3), dtype=np.float16)
    C = np.full((2, 3), 3.0, dtype=np.float32)
    for name, x in (("a", A), ("b", B), ("c", C)):
        np.save(tmp_path / f"{name}.npy", x)
    files = ["--a", str(tmp_path / "a.npy"), "--b", str(tmp_path / "b.npy")]
    files += ["--c", str(tmp_path / "c.npy")]
    for hyp in ("ampere/serial[alpha=0.5]", "ampere/serial[c_join=epilogue,alpha=0.5,beta=-2]"):
        r = run("gemm", "--arch", hyp, *files, "--json")
        assert r.exit_code == 0, r.output
        doc = json.loads(r.output)["runs"][0]
        assert doc["exact"]["max_ulps"] == 0 and doc["fp64_matmul"]["max_ulps"] == 0, doc
    # D is alpha * A*B + C (BLAS, cuBLAS, torch.addmm), not alpha * (A*B + C)
    from tensorcore_smt.gemm.measure import run_measured

    m = run_measured("ampere/serial[alpha=0.5]", A, B, C)
    assert m.exact.max_ulps == 0
    assert (m.D == 0.5 * (A.astype(np.float32) @ B.astype(np.float32)) + C).all()


def test_plot_and_k_sweep(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "e.png"
    r = run(
        "gemm",
        "--arch",
        "hopper",
        "--random",
        "4,4,64",
        "--dtype",
        "e4m3",
        "--k-sweep",
        "--compare",
        "hopper/cublas-fp8",
        "--plot",
        str(png),
    )
    assert r.exit_code == 0, r.output
    assert "K sweep" in r.output and png.read_bytes()[:4] == b"\x89PNG"
    for k in ("16", "32", "64"):
        assert any(line.split()[:1] == [k] for line in r.output.splitlines())
    r = run("gemm", "--arch", "hopper", "--random", "4,4,64", "--plot", str(tmp_path / "h.png"))
    assert r.exit_code == 0 and (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"


def test_engine_option_same_bits(tmp_path):
    # --engine numpy and --engine compiled run the same schedule on the same random
    # matrices: D identical bit for bit, each report naming the engine that ran it.
    outs = {}
    for engine in ("numpy", "compiled"):
        out = tmp_path / f"{engine}.npy"
        r = run(
            "gemm",
            "--arch",
            "hopper/serial[promote=64]",
            "--random",
            "8,8,256",
            "--dtype",
            "e4m3",
            "--seed",
            "3",
            "--engine",
            engine,
            "--out",
            str(out),
        )
        assert r.exit_code == 0, r.output
        assert f"engine       {engine}" in r.output
        outs[engine] = np.load(out)
    assert outs["numpy"].view(np.uint32).tolist() == outs["compiled"].view(np.uint32).tolist()
    r = run("gemm", "--arch", "hopper", "--random", "4,4,32", "--engine", "banana")
    assert r.exit_code == 2


def test_integer_matrices_from_npy_files(tmp_path):
    """int8 .npy files are s8 values: an integer GEMM through `tcsmt gemm --instr` writes
    D (int32) equal to the exact integer product; u8 patterns need --dtype u8."""
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (4, 64), dtype=np.int8)
    b = rng.integers(-128, 128, (64, 3), dtype=np.int8)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "d.npy"
    r = run(
        "gemm", "--arch", "ampere", "--instr", "m16n8k32.s32.s8.s8.s32",
        "--a", str(tmp_path / "a.npy"), "--b", str(tmp_path / "b.npy"), "--out", str(out),
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    d = np.load(out)
    assert np.array_equal(d.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))
    r = run(
        "gemm", "--arch", "ampere", "--a", str(tmp_path / "a.npy"), "--b",
        str(tmp_path / "b.npy"), "--dtype", "u8",
    )  # fmt: skip
    assert r.exit_code == 2 and "holds s8 values but --dtype is u8" in r.output
