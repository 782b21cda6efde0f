"""The kernel body of a tcgen05.mma probe (sm_100a): one warp per vector.

The warp zeroes A and B in shared memory and one thread writes the vector's a into row 0
of A and b into column 0 of B at the bit offsets of `tmem.PackedSmem`; the warp allocates
32 columns of tensor memory (tcgen05.alloc), stores C there with c in D[0][0] and zeros
elsewhere (tcgen05.st, lane 0 column 0 under Layout F), one thread issues tcgen05.mma with
enable-input-d and commits it to an mbarrier (tcgen05.commit), the warp waits on the
mbarrier, reads D back (tcgen05.ld) and frees the tensor memory (tcgen05.dealloc). Shared
memory written by threads is made visible to the tensor core's async proxy with
fence.proxy.async; TMEM accesses around thread synchronisation are ordered with
tcgen05.fence (PTX ISA §9.7.16.6 and §9.7.16.7).

A 16-bit D is read from the low half of its 32-bit TMEM cell, and a 16-bit c stored
there; the tables of `tmem` otherwise follow the PTX ISA.
"""

from __future__ import annotations

from ..spec.presets import Instruction
from .tmem import Tcgen05Layout

TMEM_COLUMNS = 32  # the smallest allocation (a power of two >= 32)


def _mask(bits: int) -> str:
    return f"0x{(1 << bits) - 1:x}ull"


def _table(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)


def mnemonic(lay: Tcgen05Layout) -> str:
    return f"tcgen05.mma.cta_group::1.kind::{lay.kind}"


def _desc(name: str, buf: str, lbo: int, sbo: int) -> list[str]:
    """A shared memory descriptor (PTX ISA §9.7.16.4.1): start, LBO and SBO encoded as
    (x & 0x3FFFF) >> 4, bits 46-48 = 0b001, base offset 0, no swizzle."""
    return [
        f"const unsigned long long {name} =",
        f"    (unsigned long long)((__cvta_generic_to_shared({buf}) & 0x3FFFF) >> 4)",
        f"    | ((unsigned long long)(({lbo} & 0x3FFFF) >> 4) << 16)",
        f"    | ((unsigned long long)(({sbo} & 0x3FFFF) >> 4) << 32)",
        "    | (1ull << 46);  // bits 46-48: 0b001; 61-63: no swizzle",
    ]


def kernel_tcgen05(inst: Instruction, lay: Tcgen05Layout) -> str:
    """Statements of the probe kernel for one vector (they store d in vd[blockIdx.x])."""
    p = inst.params
    K = lay.K
    sa, sb = p.a_fmt.spec.storage, p.b_fmt.spec.storage
    sc, sd = p.c_fmt.spec.storage, p.d_fmt.spec.storage
    a_bits = [lay.a.bit[0][k] for k in range(K)]  # A[0][k]
    b_bits = [lay.b.bit[0][k] for k in range(K)]  # B[k][0], B stored as N x K
    lane, col = lay.d.place[0][0]
    n = lay.N
    regs = ", ".join(f"%{i + 1}" for i in range(n))
    st_in = ", ".join(f'"r"(cc[{i}])' for i in range(n))
    ld_out = ", ".join(f'"=r"(dd[{i}])' for i in range(n))
    ld_regs = ", ".join(f"%{i}" for i in range(n))
    fence = [
        'asm volatile("tcgen05.fence::before_thread_sync;\\n" ::: "memory");',
        "__syncthreads();",
        'asm volatile("tcgen05.fence::after_thread_sync;\\n" ::: "memory");',
    ]
    body = [
        f"__shared__ __align__(1024) unsigned char smem_a[{lay.a.size}];",
        f"__shared__ __align__(1024) unsigned char smem_b[{lay.b.size}];",
        "__shared__ uint32_t tmem_base;",
        "__shared__ __align__(8) unsigned long long mbar;",
        "// A (M x K) and B (N x K) K-major in shared memory, no swizzle: core matrices of",
        f"// 8 rows x 16 bytes, LBO = {lay.a.lbo} bytes along K, SBO = {lay.a.sbo} (A) /"
        f" {lay.b.sbo} (B) along M / N.",
        f"// A_BIT[k] / B_BIT[k]: bit offset of A[0][k] / B[k][0] ({lay.a.elem_bits}- and"
        f" {lay.b.elem_bits}-bit elements).",
        f"const unsigned A_BIT[{K}] = {{{_table(a_bits)}}};",
        f"const unsigned B_BIT[{K}] = {{{_table(b_bits)}}};",
        f"for (unsigned i = t; i < {lay.a.size}u; i += blockDim.x) smem_a[i] = 0;",
        f"for (unsigned i = t; i < {lay.b.size}u; i += blockDim.x) smem_b[i] = 0;",
        "__syncthreads();",
        "if (t == 0) {",
        f"  for (int k = 0; k < {K}; ++k) {{",
        f"    const unsigned long long va = (a[k] & {_mask(sa)}) << (A_BIT[k] & 7);",
        f"    const unsigned long long vb = (b[k] & {_mask(sb)}) << (B_BIT[k] & 7);",
        f"    for (unsigned j = 0; 8 * j < {sa}u + (A_BIT[k] & 7); ++j)",
        "      smem_a[(A_BIT[k] >> 3) + j] |= (unsigned char)(va >> (8 * j));",
        f"    for (unsigned j = 0; 8 * j < {sb}u + (B_BIT[k] & 7); ++j)",
        "      smem_b[(B_BIT[k] >> 3) + j] |= (unsigned char)(vb >> (8 * j));",
        "  }",
        "}",
        "// the tensor core reads shared memory through the async proxy",
        'asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");',
        "const uint32_t tmem_slot = (uint32_t)__cvta_generic_to_shared(&tmem_base);",
        "const uint32_t mbar_addr = (uint32_t)__cvta_generic_to_shared(&mbar);",
        f'asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], {TMEM_COLUMNS};\\n"',
        '             :: "r"(tmem_slot) : "memory");',
        'asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\\n" ::: "memory");',
        "if (t == 0) {",
        '  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\\n" :: "r"(mbar_addr) : "memory");',
        '  asm volatile("fence.mbarrier_init.release.cluster;\\n" ::: "memory");',
        "}",
        *fence,
        "const uint32_t taddr = tmem_base;",
        f"// C in tensor memory (Layout F): D[0][0] is lane {lane}, column {col}, which thread",
        f"// {lane} of the warp writes with .32x32b; every other cell of C is zero.",
        f"uint32_t cc[{n}] = {{0}};",
        f"if (t == {lane}u) cc[{col}] = (uint32_t)(c & {_mask(sc)});",
        f'asm volatile("tcgen05.st.sync.aligned.32x32b.x{n}.b32 [%0], {{{regs}}};\\n"',
        f'             :: "r"(taddr), {st_in} : "memory");',
        'asm volatile("tcgen05.wait::st.sync.aligned;\\n" ::: "memory");',
        *fence,
        "if (t == 0) {",
        *("  " + s for s in _desc("desc_a", "smem_a", lay.a.lbo, lay.a.sbo)),
        *("  " + s for s in _desc("desc_b", "smem_b", lay.b.lbo, lay.b.sbo)),
        f"  const uint32_t idesc = 0x{lay.idesc:08x}u;  // PTX ISA Table 42",
        '  asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %4, 0;\\n"',
        f'               "{mnemonic(lay)} [%0], %1, %2, %3, p;\\n}}\\n"',
        '               :: "r"(taddr), "l"(desc_a), "l"(desc_b), "r"(idesc), "r"(1u) : "memory");',
        '  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\\n"',
        '               :: "r"(mbar_addr) : "memory");',
        "}",
        "// wait until the MMA has completed phase 0 of the mbarrier",
        "uint32_t done = 0;",
        "while (!done) {",
        '  asm volatile("{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\\n"',
        '               "selp.u32 %0, 1, 0, p;\\n}\\n" : "=r"(done) : "r"(mbar_addr) : "memory");',
        "}",
        'asm volatile("tcgen05.fence::after_thread_sync;\\n" ::: "memory");',
        f"uint32_t dd[{n}];",
        f'asm volatile("tcgen05.ld.sync.aligned.32x32b.x{n}.b32 {{{ld_regs}}}, [%{n}];\\n"',
        f'             : {ld_out} : "r"(taddr) : "memory");',
        'asm volatile("tcgen05.wait::ld.sync.aligned;\\n" ::: "memory");',
        f"if (t == {lane}u) vd[blockIdx.x] = (unsigned long long)dd[{col}] & {_mask(sd)};",
        *fence,
        f'asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, {TMEM_COLUMNS};\\n"',
        '             :: "r"(taddr) : "memory");',
    ]
    return "\n".join(body)
