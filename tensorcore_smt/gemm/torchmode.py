"""A torch drop-in: `with tensorcore_smt.emulate("hopper/serial[promote=128]"): y = model(x)`.

A torch function mode (torch.overrides.TorchFunctionMode) that computes every
torch.matmul / Tensor.__matmul__, mm, bmm, addmm, nn.functional.linear and
torch._scaled_mm inside the block as the GEMM hypothesis would (tensorcore_smt.matmul),
and leaves every other function native. Semantics follow torch and cuBLASLt: the output
has the inputs' dtype (_scaled_mm: `out_dtype`), addmm's input and linear's bias join in
the fp32 epilogue (cuBLASLt CUBLASLT_EPILOGUE_BIAS; D = alpha*acc + beta*C), and
_scaled_mm's `use_fast_accum` picks the promotion: True is one chain over K, False a
fresh chain every 128 K elements (the hypothesis' own `promote` where it sets one).
Forward values only: the results carry no autograd history.

torch is imported when the mode is entered, so `import tensorcore_smt` does not need it.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..errors import UserError
from .hypothesis import GemmHypothesis
from .schedule import CJoin

FP8_PROMOTE = 128
"""K elements per chain of cuBLASLt FP8 GEMMs without fast accumulation (schedules/
cublas-fp8.toml; DeepSeek-V3 report §3.3.2)."""


def _hypothesis(hypothesis: str | GemmHypothesis) -> GemmHypothesis:
    from .emulate import resolve_hypothesis

    hyp = resolve_hypothesis(hypothesis, None, None)
    if hyp.schedule.c_join is None:  # cuBLASLt adds C and bias in the epilogue
        hyp = GemmHypothesis(
            hyp.variant, hyp.schedule.with_(c_join=CJoin.EPILOGUE), hyp.instr, hyp.text
        )
    return hyp


def _mm(hyp: GemmHypothesis, a, b, c=None, *, alpha=None, beta=None, **kw):
    """tc.matmul with torch's output dtype (the inputs')."""
    from .emulate import matmul

    out = kw.pop("out_dtype", None) or a.dtype
    return matmul(hyp, a, b, c, alpha=alpha, beta=beta, out_dtype=out, **kw)


def _matmul(hyp, a, b, *, out=None):
    if out is not None:
        raise UserError("matmul(out=...) is not emulated")
    if a.dim() == 0 or b.dim() == 0:
        raise UserError("matmul of a 0-d tensor is not a GEMM")
    va, vb = a.dim() == 1, b.dim() == 1
    A = a.unsqueeze(0) if va else a
    B = b.unsqueeze(-1) if vb else b
    d = _mm(hyp, A, B)
    if va:
        d = d.squeeze(-2)
    if vb:
        d = d.squeeze(-1)
    return d


def _two_d(name: str, *ts) -> None:
    for t in ts:
        if t.dim() != 2:
            raise UserError(f"{name} takes 2-D matrices; got {tuple(t.shape)}")


def _mm_fn(hyp, a, b, *, out=None):
    if out is not None:
        raise UserError("mm(out=...) is not emulated")
    _two_d("mm", a, b)
    return _mm(hyp, a, b)


def _bmm(hyp, a, b, *, out=None):
    if out is not None:
        raise UserError("bmm(out=...) is not emulated")
    if a.dim() != 3 or b.dim() != 3:
        raise UserError(f"bmm takes 3-D batches; got {tuple(a.shape)} and {tuple(b.shape)}")
    return _mm(hyp, a, b)


def _addmm(hyp, c, a, b, *, beta=1, alpha=1, out=None):
    if out is not None:
        raise UserError("addmm(out=...) is not emulated")
    _two_d("addmm", a, b)
    return _mm(hyp, a, b, c, alpha=float(alpha), beta=float(beta))


def _linear(hyp, x, w, bias=None):
    if w.dim() != 2:
        raise UserError(f"linear takes a 2-D weight; got {tuple(w.shape)}")
    if x.dim() == 1:
        return _mm(hyp, x.unsqueeze(0), w.transpose(0, 1), bias).squeeze(0)
    return _mm(hyp, x, w.transpose(0, 1), bias)


def _scaled_mm(
    hyp: GemmHypothesis,
    a,
    b,
    scale_a,
    scale_b,
    bias=None,
    scale_result=None,
    out_dtype=None,
    use_fast_accum=False,
    **rest,
):
    if rest:
        raise UserError(f"_scaled_mm({', '.join(rest)}=...) is not emulated")
    if scale_result is not None and float(scale_result) != 1.0:
        raise UserError("_scaled_mm(scale_result=...) is not emulated")
    s = hyp.schedule
    promote = None if use_fast_accum else (s.promote or FP8_PROMOTE)
    h = GemmHypothesis(hyp.variant, s.with_(promote=promote), hyp.instr, hyp.text)
    return _mm(h, a, b, bias, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype or a.dtype)


def _handlers() -> dict[Any, Any]:
    import torch
    import torch.nn.functional as F

    t = torch.Tensor
    return {
        torch.matmul: _matmul,
        t.matmul: _matmul,
        t.__matmul__: _matmul,
        torch.mm: _mm_fn,
        t.mm: _mm_fn,
        torch.bmm: _bmm,
        t.bmm: _bmm,
        torch.addmm: _addmm,
        t.addmm: _addmm,
        F.linear: _linear,
        torch._scaled_mm: _scaled_mm,
    }


def emulate(hypothesis: str | GemmHypothesis, strict: bool = True):
    """A context manager (torch function mode) computing torch's matrix products as
    `hypothesis` (`ARCH[...]/SCHEDULE[...]`) would. A call it cannot emulate (a dtype no
    instruction of the architecture takes, an `out=` argument) raises UserError, or with
    `strict=False` runs natively with a warning. Needs torch."""
    try:
        from torch.overrides import TorchFunctionMode
    except ImportError:
        raise UserError("tensorcore_smt.emulate needs torch: pip install torch") from None
    hyp = _hypothesis(hypothesis)
    handlers = _handlers()

    class GemmMode(TorchFunctionMode):
        """Matrix products as the hypothesis computes them; everything else native."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            handler = handlers.get(func)
            if handler is None:
                return func(*args, **kwargs)
            try:
                return handler(hyp, *args, **kwargs)
            except UserError as e:
                if strict:
                    raise UserError(f"{getattr(func, '__name__', func)}: {e}") from None
                warnings.warn(f"{getattr(func, '__name__', func)} runs natively: {e}", stacklevel=2)
                return func(*args, **kwargs)

    return GemmMode()
