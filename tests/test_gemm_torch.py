"""The torch drop-in (tensorcore_smt.emulate) equals tensorcore_smt.matmul bit for bit.
Needs the `torch` extra; marked `torch` (make test-torch)."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import tensorcore_smt as tc  # noqa: E402

pytestmark = pytest.mark.torch

HYPS = ["hopper", "hopper/serial[promote=128]", "ampere/serial[split_k=2,split_tile=32]"]


def _same(x, y) -> bool:
    return x.dtype == y.dtype and x.shape == y.shape and torch.equal(x.view(-1), y.view(-1))


@pytest.mark.parametrize("hyp", HYPS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mode_equals_matmul(hyp, dtype):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 5, 64, generator=g).to(dtype)
    w = torch.randn(24, 64, generator=g).to(dtype)
    bias = torch.randn(24, generator=g).to(dtype)
    c = torch.randn(5, 24, generator=g).to(dtype)
    with tc.emulate(hyp):
        y_mat = x @ w.T
        y_fn = torch.matmul(x, w.T)
        y_mm = torch.mm(x[0], w.T)
        y_bmm = torch.bmm(x, w.T.expand(3, 64, 24))
        y_lin = torch.nn.functional.linear(x, w, bias)
        y_add = torch.addmm(c, x[0], w.T, beta=0.5, alpha=2.0)
        y_vec = x[0, 0] @ w.T
    ep = hyp if "/" in hyp else hyp + "/serial"
    ep = ep.replace("serial", "serial[c_join=epilogue]", 1) if "[" not in ep else ep
    want = tc.matmul(hyp, x, w.T, out_dtype=dtype)
    assert _same(y_mat, want) and _same(y_fn, want) and _same(y_bmm, want)
    assert _same(y_mm, want[0])
    assert _same(y_vec, want[0, 0])
    assert _same(y_lin, tc.matmul(ep, x, w.T, bias, out_dtype=dtype))
    assert _same(y_add, tc.matmul(ep, x[0], w.T, c, alpha=2.0, beta=0.5, out_dtype=dtype))
    assert y_lin.dtype == dtype


def test_scaled_mm_fast_accum_picks_the_promotion():
    g = torch.Generator().manual_seed(7)
    a = torch.randn(16, 256, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(32, 256, generator=g).to(torch.float8_e4m3fn).T
    sa, sb = torch.tensor(0.5), torch.tensor(3.0)
    with tc.emulate("hopper"):
        fast = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True)
        slow = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    kw = dict(scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    assert _same(fast, tc.matmul("hopper/serial", a, b, **kw))
    assert _same(slow, tc.matmul("hopper/serial[promote=128]", a, b, **kw))
    assert not torch.equal(fast, slow)


def test_other_functions_stay_native_and_bad_calls_are_clear():
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    with tc.emulate("hopper"):
        s = torch.softmax(x.float(), dim=-1)
    assert torch.equal(s, torch.softmax(x.float(), dim=-1))
    with pytest.raises(tc.UserError, match="volta has no GEMM instruction for bf16"):
        with tc.emulate("volta"):
            x @ x.T
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tc.emulate("volta", strict=False):
            y = x @ x.T
    assert torch.equal(y, x @ x.T) and any("runs natively" in str(w.message) for w in caught)


def test_linear_on_a_vector_and_matmul_on_torch_device():
    g = torch.Generator().manual_seed(9)
    x = torch.randn(48, generator=g).to(torch.float16)
    w = torch.randn(8, 48, generator=g).to(torch.float16)
    with tc.emulate("ampere"):
        y = torch.nn.functional.linear(x, w)
    assert y.shape == (8,)
    assert _same(y, tc.matmul("ampere", x[None], w.T, out_dtype=torch.float16)[0])
    # the same element on torch's interpreter (device="cpu") equals the numpy engine
    A = torch.randn(5, 64, generator=g).to(torch.bfloat16)
    B = torch.randn(64, 6, generator=g).to(torch.bfloat16)
    for hyp in ("hopper", "hopper/serial[split_k=2,split_tile=32,reduce=pairwise,out=bf16]"):
        assert _same(tc.matmul(hyp, A, B, device="cpu"), tc.matmul(hyp, A, B))


@pytest.fixture
def fp32_precision():
    """Restores torch's float32 matmul precision after the test."""
    before = torch.get_float32_matmul_precision()
    yield torch.set_float32_matmul_precision
    torch.set_float32_matmul_precision(before)


def test_fp32_follows_torchs_matmul_precision(fp32_precision):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(4, 40, generator=g)
    w = torch.randn(40, 6, generator=g)
    c = torch.randn(6, generator=g)
    fp32_precision("highest")  # torch's default: full fp32, cuBLAS SGEMM (FFMA chains)
    with tc.emulate("ampere") as mode:
        y = x @ w
        y_lin = torch.nn.functional.linear(x, w.T, c)
    assert _same(y, tc.matmul("ampere", x, w, instr="fma.rn.f32"))
    ep = "ampere/serial[c_join=epilogue]"
    assert _same(y_lin, tc.matmul(ep, x, w, c, instr="fma.rn.f32"))
    assert mode.emulated == [("matmul", "fma.rn.f32"), ("linear", "fma.rn.f32")]
    assert not torch.equal(y, tc.matmul("ampere", x, w))  # not the TF32 mma
    with tc.emulate("cdna3") as mode_m:  # the fp32 MFMA is full fp32: emulated at any precision
        y_m = x @ w
    assert _same(y_m, tc.matmul("cdna3", x, w))
    assert mode_m.emulated == [("matmul", "v_mfma_f32_32x32x2_f32")]
    for level in ("high", "medium"):  # torch lets cuBLAS use TF32
        fp32_precision(level)
        with tc.emulate("ampere") as mode_t:
            y_t = x @ w
        assert _same(y_t, tc.matmul("ampere", x, w))
        assert mode_t.emulated == [("matmul", "m16n8k8.f32.tf32.tf32.f32")]
        assert not torch.equal(y_t, x @ w)  # TF32 drops 13 mantissa bits of each input
        with tc.emulate("volta") as mode_v:  # no TF32 on Volta: cuBLAS SGEMM at any precision
            y_v = x @ w
        assert _same(y_v, tc.matmul("volta", x, w, instr="fma.rn.f32"))
        assert mode_v.emulated == [("matmul", "fma.rn.f32")]


def test_baddbmm_is_emulated_and_other_products_are_named():
    g = torch.Generator().manual_seed(13)
    a = torch.randn(2, 3, 32, generator=g).to(torch.float16)
    b = torch.randn(2, 32, 5, generator=g).to(torch.float16)
    c = torch.randn(2, 3, 5, generator=g).to(torch.float16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tc.emulate("hopper") as mode:
            y = torch.baddbmm(c, a, b, beta=0.5, alpha=2.0)
            e1 = torch.einsum("bik,bkj->bij", a, b)
            e2 = torch.einsum("bik,bkj->bij", a, b)
    want = tc.matmul("hopper", a, b, c, alpha=2.0, beta=0.5, out_dtype=torch.float16)
    assert _same(y, want)
    assert torch.equal(e1, e2) and torch.equal(e1, torch.einsum("bik,bkj->bij", a, b))
    assert mode.native == ["einsum"]
    named = [m for m in caught if "einsum" in str(m.message)]
    assert len(named) == 1 and "not emulated" in str(named[0].message)
