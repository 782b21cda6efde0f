"""HIP probes for AMD MFMA instructions (cdna2 to cdna4): the operand tables of
probe/mfma.py are bijections that follow the AMD ISA's layout rule, every instruction
gets a program with a real clang builtin, and hipcc compiles them where it is installed
(Debian: `apt-get install hipcc libamdhip64-dev`, used with HIP_PLATFORM=amd)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache

import pytest
from click.testing import CliRunner
from test_probe import random_file

from tensorcore_smt.cli import main
from tensorcore_smt.errors import UserError
from tensorcore_smt.probe.hip import generate_hip
from tensorcore_smt.probe.mfma import all_mfma_layouts
from tensorcore_smt.probe.wmma import all_wmma_layouts
from tensorcore_smt.spec.presets import PRESETS
from tensorcore_smt.validation.vectors import save

HIPCC = shutil.which("hipcc")
LAYOUTS = all_mfma_layouts()
IDS = [f"{a}:{n}" for a, n in LAYOUTS]


@pytest.mark.parametrize("key", list(LAYOUTS), ids=IDS)
def test_operand_tables_are_bijections(key):
    lay = LAYOUTS[key]
    a = [x for lane in lay.a for x in lane]
    b = [x for lane in lay.b for x in lane]
    want_a = [(blk, i, k) for blk in range(lay.blocks) for i in range(lay.M) for k in range(lay.K)]
    want_b = [(blk, k, j) for blk in range(lay.blocks) for k in range(lay.K) for j in range(lay.N)]
    assert sorted(a) == want_a and sorted(b) == want_b
    for k in range(lay.K):
        lane, e = lay.a_lane(k)
        assert lay.a[lane][e] == (0, 0, k)
        lane, e = lay.b_lane(k)
        assert lay.b[lane][e] == (0, k, 0)
    assert lay.acc * 64 == lay.blocks * lay.M * lay.N


def test_layouts_match_the_isa_examples():
    """v_mfma_f32_32x32x8f16: A[i][k] in lane i + 32 (k // 4), element k % 4; the 4x4x4
    16-block form: block b's row i in lane i + 4 b; CDNA3's _Nb names give the blocks."""
    lay = LAYOUTS[("cdna2", "v_mfma_f32_32x32x8f16")]
    assert (lay.blocks, lay.kpl) == (1, 4)
    assert lay.a[32 + 5][3] == (0, 5, 7)
    lay = LAYOUTS[("cdna3", "v_mfma_f32_4x4x4_16b_f16")]
    assert lay.blocks == 16 and lay.a[4 * 9 + 2][1] == (9, 2, 1)
    for (_, name), lay in LAYOUTS.items():
        m = re.search(r"_(\d+)b_", name)
        if m:
            assert lay.blocks == int(m.group(1)), name
    assert LAYOUTS[("cdna2", "v_mfma_f32_32x32x4bf16")].kpl == 2  # bf16 without _1k
    assert LAYOUTS[("cdna3", "v_mfma_f32_32x32x8_bf16")].kpl == 4


def test_builtin_names():
    names = {k: lay.builtin for k, lay in LAYOUTS.items()}
    assert names[("cdna3", "v_mfma_f32_16x16x32_fp8_bf8")] == (
        "__builtin_amdgcn_mfma_f32_16x16x32_fp8_bf8"
    )
    assert names[("cdna3", "v_mfma_f32_16x16x8_xf32")] == "__builtin_amdgcn_mfma_f32_16x16x8_xf32"
    assert names[("cdna3", "v_mfma_f32_32x32x4_2b_bf16")] == (
        "__builtin_amdgcn_mfma_f32_32x32x4bf16_1k"
    )
    assert names[("cdna2", "v_mfma_f64_4x4x4f64")] == "__builtin_amdgcn_mfma_f64_4x4x4f64"


def test_every_mfma_instruction_has_a_probe():
    n = 0
    for arch in ("cdna2", "cdna3"):
        for name in PRESETS[arch].instructions:
            src = generate_hip(random_file(arch, name, n=1))
            assert "__builtin_amdgcn_mfma_" in src and "hip/hip_runtime.h" in src
            n += 1
    assert n == 59  # 49 floating-point forms and 10 v_mfma_i32_*i8


def test_probe_command_writes_hip(tmp_path):
    path = tmp_path / "v.json"
    save(random_file("cdna2", "v_mfma_f32_32x32x8f16", n=2), path)
    r = CliRunner().invoke(main, ["probe", str(path), "--out", str(tmp_path / "p.hip")])
    assert r.exit_code == 0, r.output
    assert "build: hipcc --offload-arch=gfx90a -o p p.hip" in r.output
    assert "__builtin_amdgcn_mfma_f32_32x32x8f16" in (tmp_path / "p.hip").read_text()
    r = CliRunner().invoke(main, ["probe", str(path), "--sm", "90a"])
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "gfx target" in lines[0]


@cache
def _cdna3_target() -> str:
    """gfx942 where the compiler knows it; LLVM before 17 (Debian 12's hipcc) has the
    same MFMA instructions as gfx940."""
    return "gfx942" if _builds("gfx942") else "gfx940"


def _env() -> dict:
    return dict(os.environ, HIP_PLATFORM="amd")


def _builds(target: str) -> bool:
    r = subprocess.run(
        [HIPCC, f"--offload-arch={target}", "-x", "hip", "-c", "-", "-o", os.devnull],
        input="__global__ void k() {}\n",
        capture_output=True,
        text=True,
        env=_env(),
    )
    return r.returncode == 0


def _compile(tmp_path, jobs: list[tuple[str, str]]) -> list[str]:
    failures = []
    for n, (arch, name) in enumerate(jobs):
        target = {"cdna1": "gfx908", "cdna2": "gfx90a"}.get(arch) or _cdna3_target()
        src = tmp_path / f"h{n}.hip"
        src.write_text(generate_hip(random_file(arch, name, n=2, seed=n), arch=target))
        r = subprocess.run(
            [HIPCC, f"--offload-arch={target}", "-c", str(src), "-o", str(src.with_suffix(".o"))],
            capture_output=True,
            text=True,
            env=_env(),
        )
        if r.returncode != 0:
            failures.append(f"{arch} {name} ({target}): {r.stderr.strip()[-600:]}")
    return failures


def _need_hipcc():
    if HIPCC is None:
        pytest.skip("hipcc not found (Debian: apt-get install hipcc libamdhip64-dev)")


def _representatives() -> list[tuple[str, str]]:
    """One instruction per (architecture, operand type, accumulator type)."""
    seen: dict[tuple, tuple[str, str]] = {}
    for (arch, name), lay in LAYOUTS.items():
        seen.setdefault((arch, lay.a_type, lay.acc_type), (arch, name))
    return sorted(seen.values())


def test_one_hip_probe_per_architecture_compiles(tmp_path):
    _need_hipcc()
    first: dict[str, tuple[str, str]] = {}
    for arch, name in _representatives():
        first.setdefault(arch, (arch, name))
    failures = _compile(tmp_path, sorted(first.values()))
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_representative_hip_probes_compile(tmp_path):
    _need_hipcc()
    failures = _compile(tmp_path, _representatives())
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_every_hip_probe_compiles(tmp_path):
    _need_hipcc()
    failures = _compile(tmp_path, sorted(LAYOUTS))
    assert not failures, "\n".join(failures)


# --- RDNA WMMA and V_DOT2 (wave32) --------------------------------------------------------

WMMA = all_wmma_layouts()


@pytest.mark.parametrize("key", list(WMMA), ids=[f"{a}:{n}" for a, n in WMMA])
def test_wmma_tables_cover_every_element_copies_times(key):
    """Each element of A and B in exactly `copies` (lane, element) slots (RDNA3: lanes l
    and l + 16 hold the same row; RDNA4: none twice), and the accumulator holds M x N."""
    lay = WMMA[key]
    a = sorted(x for lane in lay.a for x in lane)
    b = sorted(x for lane in lay.b for x in lane)
    want_a = sorted((0, i, k) for i in range(lay.M) for k in range(lay.K)) * 1
    want_b = sorted((0, k, j) for k in range(lay.K) for j in range(lay.N))
    assert a == sorted(want_a * lay.copies) and b == sorted(want_b * lay.copies)
    assert len(lay.a) == lay.wave and lay.acc * lay.wave == lay.M * lay.N
    for k in range(lay.K):
        assert len(lay.holders("a", k)) == lay.copies == len(lay.holders("b", k))


def test_wmma_layouts_match_the_isa_rules():
    """RDNA3: lane 16 + i holds row i of A with k = 0..15 (a copy of lane i); RDNA4: lane
    16 + i holds row i with k = 8..15; builtins as clang spells them."""
    r3 = WMMA[("rdna3", "v_wmma_f32_16x16x16_f16")]
    assert r3.a[16 + 5][9] == (0, 5, 9) and r3.a[5][9] == (0, 5, 9)
    assert r3.builtin == "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32"
    r4 = WMMA[("rdna4", "v_wmma_f32_16x16x16_f16")]
    assert r4.a[16 + 5][1] == (0, 5, 9) and r4.kpl == 8
    assert r4.builtin == "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12"
    fp8 = WMMA[("rdna4", "v_wmma_f32_16x16x16_bf8_fp8")]
    assert fp8.builtin == "__builtin_amdgcn_wmma_f32_16x16x16_bf8_fp8_w32_gfx12"
    assert "int __attribute__((ext_vector_type(2)))" == fp8.a_type
    assert WMMA[("rdna3", "v_wmma_bf16_16x16x16_bf16")].call_args == ", false"  # opsel
    assert WMMA[("rdna3", "v_dot2_f32_bf16")].builtin == "__builtin_amdgcn_fdot2_f32_bf16"


def test_every_wmma_and_dot_instruction_has_a_probe():
    """Every RDNA instruction but the 4-bit integer WMMA forms, which are refused in one
    line (their elements pack two to a byte)."""
    n = refused = 0
    for arch in ("rdna3", "rdna4"):
        for name in PRESETS[arch].instructions:
            vf = random_file(arch, name, n=1)
            if (arch, name) not in WMMA:
                with pytest.raises(UserError, match="4-bit WMMA operands pack two to a byte"):
                    generate_hip(vf)
                refused += 1
                continue
            src = generate_hip(vf)
            lay = WMMA[(arch, name)]
            call = f"{lay.builtin}({lay.a_prefix}av, {lay.b_prefix}bv, acc{lay.call_args});"
            assert call in src and "hip/hip_runtime.h" in src
            assert f"dim3({lay.wave})" in src
            if lay.copies == 2:  # RDNA3: a[0] goes to lanes 0 and 16
                assert "case 16:" in src
            n += 1
    assert (n, refused) == (16 + 16, 8 + 16)


def test_integer_wmma_probes_pass_sign_and_clamp_flags():
    """clang's integer WMMA builtins: (sign A, A, sign B, B, C, clamp), the sign flags the
    ISA's NEG bits (set: signed), the clamp flag its CLAMP bit; 8-bit elements four to a
    register (RDNA3: all 16 k in a lane; RDNA4: 8)."""
    r3 = WMMA[("rdna3", "v_wmma_i32_16x16x16_iu8_i8_u8_clamp")]
    assert r3.builtin == "__builtin_amdgcn_wmma_i32_16x16x16_iu8_w32"
    assert (r3.a_prefix, r3.b_prefix, r3.call_args) == ("true, ", "false, ", ", true")
    assert r3.a_type == "int __attribute__((ext_vector_type(4)))" and r3.elem_bytes == 1
    assert r3.acc_type == "int __attribute__((ext_vector_type(8)))"
    r4 = WMMA[("rdna4", "v_wmma_i32_16x16x16_iu8_u8_i8")]
    assert r4.builtin == "__builtin_amdgcn_wmma_i32_16x16x16_iu8_w32_gfx12"
    assert (r4.a_prefix, r4.b_prefix, r4.call_args) == ("false, ", "true, ", ", false")
    assert r4.a_type == "int __attribute__((ext_vector_type(2)))" and r4.a[16 + 5][1] == (0, 5, 9)
    src = generate_hip(random_file("rdna3", "v_wmma_i32_16x16x16_iu8_u8_u8", n=2))
    assert "__builtin_amdgcn_wmma_i32_16x16x16_iu8_w32(false, av, false, bv, acc, false);" in src


def test_cdna4_new_shapes_hold_twice_the_k_a_lane():
    """gfx950's shapes of twice CDNA3's K: lane l holds row l % M of A (column of B) and
    the k-range (l // M) * (M K / 64) upwards, through the `_f16` / `_bf16` / `_i8`
    builtins with 8 f16 / bf16 or 16 bytes of i8 a lane."""
    lay = LAYOUTS[("cdna4", "v_mfma_f32_16x16x32_bf16")]
    assert lay.kpl == 8 and lay.blocks == 1 and lay.a[37] == tuple((0, 5, 16 + e) for e in range(8))
    assert lay.builtin == "__builtin_amdgcn_mfma_f32_16x16x32_bf16"
    assert lay.a_type == "__bf16 __attribute__((ext_vector_type(8)))"
    i8 = LAYOUTS[("cdna4", "v_mfma_i32_32x32x32_i8")]
    assert i8.kpl == 16 and i8.b[40] == tuple((0, 16 + e, 8) for e in range(16))
    assert i8.a_type == "int __attribute__((ext_vector_type(4)))"
    # the forms CDNA4 keeps are CDNA3's, with CDNA3's builtins (fp8: OCP on gfx950)
    keep = LAYOUTS[("cdna4", "v_mfma_f32_16x16x32_fp8_fp8")]
    assert keep.builtin == LAYOUTS[("cdna3", "v_mfma_f32_16x16x32_fp8_fp8")].builtin
    assert keep.a == LAYOUTS[("cdna3", "v_mfma_f32_16x16x32_fp8_fp8")].a


def test_cdna4_probes():
    """A new gfx950 shape, and a block-scaled form from a file without scale factors
    (every factor 2^0; tests/test_probe_hip_scaled.py checks them in detail)."""
    src = generate_hip(random_file("cdna4", "v_mfma_f32_32x32x16_f16", n=2))
    assert "hipcc --offload-arch=gfx950" in src
    assert "__builtin_amdgcn_mfma_f32_32x32x16_f16(av, bv, acc, 0, 0, 0)" in src
    src = generate_hip(random_file("cdna4", "v_mfma_scale_f32_16x16x128_f8f6f4_fp8_fp8", n=1))
    assert "VSA[NV * NS] = {\n    0x7f7f7f7fu, 0x7f7f7f7fu, 0x7f7f7f7fu, 0x7f7f7f7fu};" in src
    call = "__builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(av, bv, acc, 0, 0, 0, scale_a, 0, scale_b)"
    assert call in src


def test_rdna_probes_compile(tmp_path):
    """One probe per RDNA operand type where hipcc knows the target (gfx1100; gfx1201
    needs LLVM 18 for the _gfx12 builtins)."""
    _need_hipcc()
    picks = [
        ("rdna3", "v_wmma_f32_16x16x16_f16", "gfx1100"),
        ("rdna3", "v_wmma_bf16_16x16x16_bf16", "gfx1100"),
        ("rdna3", "v_dot2_f32_bf16", "gfx1100"),
        ("rdna3", "v_wmma_i32_16x16x16_iu8_i8_u8_clamp", "gfx1100"),
        ("rdna4", "v_wmma_f32_16x16x16_fp8_bf8", "gfx1201"),
    ]
    failures = []
    for n, (arch, name, target) in enumerate(picks):
        if not _builds(target):
            continue
        src = tmp_path / f"r{n}.hip"
        src.write_text(generate_hip(random_file(arch, name, n=2, seed=n), arch=target))
        cmd = [HIPCC, f"--offload-arch={target}", "-c", str(src), "-o", str(src.with_suffix(".o"))]
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env())
        if r.returncode != 0:
            failures.append(f"{arch} {name} ({target}): {r.stderr.strip()[-600:]}")
    assert not failures, "\n".join(failures)
