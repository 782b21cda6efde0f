"""A torch drop-in: `with tensorcore_smt.emulate("hopper/serial[promote=128]"): y = model(x)`.

A torch function mode (torch.overrides.TorchFunctionMode) that computes every
torch.matmul / Tensor.__matmul__, mm, bmm, addmm, nn.functional.linear and
torch._scaled_mm inside the block as the GEMM hypothesis would (tensorcore_smt.matmul),
and leaves every other function native. Semantics follow torch and cuBLASLt: the output
has the inputs' dtype (_scaled_mm: `out_dtype`), addmm's input and linear's bias join in
the fp32 epilogue (cuBLASLt CUBLASLT_EPILOGUE_BIAS; D = alpha*acc + beta*C), and
_scaled_mm's `use_fast_accum` picks the promotion: True is one chain over K, False a
fresh chain every 128 K elements (the hypothesis' own `promote` where it sets one).
baddbmm is bmm with its input in the epilogue. Forward values only: the results carry no
autograd history. The mode's `emulated` lists each (function, instruction) it ran, in
first-call order.

`emulate(PROFILE)` (a library profile: `h100`, `h100-cublas-13.0`; docs/profiles.md;
a profile name is looked up before an architecture name) picks the recipe of every call
from the profile, by its class (function, formats, torch's precision flags as set when the
call runs, layouts, epilogue) and shape; the mode's `decisions` lists one Decision per
call, in call order, each saying whether its recipe is a recorded shape's, the profile's
rule's or its default.

fp32 inputs follow torch's float32 matmul precision (torch.set_float32_matmul_precision,
torch.backends.cuda.matmul.allow_tf32): on CUDA, "high" and "medium" let cuBLAS run TF32
(the architecture's fp32 default, its TF32 form, is emulated); "highest", torch's
default, is full fp32: cuBLAS SGEMM, a chain of FFMAs along K per output on NVIDIA
(`fma.rn.f32`), the fp32 MFMA on CDNA (`[full_fp32]` of schedules/instructions.toml).

Functions outside the emulated set that compute matrix products (einsum, addbmm,
scaled_dot_product_attention, ...: `NATIVE_PRODUCTS`) run natively; the mode warns once
per function name and lists them in its `native` attribute. So do matrix products of
integer or bool tensors (index arithmetic inside a model: an int64 torch.matmul), listed
as `matmul (int64)`: torch computes them exactly, modulo the dtype's width, on the CPU
and without tensor cores on CUDA (torch's integer GEMM on tensor cores is
torch._int_mm, not matmul), so they are no call of the emulated GEMM.

torch is imported when the mode is entered, so `import tensorcore_smt` does not need it.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..argtypes import Arg, check, check_type
from ..errors import UserError
from .hypothesis import GemmHypothesis, full_fp32_instruction
from .profile_call import FP8_PROMOTE, library_tf32, torch_flags
from .profiles import Function, Profile, find_profile
from .schedule import CJoin

NATIVE_PRODUCTS = (
    "einsum",
    "tensordot",
    "addbmm",
    "addmv",
    "mv",
    "dot",
    "vdot",
    "inner",
    "outer",
    "chain_matmul",
    "bilinear",
    "scaled_dot_product_attention",
    "multi_head_attention_forward",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
)
"""Names of torch functions that compute matrix products but are not emulated: each runs
natively, named once by a warning and in the mode's `native` list."""

FUNCTIONS: dict[str, Function] = {
    "matmul": Function.MM,
    "__matmul__": Function.MM,
    "mm": Function.MM,
    "bmm": Function.BMM,
    "baddbmm": Function.BMM,
    "addmm": Function.ADDMM,
    "linear": Function.LINEAR,
    "_scaled_mm": Function.SCALED_MM,
}
"""The call class function of each emulated torch function (batched mm/matmul: bmm)."""


def _hypothesis(hypothesis: str | GemmHypothesis) -> GemmHypothesis:
    from .emulate import resolve_hypothesis

    hyp = resolve_hypothesis(hypothesis, None, None)
    if hyp.schedule.c_join is None:  # cuBLASLt adds C and bias in the epilogue
        hyp = GemmHypothesis(
            hyp.variant, hyp.schedule.with_(c_join=CJoin.EPILOGUE), hyp.instr, hyp.text
        )
    return hyp


def _tf32_allowed() -> bool:
    """Whether torch lets cuBLAS run fp32 matmuls as TF32: float32 matmul precision
    "high" or "medium" (torch.set_float32_matmul_precision; the same flag as
    torch.backends.cuda.matmul.allow_tf32), not "highest" (torch's default)."""
    import torch

    return bool(torch.backends.cuda.matmul.allow_tf32)


def _fp32(hyp: GemmHypothesis, a) -> GemmHypothesis:
    """The hypothesis an fp32 product runs: at torch's float32 matmul precision "highest"
    (TF32 not allowed) the architecture's full-fp32 instruction (cuBLAS SGEMM's FFMA
    chain on NVIDIA), unless the hypothesis names one; with TF32 allowed, `hyp` with the
    library's operand conversion (LIBRARY_TF32_ROUND) where its schedule keeps the
    default; else `hyp` itself."""
    import torch

    if a.dtype != torch.float32:
        return hyp
    if _tf32_allowed():
        return library_tf32(hyp)
    if hyp.instr is not None:
        return hyp
    return dataclasses.replace(hyp, instr=full_fp32_instruction(hyp.arch))


@dataclass
class _Call:
    """What a handler needs: the hypothesis (None with a profile), the profile and the
    call's function, and the lists its runs and decisions are recorded in."""

    hyp: GemmHypothesis | None
    profile: Profile | None = None
    function: Function = Function.MM
    fast_accum: bool = False
    runs: list = field(default_factory=list)
    decisions: list = field(default_factory=list)


def _mm(call: _Call, a, b, c=None, *, alpha=None, beta=None, **kw):
    """tc.matmul with torch's output dtype (the inputs'); with a profile, the recipe the
    profile decides for this call."""
    from .emulate import decide_call, matmul

    out = kw.pop("out_dtype", None) or a.dtype
    if call.profile is None:
        hyp = _fp32(call.hyp, a)
    else:
        fn = call.function
        if fn == Function.MM and b.dim() > 2:  # an N-D A times a 2-D B: torch folds it, one mm
            fn = Function.BMM
        dec = decide_call(
            call.profile,
            fn,
            a,
            b,
            c,
            alpha=alpha,
            beta=beta,
            out_dtype=out,
            flags=torch_flags(call.fast_accum),
        )
        call.decisions.append(dec)
        hyp = dec.hypothesis()
    return matmul(hyp, a, b, c, alpha=alpha, beta=beta, out_dtype=out, run_info=call.runs, **kw)


def _matmul(call, a, b, *, out=None):
    if out is not None:
        raise UserError("matmul(out=...) is not emulated")
    if a.dim() == 0 or b.dim() == 0:
        raise UserError("matmul of a 0-d tensor is not a GEMM")
    va, vb = a.dim() == 1, b.dim() == 1
    A = a.unsqueeze(0) if va else a
    B = b.unsqueeze(-1) if vb else b
    d = _mm(call, A, B)
    if va:
        d = d.squeeze(-2)
    if vb:
        d = d.squeeze(-1)
    return d


def _two_d(name: str, *ts) -> None:
    for t in ts:
        if t.dim() != 2:
            raise UserError(f"{name} takes 2-D matrices; got {tuple(t.shape)}")


def _mm_fn(call, a, b, *, out=None, out_dtype=None):
    if out is not None:
        raise UserError("mm(out=...) is not emulated")
    _two_d("mm", a, b)
    return _mm(call, a, b, out_dtype=out_dtype)


def _bmm(call, a, b, *, out=None):
    if out is not None:
        raise UserError("bmm(out=...) is not emulated")
    if a.dim() != 3 or b.dim() != 3:
        raise UserError(f"bmm takes 3-D batches; got {tuple(a.shape)} and {tuple(b.shape)}")
    return _mm(call, a, b)


def _addmm(call, c, a, b, *, beta=1, alpha=1, out=None):
    if out is not None:
        raise UserError("addmm(out=...) is not emulated")
    _two_d("addmm", a, b)
    return _mm(call, a, b, c, alpha=float(alpha), beta=float(beta))


def _baddbmm(call, c, a, b, *, beta=1, alpha=1, out=None):
    if out is not None:
        raise UserError("baddbmm(out=...) is not emulated")
    if a.dim() != 3 or b.dim() != 3:
        raise UserError(f"baddbmm takes 3-D batches; got {tuple(a.shape)} and {tuple(b.shape)}")
    return _mm(call, a, b, c, alpha=float(alpha), beta=float(beta))


def _linear(call, x, w, bias=None):
    if w.dim() != 2:
        raise UserError(f"linear takes a 2-D weight; got {tuple(w.shape)}")
    if x.dim() == 1:
        return _mm(call, x.unsqueeze(0), w.transpose(0, 1), bias).squeeze(0)
    return _mm(call, x, w.transpose(0, 1), bias)


def _scaled_mm(
    call: _Call,
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
    if call.profile is not None:  # the profile's recipe says how it accumulates
        call.fast_accum = bool(use_fast_accum)
        h = None
    else:
        hyp = call.hyp
        s = hyp.schedule
        promote = None if use_fast_accum else (s.promote or FP8_PROMOTE)
        h = GemmHypothesis(hyp.variant, s.with_(promote=promote), hyp.instr, hyp.text)
    return _mm(
        dataclasses.replace(call, hyp=h) if h is not None else call,
        a,
        b,
        bias,
        scale_a=scale_a,
        scale_b=scale_b,
        out_dtype=out_dtype or a.dtype,
    )


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
        torch.baddbmm: _baddbmm,
        t.baddbmm: _baddbmm,
        F.linear: _linear,
        torch._scaled_mm: _scaled_mm,
    }


def _integer_dtype(args: tuple, kwargs: dict) -> str | None:
    """The dtype name (int64, uint8, bool, ...) of the first integer or bool tensor among
    a call's arguments, None when every tensor is a float one."""
    import torch

    for x in (*args, *kwargs.values()):
        if isinstance(x, torch.Tensor) and not (x.is_floating_point() or x.is_complex()):
            return str(x.dtype).removeprefix("torch.")
    return None


def emulate(hypothesis: str | GemmHypothesis, strict: bool = True):
    """A context manager (torch function mode) computing torch's matrix products as
    `hypothesis` (`ARCH[...]/SCHEDULE[...]`) would, or as a library profile (`h100`)
    decides per call. A call it cannot emulate (a dtype no instruction of the
    architecture takes, an `out=` argument) raises UserError, or with `strict=False`
    runs natively with a warning. Needs torch."""
    check_type("emulate: hypothesis", hypothesis, (str, GemmHypothesis), "a hypothesis or profile")
    check("emulate: strict", strict, Arg.BOOL)
    try:
        from torch.overrides import TorchFunctionMode
    except ImportError:
        raise UserError("tensorcore_smt.emulate needs torch: pip install torch") from None
    profile = find_profile(hypothesis) if isinstance(hypothesis, str) else None
    hyp = None if profile is not None else _hypothesis(hypothesis)
    handlers = _handlers()

    class GemmMode(TorchFunctionMode):
        """Matrix products as the hypothesis computes them; everything else native.
        `emulated`: (function name, instruction) of every emulated call, each pair once,
        in first-call order; `native`: the matrix-product functions (NATIVE_PRODUCTS)
        that ran natively, and `NAME (DTYPE)` for a product of integer tensors, in
        first-call order; `profile`: the library profile (None
        for a hypothesis) and `decisions`: with a profile, the Decision of every
        emulated call, in call order."""

        def __init__(self) -> None:
            super().__init__()
            self.emulated: list[tuple[str, str]] = []
            self.native: list[str] = []
            self.profile = profile
            self.decisions: list = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            handler = handlers.get(func)
            name = getattr(func, "__name__", str(func))
            if handler is None:
                if name in NATIVE_PRODUCTS and name not in self.native:
                    self.native.append(name)
                    warnings.warn(
                        f"{name} computes matrix products but is not emulated: it runs natively",
                        stacklevel=2,
                    )
                return func(*args, **kwargs)
            integer = _integer_dtype(args, kwargs)
            if integer is not None:  # integer products run natively (module docstring)
                entry = f"{name} ({integer})"
                if entry not in self.native:
                    self.native.append(entry)
                    warnings.warn(
                        f"{name} on {integer} tensors runs natively: integer matrix products "
                        "are exact in torch and not emulated",
                        stacklevel=2,
                    )
                return func(*args, **kwargs)
            call = _Call(hyp, profile, FUNCTIONS.get(name, Function.MM))
            try:
                out = handler(call, *args, **kwargs)
            except UserError as e:
                if strict:
                    raise UserError(f"{name}: {e}") from None
                warnings.warn(f"{name} runs natively: {e}", stacklevel=2)
                return func(*args, **kwargs)
            self.decisions.extend(call.decisions)
            for run in call.runs:
                if (name, run.instr) not in self.emulated:
                    self.emulated.append((name, run.instr))
            return out

    return GemmMode()
