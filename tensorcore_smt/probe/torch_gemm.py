"""GEMM probes: a Python program that feeds the witness matrices of a GEMM vector file to
torch on a CUDA GPU, and the reading of its output.

Each vector sits in row 0 of A (M×K), column 0 of B (K×N) and C[0][0] of an M×N product
whose other elements are +0 (the file's `shape`), so D[0][0] is the output element the
hypotheses predict. The program runs the library call that computes such a product for
the file's formats (`CALLS`):

- FP8 inputs: `torch._scaled_mm` (cuBLASLt), once with `use_fast_accum=True` and once
  with False: fast accumulation runs one wgmma chain over K, the default promotes every
  128 elements (cuBLAS documentation, CUBLASLT_MATMUL_DESC_FAST_ACCUM); per-tensor fp32
  scales (alpha = scale_a·scale_b; the program passes the first hypothesis's alpha as
  scale_a and 1 as scale_b); K zero-padded to a multiple of 16 and B column-major, as
  the CUDA kernel requires (torch_rules.py). c joins as the bias of column 0 where torch
  takes one (bf16 bias for bf16 and FP8 outputs, fp16 for fp16); torch refuses a bias
  with an fp32 output, so there C is added to _scaled_mm's fp32 result by one fp32 add:
  D = RN(RN(alpha·acc) + c), the `epilogue=mul-add` form, equal to the fma epilogue
  when alpha = 1;
- fp16 / bf16 inputs: `torch.addmm(C, A, B)` when D has the inputs' format (beta = 1,
  C in the inputs' dtype, as addmm requires), `torch.mm(A, B, out_dtype=torch.float32)`
  plus nothing when D is fp32 and c is +0;
- fp32 inputs: `torch.addmm` with TF32 allowed (`torch.backends.cuda.matmul.allow_tf32`)
  when the instruction is TF32, disallowed otherwise; fp64: `torch.addmm`.

Every call keeps torch's argument rules for the CUDA kernels (torch_rules.py; the tests
run each program on the CPU with those rules checked on every call).

The program prints one line per vector and call, ``vector <i> call=<name> d=0x<hex>``;
`check_gemm_output` reads it back and says, for each call, which hypotheses the GPU
followed on every vector.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import UserError
from ..formats import Format, format_hex, parse_hex
from ..gemm.arrays import holds
from ..validation.gemm_vectors import GemmVectorFile, predict
from ..version import __version__
from .check import output_lines
from .torch_rules import scaled_mm_bias_format

TORCH_DTYPE = {
    Format.FP64: "torch.float64",
    Format.FP32: "torch.float32",
    Format.TF32: "torch.float32",
    Format.FP16: "torch.float16",
    Format.BF16: "torch.bfloat16",
    Format.E4M3: "torch.float8_e4m3fn",
    Format.E5M2: "torch.float8_e5m2",
}
"""The torch dtype that holds each format (TF32 operands live in float32 tensors)."""

INT_DTYPE = {8: "torch.uint8", 16: "torch.int16", 32: "torch.int32", 64: "torch.int64"}
FP8 = (Format.E4M3, Format.E5M2)


@dataclass(frozen=True)
class Call:
    """One library call the program makes: a name for the output lines and the Python
    expression that computes D from tensors A, B, C (and scales sa, sb)."""

    name: str
    expr: str
    doc: str


def calls_for(gf: GemmVectorFile) -> list[Call]:
    """The torch calls that run a GEMM with the file's operand formats (UserError when
    torch has none)."""
    f = gf.formats()
    fa, fb, fd = f["a"], f["b"], f["d"]
    for what, fmt in (("a", fa), ("b", fb), ("d", fd)):
        if fmt not in TORCH_DTYPE:
            raise UserError(f"{what}: torch has no dtype for {fmt.spec.name}")
    if fa in FP8 or fb in FP8:
        if fa == fb == Format.E5M2:
            raise UserError("torch._scaled_mm does not multiply two e5m2 matrices")
        out = TORCH_DTYPE[fd]
        call = (
            "torch._scaled_mm(A, B.t().contiguous().t(), scale_a=sa, scale_b=sb, {bias}"
            "out_dtype={out}, use_fast_accum={flag})"
        )
        bias_fmt = scaled_mm_bias_format(fd)
        if bias_fmt is None:  # no bias with an fp32 output: C added to the fp32 result
            return [
                Call(
                    f"scaled_mm_fast_accum={flag}",
                    call.format(bias="", out=out, flag=flag) + " + C",
                    f"torch._scaled_mm with use_fast_accum={flag}, fp32 output, plus C by "
                    "one fp32 add (D = RN(RN(alpha*acc) + c): epilogue=mul-add; the fma "
                    "epilogue when alpha = 1)",
                )
                for flag in (True, False)
            ]
        if not holds(f["c"], bias_fmt):
            raise UserError(
                f"c is {f['c'].spec.name}, but torch._scaled_mm takes a {bias_fmt.spec.name} "
                f"bias for a {fd.spec.name} output; give the hypotheses c_join=epilogue"
            )
        return [
            Call(
                f"scaled_mm_fast_accum={flag}",
                call.format(bias="bias=bias, ", out=out, flag=flag),
                f"torch._scaled_mm with use_fast_accum={flag}, c as the "
                f"{bias_fmt.spec.name} bias of column 0",
            )
            for flag in (True, False)
        ]
    if fa != fb:
        raise UserError(f"torch multiplies {fa.spec.name} by {fb.spec.name} only as FP8")
    if fd == fa or (fa == Format.TF32 and fd == Format.FP32):
        held = Format.FP32 if fa == Format.TF32 else fa  # TF32 operands live in fp32
        if not holds(f["c"], held):
            raise UserError(
                f"c is {f['c'].spec.name}, but torch.addmm reads C in {held.spec.name}; give "
                "the hypotheses c_join=epilogue"
            )
        return [
            Call(
                "addmm",
                "torch.addmm(C.to(A.dtype), A, B)",
                "torch.addmm(C, A, B): beta = 1, C in the inputs' dtype",
            )
        ]
    if fd == Format.FP32 and fa in (Format.FP16, Format.BF16):
        return [
            Call(
                "mm_out_fp32",
                "torch.mm(A, B, out_dtype=torch.float32)",
                "torch.mm with out_dtype=float32 (c must be +0)",
            )
        ]
    raise UserError(
        f"no torch call multiplies {fa.spec.name} inputs into {fd.spec.name}; give the "
        f"hypotheses out={fa.spec.name}"
    )


def generate(gf: GemmVectorFile, vectors_name: str = "VECTORS.json") -> str:
    """A runnable Python program (torch on cuda) for the GEMM vectors of `gf`."""
    gf.validate()
    f = gf.formats()
    calls = calls_for(gf)
    M, N = gf.shape
    ms = gf.models()
    alpha = float(ms[0].schedule.alpha)
    if any(m.p.a_fmt in FP8 for m in ms) and any(float(m.schedule.alpha) != alpha for m in ms):
        raise UserError("hypotheses: their alphas differ; the probe passes one scale")
    fp8 = f["a"] in FP8
    if fp8 and N % 16:
        raise UserError(f"shape: torch._scaled_mm needs N a multiple of 16; got N={N}")
    bias_fmt = scaled_mm_bias_format(f["d"]) if fp8 else None
    if calls[0].name == "mm_out_fp32" and any(v.c for v in gf.vectors):
        raise UserError(
            "vectors: c is not +0, but torch.mm with an fp32 output takes no C; "
            "give the hypotheses out=fp16/bf16 or use c = +0"
        )
    tf32 = f["a"] == Format.TF32
    rows = ",\n".join(
        "    ("
        + repr([format_hex(x, f["a"]) for x in v.a])
        + ", "
        + repr([format_hex(x, f["b"]) for x in v.b])
        + ", "
        + repr(format_hex(v.c, f["c"]))
        + ")"
        for v in gf.vectors
    )
    call_defs = ",\n".join(
        f"    ({c.name!r}, lambda A, B, C, sa, sb, bias: {c.expr})" for c in calls
    )
    return _TEMPLATE.format(
        version=__version__,
        vectors_name=vectors_name,
        arch=gf.arch,
        instruction=gf.instruction,
        hypotheses="\n".join(f"#   {h}" for h in gf.hypotheses),
        calls_doc="\n".join(f"#   {c.name}: {c.doc}" for c in calls),
        M=M,
        N=N,
        K=gf.K,
        KP=-(-gf.K // 16) * 16 if fp8 else gf.K,
        bias_dtype=TORCH_DTYPE[bias_fmt] if bias_fmt is not None else "None",
        rows=rows,
        a_dtype=TORCH_DTYPE[f["a"]],
        b_dtype=TORCH_DTYPE[f["b"]],
        c_dtype=TORCH_DTYPE[f["c"]],
        d_dtype=TORCH_DTYPE[f["d"]],
        a_int=INT_DTYPE[f["a"].spec.storage],
        b_int=INT_DTYPE[f["b"].spec.storage],
        c_int=INT_DTYPE[f["c"].spec.storage],
        d_int=INT_DTYPE[f["d"].spec.storage],
        a_bits=f["a"].spec.storage,
        b_bits=f["b"].spec.storage,
        c_bits=f["c"].spec.storage,
        d_bits=f["d"].spec.storage,
        d_digits=f["d"].spec.storage // 4,
        tf32=tf32,
        alpha=repr(alpha),
        calls=call_defs,
    )


_TEMPLATE = '''#!/usr/bin/env python3
# GEMM probe written by tensorcore-smt {version} from {vectors_name}.
# {arch}, instruction {instruction}, K = {K}; each vector is row 0 of A ({M}x{KP}), column 0
# of B ({KP}x{N}) and C[0][0], every other element +0 (K = {K} zero-padded to {KP}); D[0][0]
# is printed.
# Hypotheses of the file:
{hypotheses}
# Calls (each within torch's argument rules for its CUDA kernel):
{calls_doc}
# Run on a machine with a CUDA GPU and torch:  python3 THIS.py > gemm_output.txt
# then:  tcsmt probe --check {vectors_name} gemm_output.txt
# (python3 THIS.py cpu runs the same calls on torch's CPU kernels: a dry run, not the GPU)
import sys

import torch

M, N, K, KP = {M}, {N}, {K}, {KP}
VECTORS = [
{rows},
]
CALLS = [
{calls},
]
BIAS_DTYPE = {bias_dtype}  # _scaled_mm's bias for this output (None: C added outside)


def tensor(hexes, int_dtype, dtype, bits, device):
    """Bit patterns (hex strings) as a 1-D tensor of `dtype` on `device`."""
    vals = [int(h, 16) for h in hexes]
    signed = [v - (1 << bits) if int_dtype != torch.uint8 and v >> (bits - 1) else v for v in vals]
    return torch.tensor(signed, dtype=int_dtype).view(dtype).to(device)


def main():
    device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    if device == "cuda":
        if not torch.cuda.is_available():
            print("gemm probe: torch sees no CUDA device", file=sys.stderr)
            sys.exit(2)
        print("# device:", torch.cuda.get_device_name(0), "torch", torch.__version__)
    else:
        print("# device:", device, "(torch's own kernels, not the GPU) torch", torch.__version__)
    torch.backends.cuda.matmul.allow_tf32 = {tf32}
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    sa = torch.tensor({alpha}, dtype=torch.float32, device=device)
    sb = torch.tensor(1.0, dtype=torch.float32, device=device)
    for i, (a, b, c) in enumerate(VECTORS):
        A = torch.zeros(M, KP, dtype={a_dtype}, device=device)
        B = torch.zeros(KP, N, dtype={b_dtype}, device=device)
        C = torch.zeros(M, N, dtype={c_dtype}, device=device)
        A[0, :K] = tensor(a, {a_int}, {a_dtype}, {a_bits}, device)
        B[:K, 0] = tensor(b, {b_int}, {b_dtype}, {b_bits}, device)
        C[0, 0] = tensor([c], {c_int}, {c_dtype}, {c_bits}, device)[0]
        bias = None
        if BIAS_DTYPE is not None:
            bias = torch.zeros(N, dtype=BIAS_DTYPE, device=device)
            bias[0] = C[0, 0].to(BIAS_DTYPE)
        for name, call in CALLS:
            D = call(A, B, C, sa, sb, bias)
            if device == "cuda":
                torch.cuda.synchronize()
            d = D[0, 0].reshape(1).view({d_int}).item() & ((1 << {d_bits}) - 1)
            print(f"vector {{i}} call={{name}} d=0x{{d:0{d_digits}x}}")


if __name__ == "__main__":
    main()
'''


_LINE = re.compile(r"^vector\s+(\d+)\s+(?:call=(\S+)\s+)?d=(\S+)\s*$")


@dataclass
class CallResult:
    """What the GPU gave under one call: the d of each vector and the hypotheses that
    predicted it on every vector."""

    call: str
    observed: list[int]
    matched: list[list[str]]
    survivors: list[str] = field(default_factory=list)

    def verdict(self) -> str:
        if len(self.survivors) == 1:
            return f"the GPU follows {self.survivors[0]} on every vector"
        if self.survivors:
            return "not told apart by these vectors: " + ", ".join(self.survivors)
        return "no hypothesis of the file explains every vector"


def parse_gemm_output(text: str, n_vectors: int, d_fmt: Format) -> dict[str, list[int]]:
    """call name -> d bits of each vector (a line without `call=` belongs to call '').
    UserError (one line) on a malformed line, a repeated vector or a truncated output."""
    got: dict[str, dict[int, int]] = {}
    for lineno, m in output_lines(text, _LINE, "vector <index> call=<name> d=0x<hex>"):
        i, call = int(m.group(1)), m.group(2) or ""
        if i >= n_vectors:
            raise UserError(f"line {lineno}: vector {i} does not exist ({n_vectors} vectors)")
        per = got.setdefault(call, {})
        if i in per:
            raise UserError(f"line {lineno}: vector {i} of call {call or '-'} appears twice")
        try:
            per[i] = parse_hex(m.group(3), d_fmt, f"line {lineno}: d")
        except ValueError as e:
            raise UserError(str(e)) from None
    if not got:
        raise UserError("no 'vector <index> ... d=0x<hex>' lines: did the program run?")
    out = {}
    for call, per in got.items():
        missing = [i for i in range(n_vectors) if i not in per]
        if missing:
            raise UserError(
                f"truncated output: call {call or '-'} reports {len(per)} of {n_vectors} vectors"
            )
        out[call] = [per[i] for i in range(n_vectors)]
    return out


def check_gemm_output(gf: GemmVectorFile, text: str) -> list[CallResult]:
    """For each call in the output, which hypotheses predicted the GPU's D on every
    vector (missing predictions are computed first)."""
    full = predict(gf, only_missing=True)
    d_fmt = full.formats()["d"]
    res = []
    for call, ds in parse_gemm_output(text, len(full.vectors), d_fmt).items():
        matched = [
            [h for h in full.hypotheses if v.predicted[h] == d] for v, d in zip(full.vectors, ds)
        ]
        surv = [h for h in full.hypotheses if all(h in m for m in matched)]
        res.append(CallResult(call, ds, matched, surv))
    return res


def report_text(gf: GemmVectorFile, results: list[CallResult], output_name: str) -> str:
    f = gf.formats()
    lines = [
        f"{gf.arch} {gf.instruction}, K={gf.K}: {len(gf.vectors)} vectors, "
        f"{len(gf.hypotheses)} hypotheses, GPU output {output_name}"
    ]
    for r in results:
        lines.append(f"call {r.call or '-'}:")
        for i, (d, m) in enumerate(zip(r.observed, r.matched)):
            tail = f"matches {', '.join(m)}" if m else "MISMATCH: no hypothesis predicts it"
            lines.append(f"  vector {i}: d={format_hex(d, f['d'])}  {tail}")
        lines.append(f"  verdict: {r.verdict()}")
    return "\n".join(lines)
