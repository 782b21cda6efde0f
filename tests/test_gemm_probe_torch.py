"""The torch programs GEMM probes write keep torch's argument rules for the CUDA kernels
(probe/torch_rules.py): each program runs here on torch's CPU kernels with every
_scaled_mm, addmm and mm call checked against those rules, so only the GPU itself is left
untested. The rules themselves are checked on calls torch's CUDA kernels refuse."""

from __future__ import annotations

import contextlib
import io
import sys

import pytest

from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format
from tensorcore_smt.probe import torch_rules as rules
from tensorcore_smt.probe.torch_gemm import generate, parse_gemm_output
from tensorcore_smt.validation.gemm_vectors import GemmVector, GemmVectorFile

torch = pytest.importorskip("torch")

FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"
FP16 = "m16n8k16.f32.f16.f16.f32"
TF32 = "m16n8k8.f32.tf32.tf32.f32"
ONE = {Format.E4M3: 0x38, Format.FP16: 0x3C00, Format.FP32: 0x3F800000, Format.TF32: 0x3F800000}
C_BITS = {Format.FP32: 0xC0A00000, Format.BF16: 0xC0A0, Format.FP16: 0xC500, Format.E4M3: 0xCA}
"""-5.0 in each format c can take."""


def _file(arch: str, instr: str, K: int, hyps: list[str], c_zero: bool = False):
    gf = GemmVectorFile(arch, instr, K, hyps, [], shape=(16, 32))
    f = gf.formats()
    c = 0 if c_zero else C_BITS[f["c"]]
    gf.vectors = [
        GemmVector([ONE[f["a"]]] * K, [ONE[f["b"]]] * K, c, {}),
        GemmVector([ONE[f["a"]]] + [0] * (K - 1), [ONE[f["b"]]] * K, 0, {}),
    ]
    return gf


class RuleChecked:
    """torch._scaled_mm, torch.addmm and torch.mm replaced by wrappers that assert the
    CUDA rules hold, then run torch's CPU kernel (mm(out_dtype=) has none on the CPU:
    the fp32 product stands in for it)."""

    def __init__(self, monkeypatch):
        self.calls: list[str] = []
        orig_smm, orig_addmm, orig_mm = torch._scaled_mm, torch.addmm, torch.mm

        def smm(a, b, scale_a=None, scale_b=None, bias=None, out_dtype=None, **kw):
            bad = rules.scaled_mm_violations(a, b, scale_a, scale_b, bias, out_dtype)
            assert not bad, bad
            self.calls.append("_scaled_mm")
            return orig_smm(
                a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, out_dtype=out_dtype, **kw
            )

        def addmm(c, a, b, **kw):
            bad = rules.addmm_violations(c, a, b)
            assert not bad, bad
            self.calls.append("addmm")
            return orig_addmm(c, a, b, **kw)

        def mm(a, b, out_dtype=None):
            if out_dtype is None:
                return orig_mm(a, b)
            bad = rules.mm_out_dtype_violations(a, b, out_dtype)
            assert not bad, bad
            self.calls.append("mm")
            return orig_mm(a.float(), b.float()).to(out_dtype)

        monkeypatch.setattr(torch, "_scaled_mm", smm)
        monkeypatch.setattr(torch, "addmm", addmm)
        monkeypatch.setattr(torch, "mm", mm)


def _run_on_cpu(src: str, monkeypatch) -> tuple[str, list[str]]:
    checked = RuleChecked(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["probe.py", "cpu"])
    # the program sets torch's matmul flags for its own process: put them back after it
    m = torch.backends.cuda.matmul
    names = (
        "allow_tf32",
        "allow_fp16_reduced_precision_reduction",
        "allow_bf16_reduced_precision_reduction",
    )
    before = [getattr(m, n) for n in names]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            ns: dict = {"__name__": "__main__"}
            exec(compile(src, "probe.py", "exec"), ns)
    finally:
        for n, v in zip(names, before):
            setattr(m, n, v)
    return out.getvalue(), checked.calls


PROGRAMS = [
    # (id, arch, instr, K, hypotheses, c = +0, the call that runs)
    ("fp8-fp32-out-c", "hopper", FP8, 256, ["hopper/fast-accum", "hopper/cublas-fp8"], False,
     "_scaled_mm"),
    ("fp8-bf16-out", "hopper", FP8, 64,
     ["hopper/fast-accum[out=bf16]", "hopper/cublas-fp8[out=bf16]"], False, "_scaled_mm"),
    ("fp8-fp16-out", "hopper", FP8, 64, ["hopper/fast-accum[out=fp16]"], False, "_scaled_mm"),
    ("fp8-e4m3-out-k40", "hopper", FP8, 40, ["hopper/fast-accum[out=e4m3]"], False,
     "_scaled_mm"),
    ("fp16-addmm", "hopper", FP16, 32, ["hopper/serial[out=fp16,c_join=epilogue]"], False,
     "addmm"),
    ("fp16-mm-fp32", "hopper", FP16, 32, ["hopper/serial"], True, "mm"),
    ("tf32-addmm", "ampere", TF32, 24, ["ampere/serial", "ampere/serial[promote=8]"], False,
     "addmm"),
]  # fmt: skip


@pytest.mark.parametrize(
    "arch,instr,K,hyps,c_zero,call", [p[1:] for p in PROGRAMS], ids=[p[0] for p in PROGRAMS]
)
def test_generated_program_keeps_the_cuda_rules_and_runs_on_cpu(
    arch, instr, K, hyps, c_zero, call, monkeypatch
):
    gf = _file(arch, instr, K, hyps, c_zero)
    src = generate(gf, "v.json")
    text, calls = _run_on_cpu(src, monkeypatch)
    per_call = parse_gemm_output(text, len(gf.vectors), gf.formats()["d"])
    assert calls and set(calls) == {call}
    assert all(len(ds) == len(gf.vectors) for ds in per_call.values())
    n_calls = 2 if call == "_scaled_mm" else 1
    assert len(per_call) == n_calls and len(calls) == n_calls * len(gf.vectors)


def test_fp8_fp32_output_adds_c_outside_and_says_so(monkeypatch):
    """torch refuses a bias with an fp32 output: the program adds C after _scaled_mm and
    its header names what that computes; D[0][0] = 256 * 1 + (-5) here."""
    gf = _file("hopper", FP8, 256, ["hopper/fast-accum"])
    src = generate(gf, "v.json")
    assert "bias=bias" not in src and "+ C" in src and "epilogue=mul-add" in src
    text, _ = _run_on_cpu(src, monkeypatch)
    ds = parse_gemm_output(text, 2, Format.FP32)
    assert {d[0] for d in ds.values()} == {0x437B0000}  # 251.0


def test_bias_that_cannot_hold_c_is_one_error():
    gf = _file("hopper", FP8, 64, ["hopper/serial[out=bf16]"])  # C in the chain: fp32
    with pytest.raises(UserError, match="c_join=epilogue"):
        generate(gf, "v.json")


def _fp8(shape, col_major=False):
    t = torch.zeros(shape).to(torch.float8_e4m3fn)
    return t.t().contiguous().t() if col_major else t


def test_rules_refuse_what_cuda_refuses():
    a, b = _fp8((16, 32)), _fp8((32, 48), col_major=True)
    s = torch.tensor(1.0)
    assert rules.scaled_mm_violations(a, b, s, s, None, torch.float32) == []
    f32_bias = rules.scaled_mm_violations(a, b, s, s, torch.zeros(48), torch.float32)
    assert "bias is not supported when out_dtype is float32" in f32_bias
    bad_bias = rules.scaled_mm_violations(
        a, b, s, s, torch.zeros(48, dtype=torch.float16), torch.bfloat16
    )
    assert bad_bias == ["bias must be bfloat16 for a bfloat16 output"]
    assert "mat2 must be column-major" in rules.scaled_mm_violations(
        a, _fp8((32, 48)), s, s, None, torch.float32
    )
    assert any("16" in v for v in rules.scaled_mm_violations(
        _fp8((16, 40)), _fp8((40, 48), True), s, s, None, torch.float32
    ))  # fmt: skip
    assert rules.scaled_mm_violations(a, b, torch.ones(2), s, None, torch.float32)
    x = torch.zeros(4, 4, dtype=torch.float16)
    assert rules.addmm_violations(x.float(), x, x) and not rules.addmm_violations(x, x, x)
    assert rules.mm_out_dtype_violations(x.float(), x.float(), torch.float32)
    assert rules.scaled_mm_bias_format(Format.FP32) is None
    assert rules.scaled_mm_bias_format(Format.E4M3) == Format.BF16
