"""Block-scaled mma.sync of sm_120a (PTX `.block_scale`; MMA-Sim §IV-E): scale factors as
inputs of the model.

- every block-scaled rtx-blackwell form against MMA-Sim 2.1.1 (`MMABlockScale`: ST-FDPA
  for mxf8f6f4, GST-FDPA for mxf4 / mxf4nvf4), bit for bit on random rows with random
  scale factors (2,000 rows here, 10^5 in the slow run);
- the interpreters agree with scale factors: concrete vs vector on mixture rows, the
  symbolic DAG (through z3) vs concrete on single rows;
- the API: no scales means scales of 1; scale factors to an unscaled unit, or of the
  wrong shape, are user errors; the GDFS parameters are checked.
"""

from __future__ import annotations

import numpy as np
import pytest
import z3

from tensorcore_smt.api import simulate, simulate_one, simulate_params
from tensorcore_smt.bv.symbolic import SymbolicBackend
from tensorcore_smt.bv.to_z3 import to_z3
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format
from tensorcore_smt.model import dot_add
from tensorcore_smt.model.params import Algorithm
from tensorcore_smt.spec.presets import PRESETS

ARCH = "rtx-blackwell"


def block_scaled(arch: str) -> list[str]:
    """The block-scaled instructions of `arch` (those that take scale factors)."""
    return [n for n, i in PRESETS[arch].instructions.items() if i.params.scale_fmt is not None]


NAMES = block_scaled(ARCH)
# every block-scaled form: rtx-blackwell's mma.sync and blackwell's tcgen05.mma
FORMS = [(ARCH, n) for n in NAMES] + [("blackwell", n) for n in block_scaled("blackwell")]
IDS = [f"{a}:{n}".replace("::", "-") for a, n in FORMS]
MXF4 = "m16n8k64.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"
NVF4 = "m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"
MXF8 = "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e2m1.f32.ue8m0"


def _params(name: str, arch: str = ARCH):
    return PRESETS[arch].instructions[name].params


def scaled_rows(rng: np.random.Generator, p, n: int):
    """Random rows for a block-scaled unit: random operand bits; scale factors near 1
    (ue8m0 127 +- 20) with a fifth fully random (NaN, extremes; every ue4m3 pattern,
    sign bit included); c near the products' magnitude, random, +-0 or special."""
    a = rng.integers(0, 1 << p.a_fmt.spec.storage, (n, p.K), dtype=np.uint64)
    b = rng.integers(0, 1 << p.b_fmt.spec.storage, (n, p.K), dtype=np.uint64)
    shape = (n, p.n_scales)

    def scales() -> np.ndarray:
        full = rng.integers(0, 256, shape)
        if p.scale_fmt == Format.UE4M3:
            return full.astype(np.uint64)
        near = 127 + rng.integers(-20, 21, shape)
        return np.where(rng.random(shape) < 0.8, near, full).astype(np.uint64)

    sa, sb = scales(), scales()
    c = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    exp = rng.integers(100, 160, n).astype(np.uint64) << np.uint64(23)
    near = (c & np.uint64(0x807FFFFF)) | exp
    pick = rng.random(n)
    c = np.where(pick < 0.6, near, c)
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000], dtype=np.uint64)
    c = np.where(pick > 0.9, specials[rng.integers(0, len(specials), n)], c)
    return a, b, c.astype(np.uint64), sa, sb


def test_forms_listed():
    """The PTX forms MMA-Sim lists for sm_120 (25 mxf8f6f4 type pairs, mxf4, mxf4nvf4
    with 2X ue8m0 and 4X ue8m0 / ue4m3), each with its algorithm and block."""
    assert len(NAMES) == 29
    assert _params(MXF8).algorithm == Algorithm.FDA and _params(MXF8).scale_block == 32
    assert _params(MXF4).algorithm == Algorithm.GDFS and _params(MXF4).n_scales == 2
    p = _params(NVF4)
    assert (p.algorithm, p.G, p.F, p.e_zero, p.n_scales) == (Algorithm.GDFS, 16, 35, -139, 4)
    assert p.scale_fmt == Format.UE4M3


def _against_mmasim(arch: str, name: str, rows: int, seed: int) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("mmasim")
    from tensorcore_smt.validation import mmasim

    p = _params(name, arch)
    op = mmasim.make_op(arch, name)
    assert op is not None and op.k == p.K
    rng = np.random.default_rng(seed)
    step = 20000
    for lo in range(0, rows, step):
        a, b, c, sa, sb = scaled_rows(rng, p, min(step, rows - lo))
        ours = simulate_params(p, a, b, c, None, sa, sb)
        theirs = mmasim.run(op, p, a, b, c, sa, sb)
        bad = np.nonzero(ours != theirs)[0]
        detail = [
            f"a={[hex(int(x)) for x in a[i]]} b={[hex(int(x)) for x in b[i]]} c={int(c[i]):#x}"
            f" sa={[hex(int(x)) for x in sa[i]]} sb={[hex(int(x)) for x in sb[i]]}"
            f" ours={int(ours[i]):#x} mmasim={int(theirs[i]):#x}"
            for i in bad[:2]
        ]
        assert len(bad) == 0, f"{name}: {len(bad)} rows differ: {detail}"


@pytest.mark.parametrize("arch,name", FORMS, ids=IDS)
def test_matches_mmasim(arch, name):
    _against_mmasim(arch, name, 2000, FORMS.index((arch, name)) + 7100)


@pytest.mark.slow
@pytest.mark.parametrize("arch,name", FORMS, ids=IDS)
def test_matches_mmasim_large(arch, name):
    _against_mmasim(arch, name, 100_000, FORMS.index((arch, name)) + 9100)


def test_tcgen05_forms():
    """blackwell's tcgen05.mma .block_scale forms run the sm_120a arithmetic (MMA-Sim
    sim.TCGen05MMABlockScale); any N and M = 128 name one of them; no probe yet."""
    from tensorcore_smt.spec.presets import parse_variant
    from tensorcore_smt.validation.vectors import VectorFile

    tc = block_scaled("blackwell")
    assert len(tc) == 29
    name = "tcgen05.m128n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.ue4m3"
    assert _params(name, "blackwell") == _params(NVF4)
    got = parse_variant("blackwell").instruction(name.replace("m128n8", "m128n256"))
    assert got.name == name
    from tensorcore_smt.probe.cuda import generate

    vf = VectorFile("blackwell", name, [], [])
    with pytest.raises(UserError, match="tcgen05 .block_scale forms is not supported yet"):
        generate(vf)


def test_rows_are_informative():
    """The random rows are not dominated by NaNs, and the scale factors change d."""
    p = _params(NVF4)
    a, b, c, sa, sb = scaled_rows(np.random.default_rng(5), p, 2000)
    d = simulate_params(p, a, b, c, None, sa, sb)
    d1 = simulate_params(p, a, b, c)
    assert (d == 0x7FFFFFFF).mean() < 0.2
    assert (d != d1).mean() > 0.5


@pytest.mark.parametrize("name", [MXF8, MXF4, NVF4], ids=["mxf8f6f4", "mxf4", "nvf4"])
def test_concrete_matches_vector(name):
    p = _params(name)
    a, b, c, sa, sb = scaled_rows(np.random.default_rng(11), p, 40)
    vec = simulate_params(p, a, b, c, None, sa, sb)
    for i in range(len(c)):
        want = simulate_one(
            p,
            [int(x) for x in a[i]],
            [int(x) for x in b[i]],
            int(c[i]),
            [int(x) for x in sa[i]],
            [int(x) for x in sb[i]],
        )
        assert int(vec[i]) == want, (name, i)


@pytest.mark.parametrize("name", [MXF8, MXF4, NVF4], ids=["mxf8f6f4", "mxf4", "nvf4"])
def test_symbolic_matches_concrete(name):
    """The model with symbolic a, b, c and scale factors, evaluated by z3 on fixed inputs."""
    p = _params(name)
    sbk = SymbolicBackend()
    wa, wc, ws = p.a_fmt.spec.storage, p.c_fmt.spec.storage, p.scale_fmt.spec.storage
    wb = p.b_fmt.spec.storage
    av = [sbk.var(f"a{k}", wa) for k in range(p.K)]
    bv = [sbk.var(f"b{k}", wb) for k in range(p.K)]
    sav = [sbk.var(f"sa{i}", ws) for i in range(p.n_scales)]
    sbv = [sbk.var(f"sb{i}", ws) for i in range(p.n_scales)]
    d = dot_add(av, bv, sbk.var("c", wc), p, sav, sbv)
    (expr,), zvars = to_z3([d.v])
    a, b, c, sa, sb = scaled_rows(np.random.default_rng(3), p, 2)
    for i in range(2):
        env = {f"a{k}": (int(a[i][k]), wa) for k in range(p.K)}
        env |= {f"b{k}": (int(b[i][k]), wb) for k in range(p.K)}
        env |= {f"sa{j}": (int(sa[i][j]), ws) for j in range(p.n_scales)}
        env |= {f"sb{j}": (int(sb[i][j]), ws) for j in range(p.n_scales)}
        env["c"] = (int(c[i]), wc)
        subs = [(zvars[k], z3.BitVecVal(v, w)) for k, (v, w) in env.items() if k in zvars]
        got = z3.simplify(z3.substitute(expr, *subs))
        want = simulate_one(
            p,
            [int(x) for x in a[i]],
            [int(x) for x in b[i]],
            int(c[i]),
            [int(x) for x in sa[i]],
            [int(x) for x in sb[i]],
        )
        assert z3.is_bv_value(got) and got.as_long() == want, (name, i)


def test_scale_factors_scale_the_sum():
    """Exact small sums: doubling every scale of a (ue8m0 127 -> 128) doubles d, and
    the default (no scale factors) is scale 1 (MMA-Sim §IV-E step 4: the scales multiply)."""
    p = _params(MXF4)
    one = 0x2  # e2m1 1.0
    a = np.full((1, 64), one, dtype=np.uint64)
    b = np.full((1, 64), one, dtype=np.uint64)
    c = np.zeros(1, dtype=np.uint64)
    ones = np.full((1, 2), 127, dtype=np.uint64)
    twos = np.full((1, 2), 128, dtype=np.uint64)
    assert simulate_params(p, a, b, c)[0] == 0x42800000  # 64.0
    assert simulate_params(p, a, b, c, None, ones, ones)[0] == 0x42800000
    assert simulate_params(p, a, b, c, None, twos, ones)[0] == 0x43000000  # 128.0
    nan = np.full((1, 2), 0xFF, dtype=np.uint64)
    assert simulate_params(p, a, b, c, None, nan, ones)[0] == 0x7FFFFFFF


def test_api_errors():
    p = _params(NVF4)
    a = np.zeros((2, 64), dtype=np.uint64)
    c = np.zeros(2, dtype=np.uint64)
    with pytest.raises(UserError, match="sa and sb must both have shape"):
        simulate_params(p, a, a, c, None, np.zeros((2, 2), np.uint64), np.zeros((2, 2), np.uint64))
    with pytest.raises(UserError, match="give both"):
        simulate_params(p, a, a, c, None, np.zeros((2, 4), np.uint64), None)
    with pytest.raises(UserError, match="takes no scale factors"):
        f16 = np.zeros((2, 16), dtype=np.uint64)
        simulate("hopper", None, f16, f16, c, None, np.zeros((2, 1), np.uint64), f16[:, :1])
    with pytest.raises(UserError, match="does not fit"):
        big = np.full((2, 4), 0x100, np.uint64)
        simulate_params(p, a, a, c, None, big, big)


def test_params_checked():
    p = _params(NVF4)
    with pytest.raises(ValueError, match="not a multiple of the GDFS group size"):
        p.with_(G=24)
    with pytest.raises(ValueError, match="needs scale_fmt"):
        p.with_(scale_fmt=None)
    with pytest.raises(ValueError, match="scale_fmt"):
        p.with_(algorithm=Algorithm.SFMA)
    with pytest.raises(ValueError, match="scale_block=0 is out of range"):
        p.with_(scale_block=0)
    with pytest.raises(ValueError, match="scale_fmt=fp16 is not allowed"):
        p.with_(scale_fmt=Format.FP16)


# --- CLI and vector files -----------------------------------------------------------


def _cli(*args: str):
    from click.testing import CliRunner

    from tensorcore_smt.cli import main

    return CliRunner().invoke(main, list(args))


def test_cli_simulate_scales():
    ones = ",".join(["2"] * 64)  # e2m1 1.0
    base = ["simulate", "--arch", ARCH, "--instr", NVF4, "--a", ones, "--b", ones, "--c", "0"]
    r = _cli(*base, "--json")
    assert r.exit_code == 0 and '"d": "0x42800000"' in r.output  # scales default to 1
    r = _cli(*base, "--sa", "38,38,38,40", "--sb", "38,38,38,38", "--json")
    assert r.exit_code == 0, r.output
    assert '"d": "0x42a00000"' in r.output and '"sa": ["0x38"' in r.output  # 16*(1+1+1+2)
    for extra, msg in (
        (["--sa", "38"], "--sa and --sb go together"),
        (["--sa", "38", "--sb", "38"], "sa: expected 4 entries"),
        (["--sa", "38,38,38,1ff", "--sb", "38,38,38,38"], "sa[3]"),
    ):
        r = _cli(*base, *extra)
        assert r.exit_code == 2 and msg in r.output, r.output
    r = _cli("simulate", "--arch", "volta", "--a", "0,0,0,0", "--b", "0,0,0,0", "--c", "0")
    assert r.exit_code == 0
    r = _cli(
        *["simulate", "--arch", "volta", "--a", "0,0,0,0", "--b", "0,0,0,0", "--c", "0"],
        "--sa",
        "7f",
        "--sb",
        "7f",
    )
    assert r.exit_code == 2 and "takes no scale factors" in r.output


def test_cli_simulate_jsonl_scales(tmp_path):
    import json

    row = {"a": ["2"] * 64, "b": ["2"] * 64, "c": "0"}
    src = tmp_path / "rows.jsonl"
    src.write_text(
        json.dumps({**row, "sa": ["7f", "80"], "sb": ["7f", "7f"]}) + "\n" + json.dumps(row) + "\n"
    )
    r = _cli("simulate", "--arch", ARCH, "--instr", MXF4, "--vectors", str(src))
    assert r.exit_code == 0, r.output
    ds = [json.loads(x)["d"] for x in r.output.splitlines()]
    assert ds == ["0x42c00000", "0x42800000"]  # 32*1 + 32*2, then 64
    src.write_text(json.dumps({**row, "sa": ["7f"], "sb": ["7f", "7f"]}) + "\n")
    r = _cli("simulate", "--arch", ARCH, "--instr", MXF4, "--vectors", str(src))
    assert r.exit_code == 2 and "sa: expected a list of 2" in r.output


def test_vector_file_carries_scales(tmp_path):
    from tensorcore_smt.validation import vectors as vx

    vec = vx.Vector([2] * 64, [2] * 64, 0, {}, sa=[0x7F, 0x80], sb=[0x7F, 0x7F])
    plain = vx.Vector([2] * 64, [2] * 64, 0, {})
    vf = vx.VectorFile(ARCH, MXF4, [ARCH], [vec, plain])
    vf = vx.predict(vf)
    assert [v.predicted[ARCH] for v in vf.vectors] == [0x42C00000, 0x42800000]
    path = tmp_path / "v.json"
    vx.save(vf, path)
    back = vx.load(path)
    assert back.vectors[0].sa == [0x7F, 0x80] and back.vectors[1].sa is None
    assert back.vectors[0].key() != back.vectors[1].key()
    assert not vx.stale_predictions(back)
    with pytest.raises(UserError, match="CSV has no columns for scale factors"):
        vx.to_csv(back)
    bad = vx.VectorFile(
        "hopper",
        "m16n8k16.f32.f16.f16.f32",
        [],
        [vx.Vector([0] * 16, [0] * 16, 0, {}, sa=[1], sb=[1])],
    )
    with pytest.raises(UserError, match=r"vectors\[0\].sa: this instruction takes no scale"):
        bad.validate()


# --- property, query inputs and probes ------------------------------------------------


def test_block_scale_property_binds_with_scale_inputs():
    """The property asks on the first GDFS form; its queries take the scale factors as
    inputs (sa0.., sb0..) beside a, b, c."""
    from tensorcore_smt.smt.library import get

    prop = get("block-scale")
    bound = prop.bind(ARCH)
    assert [s.id for s, _ in bound] == [
        "after-group-sum-vs-per-product",
        "F-vs-F-minus-1",
        "group-16-vs-8",
    ]
    q = bound[0][1]
    assert q.instruction == MXF4
    names = [o.name for o in q.operands]
    assert names[-4:] == ["sa0", "sa1", "sb0", "sb1"]
    assert q.params[1].algorithm == Algorithm.FDA and q.params[1].scale_fmt == Format.UE8M0
    assert prop.not_applicable(PRESETS["hopper"]) is not None


def _scaled_file(name: str, n: int = 3):
    from tensorcore_smt.validation import vectors as vx

    p = _params(name)
    a, b, c, sa, sb = scaled_rows(np.random.default_rng(17), p, n)
    vecs = [
        vx.Vector(
            [int(x) for x in a[i]],
            [int(x) for x in b[i]],
            int(c[i]),
            {},
            sa=[int(x) for x in sa[i]],
            sb=[int(x) for x in sb[i]],
        )
        for i in range(n)
    ]
    return vx.predict(vx.VectorFile(ARCH, name, [ARCH], vecs))


@pytest.mark.parametrize("name", [MXF8, MXF4, NVF4], ids=["mxf8f6f4", "mxf4", "nvf4"])
def test_probe_passes_the_scale_factors(name, tmp_path):
    """The probe runs the block-scaled form itself with each vector's scale factors in
    bytes 0.. of the scale registers (the other bytes 1), and nvcc compiles it for sm_120a."""
    import shutil
    import subprocess

    from tensorcore_smt.probe.cuda import generate, scale_word

    vf = _scaled_file(name)
    p = vf.params
    src = generate(vf, source_name="p.cu")
    assert "mma.sync.aligned." + name.split(".")[0] + ".row.col.kind::" in src
    assert ".block_scale.scale_vec::" in src and "nvcc -arch=sm_120a" in src
    words = ", ".join(f"0x{scale_word(v.sa, p):08x}u" for v in vf.vectors)
    assert f"VSA[NV] = {{{words}}};" in src
    one = 0x7F if p.scale_fmt == Format.UE8M0 else 0x38
    assert scale_word(None, p) == one * 0x01010101
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    (tmp_path / "p.cu").write_text(src)
    r = subprocess.run(
        ["nvcc", "-arch=sm_120a", "-c", "p.cu", "-o", "p.o"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "warning" not in r.stderr


def test_fp4_packed_layout_is_a_bijection():
    """m16n8k64 .e2m1 (kind::mxf4 / mxf4nvf4) packs 8 elements a register: every element
    of A (16 x 64) and B (64 x 8) has exactly one holder."""
    from tensorcore_smt.probe.layouts import layout_for
    from tensorcore_smt.spec.presets import parse_variant

    lay = layout_for(parse_variant(ARCH).instruction(MXF4))
    for frag, (rows, cols) in ((lay.a, (16, 64)), (lay.b, (64, 8))):
        assert frag.elem_bits == 4 and frag.regs == (4 if frag is lay.a else 2)
        cells = [rc for elems in frag.place for rc in elems]
        assert sorted(cells) == [(r, c) for r in range(rows) for c in range(cols)]


@pytest.mark.slow
def test_find_block_scale_then_probe(tmp_path):
    """`tcsmt find --property block-scale --arch rtx-blackwell --out v.json`, then `tcsmt
    probe v.json --out p.cu`: the witnesses carry scale factors, the preset's predictions
    are MMA-Sim's, and the probe compiles for sm_120a."""
    import json
    import shutil
    import subprocess

    from tensorcore_smt.validation import vectors as vx

    out = tmp_path / "v.json"
    r = _cli("find", "--property", "block-scale", "--arch", ARCH, "--out", str(out), "--json")
    assert r.exit_code == 0, r.output[-2000:]
    assert all(q["answer"] == "sat" for q in json.loads(r.output)["queries"])
    vf = vx.load(out)
    assert vf.vectors and all(v.sa is not None for v in vf.vectors)
    pytest.importorskip("mmasim")
    from tensorcore_smt.validation import mmasim

    p = vf.params
    rows = [
        np.array(x, dtype=np.uint64) for x in zip(*[(v.a, v.b, v.sa, v.sb) for v in vf.vectors])
    ]
    c = np.array([v.c for v in vf.vectors], dtype=np.uint64)
    theirs = mmasim.run(
        mmasim.make_op(ARCH, vf.instruction), p, rows[0], rows[1], c, rows[2], rows[3]
    )
    assert [int(x) for x in theirs] == [v.predicted[ARCH] for v in vf.vectors]
    r = _cli("probe", str(out), "--out", str(tmp_path / "p.cu"))
    assert r.exit_code == 0, r.output
    if shutil.which("nvcc"):
        cc = subprocess.run(
            ["nvcc", "-arch=sm_120a", "-c", "p.cu", "-o", "p.o"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert cc.returncode == 0, cc.stderr[-2000:]
