"""Generate a self-contained CUDA program that runs a vector file's vectors on the GPU.

One thread block per vector: a warp (mma.sync) or a warpgroup of 128 threads (wgmma). The
vector goes to row 0 of A, column 0 of B and C[0][0], every other element is zero (the
setup of Fasi et al. §III), the instruction runs once as inline PTX, and the thread that
holds D[0][0] stores its bits. The host prints one line per vector,
``vector <index> d=0x<hex>``, in the output format's own width, and exits non-zero on
any CUDA error. Device details go to standard error, so standard output is exactly the
lines `tcsmt probe --check` reads.

Register placement comes from the tables in `layouts` (PTX ISA fragment layouts); the
generated code spells out, per thread, which register bits receive which element.

(About 680 lines, kept in one module: the mma.sync and wgmma kernels, their register
types and the host program are one text generator whose parts only make sense together.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UserError
from ..model.params import ModelParams
from ..spec.presets import PRESETS, Instruction, parse_variant
from ..validation.vectors import VectorFile
from ..version import __version__
from .layouts import Form, Fragment, Layout, container_shift, form_of, layout_for
from .tcgen05 import kernel_tcgen05, mnemonic
from .tmem import Tcgen05Layout, tcgen05_layout

NVCC_MIN_SM = 75
"""Oldest target nvcc 13 builds (CUDA 13 dropped sm_70 and older; CUDA 12.x builds sm_70)."""


@dataclass(frozen=True)
class Target:
    """A GPU target such as sm_90a."""

    sm: int
    suffix: str = ""  # "", "a" (arch-specific) or "f" (family)

    def __str__(self) -> str:
        return f"sm_{self.sm}{self.suffix}"


@dataclass(frozen=True)
class Requirement:
    """Which targets can run an instruction form on its tensor cores."""

    min_sm: int
    max_sm: int | None = None  # None: every later generation
    arch_specific: bool = False  # needs the `a` target (wgmma, .kind::f8f6f4)
    why: str = ""


def requirement(inst: Instruction) -> Requirement:
    """Minimum (and maximum) sm of a PTX form, from the PTX ISA target notes."""
    f = form_of(inst)
    if f.kind == "wgmma":
        return Requirement(90, 90, True, "wgmma.mma_async needs sm_90a")
    if f.sparse:
        if f.a in ("e4m3", "e5m2"):
            return Requirement(89, why=f"mma.{f.sparse} with .{f.a} needs sm_89 or later")
        return Requirement(80, why=f"mma.{f.sparse}.{f.shape} .{f.a} needs sm_80 or later")
    if f.d == "s32" and f.kind == "mma":
        return _int_requirement(f)
    if f.kind == "tcgen05":
        return Requirement(100, 100, True, "tcgen05.mma needs sm_100a")
    if f.f8f6f4:
        return Requirement(120, 121, True, "mma with .kind::f8f6f4 needs sm_120a or sm_121a")
    if f.scaled:
        return Requirement(120, 121, True, "mma with .block_scale needs sm_120a or sm_121a")
    if f.shape == "m8n8k4" and f.a == "f16":
        return Requirement(
            70,
            75,
            False,
            "mma.m8n8k4 .f16 runs on tensor cores only on sm_70 and sm_75; on Ampere and "
            "later it compiles to CUDA-core (FPU) code (Sun et al. §2.2)",
        )
    if f.a in ("e4m3", "e5m2"):
        return Requirement(89, why="mma with .e4m3/.e5m2 needs sm_89 or later")
    if f.a == "f64":
        if f.shape == "m8n8k4":
            return Requirement(80, why="mma.m8n8k4 .f64 needs sm_80 or later")
        return Requirement(90, why=f"mma.{f.shape} .f64 needs sm_90 or later")
    if f.shape == "m16n8k8" and f.a == "f16":
        return Requirement(75, why="mma.m16n8k8 .f16 needs sm_75 or later")
    return Requirement(80, why=f"mma.{f.shape} .{f.a} needs sm_80 or later")


def _int_requirement(f) -> Requirement:
    """PTX ISA, mma target notes: .u8/.s8 at m8n8k16 from sm_72 (nvcc 13 builds sm_75 and
    later), .u4/.s4 at m8n8k32 and .b1 .xor.popc at m8n8k128 from sm_75, the m16n8 shapes
    and .and.popc from sm_80."""
    if f.bit_op == "and" or f.shape.startswith("m16n8"):
        return Requirement(
            80, why=f"mma.{f.shape} .{f.a} .{f.bit_op or 'int'} needs sm_80 or later"
        )
    return Requirement(75, why=f"mma.{f.shape} .{f.a} needs sm_75 or later")


_SM_RE = re.compile(r"^(?:sm_)?(\d+)([af]?)$")


def parse_sm(text: str) -> Target:
    m = _SM_RE.match(text.strip().lower())
    if not m:
        raise UserError(f"--sm {text}: not a GPU target such as 90a, sm_89 or 120a")
    return Target(int(m.group(1)), m.group(2))


def choose_target(vf: VectorFile, sm: str | None = None) -> tuple[Target, list[str]]:
    """The target to build for (the file's architecture unless `sm` overrides it) and
    notes for the program's header."""
    inst = vf.instr()
    req = requirement(inst)
    notes: list[str] = []
    preset_sm = parse_variant(vf.arch).preset.sm
    if sm is None:
        base = max(preset_sm, req.min_sm)
        if base < NVCC_MIN_SM:
            notes.append(
                f"{vf.arch} is sm_{base}; CUDA 13 no longer builds sm_{base}, so the default "
                f"target is sm_{NVCC_MIN_SM}, where this instruction runs on the same "
                f"HMMA.884 path (Volta and Turing tensor cores behave identically: Valpey et al. 2025 "
                f"§5). To run on an sm_{base} GPU, build with CUDA 12.x or older:\n"
                f"nvcc -arch=sm_{base} -o probe probe.cu"
            )
            base = NVCC_MIN_SM
        target = Target(base, "a" if req.arch_specific else "")
    else:
        target = parse_sm(sm)
        if target.sm < req.min_sm or (req.max_sm is not None and target.sm > req.max_sm):
            raise UserError(f"--sm {sm}: {inst.name}: {req.why}")
        if req.arch_specific and target.suffix != "a":
            raise UserError(f"--sm {sm}: {inst.name}: {req.why} (an arch-specific 'a' target)")
        if target.sm < NVCC_MIN_SM:
            notes.append(
                f"sm_{target.sm} needs CUDA 12.x or older (CUDA 13 builds sm_75 and later)"
            )
        if preset_sm is not None and target.sm != preset_sm:
            notes.append(
                f"built for {target}, not for {vf.arch}'s own sm_{preset_sm}: run it on the "
                f"GPU whose arithmetic you want to test"
            )
    return target, notes


def nvcc_command(target: Target, source: str = "probe.cu") -> str:
    exe = source[:-3] if source.endswith(".cu") else source + ".out"
    return f"nvcc -arch={target} -o {exe} {source}"


# --- code generation -------------------------------------------------------------------


def probe_layout(inst: Instruction) -> Layout | Tcgen05Layout:
    """The placement tables of any instruction a probe can run (UserError for MFMA)."""
    if inst.kind == "tcgen05":
        return tcgen05_layout(inst)
    return layout_for(inst)


def ptx_mnemonic(inst: Instruction) -> str:
    if inst.kind == "tcgen05":
        return mnemonic(tcgen05_layout(inst))
    f = form_of(inst)
    sat = ".satfinite" if f.satfinite else ""
    popc = f".{f.bit_op}.popc" if f.bit_op else ""
    if f.kind == "wgmma":
        return f"wgmma.mma_async.sync.aligned.{f.shape}{sat}.{f.d}.{f.a}.{f.b}{popc}"
    op = f"mma.{f.sparse}" if f.sparse else "mma"
    if f.d == "s32":
        return f"{op}.sync.aligned.{f.shape}.row.col{sat}.{f.d}.{f.a}.{f.b}.{f.c}{popc}"
    if f.scaled:
        return f"mma.sync.aligned.{f.shape}.row.col.{f.scaled}"
    kind = ".kind::f8f6f4" if f.f8f6f4 else ""
    return f"{op}.sync.aligned.{f.shape}.row.col{kind}.{f.d}.{f.a}.{f.b}.{f.c}"


UNIT_SCALE = 0x7F7F7F7F
"""Four ue8m0 scale factors of 2^0 (bias 127): every byte a scale selector can pick is 1."""


def scale_word(scales: list[int] | None, p: ModelParams) -> int:
    """The 32-bit scale-factor register of one operand: its scale factors in bytes 0..n-1
    (PTX ISA, mma block scaling: byte-id 0 selects byte 0 for scale_vec::1X, bytes 0-1
    for 2X, bytes 0-3 for 4X), every other byte 1 (the format's encoding of 2^0); None:
    every scale factor 1. Every thread passes the same word, so whichever thread the
    thread-id selector names for row 0 of A / column 0 of B supplies the vector's."""
    assert p.scale_fmt is not None
    s = p.scale_fmt.spec
    one = s.bias << s.mbits
    xs = list(scales) if scales is not None else []
    xs += [one] * (4 - len(xs))
    return sum(x << (8 * i) for i, x in enumerate(xs))


def check_block_scale(inst: Instruction) -> None:
    """UserError unless `inst` has a block-scaled form: mma .kind::f8f6f4 with f32 d, whose
    .kind::mxf8f6f4 .block_scale form (PTX ISA, mma with block scaling; sm_120a) at unit
    scale factors runs the same arithmetic (MMA-Sim: ST_FDPA with alpha = beta = 1 is
    the T_FDPA of .kind::f8f6f4, F = 25 over 32 products, RZ)."""
    f = form_of(inst)
    if not f.f8f6f4 or f.d != "f32":
        raise UserError(
            f"--block-scale: {inst.name} has no block-scaled form; it needs an mma "
            f".kind::f8f6f4 instruction with f32 d (rtx-blackwell)"
        )


def block_scale_mnemonic(inst: Instruction) -> str:
    f = form_of(inst)
    return (
        f"mma.sync.aligned.{f.shape}.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"
        f".{f.d}.{f.a}.{f.b}.{f.c}.ue8m0"
    )


@dataclass(frozen=True)
class _RegType:
    ctype: str  # C type holding the bits
    bits_type: str  # register constraint for bits (r or l)
    constraint: str  # asm constraint of the value
    to_value: str  # bits -> value expression template
    value_type: str  # C type of the value
    to_bits: str  # value -> bits expression template


_B32 = _RegType("uint32_t", "r", "r", "{}", "uint32_t", "{}")
_F32 = _RegType("uint32_t", "r", "f", "__uint_as_float({})", "float", "__float_as_uint({})")
_F64 = _RegType(
    "unsigned long long",
    "l",
    "d",
    "__longlong_as_double((long long)({}))",
    "double",
    "(unsigned long long)__double_as_longlong({})",
)


def _ab_type(frag: Fragment) -> _RegType:
    return _F64 if frag.reg_bits == 64 else _B32


def _cd_type(frag: Fragment) -> _RegType:
    if frag.reg_bits == 64:
        return _F64
    return _F32 if frag.elem_bits == 32 else _B32


def _mask(bits: int) -> str:
    return f"0x{(1 << bits) - 1:x}ull"


def _loads(
    frag: Fragment, lay: Layout, reg: str, want, src: str, storage: int, shift: int, rt
) -> list[str]:
    """Per-thread statements that put the wanted elements into registers.

    `want(row, col)` returns the index expression into `src` for a wanted element, or None.
    """
    by_thread: dict[int, list[str]] = {}
    for t, elems in enumerate(frag.place):
        if lay.group[t] != 0:
            continue
        for i, (row, col) in enumerate(elems):
            idx = want(row, col)
            if idx is None:
                continue
            r, off = frag.slot(i)
            sh = off + shift
            by_thread.setdefault(t, []).append(
                f"{reg}[{r}] |= ({rt.ctype})(({src}{idx} & {_mask(storage)}) << {sh});"
                f"  // {frag.operand.split('/')[0]}[{row}][{col}]"
            )
    out = ["switch (t) {"]
    for t, stmts in sorted(by_thread.items()):
        out.append(f"  case {t}:")
        out.extend(f"    {s}" for s in stmts)
        out.append("    break;")
    out.append("  default:")
    out.append("    break;")
    out.append("}")
    return out


def _d_holder(lay: Layout) -> tuple[int, int, int]:
    """(thread, register, bit offset) of D[0][0] in product 0."""
    (t, i), *_ = lay.d.holders(0, 0, lay.group)
    r, off = lay.d.slot(i)
    return t, r, off


def _c_literal(values: list[int], per_line: int = 8) -> str:
    items = [f"0x{v:x}ull" for v in values]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return ",\n    ".join(lines) if lines else "0ull"


def _asm_list(start: int, n: int) -> str:
    return "{" + ", ".join(f"%{start + i}" for i in range(n)) + "}"


def _kernel_mma(inst: Instruction, lay: Layout, block_scale: bool = False) -> str:
    p = inst.params
    at, bt, ct, dt = _ab_type(lay.a), _ab_type(lay.b), _cd_type(lay.c), _cd_type(lay.d)
    if p.d_fmt.spec.is_integer:  # .s32 accumulators live in "r" registers
        ct = dt = _B32
    na, nb, nc, nd = lay.a.regs, lay.b.regs, lay.c.regs, lay.d.regs
    mn = block_scale_mnemonic(inst) if block_scale else ptx_mnemonic(inst)
    asm = (
        f"{mn} {_asm_list(0, nd)}, {_asm_list(nd, na)}, "
        f"{_asm_list(nd + na, nb)}, {_asm_list(nd + na + nb, nc)}"
    )
    scales: list[str] = []
    if p.scale_fmt is not None:
        n = nd + na + nb + nc
        # scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b, thread-id-b}:
        # the vector's own scale factors (`scale_word`), from every thread
        asm += f", %{n}, {{%{n + 1}, %{n + 2}}}, %{n + 3}, {{%{n + 4}, %{n + 5}}}"
        scales = ['"r"(VSA[blockIdx.x])', '"h"((uint16_t)0)', '"h"((uint16_t)0)']
        scales += ['"r"(VSB[blockIdx.x])', '"h"((uint16_t)0)', '"h"((uint16_t)0)']
    elif form_of(inst).sparse:
        # the sparsity metadata (every thread passes the vector's word, `sparse_meta`)
        # and the sparsity selector 0
        asm += f", %{nd + na + nb + nc}, 0x0"
        scales = ['"r"(vm)']
    elif block_scale:
        n = nd + na + nb + nc
        # scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b, thread-id-b}
        asm += f", %{n}, {{%{n + 1}, %{n + 2}}}, %{n + 3}, {{%{n + 4}, %{n + 5}}}"
        scales = [f'"r"({UNIT_SCALE:#x}u)', '"h"((uint16_t)0)', '"h"((uint16_t)0)'] * 2
    asm += ";"
    outs = ", ".join(f'"={dt.constraint}"(fd[{i}])' for i in range(nd))
    ins = ", ".join(
        [f'"{at.constraint}"({at.to_value.format(f"ra[{i}]")})' for i in range(na)]
        + [f'"{bt.constraint}"({bt.to_value.format(f"rb[{i}]")})' for i in range(nb)]
        + [f'"{ct.constraint}"({ct.to_value.format(f"rc[{i}]")})' for i in range(nc)]
        + scales
    )
    sa, sb, sc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    body = [
        f"{at.ctype} ra[{na}] = {{0}};",
        f"{bt.ctype} rb[{nb}] = {{0}};",
        f"{ct.ctype} rc[{nc}] = {{0}};",
        f"{dt.value_type} fd[{nd}];",
        "// A: row 0 holds the vector's a (every other element of A is zero)",
        *_loads(
            lay.a,
            lay,
            "ra",
            lambda r, c: f"[{c}]" if r == 0 else None,
            "a",
            sa,
            0 if lay.a.elem_bits == 4 else container_shift(p.a_fmt),
            at,
        ),
        "// B: column 0 holds the vector's b",
        *_loads(
            lay.b,
            lay,
            "rb",
            lambda r, c: f"[{r}]" if c == 0 else None,
            "b",
            sb,
            0 if lay.b.elem_bits == 4 else container_shift(p.b_fmt),
            bt,
        ),
        "// C: C[0][0] = the vector's c",
        *_loads(
            lay.c,
            lay,
            "rc",
            lambda r, c: "" if (r, c) == (0, 0) else None,
            "c",
            sc,
            0,
            ct,
        ),
        f'asm volatile("{asm}"',
        f"    : {outs}",
        f"    : {ins});",
    ]
    return "\n".join(body)


def _kernel_wgmma(inst: Instruction, lay: Layout) -> str:
    p = inst.params
    f = form_of(inst)
    smem = lay.b
    at, ct = _ab_type(lay.a), _cd_type(lay.c)
    if p.d_fmt.spec.is_integer:  # .s32 accumulators live in "r" registers
        ct = _B32
    na, nc = lay.a.regs, lay.c.regs
    sa, sb, sc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    ebytes = smem.elem_bytes
    btype = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t"}[ebytes]
    offsets = ", ".join(str(smem.offset[k][0]) for k in range(smem.rows))
    trans = ", 0" if f.a in ("f16", "bf16") else ""  # imm-trans-b (f16/bf16 forms only)
    # imm-scale-a, imm-scale-b: floating-point forms only (the integer syntax ends at scale-d)
    scale = "" if p.d_fmt.spec.is_integer else ", 1, 1"
    asm = (
        "{\\n"
        ".reg .pred p;\\n"
        f"setp.ne.b32 p, %{nc + na + 1}, 0;\\n"
        f"{ptx_mnemonic(inst)} {_asm_list(0, nc)}, {_asm_list(nc, na)}, %{nc + na}, p{scale}{trans};\\n"
        "}\\n"
    )
    inouts = ", ".join(f'"+{ct.constraint}"(fd[{i}])' for i in range(nc))
    ins = ", ".join(
        [f'"{at.constraint}"({at.to_value.format(f"ra[{i}]")})' for i in range(na)]
        + ['"l"(desc_b)', '"r"(1u)']
    )
    fence = "\n".join(
        f'asm volatile("" : "+{ct.constraint}"(fd[{i}]) :: "memory");' for i in range(nc)
    )
    body = [
        f"__shared__ __align__(1024) unsigned char smem_b[{smem.size}];",
        "// B (K x N, K-major) in shared memory: no swizzle, 8x16-byte core matrices,",
        f"// LBO = {smem.lbo} bytes between core matrices along K, SBO = {smem.sbo} (N = 8: one",
        "// core matrix along N). B_OFFSET[k] is the byte offset of B[k][0].",
        f"const unsigned B_OFFSET[{smem.rows}] = {{{offsets}}};",
        f"for (unsigned i = t; i < {smem.size}u; i += blockDim.x) smem_b[i] = 0;",
        "__syncthreads();",
        f"if (t < {smem.rows}u) {{",
        f"  *reinterpret_cast<{btype}*>(smem_b + B_OFFSET[t]) = ({btype})((b[t] & {_mask(sb)}) << {container_shift(p.b_fmt)});",
        "}",
        "// make the generic-proxy stores visible to the async proxy that wgmma reads with",
        'asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");',
        "__syncthreads();",
        "const uint32_t b_addr = (uint32_t)__cvta_generic_to_shared(smem_b);",
        "const unsigned long long desc_b =",
        "    (unsigned long long)((b_addr & 0x3FFFF) >> 4)",
        f"    | ((unsigned long long)(({smem.lbo} & 0x3FFFF) >> 4) << 16)",
        f"    | ((unsigned long long)(({smem.sbo} & 0x3FFFF) >> 4) << 32);  // bits 62-63: swizzle 0",
        f"{at.ctype} ra[{na}] = {{0}};",
        f"{ct.ctype} rc[{nc}] = {{0}};",
        "// A (from registers): row 0 holds the vector's a",
        *_loads(
            lay.a,
            lay,
            "ra",
            lambda r, c: f"[{c}]" if r == 0 else None,
            "a",
            sa,
            0 if lay.a.elem_bits == 4 else container_shift(p.a_fmt),
            at,
        ),
        "// D starts as C: D[0][0] = the vector's c (scale-d = 1 accumulates into it)",
        *_loads(
            lay.c,
            lay,
            "rc",
            lambda r, c: "" if (r, c) == (0, 0) else None,
            "c",
            sc,
            0,
            ct,
        ),
        f"{ct.value_type} fd[{nc}];",
        *(f"fd[{i}] = {ct.to_value.format(f'rc[{i}]')};" for i in range(nc)),
        fence,
        'asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");',
        f'asm volatile("{asm}"',
        f"    : {inouts}",
        f"    : {ins}",
        '    : "memory");',
        'asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");',
        'asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");',
        fence,
    ]
    return "\n".join(body)


_UNSUPPORTED = """  int unsupported = 0;
  CHECK(cudaMemcpyFromSymbol(&unsupported, g_unsupported, sizeof(int)));
  if (unsupported) {{
    fprintf(stderr, "probe: this GPU (sm_%d) ran the portable PTX, which lacks the instruction; "
                    "{target} code needs an sm_{target.sm} GPU\\n", sm);
    return 1;
  }}
"""


def _comment(text: str) -> str:
    """Text safe inside a // comment: one line, printable, no trailing backslash."""
    flat = " ".join(str(text).split())
    return "".join(ch if ch.isprintable() else "?" for ch in flat).rstrip("\\")


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in text.splitlines())


def kernel_definition(inst: Instruction, target: Target, block_scale: bool = False) -> str:
    """CUDA source of `probe_kernel` (and `g_unsupported` on arch-specific targets): block
    `i` computes the dot product of vector `i` of the arrays `va` (NA words a vector: K,
    or the kept elements of a sparse A), `vb` (K words), `vc` and stores d's bits in
    `vd[i]`; a sparse form also reads its metadata word from `vmeta[i]`. The program
    defines `K` and `NA`."""
    lay = probe_layout(inst)
    p = inst.params
    threads = lay.threads
    if isinstance(lay, Tcgen05Layout):
        kernel = kernel_tcgen05(inst, lay)
        store = ""
    else:
        if lay.threads == 128:
            kernel = _kernel_wgmma(inst, lay)
        else:
            kernel = _kernel_mma(inst, lay, block_scale)
        t_d, r_d, off_d = _d_holder(lay)
        # an .s32 d is read as the integer it is (`_cd_type` would take it for an f32)
        ct = _B32 if p.d_fmt.spec.is_integer else _cd_type(lay.d)
        store = f"""  // D[0][0]: thread {t_d}, register {r_d}, bits {off_d}..
  if (t == {t_d}u) {{
    vd[blockIdx.x] = ((unsigned long long)({ct.to_bits.format(f"fd[{r_d}]")}) >> {off_d}) & {_mask(p.d_fmt.spec.storage)};
  }}
"""
    sparse = inst.kind == "mma" and form_of(inst).sparse
    meta_param = (
        ",\n                                          const unsigned long long* __restrict__ vmeta"
        if sparse
        else ""
    )
    meta_load = "  const uint32_t vm = (uint32_t)vmeta[blockIdx.x];\n" if sparse else ""
    if target.suffix == "a":
        # `nvcc -arch=sm_XXa` also embeds portable compute_XX PTX, where the instruction
        # does not exist: compile it only for the arch-specific target.
        decl = "__device__ int g_unsupported = 0;  // set when the kernel ran without the instruction\n\n"
        guard_open = f"#if defined(__CUDA_ARCH_FEAT_SM{target.sm}_ALL)\n"
        unused = "(void)va, (void)vb, (void)vc, (void)vd"
        if p.scale_fmt is not None:
            unused += ", (void)VSA, (void)VSB"
        guard_close = f"#else\n  {unused};\n  if (t == 0) g_unsupported = 1;\n#endif\n"
    else:
        decl = guard_open = guard_close = ""
    return f"""{decl}__global__ void __launch_bounds__({threads}) probe_kernel(const unsigned long long* __restrict__ va,
                                          const unsigned long long* __restrict__ vb,
                                          const unsigned long long* __restrict__ vc,
                                          unsigned long long* __restrict__ vd{meta_param}) {{
  const unsigned t = threadIdx.x;
{guard_open}  const unsigned long long* a = va + (size_t)blockIdx.x * NA;
  const unsigned long long* b = vb + (size_t)blockIdx.x * K;
  const unsigned long long c = vc[blockIdx.x];
{meta_load}{_indent(kernel, 2)}
{store}{guard_close}}}
"""


def _meta_words(vf: VectorFile) -> list[int]:
    """A sparse probe's metadata register of each vector (probe/sparse_meta.py: every
    thread passes one word, so every group of a vector must keep the same pattern)."""
    from .sparse_meta import meta_word

    p = vf.params
    out = []
    for i, v in enumerate(vf.vectors):
        meta = list(v.metadata or [])
        pattern = tuple(meta[: p.sparse_keep])
        if meta != list(pattern) * (p.n_a // p.sparse_keep):
            raise UserError(
                f"vectors[{i}].metadata: a probe passes one metadata word a vector, so every "
                f"group must keep the same positions; got {meta}"
            )
        out.append(meta_word(pattern, p))
    return out


def _meta_array(words: list[int]) -> str:
    """The metadata words as a host array (sparse probes only)."""
    if not words:
        return ""
    items = ", ".join(f"0x{w:08x}ull" for w in words)
    return (
        "// Sparsity metadata: one 32-bit register word a vector (every group's nibble).\n"
        f"static const unsigned long long VM[NV] = {{{items}}};\n"
    )


def _meta_copy(words: list[int]) -> str:
    if not words:
        return ""
    return (
        "  unsigned long long* dm = nullptr;\n"
        "  CHECK(cudaMalloc(&dm, sizeof(VM)));\n"
        "  CHECK(cudaMemcpy(dm, VM, sizeof(VM), cudaMemcpyHostToDevice));\n"
    )


def _scale_arrays(vf: VectorFile, p: ModelParams) -> str:
    """Device arrays of each vector's scale-factor registers (block-scaled forms only)."""
    if p.scale_fmt is None:
        return ""
    out = [f"// Scale factors ({p.scale_fmt.spec.name}): one register word a vector (scale_word)."]
    for name, attr in (("VSA", "sa"), ("VSB", "sb")):
        words = [scale_word(getattr(v, attr), p) for v in vf.vectors]
        items = ", ".join(f"0x{w:08x}u" for w in words)
        out.append(f"__device__ const uint32_t {name}[NV] = {{{items}}};")
    return "\n".join(out) + "\n"


def generate(
    vf: VectorFile,
    sm: str | None = None,
    source_name: str = "probe.cu",
    vectors_name: str = "",
    block_scale: bool = False,
) -> str:
    """The CUDA source of a probe for every vector of `vf`; with `block_scale`, through the
    instruction's block-scaled form at unit scale factors (see `check_block_scale`)."""
    vf.validate()
    inst = vf.instr()
    lay = probe_layout(inst)  # UserError for MFMA
    sparse = inst.kind == "mma" and bool(form_of(inst).sparse)
    meta_words = _meta_words(vf) if sparse else []
    if block_scale:
        check_block_scale(inst)
    if not vf.vectors:
        raise UserError("vectors: the file has no vectors to probe")
    target, notes = choose_target(vf, sm)
    p = inst.params
    K = p.K
    d_fmt = p.d_fmt
    vname = _comment(vectors_name or "VECTORS.json")
    source_name = _comment(source_name)
    cmd = nvcc_command(target, source_name)
    exe = cmd.split(" -o ")[1].split()[0]
    nvec = len(vf.vectors)
    fmts = vf.formats()
    header = [
        f"// {source_name}: tensor-core probe generated by tcsmt {__version__} (tensorcore-smt)",
        "//",
        f"// arch:        {vf.arch} ({PRESETS[vf.arch].description})",
        f"// instruction: {inst.name}",
        f"// PTX:         {block_scale_mnemonic(inst) if block_scale else ptx_mnemonic(inst)}",
        f"// operands:    a {fmts['a'].spec.name}, b {fmts['b'].spec.name}, "
        f"c {fmts['c'].spec.name}, d {fmts['d'].spec.name}; K = {K}",
        f"// target:      {target}",
        f"// vectors:     {nvec} from {vname}"
        + (f" (property {vf.property})" if vf.property else ""),
        f"// variants:    {', '.join(vf.variants) if vf.variants else '(none)'}",
        "//",
        f"// build:  {cmd}",
        f"// run:    ./{exe} > probe_output.txt",
        f"// check:  tcsmt probe --check {vname} probe_output.txt",
        "//",
        "// Each vector is one dot product d = c + sum_k a[k] b[k]: a goes to row 0 of A, b to",
        "// column 0 of B, c to C[0][0], every other element is zero (Fasi et al. §III), and",
        "// D[0][0] is printed as `vector <index> d=0x<hex>` (one line per vector on standard",
        "// output; device details and errors go to standard error). Register placement:",
        f"// {lay.source}.",
    ]
    if block_scale:
        header += [
            "//",
            "// BLOCK SCALE: the vectors run through the .kind::mxf8f6f4 .block_scale form with",
            f"// every ue8m0 scale factor 1 (scale data {UNIT_SCALE:#x}, byte and thread",
            "// selectors 0), which MMA-Sim models as the arithmetic of .kind::f8f6f4: the",
            "// predictions of the vector file hold for it.",
        ]
    for n in notes:
        header.append("//")
        line = "// NOTE:"
        for part in n.split("\n"):
            for w in part.split():
                if len(line) + 1 + len(w) > 92:
                    header.append(line)
                    line = "//      "
                line += " " + w
            header.append(line)
            line = "//      "
    threads = lay.threads
    unsupported = _UNSUPPORTED.format(target=target) if target.suffix == "a" else ""
    notes_lines = [
        f"//   vector {i}: {_comment(v.note)}" for i, v in enumerate(vf.vectors) if v.note
    ]
    src = f"""{chr(10).join(header)}

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                              \\
  do {{                                                                           \\
    cudaError_t err_ = (call);                                                   \\
    if (err_ != cudaSuccess) {{                                                   \\
      fprintf(stderr, "probe: CUDA error %s at %s:%d: %s\\n", cudaGetErrorName(err_), \\
              __FILE__, __LINE__, cudaGetErrorString(err_));                     \\
      exit(1);                                                                   \\
    }}                                                                            \\
  }} while (0)

static const int NV = {nvec};  // vectors
static const int K = {K};  // products per dot product
#define NA {p.n_a}  // a words per vector (the kept entries of a sparse A)
static const int THREADS = {threads};  // one {"warpgroup" if threads == 128 else "warp"} per vector
static const int TARGET_SM = {target.sm};

// The vectors' bit patterns (a: {fmts["a"].spec.name}, b: {fmts["b"].spec.name}, c: {fmts["c"].spec.name}), one 64-bit word each.
{chr(10).join(notes_lines) if notes_lines else "// (no notes)"}
static const unsigned long long VA[NV * NA] = {{
    {_c_literal([x for v in vf.vectors for x in v.a])}}};
static const unsigned long long VB[NV * K] = {{
    {_c_literal([x for v in vf.vectors for x in v.b])}}};
static const unsigned long long VC[NV] = {{
    {_c_literal([v.c for v in vf.vectors])}}};
{_scale_arrays(vf, p)}{_meta_array(meta_words)}
{kernel_definition(inst, target, block_scale)}
int main() {{
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  const int sm = prop.major * 10 + prop.minor;
  fprintf(stderr, "probe: device %d: %s (sm_%d), {inst.name}, %d vectors\\n", dev, prop.name, sm, NV);
  if (sm != TARGET_SM) {{
    fprintf(stderr, "probe: warning: built for sm_%d, running on sm_%d\\n", TARGET_SM, sm);
  }}
  unsigned long long *da = nullptr, *db = nullptr, *dc = nullptr, *dd = nullptr;
  CHECK(cudaMalloc(&da, sizeof(VA)));
  CHECK(cudaMalloc(&db, sizeof(VB)));
  CHECK(cudaMalloc(&dc, sizeof(VC)));
  CHECK(cudaMalloc(&dd, sizeof(unsigned long long) * NV));
  CHECK(cudaMemcpy(da, VA, sizeof(VA), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, VB, sizeof(VB), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dc, VC, sizeof(VC), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dd, 0xff, sizeof(unsigned long long) * NV));
{_meta_copy(meta_words)}  probe_kernel<<<NV, THREADS>>>(da, db, dc, dd{", dm" if sparse else ""});
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
{unsupported}  static unsigned long long out[NV];
  CHECK(cudaMemcpy(out, dd, sizeof(out), cudaMemcpyDeviceToHost));
  for (int i = 0; i < NV; ++i) {{
    printf("vector %d d=0x%0{d_fmt.spec.hex_digits}llx\\n", i, out[i]);
  }}
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dc));
  CHECK(cudaFree(dd));
  if (fflush(stdout) != 0) {{
    fprintf(stderr, "probe: cannot write the output\\n");
    return 1;
  }}
  return 0;
}}
"""
    return src


__all__ = [
    "Form",
    "Requirement",
    "Target",
    "choose_target",
    "generate",
    "kernel_definition",
    "nvcc_command",
    "parse_sm",
    "ptx_mnemonic",
    "requirement",
]
