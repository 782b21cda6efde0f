"""The library call classes (`op.precision[.rr0|.rr1]`, hardware/library_calls.py) as the
call classes of a profile (gemm/profiles.py CallKey), and the decision tables of
schedules/library (gemm/library_rules.py) as data inside a profile.

A library profile (format 2, docs/profiles.md) names its classes by the recordings' class
names and carries the rules of the tables that apply to its GPU, so that a call decides
its recipe from the profile file alone: a recorded shape of its class whose recipe
reproduced every recording of it, else the first table rule that decides the shape,
else the profile's default.

The mapping between a call as torch makes it (function, formats, flags, layouts,
epilogue) and a class name is one table (`OPS`) read both ways.
"""

from __future__ import annotations

from ..errors import UserError
from .library_rules import Rule as TableRule
from .library_rules import Table, table_doc, table_from_doc
from .profiles import CallKey, Epilogue, Flag, Function, Major, call_key

OPS: dict[str, tuple[Function, tuple[Major, Major], tuple[Epilogue, ...]]] = {
    "matmul": (Function.MM, (Major.ROW, Major.ROW), (Epilogue.NONE,)),
    "matmul-at": (Function.MM, (Major.COL, Major.ROW), (Epilogue.NONE,)),
    "matmul-bt": (Function.MM, (Major.ROW, Major.COL), (Epilogue.NONE,)),
    "linear": (Function.LINEAR, (Major.ROW, Major.COL), (Epilogue.NONE,)),
    "linear-bias": (Function.LINEAR, (Major.ROW, Major.COL), (Epilogue.BIAS,)),
    "addmm": (
        Function.ADDMM,
        (Major.ROW, Major.ROW),
        (Epilogue.ALPHA_BETA, Epilogue.C, Epilogue.BIAS),
    ),
    "bmm": (Function.BMM, (Major.ROW, Major.ROW), (Epilogue.NONE,)),
    "scaled-mm": (Function.SCALED_MM, (Major.ROW, Major.COL), (Epilogue.NONE,)),
    "scaled-mm-fast": (Function.SCALED_MM, (Major.ROW, Major.COL), (Epilogue.NONE,)),
}
"""Per recorded op: the profile function, the operand layouts and the epilogues of the
calls it stands for (the first epilogue is the recorded one: addmm was recorded with
alpha = 0.7, beta = 1.3; a matrix C with unit scalars or a bias vector is the same
cuBLASLt call with other scalars)."""

PRECISIONS: dict[str, tuple[str, str]] = {
    "fp16": ("fp16", "fp16"),
    "bf16": ("bf16", "bf16"),
    "fp32": ("fp32", "fp32"),
    "tf32": ("fp32", "fp32"),
    "e4m3": ("e4m3", "bf16"),
}
"""Per recorded precision: (input format, output format) of its calls."""

REDUCED_FLAG = {"fp16": Flag.FP16_REDUCED, "bf16": Flag.BF16_REDUCED}


def class_name(key: CallKey) -> str | None:
    """The library class name of a call (`matmul.fp16.rr1`), None when no recorded op
    takes it (another layout, mixed formats, another output format)."""
    flags = dict(key.flags)
    if key.a != key.b:
        return None
    if key.a == "fp32":
        prec = "tf32" if flags.get(Flag.TF32, False) else "fp32"
    elif key.a in ("fp16", "bf16", "e4m3"):
        prec = key.a
    else:
        return None
    if PRECISIONS[prec][1] != key.out:
        return None
    for op, (fn, layout, epilogues) in OPS.items():
        if fn != key.function or layout != key.layout or key.epilogue not in epilogues:
            continue
        if fn == Function.SCALED_MM:
            if (op == "scaled-mm-fast") != flags.get(Flag.FAST_ACCUM, False):
                continue
        elif prec == "e4m3":
            continue
        tail = f".rr{int(flags[REDUCED_FLAG[prec]])}" if prec in REDUCED_FLAG else ""
        return f"{op}.{prec}{tail}"
    return None


def class_key(name: str) -> CallKey:
    """The profile call class of a library class name (the recorded epilogue)."""
    parts = name.split(".")
    if len(parts) not in (2, 3) or parts[0] not in OPS or parts[1] not in PRECISIONS:
        raise UserError(f"call class {name!r}: expected OP.PRECISION[.rr0|.rr1]")
    op, prec = parts[0], parts[1]
    fn, layout, epilogues = OPS[op]
    a, out = PRECISIONS[prec]
    flags: dict[Flag, bool] = {}
    if prec in ("fp32", "tf32"):
        flags[Flag.TF32] = prec == "tf32"
    elif prec in REDUCED_FLAG:
        if len(parts) != 3 or parts[2] not in ("rr0", "rr1"):
            raise UserError(f"call class {name!r}: {prec} takes .rr0 or .rr1")
        flags[REDUCED_FLAG[prec]] = parts[2] == "rr1"
    else:
        flags[Flag.FAST_ACCUM] = op == "scaled-mm-fast"
    return call_key(fn, a, a, out, flags, layout, epilogues[0])


def resolve_instr(table_instr: str | None, recipe: str, key: CallKey) -> str | None:
    """The instruction a table's `instr` means for a call: "" (or None) the library
    default for the inputs, which for fp32 at torch's "highest" precision is the
    architecture's full-fp32 FFMA chain; "full-fp32" that chain; else the name itself."""
    from .hypothesis import full_fp32_instruction, split_gemm_text

    arch = split_gemm_text(recipe)[0].split("[")[0]
    highest = key.a == "fp32" and not dict(key.flags).get(Flag.TF32, False)
    if table_instr == "full-fp32" or (not table_instr and highest):
        return full_fp32_instruction(arch)
    return table_instr or None


def for_gpu(t: Table, gpu: str) -> Table:
    """`t` with only the rules that apply on `gpu`."""
    rules = tuple(r for r in t.rules if r.gpu is None or gpu in r.gpu)
    return Table(t.name, t.classes, t.instr, rules, t.source, t.base, t.vote)


def rule_label(table: Table, rule: TableRule) -> str:
    """`TABLE rule I` (I from 0, the rule's place in its table); in a vote table also the
    rule's tree: `TABLE rule I (tree T of a vote of V)`."""
    where = f"{table.name} rule {table.rules.index(rule)}"
    return f"{where} (tree {rule.tree} of a vote of {table.vote})" if table.vote else where


__all__ = [
    "OPS",
    "PRECISIONS",
    "class_key",
    "class_name",
    "for_gpu",
    "resolve_instr",
    "rule_label",
    "table_doc",
    "table_from_doc",
]
