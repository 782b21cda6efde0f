"""`tcsmt gemm --profile`: the recipe a library profile gives the command's GEMM, as a
GEMM hypothesis the command runs like any other, and the decision it came from."""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..formats import Format
from ..gemm.emulate import decide_call
from ..gemm.hypothesis import GemmHypothesis
from ..gemm.profile_call import Decision, parse_flags
from ..gemm.profiles import CallKey, Major, Profile
from ..intake import DTYPE_FORMAT


def profile_recipe(
    profile: Profile, call_class: str | None, A: np.ndarray, B: np.ndarray, C: np.ndarray | None
) -> tuple[GemmHypothesis, np.ndarray, Decision]:
    """(hypothesis, B as the call lays it out, decision) of the GEMM A*B (+ C) under
    `profile`: as the call class `call_class` (its function, flags, output format and B's
    layout) or, None, as torch.matmul with torch's default flags (output: the inputs')."""
    function, flags, out = None, parse_flags(None), None
    if call_class is not None:
        key = profile_class_key(profile, call_class)
        if key.a != _fmt_name(A):
            raise UserError(f"--call {call_class} takes {key.a} inputs; A is {_fmt_name(A)}")
        function, out = key.function, Format.parse(key.out)
        flags.update(dict(key.flags))
        if key.layout[0] == Major.COL:
            A = np.asfortranarray(A)
        if key.layout[1] == Major.COL:
            B = np.asfortranarray(B)
    dec = decide_call(profile, function, A, B, C, out_dtype=out, flags=flags)
    hyp = dec.hypothesis()
    sched = hyp.schedule.with_(out=Format.parse(dec.key.out))
    return GemmHypothesis(hyp.variant, sched, hyp.instr, dec.recipe), B, dec


def profile_class_key(profile: Profile, name: str) -> CallKey:
    """The call class `name` of `profile`: a library profile takes any recorded class name
    (library_calls: `matmul.fp16.rr1`, `linear.bf16.rr0`, ...), recorded in it or not."""
    if not profile.is_library:
        return profile.by_name(name).key
    from ..gemm.library_profile import class_key

    return class_key(name)


def _fmt_name(x: np.ndarray) -> str:
    f = DTYPE_FORMAT.get(x.dtype)
    return f.spec.name if f is not None else str(x.dtype)


__all__ = ["profile_class_key", "profile_recipe"]
