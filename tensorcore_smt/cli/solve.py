"""`tcsmt diff`, `tcsmt prove`, `tcsmt export`: questions about two variants for solvers.

Exit codes. diff: 0 witness found, 1 proved equal, 3 unknown. prove: 0 proved equal,
1 refuted (witness shown), 3 unknown. A proof by a stated argument (unsat-by-argument,
its extreme rows reproduced on the concrete model) exits as a solver's proof does. Both: 2 bad input, 4 a solver witness that the
concrete model does not reproduce (a bug, never shown as a result).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import ExitCode, UserError
from ..smt.gemm_query import MAX_K, is_gemm
from ..smt.gemm_solve import FOCUS_PER_BLOCK
from ..smt.query import Goal, Query
from ..smt.solve import Limits, Outcome, Verdict, answer, solvers_for
from .answer_report import report_and_exit
from .base import check_out, main, write_or_print
from .gemm_io import DTYPE_HELP
from .gemm_solve import DEFAULT_K, run_gemm
from .options import (
    Spinner,
    build_query,
    check_vector_out,
    constraint_options,
    export_query,
    limits_from,
    parse_meta,
    query_options,
    solver_options,
)

# (verdict -> exit code) per command
_DIFF_EXIT = {
    Verdict.WITNESS: ExitCode.OK,
    Verdict.UNSAT: ExitCode.REFUTED,
    Verdict.UNSAT_BY_ARGUMENT: ExitCode.REFUTED,
    Verdict.UNKNOWN: ExitCode.INCOMPLETE,
    Verdict.BAD_WITNESS: ExitCode.WITNESS_BUG,
}
_PROVE_EXIT = {
    Verdict.UNSAT: ExitCode.OK,
    Verdict.UNSAT_BY_ARGUMENT: ExitCode.OK,
    Verdict.WITNESS: ExitCode.REFUTED,
    Verdict.UNKNOWN: ExitCode.INCOMPLETE,
    Verdict.BAD_WITNESS: ExitCode.WITNESS_BUG,
}


def save_witness(o: Outcome, path: str) -> bool:
    """Write the witness as a test-vector file with both variants' predicted outputs
    (printed on stdout instead if the file cannot be written after all)."""
    from ..validation import vectors

    q, w = o.query, o.witness
    vf = vectors.VectorFile(
        arch=q.variants[0].split("[")[0].strip(),
        instruction=q.instruction,
        variants=list(q.variants),
        vectors=[
            vectors.Vector(
                **q.vector_fields(w.inputs),
                predicted=dict(zip(q.variants, w.outputs)),
                note=f"{q.goal.value}: {q.variants[0]} vs {q.variants[1]}",
            )
        ],
    )
    return write_or_print(Path(path), vectors.dumps(vf, path), "witness")


def run(
    q: Query, limits: Limits, as_json: bool, out: str | None, export: str | None, codes
) -> None:
    """Answer, report, write files, exit with the command's code for the verdict."""
    solvers_for(limits.solver)  # bad solver names and output paths fail before any work
    check_out(out)
    check_vector_out(q, out)
    files: list[str] = []
    if export is not None:
        files.append(str(export_query(q, export or None)))
    spinner = Spinner(sys.stderr.isatty() and not as_json)
    try:
        o = answer(q, limits, spinner)
    finally:
        spinner.clear()
    unwritten = False
    if out and o.witness and o.verdict == Verdict.WITNESS:
        if save_witness(o, out):
            files.append(str(out))
        else:
            unwritten = True
    report_and_exit(o, files, as_json, codes, unwritten)


def gemm_options(f):
    """--k, --zero-k and --focus: the options of GEMM hypotheses (ARCH/SCHEDULE)."""
    f = click.option(
        "--focus/--no-focus",
        default=True,
        help="GEMM diff: ask first with the k-blocks inside chains +0 (a witness of "
        "the whole question), then the whole query.",
    )(f)
    return gemm_query_options(f)


def gemm_query_options(f):
    """--k and --zero-k: the shape of a GEMM query."""
    opts = [
        click.option(
            "--k",
            "k",
            type=click.IntRange(1, MAX_K),
            default=None,
            help=f"GEMM hypotheses: the depth K of the product (default {DEFAULT_K}).",
        ),
        click.option(
            "--zero-k",
            "zero_k",
            multiple=True,
            metavar="LO:HI",
            help="GEMM hypotheses: a_k = b_k = +0 for LO <= k < HI.",
        ),
        click.option(
            "--dtype", default=None, metavar="FMT", help=f"GEMM hypotheses: {DTYPE_HELP}."
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _gemm_level(x: str, y: str, opts: dict) -> bool:
    """Whether the hypotheses are GEMM hypotheses; UserError when only one is, or when a
    GEMM option is given to instruction-level variants."""
    gx, gy = is_gemm(x), is_gemm(y)
    if gx != gy:
        raise UserError(
            "compare two GEMM hypotheses (ARCH[...]/SCHEDULE[...]) or two instruction "
            f"variants; got {x!r} and {y!r} (write 'ARCH/serial' for the plain chain)"
        )
    if not gx and (opts.get("k") is not None or opts.get("zero_k") or opts.get("dtype")):
        raise UserError(
            "--k, --zero-k and --dtype apply to GEMM hypotheses ARCH[...]/SCHEDULE[...]"
        )
    if gx and opts.get("meta_text") is not None:
        raise UserError("--meta applies to a sparse (mma.sp) instruction, not a GEMM")
    return gx


@main.command()
@query_options
@solver_options
@gemm_options
@click.option(
    "--compare-errors",
    is_flag=True,
    help="Instead of any difference, find inputs where X's error is smaller than Y's.",
)
def diff(variant_x: str, variant_y: str, compare_errors: bool, focus: bool, **opts) -> None:
    """Find inputs on which two variants of one instruction, or two GEMM hypotheses
    ARCH[...]/SCHEDULE[...] (one output element of a depth --k product), give
    different bits.

    Exit 0: witness found (re-checked on the concrete model); 1: proved equal; 3: unknown.
    """
    goal = Goal.COMPARE_ERRORS if compare_errors else Goal.DIFFER
    if _gemm_level(variant_x, variant_y, opts):
        if compare_errors:
            raise UserError("--compare-errors is not asked of GEMM hypotheses")
        run_gemm(variant_x, variant_y, goal, opts, limits_from(opts), _DIFF_EXIT, focus)
    q = build_query(variant_x, variant_y, goal, opts)
    run(q, limits_from(opts), opts["as_json"], opts["out"], opts["export_path"], _DIFF_EXIT)


@main.command()
@query_options
@solver_options
@gemm_options
def prove(variant_x: str, variant_y: str, focus: bool, **opts) -> None:
    """Prove two variants (or two GEMM hypotheses ARCH[...]/SCHEDULE[...]) give the same
    bits on every input (subject to the constraints).

    Exit 0: proved; 1: refuted (a witness is shown); 3: unknown.
    """
    if _gemm_level(variant_x, variant_y, opts):
        run_gemm(variant_x, variant_y, Goal.EQUIVALENT, opts, limits_from(opts), _PROVE_EXIT, False)
    q = build_query(variant_x, variant_y, Goal.EQUIVALENT, opts)
    run(q, limits_from(opts), opts["as_json"], opts["out"], opts["export_path"], _PROVE_EXIT)


@main.command()
@click.argument("variants", nargs=-1)
@constraint_options
@click.option(
    "--goal",
    type=click.Choice([g.value for g in Goal if g != Goal.ERROR_EXCEEDS]),
    default=Goal.DIFFER.value,
    show_default=True,
    help="What the query asks.",
)
@click.option("--property", "prop_name", default=None, help="Export every query of a property.")
@click.option("--arch", default=None, help="Architecture for --property.")
@click.option(
    "--out",
    "out",
    type=click.Path(),
    default=None,
    help="Output file (default: queries/NAME.smt2; a directory with --property).",
)
@gemm_query_options
@click.option(
    "--focused",
    is_flag=True,
    help="GEMM hypotheses: the focused query (the k-blocks inside chains +0) diff asks first.",
)
def export(
    variants: tuple[str, ...],
    goal: str,
    prop_name: str | None,
    arch: str | None,
    out: str | None,
    focused: bool,
    **opts,
) -> None:
    """Write a query as SMT-LIB2 that z3, cvc5 and bitwuzla all read.

    Either two variants (tcsmt export volta 'volta[carry_bits=2]'), two GEMM hypotheses
    (tcsmt export hopper/fast-accum hopper/cublas-fp8 --k 256; the whole query, or the
    focused one with --focus), or a property of the library on an architecture (tcsmt
    export --property carry-bits --arch ampere).
    """
    if prop_name:
        from ..smt.library import get

        if variants:
            raise UserError("give either two variants or --property, not both")
        if not arch:
            raise UserError("--property needs --arch")
        meta = parse_meta(opts["meta_text"])
        for _, q in get(prop_name).bind(arch, opts["instr"], meta):
            dst = Path(out) / f"{q.slug}.smt2" if out else None
            if dst is not None:
                dst.parent.mkdir(parents=True, exist_ok=True)  # --out names a folder here
            click.echo(str(export_query(q, str(dst) if dst else None, "--out")))
        return
    if len(variants) != 2:
        raise UserError(f"export takes two variants (or --property); got {len(variants)}")
    if _gemm_level(variants[0], variants[1], opts):
        from ..smt import gemm_query
        from .gemm_solve import build_gemm_query

        q = build_gemm_query(variants[0], variants[1], Goal(goal), opts)
        if focused:
            q = gemm_query.focused(q, FOCUS_PER_BLOCK)
        click.echo(str(export_query(q, out, "--out")))
        return
    q = build_query(variants[0], variants[1], Goal(goal), opts)
    click.echo(str(export_query(q, out, "--out")))
