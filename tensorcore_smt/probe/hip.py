"""Generate a self-contained HIP program that runs a vector file's vectors on an AMD GPU.

One wavefront (64 lanes for MFMA, 32 for RDNA WMMA, one lane for V_DOT2) per vector: the
vector goes to row 0 of A and column 0 of B of block 0 (every lane that holds a copy),
c to C[0][0], every other element is zero; the instruction runs once through its clang
builtin (`__builtin_amdgcn_mfma_*`, `_wmma_*`, `_fdot2*`), and lane 0 stores element 0
of the accumulator, D[0][0]. The host prints ``vector <index> d=0x<hex>`` lines as the CUDA probes do, so
`tcsmt probe --check` reads either. Elements are written at bit offsets (`put`), so fp6
and fp4 pack densely; CDNA4's block-scaled forms also get each vector's E8M0 scale
factors (`scale_words`) in the lanes that supply row 0's and column 0's (mfma.py
`_scaled_layout`, whose docstring says what is documented and what a gfx950 run
settles). hipcc is not installed here, so the block-scaled programs are not compiled by
the tests.

Build with ROCm's hipcc (`hipcc --offload-arch=gfx908` for CDNA1 / MI100, gfx90a for CDNA2 / MI200,
`--offload-arch=gfx942` for CDNA3 / MI300, gfx950 for CDNA4 / MI350 (LLVM 20 or later);
compilers older than LLVM 17 know CDNA3 as
gfx940, which has the same MFMA instructions; gfx1100 for RDNA3, gfx1151 for RDNA3.5,
gfx1201 for RDNA4, whose `_gfx12` WMMA builtins need LLVM 18 or later).
"""

from __future__ import annotations

import re

from ..errors import UserError
from ..spec.presets import PRESETS
from ..validation.vectors import VectorFile
from ..version import __version__
from .cuda import UNIT_SCALE
from .mfma import MFMA_PROBE_ARCHS, MfmaLayout, mfma_layout
from .wmma import WMMA_ARCHS, wmma_layout

OFFLOAD_ARCH = {
    "cdna1": "gfx908",
    "cdna2": "gfx90a",
    "cdna3": "gfx942",
    "cdna4": "gfx950",
    **WMMA_ARCHS,
}
"""Default --offload-arch per preset (MI100 / MI200 / MI300 / MI355X, RX 7900 / RX 9070)."""

_GFX_RE = re.compile(r"^gfx[0-9a-f]{3,4}$")


def hip_target(vf: VectorFile, arch: str | None = None) -> str:
    """The --offload-arch to build for: `arch` when given (gfxNNN), else the preset's."""
    if arch is not None:
        t = arch.strip().lower()
        if not _GFX_RE.match(t):
            raise UserError(
                f"--sm {arch}: an AMD probe needs a gfx target such as gfx90a or gfx942"
            )
        return t
    return OFFLOAD_ARCH[_preset_name(vf)]


def _preset_name(vf: VectorFile) -> str:
    from ..spec.presets import parse_variant

    name = vf.arch if vf.arch in PRESETS else parse_variant(vf.arch).preset.name
    if name not in OFFLOAD_ARCH:
        raise UserError(f"arch: {name} has no AMD target")
    return name


def hipcc_command(target: str, source: str = "probe.hip") -> str:
    exe = source.rsplit(".", 1)[0] if "." in source else source + ".out"
    return f"hipcc --offload-arch={target} -o {exe} {source}"


def _literal(values: list[int], per_line: int = 8, suffix: str = "ull") -> str:
    """The body of a C array initialiser: hex literals with `suffix`, `per_line` a line."""
    items = [f"0x{v:x}{suffix}" for v in values]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return ",\n    ".join(lines) if lines else "0ull"


def _switch(by_lane: dict[int, list[str]]) -> list[str]:
    """A switch on the lane t running each lane's statements."""
    out = ["switch (t) {"]
    for lane, stmts in sorted(by_lane.items()):
        out.append(f"  case {lane}:")
        out.extend(f"    {s}" for s in stmts)
        out.append("    break;")
    out += ["  default:", "    break;", "}"]
    return out


def _fill(lay: MfmaLayout, which: str, src: str, storage: int) -> list[str]:
    """Per-lane statements that write the vector's elements into the operand's bits:
    element e of a lane at bits [e * bits, (e + 1) * bits) (`put`)."""
    by_lane: dict[int, list[str]] = {}
    mask = f"0x{(1 << storage) - 1:x}ull"
    bits = lay.bits(which)
    for k in range(lay.K):
        where = f"A[0][{k}]" if which == "a" else f"B[{k}][0]"
        for lane, e in lay.holders(which, k):  # every copy (RDNA3 WMMA: lanes l, l + 16)
            by_lane.setdefault(lane, []).append(
                f"put(buf_{which}, {e * bits}, {bits}, {src}[{k}] & {mask});  // {where}"
            )
    return _switch(by_lane)


def scale_word(scale: int) -> int:
    """The 32-bit scale operand a lane passes for one E8M0 scale factor: the factor in
    all four bytes, so whichever byte opsel selects holds it."""
    return scale * 0x01010101


def scale_words(vf: VectorFile) -> tuple[list[int], list[int]]:
    """Each vector's scale words of A and of B (p.n_scales a vector, in vector order;
    a vector without scale factors: every factor 2^0)."""
    p = vf.instr().params
    s = p.scale_fmt.spec
    one = s.bias << s.mbits
    out: tuple[list[int], list[int]] = ([], [])
    for v in vf.vectors:
        for words, xs in zip(out, (v.sa, v.sb), strict=True):
            words.extend(scale_word(x) for x in (xs or [one] * p.n_scales))
    return out


def _scale_fill(lay: MfmaLayout, which: str, n_scales: int) -> list[str]:
    """Per-lane statements that set the lane's scale word: the vector's scale factor of
    block kb of row 0 of A (column 0 of B) in the lanes `scale_lanes` names; every other
    lane keeps 2^0."""
    arr, var = ("sa", "scale_a") if which == "a" else ("sb", "scale_b")
    by_lane: dict[int, list[str]] = {}
    for kb in range(n_scales):
        for lane in lay.scale_lanes(which, kb):
            by_lane.setdefault(lane, []).append(f"{var} = {arr}[{kb}];  // scale block {kb}")
    return _switch(by_lane)


def kernel_hip(vf: VectorFile, lay: MfmaLayout) -> str:
    p = vf.instr().params
    sa, sb, sc, sd = (f.spec.storage for f in (p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt))
    abytes = lay.reg_bytes()
    scales: list[str] = []
    if lay.scaled:
        scales = [
            f"// E8M0 scale words: 2^0 (0x{UNIT_SCALE:08x}) but in the lanes of row 0 of A /",
            "// column 0 of B, which take the vector's scale factors (sa, sb)",
            "const unsigned* sa = VSA + (size_t)blockIdx.x * NS;",
            "const unsigned* sb = VSB + (size_t)blockIdx.x * NS;",
            f"unsigned scale_a = 0x{UNIT_SCALE:08x}u, scale_b = 0x{UNIT_SCALE:08x}u;",
            *_scale_fill(lay, "a", p.n_scales),
            *_scale_fill(lay, "b", p.n_scales),
        ]
    body = [
        f"unsigned char buf_a[{abytes}] = {{0}};",
        f"unsigned char buf_b[{abytes}] = {{0}};",
        "// A: row 0 of block 0 holds the vector's a",
        *_fill(lay, "a", "a", sa),
        "// B: column 0 of block 0 holds the vector's b",
        *_fill(lay, "b", "b", sb),
        *scales,
        "AT av, bv;",
        "__builtin_memcpy(&av, buf_a, sizeof(AT));",
        "__builtin_memcpy(&bv, buf_b, sizeof(AT));",
        "CT acc;",
        "__builtin_memset(&acc, 0, sizeof(CT));",
        "if (t == 0) {  // C[0][0] = the vector's c: element 0 of lane 0",
        f"  const unsigned long long cb = c & 0x{(1 << sc) - 1:x}ull;",
        f"  __builtin_memcpy(&acc, &cb, {sc // 8});",
        "}",
        f"acc = {lay.builtin}({lay.a_prefix}av, {lay.b_prefix}bv, acc{lay.call_args});",
        "if (t == 0) {  // D[0][0]: element 0 of lane 0",
        "  unsigned long long db = 0;",
        f"  __builtin_memcpy(&db, &acc, {sd // 8});",
        "  vd[blockIdx.x] = db;",
        "}",
    ]
    return "\n".join(body)


def _scale_arrays(vf: VectorFile, lay: MfmaLayout) -> str:
    """Device arrays of each vector's scale words (block-scaled forms only; `scale_words`)."""
    if not lay.scaled:
        return ""
    n = vf.instr().params.n_scales
    wa, wb = scale_words(vf)
    out = [
        f"static const int NS = {n};  // scale factors of a row of A (column of B)",
        "// E8M0 scale factors, one word a scale block (scale_word: the factor in every byte)",
    ]
    for name, words in (("VSA", wa), ("VSB", wb)):
        out.append(f"__constant__ unsigned {name}[NV * NS] = {{\n    {_literal(words, 8, 'u')}}};")
    return "\n".join(out) + "\n"


def generate_hip(
    vf: VectorFile, arch: str | None = None, source_name: str = "probe.hip", vectors_name: str = ""
) -> str:
    """The HIP source of a probe for every vector of `vf` (an AMD MFMA, WMMA or V_DOT2
    instruction)."""
    vf.validate()
    inst = vf.instr()
    if inst.kind not in ("mfma", "wmma", "dot"):
        raise UserError(f"{inst.name} is not an AMD MFMA, WMMA or dot instruction")
    if not vf.vectors:
        raise UserError("vectors: the file has no vectors to probe")
    preset = _preset_name(vf)
    if preset in WMMA_ARCHS:
        lay = wmma_layout(inst, preset)
    elif preset in MFMA_PROBE_ARCHS:
        lay = mfma_layout(inst, preset)
    else:
        raise UserError(f"arch: {preset} has no HIP probe layouts yet")
    target = hip_target(vf, arch)
    p = inst.params
    fmts = vf.formats()
    cmd = hipcc_command(target, source_name)
    exe = cmd.split(" -o ")[1].split()[0]
    nvec = len(vf.vectors)
    vname = " ".join((vectors_name or "VECTORS.json").split())
    indent = "\n".join("  " + line if line else line for line in kernel_hip(vf, lay).splitlines())
    scaled_note = ""
    if lay.scaled:
        scaled_note = (
            f"\n// scales:      {p.scale_fmt.spec.name}, one per {p.scale_block} products "
            f"(each vector's sa / sb; 2^0 where it has none); after C:{lay.call_args[1:]}"
        )
    return f"""// {source_name}: matrix-core probe generated by tcsmt {__version__} (tensorcore-smt)
//
// arch:        {vf.arch} ({PRESETS[preset].description})
// instruction: {inst.name} ({lay.M}x{lay.N}x{lay.K}, {lay.blocks} block(s))
// builtin:     {lay.builtin}{scaled_note}
// operands:    a {fmts["a"].spec.name}, b {fmts["b"].spec.name}, c {fmts["c"].spec.name}, d {fmts["d"].spec.name}; K = {p.K}
// target:      {target}
// vectors:     {nvec} from {vname}
//
// build:  {cmd}
// run:    ./{exe} > probe_output.txt
// check:  tcsmt probe --check {vname} probe_output.txt
//
// Each vector is one dot product d = c + sum_k a[k] b[k]: a goes to row 0 of A, b to
// column 0 of B (block 0), c to C[0][0], every other element is zero; D[0][0] is printed
// as `vector <index> d=0x<hex>`. Register placement: {lay.source}.

#include <cstdio>
#include <cstdlib>
#include <hip/hip_runtime.h>

#define CHECK(call)                                                              \\
  do {{                                                                           \\
    hipError_t err_ = (call);                                                    \\
    if (err_ != hipSuccess) {{                                                    \\
      fprintf(stderr, "probe: HIP error %s at %s:%d: %s\\n", hipGetErrorName(err_), \\
              __FILE__, __LINE__, hipGetErrorString(err_));                      \\
      exit(1);                                                                   \\
    }}                                                                            \\
  }} while (0)

static const int NV = {nvec};  // vectors
static const int K = {p.K};  // products per dot product
typedef {lay.a_type} AT;  // the builtin's A / B operand
typedef {lay.acc_type} CT;  // its C / D operand

static const unsigned long long VA[NV * K] = {{
    {_literal([x for v in vf.vectors for x in v.a])}}};
static const unsigned long long VB[NV * K] = {{
    {_literal([x for v in vf.vectors for x in v.b])}}};
static const unsigned long long VC[NV] = {{
    {_literal([v.c for v in vf.vectors])}}};

// OR the low `bits` bits of v into buf at bit offset `at`, little-endian (buf starts zero)
__device__ inline void put(unsigned char* buf, int at, int bits, unsigned long long v) {{
  for (int i = 0; i < bits; ++i) {{
    if ((v >> i) & 1ull) buf[(at + i) >> 3] |= (unsigned char)(1u << ((at + i) & 7));
  }}
}}
{_scale_arrays(vf, lay)}
__global__ void __launch_bounds__({lay.wave}) probe_kernel(const unsigned long long* __restrict__ va,
                                                   const unsigned long long* __restrict__ vb,
                                                   const unsigned long long* __restrict__ vc,
                                                   unsigned long long* __restrict__ vd) {{
  const unsigned t = threadIdx.x;
  const unsigned long long* a = va + (size_t)blockIdx.x * K;
  const unsigned long long* b = vb + (size_t)blockIdx.x * K;
  const unsigned long long c = vc[blockIdx.x];
{indent}
}}

int main() {{
  int dev = 0;
  CHECK(hipGetDevice(&dev));
  hipDeviceProp_t prop;
  CHECK(hipGetDeviceProperties(&prop, dev));
  fprintf(stderr, "probe: device %d: %s ({target} build), {inst.name}, %d vectors\\n", dev, prop.name, NV);
  unsigned long long *da = nullptr, *db = nullptr, *dc = nullptr, *dd = nullptr;
  CHECK(hipMalloc(&da, sizeof(VA)));
  CHECK(hipMalloc(&db, sizeof(VB)));
  CHECK(hipMalloc(&dc, sizeof(VC)));
  CHECK(hipMalloc(&dd, sizeof(unsigned long long) * NV));
  CHECK(hipMemcpy(da, VA, sizeof(VA), hipMemcpyHostToDevice));
  CHECK(hipMemcpy(db, VB, sizeof(VB), hipMemcpyHostToDevice));
  CHECK(hipMemcpy(dc, VC, sizeof(VC), hipMemcpyHostToDevice));
  CHECK(hipMemset(dd, 0xff, sizeof(unsigned long long) * NV));
  hipLaunchKernelGGL(probe_kernel, dim3(NV), dim3({lay.wave}), 0, 0, da, db, dc, dd);
  CHECK(hipGetLastError());
  CHECK(hipDeviceSynchronize());
  static unsigned long long out[NV];
  CHECK(hipMemcpy(out, dd, sizeof(out), hipMemcpyDeviceToHost));
  for (int i = 0; i < NV; ++i) {{
    printf("vector %d d=0x%0{p.d_fmt.spec.hex_digits}llx\\n", i, out[i]);
  }}
  CHECK(hipFree(da));
  CHECK(hipFree(db));
  CHECK(hipFree(dc));
  CHECK(hipFree(dd));
  return fflush(stdout) == 0 ? 0 : 1;
}}
"""
