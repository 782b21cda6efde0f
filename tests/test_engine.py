"""The compiled engine (tensorcore_smt/engine) gives the numpy interpreter's bits.

Every kernel is the model's symbolic DAG lowered to LLVM IR and compiled, so it must equal
bv/vector.py bit for bit on any rows: random rows of validation/rows.py (the documented mix:
specials, subnormals, cancellations, wide and narrow exponent windows), random block scale
factors (any bits: NaN and extreme scales included), and uint64 as well as narrow input
arrays. The fast suite compiles a representative set (one instruction per algorithm and
operand family) and variants touching every ModelParams parameter; the slow suite compiles
every distinct instruction model of every preset. Kernels go to a fresh cache folder, so
every run compiles them (and the cache test sees a cold and a warm cache).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
from strategies import distinct_models, model_id

import tensorcore_smt as tc
from tensorcore_smt import api
from tensorcore_smt.engine import Engine, default_engine, kernel, parse_engine
from tensorcore_smt.engine import cache as engine_cache
from tensorcore_smt.engine import jit as engine_jit
from tensorcore_smt.errors import UserError
from tensorcore_smt.model.params import ModelParams
from tensorcore_smt.spec.presets import parse_variant
from tensorcore_smt.validation.rows import random_rows


@pytest.fixture(autouse=True, scope="module")
def fresh_cache(tmp_path_factory):
    """A cache folder of this module's own, and no kernels of earlier tests in memory."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TCSMT_CACHE", str(tmp_path_factory.mktemp("kernels")))
    kernel._KERNELS.clear()
    yield
    kernel._KERNELS.clear()
    mp.undo()


def _rows(p: ModelParams, n: int, seed: int):
    a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, n, seed)
    sa = sb = None
    if p.scale_fmt is not None:
        rng = np.random.default_rng(seed + 1)
        w = p.scale_fmt.spec.storage
        sa = rng.integers(0, 1 << w, size=(n, p.n_scales), dtype=np.uint64)
        sb = rng.integers(0, 1 << w, size=(n, p.n_scales), dtype=np.uint64)
    return a, b, c, sa, sb


def _agree(p: ModelParams, n: int = 3000, seed: int = 11) -> None:
    a, b, c, sa, sb = _rows(p, n, seed)
    want = api.simulate_params(p, a, b, c, sa_bits=sa, sb_bits=sb, engine="numpy")
    got = api.simulate_params(p, a, b, c, sa_bits=sa, sb_bits=sb, engine="compiled")
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (
        f"{bad.size} of {n} rows differ; first: a={a[bad[0]].tolist()} b={b[bad[0]].tolist()} "
        f"c={int(c[bad[0]]):#x} compiled {int(got[bad[0]]):#x} numpy {int(want[bad[0]]):#x}"
    )
    if p.scale_fmt is not None:  # no scale factors given: every scale factor 1
        want = api.simulate_params(p, a, b, c, engine="numpy")
        assert np.array_equal(api.simulate_params(p, a, b, c, engine="compiled"), want)


REPRESENTATIVE = [
    ("volta", "m8n8k4.f32.f16.f16.f32"),
    ("hopper", "m16n8k16.f32.f16.f16.f32"),
    ("hopper", "m16n8k8.f32.tf32.tf32.f32"),
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3"),
    ("ada", "m16n8k16.f16.e4m3.e5m2.f16"),
    ("ampere", "m8n8k4.f64.f64.f64.f64"),
    ("cdna1", "v_mfma_f32_4x4x1f32"),
    ("cdna2", "v_mfma_f32_4x4x2bf16"),
    ("cdna3", "v_mfma_f32_32x32x4_2b_f16"),
    ("cdna3", "v_mfma_f32_32x32x16_bf8_fp8"),
    ("rtx-blackwell", "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e4m3.f32.ue8m0"),
    ("rtx-blackwell", "m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"),
    ("hopper", "m16n8k32.satfinite.s32.s8.u8.s32"),
    ("ampere", "m16n8k256.s32.b1.b1.s32.and.popc"),
    ("cdna3", "v_mfma_i32_16x16x32_i8"),
]


@pytest.mark.parametrize("arch,instr", REPRESENTATIVE, ids=[f"{a}:{i}" for a, i in REPRESENTATIVE])
def test_representative_instructions_agree_with_numpy(arch, instr):
    _agree(parse_variant(arch).params(instr))


# Each ModelParams field differs from its preset's value in at least one variant below (the
# operand formats, K, scale_fmt and scale_block vary across the instructions above).
VARIANTS = [
    ("volta[F=20]", None),
    ("volta[L=2]", None),
    ("volta[carry_bits=1]", None),
    ("volta[carry_bits=1,carry_overflow=renormalize]", None),
    ("volta[align=round-down]", None),
    ("volta[align=exact]", None),
    ("volta[product_exponent=normalized]", None),
    ("volta[e_zero=-20]", None),
    ("volta[rounding=rne]", None),
    ("volta[overflow=ieee]", None),
    ("volta[nan_bits=0x7fc00001]", None),
    ("volta[L=4,group_map=byte-pairs]", None),
    ("volta[c_add=after]", None),
    ("volta[flush_inputs=true]", None),
    ("cdna2[flush_products=false]", "v_mfma_f32_4x4x2bf16"),
    ("volta[flush_sums=true]", None),
    ("volta[flush_outputs=true]", None),
    ("volta[zero_sign=ieee]", None),
    ("volta[algorithm=sequential,order=reverse,fused_products=true]", None),
    ("volta[algorithm=sequential,order=pairwise]", None),
    ("x86-avx512bf16[flush_sign=positive]", None),
    ("x86-avx512bf16[order=c-first,fused_products=false]", None),
    ("hopper[rounding_fmt=e8m13]", "m16n8k16.f32.e4m3.e4m3.f32"),
    ("hopper[unpack=none]", "m16n8k16.f32.e4m3.e4m3.f32"),
    ("ampere[tf32=full]", "m16n8k4.f32.tf32.tf32.f32"),
    ("cdna1[nan_rule=b-acc-a]", "v_mfma_f32_4x4x1f32"),
    ("cdna1[algorithm=sequential,acc_fmt=fp64,acc_rounding=rz]", "v_mfma_f32_4x4x1f32"),
    ("cdna2[G=1]", "v_mfma_f32_4x4x2bf16"),
    ("cdna3[F2=28]", "v_mfma_f32_32x32x4_2b_f16"),
    ("rdna3[opposing=exact]", "v_dot2_f32_f16"),
    ("rdna3[carry_bits=2]", "v_dot2_f32_f16"),  # ones' complement in a wrapping register
    ("rdna3[align=round-down,F=20]", "v_wmma_f32_16x16x16_bf16"),
    ("rdna3[flush_c=true,flush_sign=keep]", "v_dot2_f32_bf16"),
    ("ampere[split=markidis,split_fmt=bf16]", "m16n8k4.f32.tf32.tf32.f32"),
    ("ampere[split=ootomo-yokota,split_scale=10]", "m16n8k4.f32.tf32.tf32.f32"),
    ("hopper[int_clamp=wrap]", "m16n8k32.satfinite.s32.s8.s8.s32"),
    ("hopper[L=1,order=c-last]", "m16n8k32.satfinite.s32.u4.s4.s32"),
    ("ampere[bit_op=and]", "m16n8k128.s32.b1.b1.s32.xor.popc"),
]


@pytest.mark.parametrize("variant,instr", VARIANTS, ids=[v for v, _ in VARIANTS])
def test_variants_agree_with_numpy(variant, instr):
    _agree(parse_variant(variant).params(instr), n=2000)


def test_variants_touch_every_parameter():
    """The variant list above changes every parameter except those that the instruction
    choice itself varies (formats, K, block scaling)."""
    import dataclasses

    touched = set()
    for v, i in VARIANTS:
        p = parse_variant(v).params(i)
        base = parse_variant(v.split("[")[0]).params(i)
        touched |= {
            f.name for f in dataclasses.fields(p) if getattr(p, f.name) != getattr(base, f.name)
        }
    by_instruction = {"a_fmt", "b_fmt", "c_fmt", "d_fmt", "K", "scale_fmt", "scale_block"}
    # sparse instructions take metadata: test_sparse.py runs sparse=expanded on the engine
    by_instruction |= {"sparse", "sparse_group", "sparse_keep"}
    assert {f.name for f in dataclasses.fields(ModelParams)} - touched <= by_instruction


def test_narrow_and_wide_arrays_give_the_same_bits(monkeypatch):
    """uint64 arrays are read in place; uint16 ones by a kernel for 16-bit elements; int64
    arrays (non-negative) are viewed as unsigned; the API hands the kernel the caller's
    element widths (the test checks which widths each kernel was built for)."""
    p = parse_variant("volta").params(None)
    a, b, c, _, _ = _rows(p, 5000, 3)
    assert (p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage) == (16, 16, 32)
    want = api.simulate_params(p, a, b, c, engine="numpy")
    built = []
    real = kernel.cpu_kernel

    def spy(p, containers=None, out_bits=64):
        k = real(p, containers, out_bits)
        built.append(k.containers)
        return k

    monkeypatch.setattr(kernel, "cpu_kernel", spy)
    for dt, bits in ((np.uint16, 16), (np.uint32, 32), (np.int64, 64), (np.uint64, 64)):
        got = kernel.run_rows(p, [a.astype(dt), b.astype(dt), c.astype(np.uint32)], n_threads=1)
        assert built[-1] == (bits, bits, 32), dt
        assert got.dtype == np.uint64
        assert np.array_equal(got, want), dt
    a64, b64, c64 = a.astype(np.uint64), b.astype(np.uint64), c.astype(np.uint64)
    assert np.array_equal(api.simulate_params(p, a64, b64, c64, engine="compiled"), want)
    assert built[-1] == (64, 64, 64)  # uint64 arrays as given
    a16, b16, c32 = a.astype(np.uint16), b.astype(np.uint16), c.astype(np.uint32)
    assert np.array_equal(api.simulate_params(p, a16, b16, c32, engine="compiled"), want)
    assert built[-1] == (16, 16, 32)  # the API's path: the caller's widths, no widening


def test_rows_split_across_threads_give_the_same_bits():
    p = parse_variant("volta").params(None)
    a, b, c, _, _ = _rows(p, 50_000, 5)
    one = kernel.run_rows(p, [a, b, c], n_threads=1)
    many = kernel.run_rows(p, [a, b, c], n_threads=3)
    assert np.array_equal(one, many)
    assert np.array_equal(one, api.simulate_params(p, a, b, c, engine="numpy"))


def test_second_load_compiles_nothing(monkeypatch):
    """A kernel compiled once is loaded from the disk cache in a fresh process state."""
    p = parse_variant("volta[F=21]").params(None)
    a, b, c, _, _ = _rows(p, 500, 9)
    assert not kernel.is_ready(p, [a, b, c])
    first = api.simulate_params(p, a, b, c, engine="compiled")
    assert kernel.is_ready(p, [a, b, c])
    kernel._KERNELS.clear()

    def no_compile(ir):
        raise AssertionError("compiled again despite the disk cache")

    monkeypatch.setattr(engine_jit, "compile_object", no_compile)
    assert kernel.is_ready(p, [a, b, c])
    assert np.array_equal(api.simulate_params(p, a, b, c, engine="compiled"), first)


def test_kernel_sources_are_what_the_generators_import():
    """The digest in every key covers the generators and what they import: the model,
    bv/, engine/, gemm/compiled.py and gemm/'s element and plan code,
    validation/rows_kernel.py."""
    rel = {str(f.relative_to(engine_cache._ROOT)) for f in engine_cache.kernel_sources()}
    for want in (
        "engine/kernel_ir.py",
        "gemm/compiled.py",
        "bv/symbolic.py",
        "model/params.py",
        "model/sequential.py",
        "gemm/element.py",
        "gemm/plan.py",
        "gemm/schedule.py",
        "formats.py",
        "validation/rows_kernel.py",
    ):
        assert want in rel, want
    assert "cli/base.py" not in rel  # found, not the whole package


@pytest.fixture
def fresh_digest():
    """source_digest computed anew in the test and again after it."""
    engine_cache.source_digest.cache_clear()
    yield
    engine_cache.source_digest.cache_clear()


def test_edited_generator_source_misses_the_cache_and_unchanged_source_hits(
    tmp_path, monkeypatch, fresh_digest
):
    """The package's source read from a copy: unchanged, the kernel is loaded from disk;
    one comment added to gemm/element.py, the key changes and the kernel is compiled
    again."""
    p = parse_variant("volta[F=23]").params(None)
    a, b, c, _, _ = _rows(p, 300, 4)
    first = api.simulate_params(p, a, b, c, engine="compiled")
    before = engine_cache.source_digest()
    compiled = []
    real = engine_jit.compile_object

    def counting(ir, vectorize=True):
        compiled.append(ir)
        return real(ir, vectorize)

    def load_again():
        kernel._KERNELS.clear()
        engine_cache.source_digest.cache_clear()
        ready = kernel.is_ready(p, [a, b, c])
        assert np.array_equal(api.simulate_params(p, a, b, c, engine="compiled"), first)
        return ready

    monkeypatch.setattr(engine_jit, "compile_object", counting)
    copy = tmp_path / engine_cache._ROOT.name
    shutil.copytree(engine_cache._ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(engine_cache, "_ROOT", copy)
    assert load_again()
    assert engine_cache.source_digest() == before
    assert compiled == []  # hit

    element = copy / "gemm" / "element.py"
    element.write_text(element.read_text() + "\n# edited\n")
    assert not load_again()
    assert engine_cache.source_digest() != before
    assert len(compiled) == 1  # miss: compiled again
    assert kernel.is_ready(p, [a, b, c])


def test_default_engine_by_batch_and_readiness(monkeypatch):
    monkeypatch.delenv("TCSMT_ENGINE", raising=False)  # conftest.py sets numpy for tests
    p = parse_variant("volta[F=19]").params(None)
    a, b, c, _, _ = _rows(p, 100, 1)
    assert api._pick_engine(p, None, None, [a, b, c]) == Engine.NUMPY  # not compiled, small
    api.simulate_params(p, a, b, c, engine="compiled")
    assert api._pick_engine(p, None, None, [a, b, c]) == Engine.COMPILED  # ready
    assert api._pick_engine(p, None, "cpu", [a, b, c]) == Engine.TORCH
    monkeypatch.setenv("TCSMT_ENGINE", "numpy")
    assert api._pick_engine(p, None, None, [a, b, c]) == Engine.NUMPY
    monkeypatch.setenv("TCSMT_ENGINE", "gpu")
    with pytest.raises(UserError, match="variable TCSMT_ENGINE='gpu' is not an engine"):
        api._pick_engine(p, None, None, [a, b, c])


def test_default_engine_weighs_numpy_passes(monkeypatch):
    """A GEMM of few outputs and many instruction steps goes to the compiled engine:
    numpy pays a fixed cost per pass (a step), so 16 outputs x 62,500 steps (hopper,
    4x4 by K = 10^6) is minutes of numpy, though its row-steps stay below COMPILE_ROWS;
    a small GEMM, or one batch of rows, stays on numpy."""
    from tensorcore_smt.engine.choice import COMPILE_ROWS, PASS_ROWS, numpy_cost

    monkeypatch.delenv("TCSMT_ENGINE", raising=False)
    outputs, steps = 16, 62_500
    assert outputs * steps < COMPILE_ROWS  # the step count alone said numpy
    assert default_engine(False, outputs * steps, steps) == Engine.COMPILED
    assert default_engine(False, 12 * 3, 3) == Engine.NUMPY
    assert default_engine(False, 100) == Engine.NUMPY
    assert default_engine(False, COMPILE_ROWS) == Engine.COMPILED
    assert default_engine(True, 1) == Engine.COMPILED
    # the crossover: the passes whose fixed cost alone reaches COMPILE_ROWS
    n = -(-COMPILE_ROWS // PASS_ROWS)
    assert numpy_cost(0, n) >= COMPILE_ROWS > numpy_cost(0, n - 1)
    assert default_engine(False, 0, n) == Engine.COMPILED
    assert default_engine(False, 0, n - 1) == Engine.NUMPY
    # what tc.matmul asks for such a GEMM: compiled, without running it
    A = np.ones((4, 16 * 200), np.float16)
    B = np.ones((16 * 200, 4), np.float16)
    info: list = []
    tc.matmul("hopper", A, B, run_info=info)
    assert info[-1].engine == Engine.COMPILED  # 200 steps: numpy's passes cost more


def test_engine_errors_are_one_line():
    p = parse_variant("volta").params(None)
    a, b, c, _, _ = _rows(p, 4, 1)
    with pytest.raises(UserError, match="unknown engine 'gpu'; known: numpy, compiled, torch"):
        parse_engine("gpu")
    with pytest.raises(UserError, match="engine numpy runs on this machine's CPU"):
        api.simulate_params(p, a, b, c, device="cuda", engine="numpy")
    with pytest.raises(UserError, match="engine compiled: unknown device 'tpu'"):
        api.simulate_params(p, a, b, c, device="tpu", engine="compiled")


def test_cli_engine_option(tmp_path):
    from click.testing import CliRunner

    from tensorcore_smt.cli import main

    args = ["simulate", "--arch", "volta", "--a", "3c00,3c00,3c00,3c00"]
    args += ["--b", "3c00,3c00,3c00,4000", "--c", "3f800000"]
    r = CliRunner().invoke(main, [*args, "--engine", "compiled"])
    assert r.exit_code == 0 and "0x40c00000 (6.0)" in r.output, r.output
    r = CliRunner().invoke(main, [*args, "--engine", "gpu"])
    assert r.exit_code == 2
    assert "unknown engine 'gpu'; known: numpy, compiled, torch" in r.output


def _gpu_driver_present() -> bool:
    try:
        from cuda.bindings import driver

        return driver.cuInit(0)[0] == driver.CUresult.CUDA_SUCCESS
    except Exception:
        return False


def test_ptx_for_sm90_is_accepted_by_ptxas(tmp_path):
    """The same DAG through llvmlite's NVPTX back end gives PTX that the CUDA toolkit's
    assembler accepts for sm_90 (the GPU path needs no nvcc; ptxas only checks here)."""
    from tensorcore_smt.engine.ptx import ptx_for

    if _PTXAS is None:
        pytest.skip("no CUDA toolkit (ptxas) on this machine to check the PTX with")
    for arch, instr in [REPRESENTATIVE[0], REPRESENTATIVE[1], REPRESENTATIVE[9]]:
        text = ptx_for(parse_variant(arch).params(instr), "sm_90")
        assert ".target sm_90" in text and ".entry tcsmt_kernel" in text
        assert _ptxas_error(text, tmp_path) == ""


_PTXAS = shutil.which("ptxas") or shutil.which("/usr/local/cuda/bin/ptxas")


def _ptxas_error(text: str, tmp_path) -> str:
    """What ptxas says against PTX `text` for sm_90 ("" when it accepts it)."""
    src = tmp_path / "k.ptx"
    src.write_text(text)
    r = subprocess.run(
        [_PTXAS, "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
    )
    return "" if r.returncode == 0 else r.stderr or f"exit {r.returncode}"


def test_missing_gpu_is_one_line_naming_the_engine():
    if _gpu_driver_present():
        pytest.skip("a GPU is present: the launch test below runs instead")
    p = parse_variant("volta").params(None)
    a, b, c, _, _ = _rows(p, 4, 1)
    with pytest.raises(UserError, match="^engine compiled on cuda"):
        api.simulate_params(p, a, b, c, device="cuda", engine="compiled")
    from click.testing import CliRunner

    from tensorcore_smt.cli import main

    args = ["validate", "--arch", "volta", "--oracle", "variant:volta", "--rows", "10"]
    r = CliRunner().invoke(main, [*args, "--engine", "compiled", "--device", "cuda"])
    assert r.exit_code == 2 and "engine compiled on cuda" in r.output, r.output


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_driver_present(), reason="needs an NVIDIA GPU and driver")
def test_gpu_kernel_agrees_with_numpy():
    for arch, instr in REPRESENTATIVE:
        p = parse_variant(arch).params(instr)
        a, b, c, sa, sb = _rows(p, 20_000, 4)
        want = api.simulate_params(p, a, b, c, sa_bits=sa, sb_bits=sb, engine="numpy")
        got = api.simulate_params(
            p, a, b, c, sa_bits=sa, sb_bits=sb, engine="compiled", device="cuda"
        )
        assert np.array_equal(got, want), (arch, instr)


MODELS = distinct_models()


@pytest.mark.slow
@pytest.mark.parametrize("entry", MODELS, ids=[model_id(m) for m in MODELS])
def test_every_instruction_of_every_preset_agrees_with_numpy(entry):
    _agree(entry[0], n=20_000, seed=23)


@pytest.mark.parametrize(
    "arch,instr,lanes",
    [
        ("volta", "m8n8k4.f32.f16.f16.f32", 16),  # no node over 64 bits
        ("cdna3", "v_mfma_f32_32x32x16_bf8_fp8", 8),  # a few over 64 bits
        ("cdna1", "v_mfma_f32_4x4x1f32", None),  # many over 64, none over 128: LLVM's
        ("ampere", "m8n8k4.f64.f64.f64.f64", 1),  # up to 256 bits: scalar
        ("hopper", "m16n8k32.f32.e4m3.e4m3.f32", 1),  # over 4,000 nodes: scalar
    ],
)
def test_loop_plan_follows_the_dag(arch, instr, lanes):
    """engine/loops.py: the loop form from the DAG's size and widths, and the forced
    lane count reaches the IR as loop metadata."""
    from tensorcore_smt.engine.dag import instruction_dag
    from tensorcore_smt.engine.kernel_ir import cpu_tiled_module, default_containers
    from tensorcore_smt.engine.loops import loop_plan

    dag = instruction_dag(parse_variant(arch).params(instr))
    plan = loop_plan(dag.root, dag.nodes)
    assert (plan.lanes if plan.tiled else 1) == lanes
    if plan.tiled:
        ir = cpu_tiled_module(dag, default_containers(dag), plan)
        forced = f'!"llvm.loop.vectorize.width", i32 {lanes}' in ir
        assert forced == (lanes is not None)


@pytest.mark.parametrize("out_bits", [16, 32])
def test_gpu_kernel_stores_d_in_the_output_width(tmp_path, out_bits):
    """The GPU kernel writes d as words of the caller's output array (simulate's narrow d
    or out=), so the device-to-host copy lands in it without a uint64 array between;
    ptxas, where installed, accepts the PTX."""
    from tensorcore_smt.engine.ptx import ptx_for

    instr = "m16n8k16.f16.f16.f16.f16" if out_bits == 16 else "m16n8k16.f32.f16.f16.f32"
    text = ptx_for(parse_variant("hopper").params(instr), "sm_90", out_bits=out_bits)
    stores = [ln for ln in text.splitlines() if "st.global" in ln]
    assert stores and all(f".u{out_bits}" in ln or f".b{out_bits}" in ln for ln in stores)
    wide = ptx_for(parse_variant("hopper").params(instr), "sm_90")
    assert any(".u64" in ln or ".b64" in ln for ln in wide.splitlines() if "st.global" in ln)
    if _PTXAS is not None:
        assert _ptxas_error(text, tmp_path) == ""


def test_ada_sparse_fp8_expanded_kernel_compiles_without_aborting():
    """With the SLP vectoriser on, LLVM's instruction selection aborted the process on
    this kernel (ada's sparse FP8 unit expanded to K = 64); compiled in a child process
    so that an abort fails the test instead of ending the run. Its bits must equal numpy's."""
    code = (
        "import numpy as np\n"
        "from tensorcore_smt import api\n"
        "from tensorcore_smt.model.params import Sparsity\n"
        "p = api.resolve('ada', 'mma.sp.m16n8k64.f32.e5m2.e4m3.f32')"
        ".with_(sparse=Sparsity.EXPANDED)\n"
        "rng = np.random.default_rng(1)\n"
        "a = rng.integers(0, 256, (300, p.n_a)).astype(np.uint64)\n"
        "b = rng.integers(0, 256, (300, p.K)).astype(np.uint64)\n"
        "c = rng.integers(0, 1 << 32, 300).astype(np.uint64)\n"
        "m = [0, 3] * (p.n_a // 2)\n"
        "x = api.simulate_params(p, a[:, ::1], b, c, engine='compiled', meta=m)\n"
        "y = api.simulate_params(p, a, b, c, engine='numpy', meta=m)\n"
        "assert np.array_equal(x, y)\n"
        "print('equal')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "equal", r.stderr[-800:]
