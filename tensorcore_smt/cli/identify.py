"""`tcsmt identify` and `tcsmt fit`: learn which model a unit follows from its outputs.

identify asks an oracle (a hidden variant, recorded rows, a program, the local GPU) the
questions that split the surviving hypotheses of a space; fit takes recorded rows only.
Both print the report of `tensorcore_smt.identify.report` (or its JSON with --json).
"""

from __future__ import annotations

import json
import sys

import click

from ..errors import ExitCode, UserError
from ..formats import Format
from ..identify.loop import Identifier, Result
from ..identify.oracle import make_oracle
from ..identify.report import to_json, to_text
from ..identify.search import RESTART_SECONDS
from ..identify.space import resolve_space
from ..smt.solve import PORTFOLIO, Limits, solvers_for
from ..solvers.backends import SOLVER_HELP
from .base import fail, main
from .gemm_io import DTYPE_HELP, input_format
from .options import Ranged, oracle_timeout_option


def _progress(enabled: bool):
    """A one-line progress display on a terminal's stderr (None when not shown)."""
    if not enabled:
        return None

    def show(text: str) -> None:
        sys.stderr.write("\r\033[K" + text[:150])
        sys.stderr.flush()

    return show


def _clear(enabled: bool) -> None:
    if enabled:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()


def _emit(res: Result, as_json: bool, extra: dict | None = None) -> None:
    """Print the report (or JSON), then end: exit 130 when interrupted (the report is the
    evidence so far), 2 with the oracle's error if it failed, 1 when no hypothesis
    reproduces every answer, 3 when the survivors are not established (several classes,
    or members not proved equal to their class's first: a solver said unknown or was
    never asked), 0 when one class is left whose every member is proved equal."""
    if as_json:
        doc = to_json(res)
        if extra:
            doc = {**extra, **doc}
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(to_text(res))
    if res.interrupted:
        click.echo("tcsmt: interrupted: the report above is the evidence so far", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    if res.error:
        fail(res.error)
    if not res.classes:
        sys.exit(ExitCode.REFUTED)
    if res.standing is not None and not res.standing["established"]:
        sys.exit(ExitCode.INCOMPLETE)


def _limits(solver: str, timeout: float, seed: int) -> Limits:
    """Solver limits; a named solver must be installed (exit 2 otherwise). Without any
    solver the portfolio is accepted: the loop then goes on without solver questions."""
    if solver != PORTFOLIO:
        solvers_for(solver)
    return Limits(solver=solver, timeout=timeout, seed=seed)


def _solver_opts(f):
    opts = [
        click.option(
            "--solver",
            default=PORTFOLIO,
            show_default=True,
            help=f"Solver for the questions between survivors: {SOLVER_HELP}",
        ),
        click.option(
            "--timeout",
            type=Ranged("timeout", float),
            default=10.0,
            show_default=True,
            help="Wall-clock budget of one solver question (all solvers within it).",
        ),
        click.option(
            "--search-seconds",
            type=Ranged("search_seconds", float),
            default=RESTART_SECONDS,
            show_default=True,
            help="Seconds the search may climb from random points of the space when no "
            "climb from the preset or the survivors reproduces the answers.",
        ),
        click.option(
            "--seed",
            type=Ranged("seed", int),
            default=0,
            show_default=True,
            help="Row and solver seed.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Machine-readable report."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


@main.command("identify")
@click.option("--arch", required=True, help="Architecture preset (the space is built around it).")
@click.option("--instr", default=None, help="Instruction (default: the preset's default).")
@click.option(
    "--oracle",
    "oracle_spec",
    required=True,
    metavar="SPEC",
    help="Who answers: variant:EXPR, file:ROWS, cmd:PROGRAM, or cuda[:DIR].",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1, max=1 << 20),
    default=200,
    show_default=True,
    help="Most vectors sent to the oracle.",
)
@click.option(
    "--space", "space_name", default=None, help="Hypothesis space: a built-in name or a TOML file."
)
@click.option(
    "--gemm",
    is_flag=True,
    help="Learn a GEMM's schedule (spaces/gemm.toml) and the instruction's parameters from "
    "output elements of a depth --k product; --arch may be ARCH[...]/SCHEDULE[...] (the base).",
)
@click.option(
    "--k",
    "k",
    type=click.IntRange(1, 1 << 16),
    default=None,
    help="With --gemm: the depth K of the product (default 256).",
)
@click.option("--dtype", default=None, metavar="FMT", help=f"With --gemm: {DTYPE_HELP}.")
@_solver_opts
@oracle_timeout_option
def identify_cmd(
    arch: str,
    instr: str | None,
    oracle_spec: str,
    budget: int,
    space_name: str | None,
    gemm: bool,
    k: int | None,
    dtype: str | None,
    solver: str,
    timeout: float,
    search_seconds: float,
    seed: int,
    as_json: bool,
    oracle_timeout: float,
) -> None:
    """Learn which model of the space a unit follows, asking it the inputs that split the
    surviving hypotheses (oracles: variant:EXPR, file:ROWS, cmd:PROGRAM, cuda; with
    --gemm: variant:ARCH/SCHEDULE, cmd:PROGRAM, torch[:fast], numpy:matmul, torch:cpu)."""
    if gemm:
        space, oracle = _gemm_space_and_oracle(
            arch, instr, k, input_format(dtype), space_name, oracle_spec, oracle_timeout
        )
    else:
        if k is not None or dtype is not None or "/" in arch:
            raise UserError("--k, --dtype and ARCH/SCHEDULE go with --gemm")
        space = resolve_space(arch, instr, space_name)
        oracle = make_oracle(oracle_spec, space.base, space.arch, space.instr, oracle_timeout)
    show = sys.stderr.isatty() and not as_json
    limits = _limits(solver, timeout, seed)
    ident = Identifier(
        space,
        oracle,
        budget,
        limits,
        seed=seed,
        progress=_progress(show),
        search_seconds=search_seconds,
    )
    res = ident.run()
    _clear(show)
    _emit(res, as_json)


def _gemm_space_and_oracle(
    arch: str,
    instr: str | None,
    k: int | None,
    fmt: Format | None,
    space_name: str | None,
    oracle_spec: str,
    oracle_timeout: float,
):
    """The GEMM space (spaces/gemm.toml, or --space FILE) and its oracle."""
    from pathlib import Path

    from ..identify.gemm import load_gemm_space, make_gemm_oracle
    from ..identify.space import builtin_spaces

    path = None
    if space_name is not None:
        path = builtin_spaces().get(space_name) or Path(space_name)
    space = load_gemm_space(arch, k or 256, instr, path, fmt)
    return space, make_gemm_oracle(oracle_spec, space, oracle_timeout)


@main.command("fit")
@click.argument("rows", type=click.Path(dir_okay=False))
@click.option("--arch", required=True, help="Architecture preset (the space is built around it).")
@click.option("--instr", default=None, help="Instruction (default: the preset's default).")
@click.option(
    "--space", "space_name", default=None, help="Hypothesis space: a built-in name or a TOML file."
)
@_solver_opts
def fit_cmd(
    rows: str,
    arch: str,
    instr: str | None,
    space_name: str | None,
    solver: str,
    timeout: float,
    search_seconds: float,
    seed: int,
    as_json: bool,
) -> None:
    """The hypotheses of the space that reproduce recorded rows (a, b, c, d: JSONL, vector
    JSON or CSV), grouped into classes the rows cannot tell apart, and the next probe."""
    from ..identify.fit import fit

    space = resolve_space(arch, instr, space_name)
    show = sys.stderr.isatty() and not as_json
    limits = _limits(solver, timeout, seed)
    res = fit(
        space, rows, limits, seed=seed, progress=_progress(show), search_seconds=search_seconds
    )
    _clear(show)
    _emit(res, as_json, {"rows": res.rows_read, "distinct_rows": len(res.vectors)})
