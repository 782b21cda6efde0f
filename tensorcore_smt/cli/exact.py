"""`tcsmt exact`: up to which K a unit, its serial chain and a GEMM schedule
(`ARCH/SCHEDULE`: promotions, split-K) sum integer slices exactly.

Exit codes: 0 a range was proved (and the report states the chain it implies); 3 the
solvers did not decide within the budget; 2 bad input; 130 Ctrl-C.
"""

from __future__ import annotations

import json
import sys

import click

from ..certify.exact import exactness
from ..errors import ExitCode, UserError
from ..formats import format_hex
from ..smt.solve import Limits
from .base import main
from .options import Ranged


@main.command("exact")
@click.argument("hypothesis")
@click.option(
    "--slices",
    "slice_bits",
    type=Ranged("slices", int),
    default=None,
    help="Bits P of the integer slices: |a_k|, |b_k| <= 2^P - 1 (Ozaki scheme; 7 for bf16). "
    "Required for floating-point units; an integer instruction takes none.",
)
@click.option("--instr", default=None, help="Instruction (default: the preset's default).")
@click.option(
    "--timeout",
    type=Ranged("timeout", float),
    default=600.0,
    show_default=True,
    help="Wall-clock budget of the whole search in seconds.",
)
@click.option("--solver", default="portfolio", show_default=True, help="Solver(s).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
def exact_cmd(
    hypothesis: str,
    slice_bits: int | None,
    instr: str | None,
    timeout: float,
    solver: str,
    as_json: bool,
) -> None:
    """The largest running accumulator an instruction adds P-bit integer slices into
    exactly (proved), the witness just above it, and the K up to which a serial chain
    of the instruction is exact (by induction, stated in the report), with a chain
    witness re-run through tc.matmul. HYPOTHESIS may name a GEMM schedule
    (ARCH[...]/SCHEDULE[...], e.g. hopper/cublas-fp8): the K up to which that schedule
    (its chains, fp32 promotions, split-K partials, epilogue) is exact with C = 0, and a
    witness at the next K.

    Exit 0: a range was proved; 3: undecided within the budget.
    """
    from ..smt.solve import solvers_for

    try:
        solvers_for(solver)
    except ValueError as e:
        raise UserError(f"--solver: {e}") from None
    progress = None
    if not as_json and sys.stderr.isatty():

        def progress(s) -> None:
            click.echo(f"  |c| < 2^{s.c_bits}: {s.verdict.value} [{s.seconds:.1f} s]", err=True)

    from ..certify.exact_gemm import checked_gemm, gemm_exactness
    from ..gemm.hypothesis import split_gemm_text

    variant, schedule = split_gemm_text(hypothesis)
    if _is_integer(variant, instr):
        if schedule is not None or slice_bits is not None:
            raise UserError(
                "an integer instruction: give neither --slices nor a GEMM schedule "
                "(the report is the overflow-free serial chain)"
            )
        _integer_report(variant, instr, as_json)
        return
    if slice_bits is None:
        raise UserError("--slices is required for a floating-point unit (7 for bf16 slices)")
    sparse_name, instr = _dense_unit(variant, instr, schedule)
    if schedule is not None:  # a bad schedule is reported before any solver runs
        checked_gemm(hypothesis, instr)
    r = exactness(
        variant,
        slice_bits,
        instr=instr,
        timeout=timeout,
        limits=Limits(solver, timeout),
        on_step=progress,
    )
    q_fmt = None
    if r.lemma_witness is not None:
        from ..api import resolve

        q_fmt = resolve(variant, r.instruction)
    wit = None
    if r.lemma_witness is not None:
        w = r.lemma_witness
        wit = {
            "a": [format_hex(w[f"a{i}"], q_fmt.a_fmt) for i in range(r.L)],
            "b": [format_hex(w[f"b{i}"], q_fmt.b_fmt) for i in range(r.L)],
            "c": format_hex(w["c"], q_fmt.c_fmt),
        }
    data = {
        "hypothesis": hypothesis,
        "instr": sparse_name or r.instruction,
        "dense_unit": r.instruction if sparse_name else None,
        "slice_bits": slice_bits,
        "L": r.L,
        "accumulator_bits": r.c_bits,
        "accumulator_bound": r.bound_B,
        "accumulator_method": (
            "argument"
            if r.argued_B is not None and r.bound_B == r.argued_B
            else "solver"
            if r.c_bits is not None
            else None
        ),
        "accumulator_argument": r.argued_lines,
        "accumulator_argument_rows": r.argued_rows,
        "accumulator_argument_contradiction": r.argued_contradiction,
        "lemma": [
            {
                "c_bits": s.c_bits,
                "answer": s.verdict.value,
                "solver": s.solver,
                "confirmed_by": s.confirmed_by,
                "seconds": round(s.seconds, 3),
            }
            for s in r.steps
        ],
        "witness": wit,
        "chain_exact_K": r.chain_K,
        "chain_witness_K": r.chain_witness_K,
        "chain_witness_error": None
        if r.chain_witness_error is None
        else f"{r.chain_witness_error.numerator}/{r.chain_witness_error.denominator}",
        "argument": r.argument(),
    }
    g = gemm_exactness(
        f"{variant}/{schedule or 'serial'}", slice_bits, instr=r.instruction, B=r.bound_B
    )
    data |= {
        "schedule": g.hypothesis,
        "gemm_exact_K": g.K,
        "gemm_binding": g.binding,
        "gemm_witness_K": g.witness_K,
        "gemm_witness_error": None
        if g.witness_error is None
        else f"{g.witness_error.numerator}/{g.witness_error.denominator}",
        "gemm_argument": g.lines,
        "seconds": round(r.seconds, 3),
    }
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(
            f"question:  exact sums of {slice_bits}-bit integer slices on {hypothesis} "
            f"({sparse_name or r.instruction}, L = {r.L} products)"
        )
        if sparse_name is not None:
            click.echo(
                f"sparse:    {sparse_name} is, whatever its metadata, the dense unit "
                f"{r.instruction} on its kept entries (model/sparse.py): answered there, "
                "K counting kept products"
            )
        for s in r.steps:
            extra = f", confirmed by {s.confirmed_by}" if s.confirmed_by else ""
            click.echo(
                f"  |c| <= 2^{s.c_bits}-1: {s.verdict.value} ({s.solver or '-'}{extra}) "
                f"[{s.seconds:.1f} s]"
            )
        for x in r.argued_lines:
            click.echo(f"  argument: {x}")
        if r.bound_B is None:
            click.echo("proved:    nothing within the budget (undecided)")
        else:
            how = data["accumulator_method"]
            click.echo(
                f"proved:    d = c + sum a_k b_k exactly for every |c| <= {r.bound_B} ({how})"
            )
            click.echo(f"chain:     exact up to K = {r.chain_K}: {r.argument()}")
        if wit is not None:
            click.echo(f"witness:   a = {' '.join(wit['a'])}")
            click.echo(f"           b = {' '.join(wit['b'])}")
            click.echo(f"           c = {wit['c']} (inexact: re-run on the concrete model)")
        if r.above_witness is not None and r.bound_B == r.argued_B:
            click.echo(f"tight:     |c| = {r.bound_B + 1} is not exact (the witness above)")
        if r.chain_witness_K is not None:
            click.echo(
                f"chain witness: K = {r.chain_witness_K}, |error| = "
                f"{data['chain_witness_error']} (tc.matmul, exact arithmetic)"
            )
        if g.K is not None:
            click.echo(
                f"schedule:  {g.hypothesis} with C = 0 exact up to K = {g.K} (argument); "
                f"next: {g.binding}"
            )
        else:
            click.echo(f"schedule:  {g.hypothesis}: nothing proved ({'; '.join(g.lines)})")
        if g.witness_K is not None:
            err = data["gemm_witness_error"] or "non-finite"
            click.echo(
                f"schedule witness: K = {g.witness_K}, |error| = {err} (tc.matmul, exact "
                "arithmetic)"
            )
        click.echo(f"seconds:   {r.seconds:.1f}")
    sys.exit(int(ExitCode.OK if r.bound_B is not None else ExitCode.INCOMPLETE))


def _dense_unit(
    variant: str, instr: str | None, schedule: str | None
) -> tuple[str | None, str | None]:
    """(the sparse instruction's name, the dense instruction to ask) for a
    structured-sparse `instr` whose dense unit is the same for every metadata (the
    compressed hypothesis, with a dense twin in the preset); (None, instr) for a dense
    one; UserError otherwise, before any work."""
    from ..model.params import Sparsity
    from ..model.sparse import refusal
    from ..spec.presets import parse_variant

    v = parse_variant(variant)
    p = v.params(instr)
    if p.sparse == Sparsity.NONE:
        return None, instr
    name = v.instruction(instr).name
    if schedule is not None:
        raise UserError(refusal(name, p, "a GEMM schedule chains dense instructions"))
    twin = v.dense_twin(name) if p.sparse == Sparsity.COMPRESSED else None
    if twin is None:
        raise UserError(
            refusal(
                name,
                p,
                "exact answers for every metadata at once, and here the dense unit depends on it",
            )
        )
    return name, twin


def _is_integer(variant: str, instr: str | None) -> bool:
    from ..api import resolve
    from ..model.params import Algorithm

    return resolve(variant, instr).algorithm == Algorithm.INTEGER


def _integer_report(variant: str, instr: str | None, as_json: bool) -> None:
    """The overflow-free chain of an integer instruction (certify/int_overflow.py)."""
    from ..certify.int_overflow import check_runs, overflow_free

    r = overflow_free(variant, instr)
    runs = check_runs(r)

    def run_json(k):
        if k is None:
            return None
        return {
            "K": k.K,
            "a": k.a,
            "b": k.b,
            "exact": k.exact,
            "wrap": k.wrap,
            "satfinite": k.satfinite,
        }

    if as_json:
        data = {
            "hypothesis": variant,
            "instr": r.instruction,
            "term_range": [r.tmin, r.tmax],
            "overflow_free_K": r.K,
            "method": "argument",
            "argument": r.lines,
            "at_K": run_json(r.at_K),
            "not_run": r.not_run,
            "witness": run_json(r.above),
            "checks": runs,
            "seconds": round(r.seconds, 3),
        }
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(f"question:  the longest overflow-free s32 chain of {variant} ({r.instruction})")
        for x in r.lines:
            click.echo(f"  argument: {x}")
        click.echo(
            f"proved:    a chain of up to K = {r.K} products from C = 0 never leaves the s32 "
            "range: wrap-around, .satfinite and the exact sum agree (argument)"
        )
        for x in runs:
            click.echo(f"  tc.matmul: {x}")
        if r.not_run is not None:
            click.echo(f"witness:   not run ({r.not_run})")
        click.echo(f"seconds:   {r.seconds:.1f}")
    sys.exit(int(ExitCode.OK))
