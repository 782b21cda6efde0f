"""The report of a solver answer and the command's exit: shared by the instruction
commands (solve.py) and the GEMM ones (gemm_solve.py)."""

from __future__ import annotations

import json
import sys

import click

from ..errors import ExitCode
from ..smt.report import to_json, to_text
from ..smt.solve import Outcome, Verdict


def report_and_exit(
    o: Outcome, files: list[str], as_json: bool, codes: dict, unwritten: bool = False
) -> None:
    """Print the report (text or JSON; an instruction or a GEMM query alike), the
    internal-error line for a witness that does not reproduce, and exit with the
    command's code for the verdict (`unwritten`: an output file could not be written
    after all; its content is printed above and the exit code is 2)."""
    if as_json:
        click.echo(json.dumps(to_json(o, files), indent=2))
    else:
        click.echo(to_text(o, files))
    if o.verdict == Verdict.BAD_WITNESS:
        click.echo(
            "tcsmt: internal error: the solver's witness does not reproduce on the concrete "
            "model (or, for a GEMM query, the emulator); please report this query (use "
            "--export to save it)",
            err=True,
        )
    sys.exit(ExitCode.USAGE if unwritten else codes[o.verdict])


__all__ = ["report_and_exit"]
