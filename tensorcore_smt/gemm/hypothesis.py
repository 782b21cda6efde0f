"""GEMM hypotheses: an instruction model (a variant) plus a schedule, written
`ARCH[...]/SCHEDULE[...]` (`hopper/serial[promote=128]`; `/SCHEDULE` left out: `serial`).

The instruction a library runs for given input formats on an architecture is data
(schedules/instructions.toml); `GemmHypothesis.instruction` picks it unless one is named.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache

from ..errors import UserError
from ..formats import Format
from ..model.params import ModelParams, Sparsity
from ..model.sparse import refusal
from ..spec.datadirs import data_dir
from ..spec.presets import Instruction, Variant, parse_variant
from .schedule import Schedule, parse_schedule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@cache
def _instruction_tables() -> dict:
    return tomllib.loads((data_dir("schedules") / "instructions.toml").read_text())


def default_instructions() -> dict[str, dict[str, str]]:
    """arch -> {input key ("fp16", "e4m3.e5m2", ...) -> instruction name}."""
    return _instruction_tables()["instructions"]


def full_fp32_instruction(arch: str) -> str:
    """The instruction of an fp32 GEMM on `arch` where TF32 is not allowed (torch's
    float32 matmul precision "highest"; `[full_fp32]` of schedules/instructions.toml:
    NVIDIA's FFMA chain, CDNA's fp32 MFMA); UserError when the table has none."""
    name = _instruction_tables().get("full_fp32", {}).get(arch)
    if name is None:
        raise UserError(f"{arch} has no full-fp32 GEMM instruction in schedules/instructions.toml")
    return name


DEFAULT_INPUT = Format.FP16
"""The input format of a GEMM when none is given (--dtype left out): the one every
architecture's matrix unit takes."""


def default_instruction(arch: str, a: Format, b: Format) -> str:
    """The instruction libraries run on `arch` for A in format `a` and B in `b`
    (fp32 arrays: the TF32 form where there is one); UserError when there is none."""
    table = default_instructions().get(arch, {})
    key = a.spec.name if a == b else f"{a.spec.name}.{b.spec.name}"
    name = table.get(key)
    if name is None:
        known = ", ".join(table) or "none"
        raise UserError(
            f"{arch} has no GEMM instruction for {key} inputs; inputs it takes: {known}"
        )
    return name


def split_gemm_text(text: str) -> tuple[str, str | None]:
    """`ARCH[...]/SCHEDULE[...]` -> (variant text, schedule text or None), cutting at the
    first `/` outside brackets."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "/" and depth == 0:
            return text[:i].strip(), text[i + 1 :].strip()
    return text.strip(), None


@dataclass(frozen=True)
class GemmHypothesis:
    """An instruction model and a schedule: how every output element of a GEMM is
    computed. `instr` None: the instruction libraries use for the inputs' formats."""

    variant: Variant
    schedule: Schedule
    instr: str | None = None
    text: str = ""

    @property
    def arch(self) -> str:
        return self.variant.preset.name

    def instruction(self, a: Format | None = None, b: Format | None = None) -> Instruction:
        """The instruction this hypothesis runs for A and B in formats `a`, `b` (the
        named one when `instr` is set, else the library default for those formats; `a`
        None: for `DEFAULT_INPUT`). Every GEMM command and the API pick it here."""
        if self.instr is not None:
            return self.variant.instruction(self.instr)
        a = a if a is not None else DEFAULT_INPUT
        name = default_instruction(self.arch, a, b if b is not None else a)
        return self.variant.instruction(name)

    def params(self, a: Format | None = None, b: Format | None = None) -> ModelParams:
        """The instruction's model under the variant's overrides; UserError when the
        instruction cannot be chained (c and d formats differ), is structured-sparse
        (its metadata has no place in a GEMM) or is block-scaled."""
        inst = self.instruction(a, b)
        p = self.variant.params(inst.name)
        if p.c_fmt != p.d_fmt:
            raise UserError(
                f"{inst.name} takes c in {p.c_fmt.spec.name} and gives d in "
                f"{p.d_fmt.spec.name}: a GEMM chain feeds d back as c; pick an instruction "
                "with c and d in one format"
            )
        if p.sparse != Sparsity.NONE:
            raise UserError(
                refusal(inst.name, p, "a GEMM chains dense instructions; name a dense one")
            )
        if p.scale_fmt is not None:
            raise UserError(
                f"{inst.name} is block-scaled: GEMMs with per-block scale factors are not "
                "modelled; pick an instruction without .block_scale"
            )
        return p

    def describe(self) -> str:
        return self.text or f"{self.variant.text}/{self.schedule.text()}"


def parse_gemm(
    text: str, instr: str | None = None, schedule: str | Schedule | None = None
) -> GemmHypothesis:
    """Parse `ARCH[...]/SCHEDULE[...]`. `schedule` gives the schedule when the text has
    none (default `serial`); giving both is an error."""
    if not isinstance(text, str) or not text.strip():
        raise UserError("empty GEMM hypothesis; expected ARCH[...]/SCHEDULE[...]")
    if instr is not None and (not isinstance(instr, str) or not instr.strip()):
        raise UserError(f"instruction {instr!r}: expected an instruction name")
    arch_text, sched_text = split_gemm_text(text)
    if not arch_text:
        raise UserError(f"malformed GEMM hypothesis {text!r}: no architecture before '/'")
    if sched_text is not None and schedule is not None:
        raise UserError(f"{text!r} names a schedule; give it there or separately, not both")
    variant = parse_variant(arch_text)
    if isinstance(schedule, Schedule):
        sched = schedule
    else:
        sched = parse_schedule(sched_text if sched_text is not None else (schedule or "serial"))
    shown = f"{arch_text}/{sched_text if sched_text is not None else sched.text()}"
    if isinstance(schedule, str):
        shown = f"{arch_text}/{schedule}"
    return GemmHypothesis(variant, sched, instr, shown)
