"""The hardware campaign's pieces: random validation rows, the batch runner, SASS reading,
the no-GPU exit, and the facts an H100 taught the hopper preset.

tests/data/h100_silicon.jsonl holds rows an H100 (sm_90, driver 580.159.04, nvcc 13.0)
computed through the batch runner, chosen where the beliefs the preset held before the
run (the FP8 mma.sync as the FP8 wgmma unit; DMMA with one canonical NaN) disagreed with
the silicon: every row is a real answer the model must reproduce bit for bit.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt import api
from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format, Specials
from tensorcore_smt.hardware.gpu import Gpu, sass_excerpt, sass_ops
from tensorcore_smt.hardware.validation import recheck
from tensorcore_smt.probe.runner import generate_runner, runner_target
from tensorcore_smt.spec.presets import PRESETS, parse_variant
from tensorcore_smt.validation.rows import KINDS, RowKind, random_rows
from tensorcore_smt.validation.validate import chunk_seed as _chunk_seed

DATA = Path(__file__).parent / "data" / "h100_silicon.jsonl"
NVCC = shutil.which("nvcc")


def _silicon_rows() -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for line in DATA.read_text().splitlines():
        r = json.loads(line)
        rows.setdefault(r["instr"], []).append(r)
    return rows


def _run_rows(variant: str, instr: str, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    p = parse_variant(variant).params(instr)
    a = np.array([[int(x, 16) for x in r["a"]] for r in rows], dtype=np.uint64)
    b = np.array([[int(x, 16) for x in r["b"]] for r in rows], dtype=np.uint64)
    c = np.array([int(r["c"], 16) for r in rows], dtype=np.uint64)
    d = np.array([int(r["d"], 16) for r in rows], dtype=np.uint64)
    return api.simulate_params(p, a, b, c), d


# --- what the H100 returned ---------------------------------------------------------


@pytest.mark.parametrize("instr", sorted(_silicon_rows()))
def test_hopper_preset_reproduces_the_h100(instr):
    """Every recorded row, bit for bit, on the vector and the concrete interpreter."""
    rows = _silicon_rows()[instr]
    model, silicon = _run_rows("hopper", instr, rows)
    assert model.tolist() == silicon.tolist()
    p = parse_variant("hopper").params(instr)
    r = rows[0]
    one = api.simulate_one(
        p, [int(x, 16) for x in r["a"]], [int(x, 16) for x in r["b"]], int(r["c"], 16)
    )
    assert one == int(r["d"], 16)


@pytest.mark.parametrize(
    "instr", [i for i in sorted(_silicon_rows()) if "e4m3" in i or "e5m2" in i]
)
def test_fp8_mma_sync_is_not_the_fp8_wgmma_unit(instr):
    """The MATLAB model's belief (one group of 32 at F = 13, as the FP8 wgmma) mispredicts
    rows the silicon answered, on every FP8 mma.sync form."""
    belief = "matlab-h100-fp8-f16" if ".f16.e" in instr else "matlab-h100-fp8"
    model, silicon = _run_rows(belief, instr, _silicon_rows()[instr])
    assert (model != silicon).any()


def test_fp8_mma_sync_structure_is_needed():
    """Each part of the structure read off the SASS matters: c inside the first group, or
    groups of consecutive k, mispredict recorded rows."""
    fp8 = [i for i in sorted(_silicon_rows()) if "e4m3" in i or "e5m2" in i]
    for belief in ("hopper[c_add=fused]", "hopper[group_map=contiguous]"):
        wrong = 0
        for instr in fp8:
            model, silicon = _run_rows(belief, instr, _silicon_rows()[instr])
            wrong += int((model != silicon).sum())
        assert wrong >= 10, belief


@pytest.mark.parametrize("instr", [i for i in sorted(_silicon_rows()) if ".f64." in i])
def test_dmma_nan_payloads(instr):
    """DMMA returns the first NaN of b_k, the running sum, a_k (quiet), not one NaN."""
    rows = _silicon_rows()[instr]
    model, silicon = _run_rows("hopper[nan_rule=canonical]", instr, rows)
    assert (model != silicon).any()


def test_dmma_invalid_nan_is_negative():
    rows = [r for i, rs in _silicon_rows().items() if ".f64." in i for r in rs]
    assert any(int(r["d"], 16) == 0xFFF8000000000000 for r in rows)  # Inf - Inf, 0 x Inf
    assert not any(int(r["d"], 16) == 0x7FF8000000000000 for r in rows)


def test_byte_pairs_order_and_c_after():
    p = parse_variant("hopper").params("m16n8k32.f32.e4m3.e4m3.f32")
    assert p.k_order()[:4] == [0, 1, 4, 5] and sorted(p.k_order()) == list(range(32))
    assert p.groups() == [(0, 16), (16, 32)]
    # c added after the chain with round to nearest: 1 + 0.625 ulp(1) rounds up, where
    # the fused group's RZ (c inside the chain) truncates it
    a = [0x38] + [0] * 31  # 1.0 in e4m3
    b = [0x38] + [0] * 31
    c = 0x33A00000  # 1.25 * 2^-24 = 0.625 ulp(1)
    assert api.simulate_one(p, a, b, c) == 0x3F800001
    fused = parse_variant("hopper[c_add=fused]").params("m16n8k32.f32.e4m3.e4m3.f32")
    assert api.simulate_one(fused, a, b, c) == 0x3F800000


# --- random rows ----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [Format.FP16, Format.BF16, Format.TF32, Format.E4M3, Format.E5M2])
def test_random_rows_mix(fmt):
    a, b, c, kind = random_rows(fmt, fmt, Format.FP32, 16, 7000, seed=3)
    a2, b2, c2, kind2 = random_rows(fmt, fmt, Format.FP32, 16, 7000, seed=3)
    assert (a == a2).all() and (b == b2).all() and (c == c2).all() and (kind == kind2).all()
    assert set(np.unique(kind)) == set(range(len(KINDS)))
    s = fmt.spec
    assert int(a.max()) < (1 << s.storage)
    field = (a >> np.uint64(s.mbits + s.ignored_low)) & np.uint64((1 << s.ebits) - 1)
    normal = kind == KINDS.index(RowKind.NORMAL)
    top = (1 << s.ebits) - 1
    # normal rows: no zero exponent field (zeros, subnormals) and no NaN
    assert (field[normal] > 0).all()
    if s.specials == Specials.IEEE:
        assert (field[normal] < top).all()
    # the special kind carries Inf/NaN patterns, the subnormal kind subnormals
    special = kind == KINDS.index(RowKind.SPECIAL)
    assert (field[special] == top).any()
    sub = kind == KINDS.index(RowKind.SUBNORMAL)
    assert (field[sub] == 0).any()
    if s.ignored_low:
        low = a & np.uint64((1 << s.ignored_low) - 1)
        assert (low[kind != KINDS.index(RowKind.BITS)] == 0).all()
        assert (low[kind == KINDS.index(RowKind.BITS)] != 0).any()


@pytest.mark.parametrize(
    "fmt", [Format.FP16, Format.FP64, Format.E8M31, Format.E4M3FNUZ, Format.E2M1, Format.TF32]
)
def test_random_rows_kinds_as_documented(fmt):
    """Stream 2 realises each kind as rows.py documents it, on formats of every width and
    special-value encoding: special rows carry one or two Inf/NaN operands (a and b each,
    c always), zeros rows about half +-0 (never -0 where -0 is a NaN), bits rows raw
    patterns of the storage width, and wide/subnormal rows subnormals."""
    s = fmt.spec
    a, b, c, kind = random_rows(fmt, fmt, fmt, 8, 7000, seed=5)
    assert int(max(a.max(), b.max(), c.max())) < (1 << s.storage)
    body = (a >> np.uint64(s.ignored_low)) & np.uint64((1 << (s.ebits + s.mbits)) - 1)
    field = body >> np.uint64(s.mbits)
    top = (1 << s.ebits) - 1
    fnuz_nan = np.uint64(1 << (s.storage - 1))
    if s.specials == Specials.IEEE:
        is_special = field == top
    elif s.specials == Specials.FNUZ:
        is_special = a == fnuz_nan
    else:
        is_special = None
    of = {k: kind == KINDS.index(k) for k in KINDS}
    if is_special is not None:
        per_row = is_special[of[RowKind.SPECIAL]].sum(axis=1)
        assert set(np.unique(per_row)) == {1, 2}
        for k in (RowKind.NORMAL, RowKind.ZEROS, RowKind.SUBNORMAL, RowKind.WIDE):
            assert not is_special[of[k]].any(), k
    zero = body == 0
    share = zero[of[RowKind.ZEROS]].mean()
    assert 0.4 < share < 0.6
    if s.specials == Specials.FNUZ:
        assert not (a[of[RowKind.ZEROS]] == fnuz_nan).any()
    assert not zero[of[RowKind.NORMAL]].any()
    sub = (field == 0) & ~zero
    assert sub[of[RowKind.SUBNORMAL]].mean() > 0.4 and sub[of[RowKind.WIDE]].any()
    assert not sub[of[RowKind.NORMAL] | of[RowKind.SPECIAL]].any()
    if s.ignored_low:  # only raw bits set the bits a format ignores
        low = a & np.uint64((1 << s.ignored_low) - 1)
        assert (low[of[RowKind.BITS]] != 0).mean() > 0.9 and not low[~of[RowKind.BITS]].any()


def test_cancel_rows_cancel():
    a, b, c, kind = random_rows(Format.FP16, Format.FP16, Format.FP32, 16, 2000, seed=1)
    rows = kind == KINDS.index(RowKind.CANCEL)
    assert (a[rows, 8:] == a[rows, :8]).all()
    assert ((b[rows, 8:] ^ b[rows, :8]) >> np.uint64(15) == 1).all()


# --- the runner program and the campaign ----------------------------------------------


def test_runner_targets():
    h = PRESETS["hopper"].instructions
    assert str(runner_target(h["wgmma.m64n8k16.f32.f16.f16"], 90)) == "sm_90a"
    assert str(runner_target(h["m16n8k32.f32.e4m3.e4m3.f32"], 90)) == "sm_90"
    with pytest.raises(Exception, match="cannot run on an sm_80"):
        runner_target(h["m16n8k32.f32.e4m3.e4m3.f32"], 80)


@pytest.mark.parametrize(
    "instr",
    ["m16n8k16.f32.f16.f16.f32", "m16n8k32.f16.e4m3.e5m2.f16", "wgmma.m64n8k32.f32.e4m3.e4m3"],
)
def test_runner_compiles(tmp_path, instr):
    if NVCC is None:
        pytest.skip("nvcc not found on PATH: the runner is not compiled")
    inst = PRESETS["hopper"].instructions[instr]
    target = runner_target(inst, 90)
    src = tmp_path / "r.cu"
    src.write_text(generate_runner(inst, target))
    r = subprocess.run(
        [NVCC, f"-arch={target}", "-o", str(tmp_path / "r"), str(src)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr


def test_campaign_without_gpu_is_one_line(monkeypatch):
    """`tcsmt hardware run` and `python -m tensorcore_smt hardware run` (what `make
    hardware` runs) without a GPU: one line, exit 2."""
    monkeypatch.setenv("PATH", "/nonexistent")
    r = CliRunner().invoke(main, ["hardware", "run", "--steps", "validate"])
    assert r.exit_code == 2 and r.output.strip().splitlines() == [
        "tcsmt: error: tcsmt hardware run needs an NVIDIA GPU: nvidia-smi is not installed here"
    ]
    env = {"PATH": "/nonexistent", "PYTHONPATH": str(Path(__file__).parent.parent)}
    r = subprocess.run(
        [sys.executable, "-m", "tensorcore_smt", "hardware", "run"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 2 and not r.stdout
    assert len(r.stderr.strip().splitlines()) == 1 and "needs an NVIDIA GPU" in r.stderr


def test_campaign_options_are_checked():
    for args, says in (
        (["--steps", "probes,foo"], "--steps: unknown step 'foo'"),
        (["--rows", "0"], "'--rows': 0 is out of range"),
        (["--arch", "volta"], "'--arch'"),
    ):
        r = CliRunner().invoke(main, ["hardware", "run", *args])
        assert r.exit_code == 2 and says in r.output and len(r.output.splitlines()) == 1, r.output


def test_sass_ops():
    sass = """
        /*0960*/                   HMMA.16816.F32 R16, R12, R2, RZ ;   /* 0x000000020c10723c */
        /*0970*/                   F2FP.F16.E4M3.UNPACK_B R2, R10.H1 ; /* 0x0000000aff02723e */
        /*09b0*/                   HMMA.16816.F32 R12, R12, R2, R16 ; /* 0x000000020c0c723c */
        Function : probe_kernel
    """
    assert sass_ops(sass) == {"F2FP.F16.E4M3.UNPACK_B": 1, "HMMA.16816.F32": 2}
    assert sass_excerpt(sass).count("\n") == 2


def test_gpu_slug():
    assert Gpu("NVIDIA H100 80GB HBM3", 90, "x").slug == "h100"
    assert Gpu("NVIDIA H200", 90, "x").slug == "h200"


# --- the 10^6-row validation (results/hardware/h100) ---------------------------------

RESULTS = Path(__file__).parent.parent / "results" / "hardware" / "h100"


def _kept_rows() -> list[Path]:
    return sorted((RESULTS / "rows").glob("*.rows.npz"))


@pytest.mark.parametrize("path", _kept_rows(), ids=lambda p: p.name.removesuffix(".rows.npz"))
def test_fp8_operands_are_unpacked_to_f16(path):
    """The mixed-FP8 k16 forms, as the H100 answered them (the first 20,000 rows and every
    row the validation reported): the preset, whose operands become f16 before the HMMAs
    (unpack=fp16, as F2FP.UNPACK_B does), reproduces them all; the model that multiplied
    the FP8 values directly (unpack=none: an e4m3 subnormal keeps its unnormalised
    exponent) mispredicts exactly the reported rows among the first 20,000, by at most
    16 ulp."""
    instr = path.name.removesuffix(".rows.npz")
    z = np.load(path)
    a, b, c = (z[k].astype(np.uint64) for k in "abc")
    gpu = z["d"].astype(np.uint64)
    mism = json.loads((RESULTS / "validation" / f"{instr}.mismatches.json").read_text())
    row_of = [int(v["note"].split(" row ")[1].split()[0]) for v in mism["vectors"]]
    ra = np.array([[int(x, 16) for x in v["a"]] for v in mism["vectors"]], dtype=np.uint64)
    rb = np.array([[int(x, 16) for x in v["b"]] for v in mism["vectors"]], dtype=np.uint64)
    rc = np.array([int(v["c"], 16) for v in mism["vectors"]], dtype=np.uint64)
    rd = np.array([int(x, 16) for x in mism["meta"]["observed"]], dtype=np.uint64)
    p = parse_variant("hopper").params(instr)
    assert api.simulate_params(p, a, b, c).tolist() == gpu.tolist()
    assert api.simulate_params(p, ra, rb, rc).tolist() == rd.tolist()
    old = api.simulate_params(parse_variant("hopper[unpack=none]").params(instr), a, b, c)
    wrong = set(np.flatnonzero(old != gpu).tolist())
    assert wrong == {j for j in row_of if j < len(gpu)} and wrong
    ulps = np.abs(old[list(wrong)].astype(np.int64) - gpu[list(wrong)].astype(np.int64))
    assert ulps.max() <= 16


def test_unpack_must_hold_the_operands():
    """unpack converts exactly or not at all: a format narrower than the operands is refused
    with the parameter's name."""
    with pytest.raises(ValueError, match="unpack=bf16 cannot hold fp16"):
        parse_variant("hopper[unpack=bf16]").params("m16n8k16.f32.f16.f16.f32")


def _recheck(pattern: str) -> list[dict]:
    # the model the run validated is the preset before unpack=fp16
    return recheck(RESULTS, "hopper[unpack=none]", pattern)


def test_preset_agrees_with_the_h100_on_the_mixed_fp8_k16_rows():
    """The run's 10^5 rows of each mixed-FP8 k16 form, drawn again from their seeds: the
    preset and the validated model differ exactly on the rows the H100 disagreed with."""
    rows = _recheck(r"^m16n8k16\.f32\.(e5m2\.e4m3|e4m3\.e5m2)\.")
    assert len(rows) == 2 and all(r["agrees"] and r["differ"] for r in rows)


@pytest.mark.slow
def test_preset_agrees_with_every_row_the_h100_returned():
    """All 15.7 million rows of the validation, every instruction (a few minutes)."""
    rows = _recheck("")
    assert len(rows) == 40 and all(r["agrees"] for r in rows)


def test_gpu_validation_is_validate_with_an_oracle(tmp_path):
    """The campaign's validation of one instruction, with a stand-in for the GPU (the
    oracle variant:hopper[F=24], one of the named alternatives): the seeded chunks on a
    Dask worker, the preset's mismatches counted by row kind, the alternative's own count
    zero (it is the oracle), the mismatch file in validate's format (row numbers as
    sources, the oracle's d in meta.observed); recheck then redraws the rows from the
    recorded seed and chunk size and finds the two models differ exactly there."""
    from tensorcore_smt.hardware.validation import validate_instruction
    from tensorcore_smt.identify.oracle import make_oracle
    from tensorcore_smt.validation.vectors import load

    instr = "m16n8k16.f32.f16.f16.f32"
    p = parse_variant("hopper").params(instr)
    oracle = make_oracle("variant:hopper[F=24]", p, "hopper", instr)
    entry, interrupted = validate_instruction(
        "hopper", instr, oracle, tmp_path, rows=1500, seed=7, chunk_rows=500, workers=1
    )
    assert not interrupted and entry["rows"] == 1500 and entry["stream"] == 2
    assert entry["mismatches"] > 0 and entry["alternatives"]["hopper[F=24]"] == 0
    assert sum(entry["mismatches_by_kind"].values()) == entry["mismatches"]
    vf = load(tmp_path / entry["mismatch_file"])
    assert len(vf.vectors) == entry["mismatches"]
    row = int(vf.vectors[0].source.split()[1])
    a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, 500, _chunk_seed(7, row // 500))
    j = row % 500
    assert vf.vectors[0].a == a[j].tolist()
    hidden = parse_variant("hopper[F=24]").params(instr)
    d = api.simulate_params(hidden, a[j : j + 1], b[j : j + 1], c[j : j + 1])
    assert vf.meta["observed"][0] == f"0x{int(d[0]):08x}"
    (tmp_path / "machine.json").write_text(json.dumps({"arch": "hopper"}))
    (tmp_path / "validation" / "validation.json").write_text(json.dumps([entry]))
    (again,) = recheck(tmp_path, "hopper[F=24]")
    assert again["agrees"] and again["differ"] == again["reported"] == entry["mismatches"]


@pytest.mark.parametrize(
    "fmt, c_fmt, digest",
    [
        (Format.FP16, Format.FP32, "8dbce8a015dc7376"),
        (Format.E4M3, Format.FP16, "5190618478c39387"),
        (Format.FP64, Format.FP64, "17fa4f631ccd3006"),
        (Format.TF32, Format.FP32, "e789ae501026154b"),
    ],
)
def test_row_stream_2_is_pinned(fmt, c_fmt, digest):
    """Runs are recorded as (seed, rows, chunk size) and redrawn later (hardware recheck,
    validate's mismatch files name row numbers): the rows of stream 2 for a seed must never
    change. A digest of 2,000 rows per format pins them; a faster generator must give
    these bits (a new stream needs a new STREAM number and the old one kept)."""
    import hashlib

    a, b, c, kind = random_rows(fmt, fmt, c_fmt, 8, 2000, 11)
    data = b"".join(x.astype(np.uint64).tobytes() for x in (a, b, c, kind))
    assert hashlib.sha256(data).hexdigest()[:16] == digest


@pytest.mark.parametrize(
    "fmt", [f for f in Format if f.spec.name not in ("ue8m0", "ue4m3") and not f.spec.is_integer]
)
def test_compiled_row_composition_is_numpys(fmt):
    """rows_kernel's LLVM composition gives the numpy composition's bits, on every operand
    format (widths 4 to 64, every special-value encoding, ignored low bits), K = 1, 2, 16."""
    for K in (1, 2, 16):
        fast = random_rows(fmt, fmt, Format.FP32, K, 3000, 3 + K, compiled=True)
        slow = random_rows(fmt, fmt, Format.FP32, K, 3000, 3 + K, compiled=False)
        for x, y in zip(fast, slow):
            assert x.tolist() == y.tolist()


def test_campaign_identify_without_gpu_records_the_error(tmp_path, monkeypatch):
    """The identify step runs in process: without a GPU each instruction's row says why
    (exit 2 and the one-line error), and the summary is still written."""
    from tensorcore_smt.hardware.identify import run_identify

    monkeypatch.setenv("PATH", "/nonexistent")
    (row,) = run_identify("hopper", ("m16n8k16.f32.f16.f16.f32",), tmp_path, 10)
    assert row["exit"] == 2 and "cuda oracle needs nvcc" in row["error"]
    assert json.loads((tmp_path / "identify" / "identify.json").read_text()) == [row]


@pytest.mark.slow
def test_campaign_identify_in_process(tmp_path):
    """The identify step with a stand-in for the GPU (a hidden variant): the same
    Identifier and JSON report as `tcsmt identify`, the hidden model among the survivors."""
    from tensorcore_smt.hardware.identify import run_identify

    instr = "m8n8k4.f32.f16.f16.f32"
    (row,) = run_identify("volta", (instr,), tmp_path, 60, 1, 5.0, "variant:volta[carry_bits=2]")
    assert row["exit"] == 0 and "volta[carry_bits=2]" in row["survivors"]
    doc = json.loads((tmp_path / "identify" / f"{instr}.json").read_text())
    assert doc["oracle_vectors"] == row["oracle_vectors"] <= 60
