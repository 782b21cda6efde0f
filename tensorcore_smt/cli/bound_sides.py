"""Which instruction each side of `tcsmt bound --against` runs: `--instr` for the
hypothesis, `--against-instr` for the reference variant (default: the same), or
`--dtype`, which picks on each side the instruction libraries run for that input format
(schedules/instructions.toml), as the GEMM commands do; so A100's mma.sync bf16 can be
bounded against H100's wgmma bf16 (what tc.emulate runs on each)."""

from __future__ import annotations

from ..errors import UserError
from ..gemm.hypothesis import default_instruction
from ..smt.goals import EXACT
from ..spec.presets import parse_variant
from .gemm_io import input_format


def side_instructions(
    hypothesis: str,
    against: str,
    instr: str | None,
    against_instr: str | None,
    dtype: str | None,
) -> tuple[str | None, str | None]:
    """(the hypothesis's instruction, the reference's where it differs) from the
    options; UserError, before any work, for a combination that names no single answer."""
    versus = against != EXACT
    if against_instr is not None and not versus:
        raise UserError("--against-instr: the exact result runs no instruction; give --against")
    if dtype is None:
        return instr, against_instr
    if instr is not None or against_instr is not None:
        raise UserError(
            "--dtype picks each side's instruction; leave --instr and --against-instr out"
        )
    fmt = input_format(dtype)
    assert fmt is not None
    mine = _library_instruction(hypothesis, fmt)
    theirs = _library_instruction(against, fmt) if versus else None
    return mine, (theirs if theirs != mine else None)


def _library_instruction(variant: str, fmt) -> str:
    """The instruction libraries run on `variant`'s preset for `fmt` x `fmt` inputs."""
    return default_instruction(parse_variant(variant).preset.name, fmt, fmt)
