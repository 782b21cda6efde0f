"""Integer matrix units (model/integer.py; archs/integer.toml): exact bits against
independent integer arithmetic, wrap-around against `.satfinite`, the interpreters and
the compiled engine bit for bit, solver witnesses re-run on the model, the overflow-free
chain through tc.matmul, probes and bad input."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt import api
from tensorcore_smt.bv.concrete import CONCRETE
from tensorcore_smt.bv.core import BV
from tensorcore_smt.certify.int_overflow import check_runs, overflow_free, run_chain
from tensorcore_smt.cli import main
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format, int_value
from tensorcore_smt.gemm.emulate import matmul
from tensorcore_smt.model import dot_add
from tensorcore_smt.model.integer import chain_bound, term_range
from tensorcore_smt.model.params import BitOp, IntClamp
from tensorcore_smt.probe import generate, layout_for
from tensorcore_smt.smt.query import make_query
from tensorcore_smt.smt.solve import Limits, Verdict, answer
from tensorcore_smt.spec.presets import PRESETS, parse_variant
from tensorcore_smt.validation.rows import random_rows
from tensorcore_smt.validation.vectors import Vector, VectorFile, predict

S32_MIN, S32_MAX = -(1 << 31), (1 << 31) - 1

FORMS = [
    ("turing", "m8n8k16.s32.s8.u8.s32"),
    ("turing", "m8n8k32.satfinite.s32.u4.s4.s32"),
    ("turing", "m8n8k128.s32.b1.b1.s32.xor.popc"),
    ("ampere", "m16n8k32.satfinite.s32.s8.s8.s32"),
    ("ampere", "m16n8k16.s32.u8.u8.s32"),
    ("ampere", "m16n8k64.s32.s4.s4.s32"),
    ("ampere", "m16n8k256.s32.b1.b1.s32.and.popc"),
    ("hopper", "wgmma.m64n8k32.satfinite.s32.u8.s8"),
    ("blackwell", "tcgen05.m64n8k32.kind::i8.s32.s8.s8"),
    ("cdna1", "v_mfma_i32_16x16x16i8"),
    ("cdna3", "v_mfma_i32_16x16x32_i8"),
    ("cdna4", "v_mfma_i32_16x16x64_i8"),
    ("cdna4", "v_mfma_i32_32x32x32_i8"),
    ("cdna4", "v_mfma_i32_4x4x4_16b_i8"),
    ("rdna3", "v_wmma_i32_16x16x16_iu8_i8_u8"),
    ("rdna3", "v_wmma_i32_16x16x16_iu8_u8_u8_clamp"),
    ("rdna3", "v_wmma_i32_16x16x16_iu4_i4_i4_clamp"),
    ("rdna4", "v_wmma_i32_16x16x16_iu8_i8_i8"),
    ("rdna4", "v_wmma_i32_16x16x32_iu4_u4_i4"),
    ("rdna4", "v_wmma_i32_16x16x32_iu4_i4_i4_clamp"),
]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def reference(p, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """d from numpy int64 arithmetic on the values (independent of the model): the exact
    sum, then wrapped modulo 2^32 or clamped, as uint32 patterns."""
    av = np.array([[int_value(int(x), p.a_fmt) for x in r] for r in a], dtype=np.int64)
    bv = np.array([[int_value(int(x), p.b_fmt) for x in r] for r in b], dtype=np.int64)
    cv = np.array([int_value(int(x), p.c_fmt) for x in c], dtype=np.int64)
    if p.bit_op == BitOp.AND:
        terms = av & bv
    elif p.bit_op == BitOp.XOR:
        terms = av ^ bv
    else:
        terms = av * bv
    exact = cv + terms.sum(axis=1)
    if p.int_clamp == IntClamp.SATFINITE:
        exact = np.clip(exact, S32_MIN, S32_MAX)
    return (exact & 0xFFFFFFFF).astype(np.uint64)


@pytest.mark.parametrize("arch,name", FORMS, ids=[f"{a}:{n}" for a, n in FORMS])
def test_random_and_extreme_rows_match_integer_arithmetic(arch, name):
    p = parse_variant(arch).params(name)
    a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, 1500, 3)
    want = reference(p, a, b, c)
    got = api.simulate_params(p, a, b, c, engine="numpy")
    assert np.array_equal(got, want)
    assert np.array_equal(api.simulate_params(p, a, b, c, engine="compiled"), want)
    for i in range(5):  # the concrete interpreter, row by row
        d = dot_add(
            [BV(CONCRETE, int(x), p.a_fmt.spec.storage) for x in a[i]],
            [BV(CONCRETE, int(x), p.b_fmt.spec.storage) for x in b[i]],
            BV(CONCRETE, int(c[i]), 32),
            p,
        )
        assert d.v == int(want[i])
    if p.bit_op == BitOp.MUL:  # the mix reaches beyond the s32 range
        exact = reference(p.with_(int_clamp=IntClamp.WRAP), a, b, c)
        clamped = reference(p.with_(int_clamp=IntClamp.SATFINITE), a, b, c)
        assert np.count_nonzero(exact != clamped) > 50


def test_all_minus_128_wraps_or_saturates():
    """16 products of -128 x -128 = 2^18 onto c = 2^31 - 2^18 + 5: the exact sum is
    2^31 + 5, which wraps to -2^31 + 5 or clamps to 2^31 - 1."""
    a = [-128] * 16
    c = S32_MAX - (1 << 18) + 6
    wrap = api.simulate("hopper", "m16n8k16.s32.s8.s8.s32", [a], [a], [c])
    sat = api.simulate("hopper", "m16n8k16.satfinite.s32.s8.s8.s32", [a], [a], [c])
    assert int(wrap[0]) == (S32_MIN + 5) & 0xFFFFFFFF
    assert int(sat[0]) == S32_MAX
    low = api.simulate("hopper", "m16n8k16.satfinite.s32.s8.s8.s32", [a], [[127] * 16], [S32_MIN])
    assert int(low[0]) == S32_MIN & 0xFFFFFFFF  # -2^31 - 16 * 16256 clamps to -2^31


@pytest.mark.parametrize("arch", ["rdna3", "rdna4"])
def test_rdna_clamp_bit_saturates_and_its_absence_wraps(arch):
    """rocm-systems PR #7272 on gfx1100 and gfx1201: 16 products 255 x 255 (unsigned) on
    c = 2^31 - 2^19 give 2^31 + 16 * 65025 - 2^19 > 2^31 - 1, which the plain form wraps
    modulo 2^32 and the clamp form saturates to 0x7fffffff; signed operands read the same
    bytes as -1 x -1."""
    a = [0xFF] * 16
    c = S32_MAX + 1 - (1 << 19)
    exact = c + 16 * 255 * 255
    wrap = api.simulate(arch, "v_wmma_i32_16x16x16_iu8_u8_u8", [a], [a], [c])
    sat = api.simulate(arch, "v_wmma_i32_16x16x16_iu8_u8_u8_clamp", [a], [a], [c])
    signed = api.simulate(arch, "v_wmma_i32_16x16x16_iu8_i8_i8_clamp", [a], [a], [c])
    mixed = api.simulate(arch, "v_wmma_i32_16x16x16_iu8_i8_u8", [a], [a], [c])
    assert int(wrap[0]) == exact & 0xFFFFFFFF and int(sat[0]) == 0x7FFFFFFF
    assert int(signed[0]) == c + 16 and int(mixed[0]) == c - 16 * 255
    low = api.simulate(arch, "v_wmma_i32_16x16x16_iu8_i8_u8_clamp", [[0x80] * 16], [a], [S32_MIN])
    assert int(low[0]) == S32_MIN & 0xFFFFFFFF  # -2^31 - 16 * 128 * 255 clamps to -2^31
    p = parse_variant(arch).params("v_wmma_i32_16x16x16_iu4_u4_i4")
    assert (p.a_fmt, p.b_fmt, p.K, p.int_clamp) == (Format.U4, Format.S4, 16, IntClamp.WRAP)


def test_clamping_partial_sums_is_another_hypothesis():
    """c = 2^31 - 1001, then +16384 (-128 x -128) and -16256 (127 x -128): the exact sum
    c + 128 is in range (clamped once: unchanged); a clamp after every product stops at
    2^31 - 1 first and ends at 2^31 - 1 - 16256."""
    c = S32_MAX - 1000
    a = [-128, 127] + [0] * 14
    b = [-128, -128] + [0] * 14
    once = api.simulate("hopper", "m16n8k16.satfinite.s32.s8.s8.s32", [a], [b], [c])
    each = api.simulate("hopper[L=1]", "m16n8k16.satfinite.s32.s8.s8.s32", [a], [b], [c])
    assert int(once[0]) == c + 16384 - 16256
    assert int(each[0]) == S32_MAX - 16256


def test_single_bit_popc_counts_and_or_xor():
    p = parse_variant("ampere").params("m16n8k128.s32.b1.b1.s32.and.popc")
    a = [1] * 100 + [0] * 28
    b = [1] * 60 + [0] * 40 + [1] * 28
    d_and = api.simulate("ampere", "m16n8k128.s32.b1.b1.s32.and.popc", [a], [b], [7])
    d_xor = api.simulate("ampere", "m16n8k128.s32.b1.b1.s32.xor.popc", [a], [b], [7])
    assert p.K == 128 and int(d_and[0]) == 7 + 60 and int(d_xor[0]) == 7 + 40 + 28


def test_solver_witness_wrap_against_satfinite_is_rerun_on_the_model():
    q = make_query("cdna3", "cdna3[int_clamp=satfinite]", "v_mfma_i32_4x4x4_16b_i8")
    out = answer(q, Limits(solver="z3", timeout=120, confirm=False, search=0.0))
    assert out.verdict == Verdict.WITNESS and out.method != "search"
    assert out.witness.reproduces
    w = out.witness.inputs
    a = [w[f"a{i}"] for i in range(4)]
    b = [w[f"b{i}"] for i in range(4)]
    dw = int(
        api.simulate("cdna3", "v_mfma_i32_4x4x4_16b_i8", [a], [b], [w["c"]], engine="numpy")[0]
    )
    ds = int(
        api.simulate("cdna3[int_clamp=satfinite]", "v_mfma_i32_4x4x4_16b_i8", [a], [b], [w["c"]])[0]
    )
    exact = int_value(w["c"], Format.S32) + sum(
        int_value(x, Format.S8) * int_value(y, Format.S8) for x, y in zip(a, b)
    )
    assert not S32_MIN <= exact <= S32_MAX
    assert dw == exact & 0xFFFFFFFF and ds == min(max(exact, S32_MIN), S32_MAX) & 0xFFFFFFFF


def _no_clamp_query():
    from tensorcore_smt.smt.library import get

    prop = get("integer-overflow")
    return next(q for spec, q in prop.bind("cdna3") if spec.id == "no-clamp-below")


def test_no_clamp_below_the_range_by_argument():
    """With |c| < 2^30 nothing clamps: the argument answers at once."""
    out = answer(_no_clamp_query(), Limits(solver="z3", timeout=60, confirm=False))
    assert out.verdict == Verdict.UNSAT_BY_ARGUMENT and out.method == "argument"
    assert out.argument.rows > 0 and out.argument.contradiction is None


@pytest.mark.slow
def test_no_clamp_below_the_range_by_a_solver(monkeypatch):
    """The bit-level query of a 4-product unit, the argument switched off: z3 proves it
    too (about 50 s here)."""
    from tensorcore_smt.smt import arguments

    monkeypatch.setattr(arguments, "no_clamp_argument", lambda q: None)
    out = answer(_no_clamp_query(), Limits(solver="z3", timeout=300, confirm=False))
    assert out.verdict == Verdict.UNSAT and out.method not in ("argument", "search")


@pytest.mark.parametrize(
    "fa,fb,K",
    [("s8", "s8", 131071), ("u8", "u8", 33025), ("s8", "u8", 65793), ("u4", "s4", 17895697)],
)
def test_overflow_free_chain_bound(fa, fb, K):
    """The bound from products enumerated over every value pair, not from the corners."""
    ra, rb = Format.parse(fa).spec.int_range, Format.parse(fb).spec.int_range
    prods = [x * y for x in range(ra[0], ra[1] + 1) for y in range(rb[0], rb[1] + 1)]
    lo, hi = min(prods), max(prods)
    want = min(S32_MAX // hi, (-S32_MIN) // -lo if lo < 0 else S32_MAX)
    assert chain_bound(lo, hi) == want == K


def test_overflow_free_chain_is_tight_through_matmul():
    r = overflow_free("hopper", "m16n8k32.s32.s8.s8.s32")
    assert (r.tmin, r.tmax, r.K) == (-16256, 16384, 131071)
    assert r.at_K.wrap == r.at_K.satfinite == r.at_K.exact == 131071 * 16384
    assert r.above.exact == 1 << 31
    assert (r.above.wrap, r.above.satfinite) == (S32_MIN, S32_MAX)
    assert all("UNEXPECTED" not in x and "NOT" not in x for x in check_runs(r))
    p = parse_variant("hopper").params("m16n8k32.s32.s8.u8.s32")
    assert term_range(p) == (-128 * 255, 127 * 255)


def test_gemm_chain_numpy_and_compiled_agree():
    rng = np.random.default_rng(4)
    A = rng.integers(-128, 128, size=(3, 96)).astype(np.int8)
    B = rng.integers(-128, 128, size=(96, 5)).astype(np.int8)
    C = rng.integers(S32_MAX - 600000, S32_MAX, size=(3, 5)).astype(np.int32)
    for name in ("m16n8k32.s32.s8.s8.s32", "m16n8k32.satfinite.s32.s8.s8.s32"):
        d_np = matmul("hopper", A, B, C, instr=name, engine="numpy")
        d_cc = matmul("hopper", A, B, C, instr=name, engine="compiled")
        assert d_np.dtype == np.int32 and np.array_equal(d_np, d_cc)
        exact = C.astype(np.int64) + A.astype(np.int64) @ B.astype(np.int64)
        if "satfinite" in name:  # each k32 step clamps: compare with a clamped chain
            acc = C.astype(np.int64)
            for k in range(0, 96, 32):
                acc = np.clip(
                    acc + A[:, k : k + 32].astype(np.int64) @ B[k : k + 32], S32_MIN, S32_MAX
                )
            assert np.array_equal(d_np, acc.astype(np.int32))
        else:
            assert np.array_equal(d_np, exact.astype(np.int32))  # wraps modulo 2^32
    assert run_chain("hopper", "m16n8k32.s32.s8.s8.s32", 64, -128, -128, "numpy").wrap == 64 * 16384


def test_int_layouts_are_the_ptx_8bit_formulas():
    from tensorcore_smt.probe import layouts as L

    for t in range(32):
        for i in range(16):
            assert L._int_a(4, 32)(t, i) == L._a_k32_8bit(t, i)
        for i in range(8):
            assert L._int_a(4, 16)(t, i) == L._a_k16_8bit(t, i)
            assert L._int_b(4)(t, i) == L._b_k32_8bit(t, i)
        for i in range(32):
            assert L._int_a(8, 64)(t, i) == L._a_k64_4bit(t, i)


def _vectors(arch: str, name: str) -> VectorFile:
    p = PRESETS[arch].instructions[name].params
    a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, 2, 1)
    vecs = [Vector([int(x) for x in a[i]], [int(x) for x in b[i]], int(c[i]), {}) for i in range(2)]
    # L (the clamp on every partial sum) is a belief about .satfinite forms only: a
    # wrap-around form does not read it and refuses it
    variants = [arch, f"{arch}[L=1]"] if p.int_clamp.value == "satfinite" else [arch]
    return predict(VectorFile(arch, name, variants, vecs))


PROBES = [
    ("turing", "m8n8k16.satfinite.s32.s8.u8.s32"),
    ("turing", "m8n8k32.s32.u4.s4.s32"),
    ("turing", "m8n8k128.s32.b1.b1.s32.xor.popc"),
    ("ampere", "m16n8k32.satfinite.s32.u8.s8.s32"),
    ("ampere", "m16n8k32.s32.s4.s4.s32"),
    ("ampere", "m16n8k256.s32.b1.b1.s32.and.popc"),
    ("hopper", "wgmma.m64n8k32.satfinite.s32.s8.u8"),
    ("blackwell", "tcgen05.m64n8k32.kind::i8.satfinite.s32.u8.s8"),
]


def test_probe_sources_spell_the_integer_forms():
    src = generate(_vectors("ampere", "m16n8k32.satfinite.s32.u8.s8.s32"))
    assert "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32" in src
    assert '"r"(rc[0])' in src  # s32 accumulators in integer registers
    src = generate(_vectors("ampere", "m16n8k256.s32.b1.b1.s32.and.popc"))
    assert "m16n8k256.row.col.s32.b1.b1.s32.and.popc" in src
    src = generate(_vectors("hopper", "wgmma.m64n8k32.s32.s8.s8"))
    assert "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8" in src and "p, 1, 1" not in src
    lay = layout_for(PRESETS["turing"].instructions["m8n8k32.s32.u4.s4.s32"])
    assert (lay.a.regs, lay.b.regs, lay.c.regs) == (1, 1, 2)


def _compile(tmp_path, forms) -> list[str]:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found: the integer probes are not compiled")
    bad = []
    for n, (arch, name) in enumerate(forms):
        src = generate(_vectors(arch, name), source_name=f"p{n}.cu")
        path = tmp_path / f"p{n}.cu"
        path.write_text(src)
        flag = re.search(r"// build:  nvcc (-arch=sm_\w+)", src).group(1)
        r = subprocess.run(
            ["nvcc", flag, "-cubin", str(path), "-o", str(path.with_suffix(".cubin"))],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0 or "warning" in r.stderr:
            bad.append(f"{arch} {name}: {r.stderr[-400:]}")
    return bad


def test_representative_integer_probes_compile(tmp_path):
    bad = _compile(tmp_path, [PROBES[3], PROBES[2], PROBES[6]])
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_integer_probes_compile(tmp_path):
    bad = _compile(tmp_path, PROBES)
    assert not bad, "\n".join(bad)


def test_diff_writes_vectors_that_simulate_and_probe(tmp_path):
    out = tmp_path / "v.json"
    r = run(
        "diff", "cdna3[int_clamp=satfinite]", "cdna3", "--instr", "v_mfma_i32_4x4x4_16b_i8",
        "--solver", "z3", "--out", str(out), "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    vf = json.loads(out.read_text())
    row = vf["vectors"][0]
    assert row["predicted"]["cdna3"] != row["predicted"]["cdna3[int_clamp=satfinite]"]
    r = run("simulate", "--arch", "cdna3", "--instr", "v_mfma_i32_4x4x4_16b_i8",
            "--a", ",".join(row["a"]), "--b", ",".join(row["b"]), "--c", row["c"])  # fmt: skip
    assert r.exit_code == 0 and f"d = {row['predicted']['cdna3']}" in r.output
    r = run("probe", str(out), "--out", str(tmp_path / "p.hip"))
    assert r.exit_code == 0, r.output
    src = (tmp_path / "p.hip").read_text()
    assert "__builtin_amdgcn_mfma_i32_4x4x4i8(av, bv, acc, 0, 0, 0)" in src
    assert "typedef int __attribute__((ext_vector_type(4))) CT;" in src


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--a", "1.0," + ",".join(["0"] * 15)], "is not an integer"),
        (["--a", ",".join(["200"] * 16)], "outside s8's range -128..127"),
        (["--sa", "0x7f", "--sb", "0x7f"], "takes no scale factors"),
    ],
)
def test_bad_integer_input_is_one_line_exit_2(args, needle):
    base = {"--a": ",".join(["-128"] * 16), "--b": ",".join(["1"] * 16), "--c": "0"}
    extra = dict(zip(args[::2], args[1::2]))
    base.update(extra)
    flat = [x for kv in base.items() for x in kv]
    r = run("simulate", "--arch", "hopper", "--instr", "m16n8k16.s32.s8.s8.s32", *flat)
    assert r.exit_code == 2 and needle in r.output and len(r.output.strip().splitlines()) == 1


def test_s4_range_and_float_arrays_are_refused_by_the_api():
    name = "m16n8k32.s32.s4.s4.s32"
    with pytest.raises(UserError, match="outside s4's range -8..7"):
        api.simulate("ampere", name, [[-9] + [0] * 31], [[0] * 32], [0])
    with pytest.raises(UserError, match="does not fit in 4-bit s4"):
        api.simulate("ampere", name, [[16] + [0] * 31], [[0] * 32], [0])
    with pytest.raises(UserError, match="not floats"):
        api.simulate("ampere", name, np.zeros((1, 32)), [[0] * 32], [0])
    r = run("simulate", "--arch", "ampere", "--instr", name, "--a", ",".join(["8"] * 32),
            "--b", ",".join(["0"] * 32), "--c", "0")  # fmt: skip
    assert r.exit_code == 2 and "a[0]: 8 is outside s4's range -8..7" in r.output


def test_list_shows_each_integer_instruction_with_its_source():
    r = run("list", "archs", "--arch", "cdna3")
    assert r.exit_code == 0
    lines = [x for x in r.output.splitlines() if "INTEGER" in x]
    assert len(lines) == 5 and all("(AMD CDNA3 ISA" in x for x in lines)
    r = run("list", "archs", "--arch", "hopper", "--json")
    data = json.loads(r.output)["archs"]["hopper"]
    ints = [n for n, p in data["instructions"].items() if p["algorithm"] == "integer"]
    assert "m16n8k32.satfinite.s32.s8.s8.s32" in ints and "m16n8k32.s32.s8.s8.s32" in ints
    assert all(data["sources"][n].startswith("PTX ISA") for n in ints)


def test_list_shows_the_amd_integer_forms_with_their_sources():
    """RDNA3: 16 iu8/iu4 forms (4 sign pairs, clamp or not); RDNA4 adds 8 of 16x16x32 iu4;
    CDNA4: CDNA3's five i8 MFMA and its two new shapes."""
    for arch, n, src in (
        ("rdna3", 16, "AMD RDNA"),
        ("rdna4", 24, "AMD RDNA"),
        ("cdna4", 7, "AMD CDNA"),
    ):
        r = run("list", "archs", "--arch", arch)
        lines = [x for x in r.output.splitlines() if "INTEGER" in x]
        assert r.exit_code == 0 and len(lines) == n and all(f"({src}" in x for x in lines)
    assert "v_wmma_i32_16x16x32_iu4_u4_u4_clamp" not in PRESETS["rdna3"].instructions
    p = PRESETS["cdna4"].instructions["v_mfma_i32_32x32x32_i8"].params
    assert (p.a_fmt, p.K, p.int_clamp) == (Format.S8, 32, IntClamp.WRAP)


def test_integer_formats_need_the_integer_algorithm():
    with pytest.raises(ValueError, match="integer format"):
        parse_variant("hopper[algorithm=fda]").params("m16n8k32.s32.s8.s8.s32")
    with pytest.raises(ValueError, match="b1 operands"):
        parse_variant("ampere[bit_op=mul]").params("m16n8k128.s32.b1.b1.s32.and.popc")
