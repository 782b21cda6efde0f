"""A call through a library profile: its class (from the operands, the function and
torch's flags) and the decision of which recipe computes it, with where the recipe comes
from (`Source`: a recorded shape, the profile's rule, or the profile's default).

The default, for a call class the profile has not recorded or a shape of an alignment
class it has no recording of, is the profile's `default` hypothesis computed as
`tc.emulate(ARCH)` computes it: fp32 inputs at torch's "highest" precision run the
architecture's full-fp32 instruction, TF32 otherwise; `_scaled_mm` without fast
accumulation starts a new chain every FP8_PROMOTE K elements.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from .hypothesis import GemmHypothesis, full_fp32_instruction, parse_gemm, split_gemm_text
from .library_profile import class_name, resolve_instr, rule_label
from .library_rules import with_fields
from .profile_rule import aligned, nearest
from .profiles import (
    DEFAULT_FLAGS,
    CallKey,
    Epilogue,
    Flag,
    Function,
    Major,
    Profile,
    Source,
    call_key,
)
from .schedule import CJoin, OperandRound, parse_schedule

FP8_PROMOTE = 128
"""K elements per chain of cuBLASLt FP8 GEMMs without fast accumulation (schedules/
cublas-fp8.toml; DeepSeek-V3 report §3.3.2)."""


def parse_flags(flags: Mapping[Any, Any] | None) -> dict[Flag, bool]:
    """torch's precision flags from a mapping of flag names (or Flags) to booleans, the
    others at torch's defaults; UserError naming an unknown flag or a non-boolean."""
    out = dict(DEFAULT_FLAGS)
    for name, v in (flags or {}).items():
        try:
            f = Flag(name)
        except ValueError:
            allowed = ", ".join(f.value for f in Flag)
            raise UserError(f"flags: {name!r} is not a flag; allowed: {allowed}") from None
        if not isinstance(v, bool):
            raise UserError(f"flags: {f.value}={v!r}; expected True or False")
        out[f] = v
    return out


def torch_flags(fast_accum: bool = False) -> dict[Flag, bool]:
    """torch's precision flags as they are set now (torch.backends.cuda.matmul)."""
    import torch

    m = torch.backends.cuda.matmul
    return {
        Flag.TF32: bool(m.allow_tf32),
        Flag.FP16_REDUCED: bool(m.allow_fp16_reduced_precision_reduction),
        Flag.BF16_REDUCED: bool(m.allow_bf16_reduced_precision_reduction),
        Flag.FAST_ACCUM: bool(fast_accum),
    }


def _strides(x: Any) -> tuple[int, ...]:
    if hasattr(x, "stride") and callable(x.stride):  # torch: in elements
        return tuple(x.stride())
    return tuple(s // max(1, x.itemsize) for s in x.strides)  # numpy: in bytes


def major(x: Any) -> Major:
    """Whether a matrix (numpy or torch; the last two dimensions) lies by rows or by
    columns: COL when its columns are contiguous and its rows are not. A single column
    is COL only as a transposed view (row stride not 1): a contiguous K x 1 tensor is
    torch's default row-major, as the recorded calls' operands are."""
    if getattr(x, "ndim", 0) < 2:
        return Major.ROW
    st, shape = _strides(x), tuple(x.shape)
    if shape[-2] > 1 and st[-2] == 1 and st[-1] != 1:
        return Major.COL
    return Major.ROW


def epilogue_of(c: Any, alpha: float | None, beta: float | None) -> Epilogue:
    """The epilogue of a call with C (or a bias) `c` and scalars alpha, beta."""
    if (alpha is not None and alpha != 1.0) or (beta is not None and beta != 1.0):
        return Epilogue.ALPHA_BETA
    if c is None:
        return Epilogue.NONE
    shape = tuple(getattr(c, "shape", ()))
    if len(shape) < 2 or shape[-2] == 1:
        return Epilogue.BIAS
    return Epilogue.C


LIBRARY_TF32_ROUND = OperandRound.RNE
"""How the library rounds an fp32 operand to TF32 when torch lets it run TF32 and the
hypothesis does not say (`operand_round`): to nearest, ties to even, as the TF32 probe
(python -m tensorcore_smt.gemm.tf32_probe) decided on an H200 and an H100 (torch
2.11.0+cu130, cuBLAS 13.1; raw bits in results/hardware/<gpu>/library/extras): every
probe output agrees with it, truncation and ties-away each disagree on a quarter to a
half of them. Not truncation: on ordinary fp32 operands truncation mispredicts TF32
calls wholesale (the older H100 recordings fed operands already on the TF32 grid, where
the modes agree)."""


def library_tf32(hyp: GemmHypothesis) -> GemmHypothesis:
    """`hyp` with fp32 operands rounded to TF32 as the library rounds them, unless its
    schedule names `operand_round` itself."""
    if "operand_round" in hyp.text or hyp.schedule.operand_round != OperandRound.TRUNCATE:
        return hyp
    return GemmHypothesis(
        hyp.variant, hyp.schedule.with_(operand_round=LIBRARY_TF32_ROUND), hyp.instr, hyp.text
    )


@dataclass(frozen=True)
class Decision:
    """Which recipe a profile gives one call, and why."""

    profile: str
    key: CallKey
    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    call_class: str | None  # the profile's class of the call, None when it has none
    recipe: str  # the GEMM hypothesis ARCH/SCHEDULE[...]
    instr: str | None  # its instruction (None: the library default for the inputs)
    source: Source
    came_from: tuple[int, int, int] | None  # the recorded shape the recipe is of
    reason: str
    literal: bool = False  # a library profile's: the recipe and instr say everything

    def hypothesis(self) -> GemmHypothesis:
        """The recipe as a GEMM hypothesis. A library profile's recipe is taken as
        written (what its recordings were replayed with); an older profile's C and
        biases join in the fp32 epilogue (cuBLASLt) unless the recipe says where, and
        its TF32 operands are rounded as LIBRARY_TF32_ROUND."""
        hyp = parse_gemm(self.recipe, self.instr)
        if self.literal:
            return hyp
        if hyp.schedule.c_join is None:
            hyp = GemmHypothesis(
                hyp.variant, hyp.schedule.with_(c_join=CJoin.EPILOGUE), hyp.instr, hyp.text
            )
        if self.key.a == "fp32" and dict(self.key.flags).get(Flag.TF32, False):
            hyp = library_tf32(hyp)
        return hyp

    def as_dict(self) -> dict[str, Any]:
        k = self.key
        return {
            "profile": self.profile,
            "function": k.function.value,
            "batch": list(self.batch),
            "shape": {"M": self.m, "N": self.n, "K": self.k},
            "dtypes": {"a": k.a, "b": k.b, "out": k.out},
            "flags": k.flag_dict(),
            "layout": f"{k.layout[0].value},{k.layout[1].value}",
            "epilogue": k.epilogue.value,
            "call_class": self.call_class,
            "recipe": self.recipe,
            "instr": self.instr,
            "source": self.source.value,
            "from": list(self.came_from) if self.came_from else None,
            "reason": self.reason,
        }


def library_default(profile: Profile, key: CallKey) -> tuple[str, str | None]:
    """A library profile's default for a call: `default_recipe` with the TF32 operand
    rounding the profile states (tf32_round) written into the recipe, so that the recipe
    says all it computes."""
    recipe, instr = default_recipe(profile, key)
    if key.a == "fp32" and dict(key.flags).get(Flag.TF32, False) and profile.tf32_round:
        if "operand_round" not in recipe:
            recipe = with_fields(recipe, f"operand_round={profile.tf32_round}")
    return recipe, instr


def _decide_library(profile: Profile, key: CallKey, m: int, n: int, k: int, made) -> Decision:
    """A library profile's decision (gemm/library_profile.py): a reproduced recorded
    shape of the class, else the first table rule deciding the shape, else the default."""
    from .library_rules import decide as table_decide

    name = class_name(key)
    cls = profile.find(key)
    note = ""
    if cls is not None:
        rec = next((s for s in cls.shapes if s.mnk == (m, n, k)), None)
        if rec is not None and rec.exact:
            why = f"recorded; {rec.origin or 'its recipe'} reproduces {rec.reproduced} of {rec.elements} recorded elements"
            return made(rec.recipe, rec.instr or cls.instr, Source.RECORDED, rec.mnk, why, cls.name)
        if rec is not None:
            note = f"recorded, not reproduced ({rec.reproduced} of {rec.elements} elements); "
    got = table_decide(name, m, n, k, profile.gpu, profile.tables) if name else None
    if got is not None:
        recipe, tinstr, table, rule = got
        why = note + rule_label(table, rule) + (f": {rule.why}" if rule.why else "")
        instr = resolve_instr(tinstr, recipe, key)
        return made(recipe, instr, Source.RULE, None, why, name)
    recipe, instr = library_default(profile, key)
    if name is None:
        why = f"no recorded call class takes {key.text()}"
    else:
        why = note + f"no table rule decides {name} at {m}x{n}x{k}"
    return made(recipe, instr, Source.DEFAULT, None, why, name)


def default_recipe(profile: Profile, key: CallKey) -> tuple[str, str | None]:
    """The profile's default hypothesis for a call, as tc.emulate(ARCH) computes it."""
    hyp = parse_gemm(profile.default)
    flags = dict(key.flags)
    if key.function == Function.SCALED_MM and not flags.get(Flag.FAST_ACCUM, False):
        arch_text, sched_text = split_gemm_text(profile.default)
        sched = parse_schedule(sched_text or "serial")
        if sched.promote is None:
            return f"{arch_text}/{sched.with_(promote=FP8_PROMOTE).text()}", hyp.instr
    if key.a == "fp32" and not flags.get(Flag.TF32, False) and hyp.instr is None:
        return profile.default, full_fp32_instruction(hyp.arch)
    return profile.default, hyp.instr


def decide(
    profile: Profile, key: CallKey, m: int, n: int, k: int, batch: tuple[int, ...] = ()
) -> Decision:
    """The recipe `profile` gives a call of class `key` and shape (M, N, K)."""

    def made(recipe, instr, source, came_from, reason, cls=None) -> Decision:
        return Decision(
            profile.name,
            key,
            tuple(batch),
            m,
            n,
            k,
            cls,
            recipe,
            instr,
            source,
            came_from,
            reason,
            profile.is_library,
        )

    if profile.is_library:
        return _decide_library(profile, key, m, n, k, made)
    cls = profile.find(key)
    if cls is None:
        recipe, instr = default_recipe(profile, key)
        return made(recipe, instr, Source.DEFAULT, None, f"no call class {key.text()}")
    rec = next((s for s in cls.shapes if s.mnk == (m, n, k)), None)
    if rec is not None:
        why = f"recorded; reproduces {rec.reproduced} of {rec.elements} recorded elements"
        return made(rec.recipe, cls.instr, Source.RECORDED, rec.mnk, why, cls.name)
    assert profile.rule is not None  # format 1
    near = nearest(profile.rule, key.a, cls.shapes, m, n, k)
    if near is None:
        klass = "aligned" if aligned(key.a, m, n, k, profile.rule.align_bytes) else "unaligned"
        recipe, instr = default_recipe(profile, key)
        why = f"no reproduced recorded shape of the {klass} class in {cls.name}"
        return made(recipe, instr, Source.DEFAULT, None, why, cls.name)
    why = f"nearest recorded shape {near.m}x{near.n}x{near.k}"
    return made(near.recipe, cls.instr, Source.RULE, near.mnk, why, cls.name)


__all__ = [
    "FP8_PROMOTE",
    "Decision",
    "call_key",
    "decide",
    "default_recipe",
    "library_default",
    "epilogue_of",
    "major",
    "parse_flags",
    "torch_flags",
]
