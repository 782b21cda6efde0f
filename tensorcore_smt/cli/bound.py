"""`tcsmt bound`: a certified interval on a unit's worst error (or on two units' drift).

Exit codes: 0 the interval is closed to the resolution; 3 the budget ended first (the
open interval is reported as it stands); 2 bad input; 4 a solver witness that the
concrete model does not reproduce; 130 Ctrl-C (the interval found so far is reported
first).
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction

import click

from ..certify import report
from ..certify.bound import DEFAULT_RESOLUTION, WitnessBug, bound, default_class
from ..errors import ExitCode, UserError
from ..inputs.parse import parse_where
from ..model.measure import Measure
from ..smt.solve import Limits, solvers_for
from ..solvers.backends import SOLVER_HELP
from .base import check_out, main, write_or_print
from .bound_sides import side_instructions
from .options import META_OPTION, Ranged, only_with, parse_meta


def _fraction(text: str, what: str) -> Fraction:
    try:
        v = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise UserError(f"{what}: expected a number or p/q, got {text!r}") from None
    return v


_run = bound


@main.command("bound")
@click.argument("hypothesis")
@click.option(
    "--against",
    default="exact",
    show_default=True,
    help="The reference: the exact result c + sum a_k b_k, or a second variant of the "
    "same instruction shape (the drift between two units).",
)
@click.option(
    "--measure",
    "measure_name",
    default=Measure.NORMWISE.value,
    show_default=True,
    help="abs |d-r|, rel |d-r|/|r|, normwise |d-r|/(|c|+sum|a_k b_k|), ulp |d-r|/ulp(r).",
)
@click.option(
    "--where",
    "wheres",
    multiple=True,
    metavar="CONSTRAINT",
    help="Narrow the input class (repeatable): normal-only, nonzero, positive, "
    "exponent-window:[OPS=]LO:HI, representable:[OPS=]FMT, integer:[OPS=]P (integers of "
    "at most P bits, Ozaki slices), terms:N, fix:NAME=HEX. Finite inputs without "
    "overflow always.",
)
@click.option("--instr", default=None, help="Instruction (default: the preset's default).")
@click.option(
    "--against-instr",
    default=None,
    help="The --against variant's instruction where it is not --instr (one shape and "
    "operand formats: e.g. hopper's wgmma against ampere's mma.sync).",
)
@click.option(
    "--dtype",
    default=None,
    metavar="FMT",
    help="Input format: each side runs the instruction libraries run for it "
    "(schedules/instructions.toml), as the GEMM commands do; instead of --instr.",
)
@META_OPTION
@click.option(
    "--resolution",
    default=str(DEFAULT_RESOLUTION),
    show_default=True,
    help="Stop when upper <= lower (1 + R).",
)
@click.option(
    "--timeout",
    type=Ranged("timeout", float),
    default=300.0,
    show_default=True,
    help="Wall-clock budget of the whole search in seconds.",
)
@click.option(
    "--solver",
    default="portfolio",
    show_default=True,
    help=SOLVER_HELP,
)
@click.option("--jobs", type=Ranged("jobs", int), default=None, help="Solvers at once.")
@click.option(
    "--confirm/--no-confirm",
    default=True,
    help="Confirm each proved upper bound with a second solver.",
)
@click.option(
    "--gemm",
    is_flag=True,
    help="Bound one output element of the GEMM hypothesis ARCH/SCHEDULE at depth --k "
    "(normwise; U composed over the schedule's plan, L from columns run through tc.matmul).",
)
@click.option(
    "--k",
    "depth",
    type=click.IntRange(1, 1 << 16),
    default=4096,
    show_default=True,
    help="With --gemm: the depth K of the product.",
)
@click.option(
    "--rows",
    type=click.IntRange(1, 1 << 20),
    default=256,
    show_default=True,
    help="With --gemm: random columns run for the lower bound.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@click.option(
    "--out",
    default=None,
    help="Also write the JSON certificate to this file.",
)
def bound_cmd(
    hypothesis: str,
    against: str,
    measure_name: str,
    wheres: tuple[str, ...],
    instr: str | None,
    against_instr: str | None,
    dtype: str | None,
    meta_text: str | None,
    resolution: str,
    timeout: float,
    solver: str,
    jobs: int | None,
    confirm: bool,
    gemm: bool,
    depth: int,
    rows: int,
    as_json: bool,
    out: str | None,
) -> None:
    """Bound the worst error of HYPOTHESIS over an input class: an interval [L, U] whose
    L a witness attains (re-run on the concrete model, measured with exact rationals)
    and whose U a solver proves (unsat of "measure > U", confirmed by a second solver).

    Exit 0: closed to the resolution; 3: open when the budget ended.
    """
    only_with("--gemm", gemm, {"depth": "--k", "rows": "--rows"})
    try:
        measure = Measure.parse(measure_name)
    except ValueError as e:
        raise UserError(f"--measure: {e}") from None
    r = _fraction(resolution, "--resolution")
    if r <= 0:
        raise UserError(f"--resolution: {resolution} must be positive")
    if out is not None and out == "":
        raise UserError("--out: empty path")
    check_out(out)
    try:
        solvers_for(solver)
    except ValueError as e:
        raise UserError(f"--solver: {e}") from None
    cons = default_class() + tuple(parse_where(w) for w in wheres)
    meta = parse_meta(meta_text)
    instr, against_instr = side_instructions(hypothesis, against, instr, against_instr, dtype)
    if gemm:
        if meta is not None:
            raise UserError("--meta applies to a sparse (mma.sp) instruction, not --gemm")
        if against_instr is not None or dtype is not None:
            raise UserError(
                "--against-instr and --dtype apply to an instruction's bound; a --gemm "
                "hypothesis takes --instr"
            )
        _gemm(hypothesis, against, measure, cons, depth, rows, r, as_json, out, instr)
        return
    progress = None
    if not as_json and sys.stderr.isatty():

        def progress_step(step) -> None:
            click.echo(f"  {step.describe()} [{step.seconds:.1f} s]", err=True)

        progress = progress_step
    try:
        cert = _run(
            hypothesis,
            None if against == "exact" else against,
            instr=instr,
            measure=measure,
            constraints=cons,
            resolution=r,
            timeout=timeout,
            limits=Limits(solver, timeout, jobs, 8192, confirm, 0),
            on_step=progress,
            check_class=True,
            meta=meta,
            against_instr=against_instr,
        )
    except WitnessBug as e:
        click.echo(f"tcsmt: internal error: {e}", err=True)
        sys.exit(int(ExitCode.WITNESS_BUG))
    data = report.to_json(cert)
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(report.to_text(cert))
    if out:
        from pathlib import Path

        if write_or_print(Path(out), json.dumps(data, indent=2) + "\n", "certificate"):
            click.echo(f"wrote {out}", err=True)
        else:
            sys.exit(int(ExitCode.USAGE))
    if cert.interrupted:
        click.echo("tcsmt: interrupted: the interval found so far is reported above", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    sys.exit(int(ExitCode.OK if cert.closed else ExitCode.INCOMPLETE))


def _gemm(hypothesis, against, measure, cons, depth, rows, r, as_json, out, instr=None) -> None:
    """`tcsmt bound --gemm`: the certified interval of one output element of a GEMM."""
    from ..certify.gemm import gemm_certificate

    if measure != Measure.NORMWISE:
        raise UserError("--gemm: only --measure normwise is composed over a schedule")
    try:
        cert = gemm_certificate(
            hypothesis,
            depth,
            cons,
            None if against == "exact" else against,
            rows=rows,
            instr=instr,
        )
    except KeyboardInterrupt:
        click.echo("tcsmt: interrupted", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except WitnessBug as e:
        click.echo(f"tcsmt: internal error: {e}", err=True)
        sys.exit(int(ExitCode.WITNESS_BUG))
    data = cert.to_json()
    closed = cert.upper is not None and cert.upper <= cert.lower * (1 + r)
    data["status"] = "closed" if closed else "open"
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        ref = "the exact result" if against == "exact" else against
        lines = [
            f"question:  worst normwise error of one output element of {hypothesis} at "
            f"K = {depth}, r = {ref}",
            "class:     " + " ".join(c.describe() for c in cons),
            f"lower:     {float(cert.lower):.6g}  (attained: {data['lower_from']})",
            "upper:     "
            + (
                f"{float(cert.upper):.6g}  (proved by the composed argument below)"
                if cert.upper is not None
                else "not proved"
            ),
            *[f"  argument: {x}" for x in cert.argument],
            f"interval:  {data['status']}"
            + (
                "" if closed else ": the worst case lies in [lower, upper]; nothing more is claimed"
            ),
            f"seconds:   {cert.seconds:.1f}",
        ]
        click.echo("\n".join(lines))
    if out:
        from pathlib import Path

        if write_or_print(Path(out), json.dumps(data, indent=2) + "\n", "certificate"):
            click.echo(f"wrote {out}", err=True)
        else:
            sys.exit(int(ExitCode.USAGE))
    sys.exit(int(ExitCode.OK if closed else ExitCode.INCOMPLETE))
