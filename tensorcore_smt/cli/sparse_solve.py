"""`tcsmt diff` and `tcsmt prove` on a structured-sparse (mma.sp) instruction: the
question of smt/sparse.py (two hypotheses of the dense unit behind the sparse one, for
one metadata: the selection is data movement, fixed per question), reported as the
other instruction-level answers are, with the same exit codes.

The metadata is `--meta` (one index a kept element of a, or one group's pattern, which
every group then keeps) or, when left out, the first pattern (0,1 for 2:4; 0 for .tf32's
1:2) in every group; the report says which. Of the input constraints only --finite
applies; `--out` writes a witness as a vector file with its metadata (`tcsmt probe`
turns it into a CUDA program)."""

from __future__ import annotations

import json
import sys

import click

from ..errors import UserError
from ..formats import format_hex
from ..model.params import ModelParams, Sparsity
from ..model.sparse import check_metadata
from ..probe.sparse_meta import meta_indices, patterns
from ..smt.solve import Verdict, solvers_for
from ..smt.sparse import differ
from ..spec.presets import parse_variant
from .base import check_out, write_or_print
from .simulate import _parse_meta

_NOT_SPARSE_OPTIONS = ("positive", "terms", "normal_only", "nonzero", "exponent_window")
"""Input constraints the sparse question does not take (one line names the first)."""


def sparse_params(variant_x: str, variant_y: str, instr: str | None):
    """Both hypotheses' models when the instruction is structured-sparse, else None."""
    vx = parse_variant(variant_x)
    p_x = vx.params(instr)
    if p_x.sparse == Sparsity.NONE:
        return None
    return p_x, parse_variant(variant_y).params(instr or vx.preset.default_instr)


def metadata(text: str | None, p: ModelParams) -> tuple[list[int], str]:
    """The question's metadata and how it was chosen."""
    given = _parse_meta(text)
    if given is None:
        first = patterns(p)[0]
        return meta_indices(first, p), "default: every group keeps " + ",".join(map(str, first))
    if len(given) == p.sparse_keep:
        given = meta_indices(tuple(given), p)
    try:
        return check_metadata(given, p), "--meta"
    except ValueError as e:
        raise UserError(f"--meta: {str(e).removeprefix('metadata: ')}") from None


def run_sparse(
    variant_x: str, variant_y: str, pair: tuple[ModelParams, ModelParams], opts: dict, codes
) -> None:
    """Answer the sparse question, report it (text or --json) and exit with the command's
    code for the verdict."""
    p_x, p_y = pair
    for name in _NOT_SPARSE_OPTIONS:
        if opts.get(name):
            flag = "--" + name.replace("_", "-")
            raise UserError(f"{flag}: not asked of a sparse (mma.sp) instruction; --finite is")
    if opts.get("fixes") or opts.get("representable"):
        raise UserError("--fix and --representable are not asked of a sparse instruction")
    if opts.get("export_path") is not None:
        raise UserError("--export: the sparse question is asked for one metadata; no export")
    check_out(opts.get("out"))
    meta, how = metadata(opts.get("meta_text"), p_x)
    try:
        solvers = solvers_for(opts.get("solver") or "portfolio")
    except ValueError as e:
        raise UserError(f"--solver: {e}") from None
    try:
        ans = differ(
            p_x, p_y, meta, solvers, timeout=opts.get("timeout") or 300.0, finite=opts["finite"]
        )
    except ValueError as e:  # the two hypotheses take different operands
        raise UserError(f"{variant_x} vs {variant_y}: {e}") from None
    verdict = ans.verdict
    fmt = {"a": p_x.a_fmt, "b": p_x.b_fmt, "c": p_x.c_fmt}
    witness = {n: format_hex(v, fmt[n[0]]) for n, v in ans.inputs.items()}
    outputs = (
        {v: format_hex(d, p_x.d_fmt) for v, d in zip((variant_x, variant_y), ans.outputs)}
        if ans.outputs
        else None
    )
    files = []
    if opts.get("out") and verdict == Verdict.WITNESS:
        instr = opts.get("instr") or parse_variant(variant_x).preset.default_instr
        if _save(variant_x, variant_y, instr, p_x, meta, ans, opts["out"]):
            files.append(opts["out"])
    if opts.get("as_json"):
        report = {
            "verdict": verdict.value,
            "variants": [variant_x, variant_y],
            "meta": meta,
            "meta_chosen": how,
            "solvers": ans.solvers,
            "witness": witness or None,
            "outputs": outputs,
            "reason": ans.reason,
            "files": files,
        }
        click.echo(json.dumps(report, indent=2))
    else:
        lines = [
            f"question:    do {variant_x} and {variant_y} differ (sparse, metadata given)?",
            f"metadata:    {','.join(map(str, meta))} ({how})",
            f"verdict:     {_TEXT[verdict]}"
            + (f" ({', '.join(ans.solvers)})" if ans.solvers else ""),
        ]
        if witness:
            lines.append("a:           " + " ".join(witness[f"a{j}"] for j in range(p_x.n_a)))
            lines.append("b:           " + " ".join(witness[f"b{k}"] for k in range(p_x.K)))
            lines.append(f"c:           {witness['c']}")
            lines += [f"d ({v}): {d}" for v, d in outputs.items()]
        if ans.reason:
            lines.append(f"note:        {ans.reason}")
        lines += [f"wrote:       {f}" for f in files]
        click.echo("\n".join(lines))
    sys.exit(codes[verdict])


def _save(x: str, y: str, instr: str, p: ModelParams, meta: list[int], ans, path: str) -> bool:
    """The witness as a vector file with its metadata and both predictions."""
    from pathlib import Path

    from ..validation import vectors

    vf = vectors.VectorFile(
        arch=parse_variant(x).preset.name,
        instruction=parse_variant(x).instruction(instr).name,
        variants=[x, y],
        vectors=[
            vectors.Vector(
                a=[ans.inputs[f"a{j}"] for j in range(p.n_a)],
                b=[ans.inputs[f"b{k}"] for k in range(p.K)],
                c=ans.inputs["c"],
                predicted=dict(zip((x, y), ans.outputs)),
                note=f"differ: {x} vs {y}",
                metadata=list(meta),
            )
        ],
    )
    return write_or_print(Path(path), vectors.dumps(vf, path), "witness")


_TEXT = {
    Verdict.WITNESS: "the variants differ on this input (re-run on the concrete model)",
    Verdict.UNSAT: "equal on every input with this metadata",
    Verdict.UNKNOWN: "undecided within the limits",
}

__all__ = ["metadata", "run_sparse", "sparse_params"]
