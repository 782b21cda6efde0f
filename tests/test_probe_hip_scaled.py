"""HIP probes for CDNA4's block-scaled MFMA forms (v_mfma_scale_f32_16x16x128_f8f6f4_*,
_32x32x64_f8f6f4_*): every k of row 0 of A / column 0 of B sits in the lanes and elements
the rule of probe/mfma.py `_scaled_layout` names, the generated fill statements pack each
format's bit patterns densely and decode back to the vector, the vector's scale factors
reach the lanes that supply them, and the builtin gets the formats' cbsz / blgp codes.
No hipcc here: these check the generated source, not a compiled program."""

from __future__ import annotations

import random
import re

import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main
from tensorcore_smt.probe.hip import generate_hip
from tensorcore_smt.probe.mfma import all_mfma_layouts
from tensorcore_smt.spec.presets import PRESETS
from tensorcore_smt.validation.vectors import Vector, VectorFile, predict, save

SCALED = {
    name: lay
    for (arch, name), lay in all_mfma_layouts().items()
    if arch == "cdna4" and name.startswith("v_mfma_scale_")
}
CODE = {"fp8": 0, "bf8": 1, "fp6": 2, "bf6": 3, "fp4": 4}
"""The operand-format codes the builtin's cbsz / blgp take, by the name's type."""
BITS = {"fp8": 8, "bf8": 8, "fp6": 6, "bf6": 6, "fp4": 4}


def _types(name: str) -> tuple[str, str]:
    ta, tb = name.rsplit("_", 2)[1:]
    return ta, tb


def _expected(M: int, K: int, bits: int, k: int) -> tuple[int, int]:
    """(lane, element) holding k of row 0 (column 0), written out per case: fp8 in runs
    of 16 (the blog's 32x32x64 fp8 example), fp6 / fp4 in runs of 32."""
    if bits == 8:
        half = K // 2  # 32x32x64: 32; 16x16x128: 64
        return M * ((k % half) // 16), 16 * (k // half) + k % 16
    return M * (k // 32), k % 32


def _scaled_file(name: str, n: int = 2, seed: int = 0, scales: bool = True) -> VectorFile:
    """`n` random vectors of `name`, with random E8M0 scale factors (0x70..0x8f) or none."""
    rng = random.Random(seed)
    p = PRESETS["cdna4"].instructions[name].params
    vecs = []
    for _ in range(n):
        sa = [rng.randrange(0x70, 0x90) for _ in range(p.n_scales)] if scales else None
        sb = [rng.randrange(0x70, 0x90) for _ in range(p.n_scales)] if scales else None
        vecs.append(
            Vector(
                [rng.getrandbits(p.a_fmt.spec.storage) for _ in range(p.K)],
                [rng.getrandbits(p.b_fmt.spec.storage) for _ in range(p.K)],
                rng.getrandbits(32),
                {},
                sa=sa,
                sb=sb,
            )
        )
    return predict(VectorFile("cdna4", name, ["cdna4"], vecs))


_PUT = re.compile(r"put\(buf_([ab]), (\d+), (\d+), ([ab])\[(\d+)\] & (0x[0-9a-f]+)ull\);")
_CASE = re.compile(r"^\s*case (\d+):$")
_SCALE = re.compile(r"scale_([ab]) = s([ab])\[(\d+)\];")


def _per_lane(src: str) -> dict[int, list[str]]:
    """The statements under each `case LANE:` of the kernel's switches, in order."""
    out: dict[int, list[str]] = {}
    lane = None
    for line in src.splitlines():
        m = _CASE.match(line)
        if m:
            lane = int(m.group(1))
        elif line.strip() in ("break;", "default:"):
            lane = None
        elif lane is not None:
            out.setdefault(lane, []).append(line.strip())
    return out


def _run_fills(src: str, vec: Vector, nbytes: int) -> dict[tuple[int, str], bytes]:
    """Execute the generated put() statements for one vector: each lane's A and B operand
    bytes (a tiny interpreter of the fill code, bit-granular as the device helper)."""
    bufs: dict[tuple[int, str], bytearray] = {}
    for lane, stmts in _per_lane(src).items():
        for s in stmts:
            m = _PUT.match(s)
            if not m:
                continue
            which, at, bits, src_op, k, mask = m.groups()
            assert which == src_op
            v = (vec.a if which == "a" else vec.b)[int(k)] & int(mask, 16)
            buf = bufs.setdefault((lane, which), bytearray(nbytes))
            for i in range(int(bits)):
                if (v >> i) & 1:
                    pos = int(at) + i
                    assert pos < 8 * nbytes
                    buf[pos >> 3] |= 1 << (pos & 7)
    return {key: bytes(b) for key, b in bufs.items()}


def test_every_scaled_form_has_a_layout():
    """25 format pairs in each of the two shapes, all in all_mfma_layouts."""
    names = [n for n in PRESETS["cdna4"].instructions if n.startswith("v_mfma_scale_")]
    assert sorted(names) == sorted(SCALED) and len(names) == 50


@pytest.mark.parametrize("name", sorted(SCALED))
def test_row_0_and_column_0_sit_where_the_rule_says(name):
    lay = SCALED[name]
    ta, tb = _types(name)
    assert (lay.bits("a"), lay.bits("b")) == (BITS[ta], BITS[tb])
    assert lay.kpl == 32 and lay.reg_bytes() == 32 and lay.blocks == 1
    for k in range(lay.K):
        assert lay.holders("a", k) == [_expected(lay.M, lay.K, BITS[ta], k)]
        assert lay.holders("b", k) == [_expected(lay.N, lay.K, BITS[tb], k)]
    # every lane's row (column) is lane % M, and its elements fit the 8-dword operand
    for lane in range(64):
        assert {r for _, r, _ in lay.a[lane]} == {lane % lay.M}
        assert {c for _, _, c in lay.b[lane]} == {lane % lay.N}
    assert 32 * max(BITS[ta], BITS[tb]) <= 8 * lay.reg_bytes()


def test_the_blog_examples_of_32x32x64():
    """fp8: lane 0 holds k 0..15 then 32..47, lane 32 k 16..31 then 48..63; fp4: lane 32
    holds k 32..63 in order."""
    fp8 = SCALED["v_mfma_scale_f32_32x32x64_f8f6f4_fp8_fp8"]
    assert [k for _, _, k in fp8.a[0]] == [*range(16), *range(32, 48)]
    assert [k for _, k, _ in fp8.b[32]] == [*range(16, 32), *range(48, 64)]
    fp4 = SCALED["v_mfma_scale_f32_32x32x64_f8f6f4_fp4_fp4"]
    assert [k for _, _, k in fp4.a[32]] == list(range(32, 64))
    assert fp4.a[32 + 7][0] == (0, 7, 32)


@pytest.mark.parametrize("name", sorted(SCALED))
def test_packed_bits_decode_back_to_the_vector(name):
    """Run the generated fill statements, then read each lane's operand as the format
    packs it: element e at bits [e b, (e + 1) b); every k of row 0 / column 0 comes back,
    every other bit of the 32-byte operand is zero."""
    lay = SCALED[name]
    vf = _scaled_file(name, n=1, seed=len(name))
    vec = vf.vectors[0]
    src = generate_hip(vf)
    bufs = _run_fills(src, vec, lay.reg_bytes())
    got = {"a": [None] * lay.K, "b": [None] * lay.K}
    for (lane, which), buf in bufs.items():
        bits = lay.bits(which)
        word = int.from_bytes(buf, "little")
        table = lay.a if which == "a" else lay.b
        for e, (_, x, y) in enumerate(table[lane]):
            k = y if which == "a" else x
            v = (word >> (e * bits)) & ((1 << bits) - 1)
            if (which == "a" and x == 0) or (which == "b" and y == 0):
                assert got[which][k] is None
                got[which][k] = v
            else:
                assert v == 0
        assert word >> (32 * bits) == 0  # nothing past the format's 32 elements
    assert got["a"] == vec.a and got["b"] == vec.b


def test_fp4_and_fp6_pack_as_their_bit_patterns():
    """fp4: k even in the low nibble of a byte (the blog's fp4x2); fp6: four elements in
    three bytes, element 0 in the low six bits."""
    name = "v_mfma_scale_f32_16x16x128_f8f6f4_fp4_bf6"
    lay = SCALED[name]
    vf = _scaled_file(name, n=1, seed=3)
    vec = vf.vectors[0]
    bufs = _run_fills(generate_hip(vf), vec, lay.reg_bytes())
    a16 = bufs[(16, "a")]  # row 0, k 32..63
    assert a16[0] == vec.a[32] | vec.a[33] << 4 and a16[15] == vec.a[62] | vec.a[63] << 4
    assert a16[16:] == bytes(16)
    b0 = bufs[(0, "b")]  # column 0, k 0..31, e3m2
    e0, e1, e2, e3 = vec.b[:4]
    assert b0[0] == e0 | (e1 & 0x3) << 6
    assert b0[1] == e1 >> 2 | (e2 & 0xF) << 4
    assert b0[2] == e2 >> 4 | e3 << 2
    assert b0[24:] == bytes(8)


@pytest.mark.parametrize(
    "name",
    ["v_mfma_scale_f32_16x16x128_f8f6f4_fp8_fp4", "v_mfma_scale_f32_32x32x64_f8f6f4_bf6_bf8"],
)
def test_scale_factors_reach_the_lanes_of_their_blocks(name):
    """Block kb's scale factor of row 0 of A (column 0 of B) in lane M kb (N kb), in every
    byte of the word; the words per vector in VSA / VSB; lanes outside keep 2^0."""
    lay = SCALED[name]
    vf = _scaled_file(name, n=3, seed=7)
    n = vf.instr().params.n_scales
    assert n == lay.K // 32
    src = generate_hip(vf)
    sets = {
        (lane, m.group(1)): int(m.group(3))
        for lane, ss in _per_lane(src).items()
        for s in ss
        if (m := _SCALE.match(s)) and m.group(1) == m.group(2)
    }
    assert sets == {
        **{(lay.M * kb, "a"): kb for kb in range(n)},
        **{(lay.N * kb, "b"): kb for kb in range(n)},
    }
    for which, arr in (("a", "VSA"), ("b", "VSB")):
        m = re.search(rf"__constant__ unsigned {arr}\[NV \* NS\] = \{{(.*?)\}};", src, re.S)
        words = [int(w.rstrip("u"), 16) for w in m.group(1).replace("\n", " ").split(", ")]
        want = [s * 0x01010101 for v in vf.vectors for s in (v.sa if which == "a" else v.sb)]
        assert words == want
    assert f"static const int NS = {n};" in src
    assert "unsigned scale_a = 0x7f7f7f7fu, scale_b = 0x7f7f7f7fu;" in src
    unscaled = generate_hip(_scaled_file(name, n=2, scales=False))
    unit = r",\s*".join(["0x7f7f7f7fu"] * (2 * n))
    assert re.search(r"VSA\[NV \* NS\] = \{\s*" + unit + r"\};", unscaled)


@pytest.mark.parametrize("name", sorted(SCALED))
def test_builtin_and_format_codes(name):
    lay = SCALED[name]
    ta, tb = _types(name)
    shape = f"{lay.M}x{lay.N}x{lay.K}"
    assert lay.builtin == f"__builtin_amdgcn_mfma_scale_f32_{shape}_f8f6f4"
    assert lay.a_type == "int __attribute__((ext_vector_type(8)))"
    assert lay.acc_type == f"float __attribute__((ext_vector_type({lay.M * lay.N // 64})))"
    src = generate_hip(_scaled_file(name, n=1))
    call = f"{lay.builtin}(av, bv, acc, {CODE[ta]}, {CODE[tb]}, 0, scale_a, 0, scale_b);"
    assert src.count(call) == 1
    # no Python placeholder or None left in the source
    assert not re.search(r"\{[A-Za-z_][\w.]*\}|\bNone\b|\{\{|\}\}", src)
    assert "hipcc --offload-arch=gfx950" in src


def test_probe_command_writes_a_scaled_program(tmp_path):
    """`tcsmt probe` on a cdna4 vector file of a block-scaled form (with sa / sb)."""
    name = "v_mfma_scale_f32_16x16x128_f8f6f4_fp4_fp6"
    path = tmp_path / "v.json"
    save(_scaled_file(name, n=2), path)
    r = CliRunner().invoke(main, ["probe", str(path), "--out", str(tmp_path / "p.hip")])
    assert r.exit_code == 0, r.output
    assert "build: hipcc --offload-arch=gfx950 -o p p.hip" in r.output
    src = (tmp_path / "p.hip").read_text()
    assert "__builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(av, bv, acc, 4, 2, 0," in src
