"""`tcsmt diff` and `tcsmt prove` of GEMM hypotheses (`ARCH[...]/SCHEDULE[...]`): one
output element of a depth-K product; exit codes as for instruction-level hypotheses."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import UserError
from ..smt.gemm_query import GemmQuery, make_gemm_query, parse_zero_k
from ..smt.gemm_solve import answer_gemm
from ..smt.query import Goal, parse_fix
from ..smt.solve import Limits, Outcome, Verdict, solvers_for
from .answer_report import report_and_exit
from .base import check_out, write_or_print
from .gemm_io import input_format
from .options import Spinner, constraints_from, export_query

DEFAULT_K = 256


def build_gemm_query(x: str, y: str, goal: Goal, opts: dict) -> GemmQuery:
    """The GEMM query the options describe (constraints as for instruction queries,
    plus --zero-k)."""
    K = opts.get("k") or DEFAULT_K
    fmt = input_format(opts.get("dtype"))
    cons = constraints_from(opts) + [parse_zero_k(z, K) for z in opts.get("zero_k") or ()]
    q = make_gemm_query(x, y, K, opts["instr"], goal, tuple(cons), fmt=fmt)
    if opts["fixes"]:
        fixed = tuple(parse_fix(f, q.operands) for f in opts["fixes"])
        q = make_gemm_query(x, y, K, opts["instr"], goal, tuple(cons) + fixed, fmt=fmt)
    return q


def save_gemm_witness(o: Outcome, path: str, shape: tuple[int, int] | None = None) -> bool:
    """The witness as a GEMM vector file with both hypotheses' predictions (printed on
    stdout instead if the file cannot be written after all)."""
    from ..spec.presets import parse_variant
    from ..validation import gemm_vectors as gv

    q, w = o.query, o.witness
    gf = gv.GemmVectorFile(
        arch=parse_variant(q.models[0].variant).preset.name,
        instruction=q.instruction,
        K=q.K,
        hypotheses=list(q.variants),
        vectors=[
            gv.GemmVector(
                a=[w.inputs[f"a{k}"] for k in range(q.K)],
                b=[w.inputs[f"b{k}"] for k in range(q.K)],
                c=w.inputs["c"],
                predicted=dict(zip(q.variants, w.outputs)),
                note=f"{q.goal.value}: {q.variants[0]} vs {q.variants[1]}",
            )
        ],
        shape=shape or gv.DEFAULT_SHAPE,
    )
    return write_or_print(Path(path), gv.dumps(gf), "witness")


def run_gemm(
    x: str, y: str, goal: Goal, opts: dict, limits: Limits, codes: dict, focus: bool
) -> None:
    """Answer, report, write files, exit with the command's code for the verdict."""
    q = build_gemm_query(x, y, goal, opts)
    solvers_for(limits.solver)  # bad solver names and output paths fail before any work
    out = opts.get("out")
    if out and out.lower().endswith(".csv"):
        raise UserError("--out: GEMM vector files are JSON; give a .json path")
    check_out(out)
    files: list[str] = []
    export = opts.get("export_path")
    if export is not None:
        files.append(str(export_query(q, export or None)))
    as_json = opts["as_json"]
    spinner = Spinner(sys.stderr.isatty() and not as_json)
    try:
        o = answer_gemm(q, limits, spinner, focus=focus and goal == Goal.DIFFER)
    finally:
        spinner.clear()
    unwritten = False
    if out and len(set(q.d_formats)) > 1:
        files_note = "--out: the hypotheses write D in different formats; no vector file"
        click.echo(f"tcsmt: {files_note}", err=True)
    elif out and o.witness and o.verdict == Verdict.WITNESS:
        if save_gemm_witness(o, out):
            files.append(str(out))
        else:
            unwritten = True

    report_and_exit(o, files, as_json, codes, unwritten)
