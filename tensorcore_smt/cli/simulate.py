"""`tcsmt simulate`: bit-exact outputs of one instruction, for given inputs or a file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np

from ..api import simulate_params
from ..engine import Engine
from ..errors import ExitCode, UserError
from ..formats import Format, format_hex, number, parse_hex
from ..model.params import ModelParams, Sparsity
from ..model.sparse import metadata_for
from ..smt.answers import describe
from ..spec.presets import parse_variant
from .base import check_out, main, write_or_print
from .options import engine_option, parse_meta


def _parse_list(text: str, fmt: Format, field: str, k: int) -> list[int]:
    items = [t for t in text.split(",")] if text.strip() else []
    if len(items) != k:
        raise UserError(f"{field}: expected {k} entries for this instruction, got {len(items)}")
    return [parse_hex(t, fmt, f"{field}[{i}]") for i, t in enumerate(items)]


@main.command()
@click.option(
    "--arch",
    "archs",
    required=True,
    multiple=True,
    help="Variant: ARCH or ARCH[param=value,...]; repeat to compare variants on one input.",
)
@click.option("--instr", default=None, help="Instruction (PTX shape.types or MFMA name).")
@click.option("--a", "a_text", default=None, help="Comma-separated hex patterns of a (K).")
@click.option("--b", "b_text", default=None, help="Comma-separated hex patterns of b (K).")
@click.option("--c", "c_text", default=None, help="Hex pattern of c.")
@click.option(
    "--sa",
    "sa_text",
    default=None,
    help="Comma-separated hex scale factors of a (block_scale instructions; default all 1).",
)
@click.option(
    "--sb",
    "sb_text",
    default=None,
    help="Comma-separated hex scale factors of b (block_scale instructions; default all 1).",
)
@click.option(
    "--meta",
    "meta_text",
    default=None,
    help="Sparse (mma.sp) instructions: comma-separated metadata, the position (0..3; "
    "tf32 0..1) within its group of each entry of a.",
)
@click.option(
    "--vectors", type=click.Path(dir_okay=False), default=None, help="JSONL file of rows {a, b, c}."
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write rows with d added (JSONL); default: standard output.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (single row).")
@engine_option
def simulate(
    archs: tuple[str, ...],
    instr: str | None,
    a_text: str | None,
    b_text: str | None,
    c_text: str | None,
    sa_text: str | None,
    sb_text: str | None,
    meta_text: str | None,
    vectors: str | None,
    out: str | None,
    as_json: bool,
    engine: Engine | None,
) -> None:
    """Bit-exact output of one instruction's dot product, or of every row of a file."""
    arch = archs[0]
    variant = parse_variant(arch)
    p = variant.params(instr)
    inst_name = variant.instruction(instr).name
    if vectors:
        if a_text or b_text or c_text or sa_text or sb_text or meta_text:
            raise UserError("give either --vectors or --a/--b/--c/--sa/--sb, not both")
        if len(archs) > 1:
            raise UserError("--vectors takes one --arch")
        _simulate_file(p, Path(vectors), check_out(out), engine)
        return
    if a_text is None or b_text is None or c_text is None:
        raise UserError("--a, --b and --c are required (or --vectors FILE)")
    dst = check_out(out)
    models = [(arch, p)]
    for other in archs[1:]:
        q = parse_variant(other).params(inst_name)
        if (q.K, q.n_a, q.a_fmt, q.b_fmt, q.c_fmt) != (p.K, p.n_a, p.a_fmt, p.b_fmt, p.c_fmt):
            raise UserError(f"{other!r} takes different operands than {arch!r} on {inst_name}")
        models.append((other, q))
    a = _parse_list(a_text, p.a_fmt, "a", p.n_a)
    b = _parse_list(b_text, p.b_fmt, "b", p.K)
    c = parse_hex(c_text, p.c_fmt, "c")
    sa, sb = _parse_scales(p, sa_text, sb_text)
    meta = _metadata(parse_meta(meta_text), p)
    rows: list[str] = []
    for name, pm in models:
        if (pm.scale_fmt, pm.n_scales) != (p.scale_fmt, p.n_scales):
            raise UserError(f"{name!r} takes other scale factors than {arch!r} on {inst_name}")
        d = int(
            simulate_params(
                pm,
                np.array([a], dtype=np.uint64),
                np.array([b], dtype=np.uint64),
                np.array([c], dtype=np.uint64),
                None,
                None if sa is None else np.array([sa], dtype=np.uint64),
                None if sb is None else np.array([sb], dtype=np.uint64),
                engine=engine,
                meta=meta,
            )[0]
        )
        row = json.dumps(
            {
                "arch": name,
                "instr": inst_name,
                "a": [format_hex(x, p.a_fmt) for x in a],
                "b": [format_hex(x, p.b_fmt) for x in b],
                "c": format_hex(c, p.c_fmt),
                **_scale_json(p, sa, sb),
                **({} if meta is None else {"meta": meta}),
                "d": format_hex(d, pm.d_fmt),
                "d_value": number(d, pm.d_fmt),
            }
        )
        rows.append(row)
        if as_json:
            click.echo(row)
            continue
        click.echo(f"{name} {parse_variant(name).run_name(inst_name)}")
        click.echo(f"d = {describe(d, pm.d_fmt)}")
    if dst is not None:
        _write(dst, "".join(r + "\n" for r in rows))


def _write(dst: Path, payload: str) -> None:
    """Write the rows to --out; a write that fails after all prints them (write_or_print)
    and exits 2, the code of every command whose output file could not be written."""
    if not write_or_print(dst, payload, "rows"):
        sys.exit(int(ExitCode.USAGE))


def _metadata(meta: list[int] | None, p: ModelParams) -> list[int] | None:
    """--meta read as every command reads it (model/sparse.metadata_for): every index,
    or one group's pattern that every group keeps."""
    if meta is None:
        return None
    try:
        return metadata_for(meta, p)
    except ValueError as e:
        raise UserError(f"--meta: {e}") from None


def _parse_scales(
    p: ModelParams, sa_text: str | None, sb_text: str | None
) -> tuple[list[int] | None, list[int] | None]:
    """--sa / --sb: both or neither, only for a block-scaled instruction (n_scales each)."""
    if sa_text is None and sb_text is None:
        return None, None
    if p.scale_fmt is None:
        raise UserError("--sa/--sb: this instruction takes no scale factors")
    if sa_text is None or sb_text is None:
        raise UserError("--sa and --sb go together (each scale factor defaults to 1 without both)")
    sa = _parse_list(sa_text, p.scale_fmt, "sa", p.n_scales)
    sb = _parse_list(sb_text, p.scale_fmt, "sb", p.n_scales)
    return sa, sb


def _scale_json(p: ModelParams, sa: list[int] | None, sb: list[int] | None) -> dict:
    if sa is None or sb is None or p.scale_fmt is None:
        return {}
    return {
        "sa": [format_hex(x, p.scale_fmt) for x in sa],
        "sb": [format_hex(x, p.scale_fmt) for x in sb],
    }


def _simulate_file(p: ModelParams, src: Path, dst: Path | None, engine: Engine | None) -> None:
    """Simulate every valid row up to the first bad one; write them; then report it."""
    from ..validation.vectors import read_rows

    got = read_rows(src, p, partial=True)
    rows = [(r.a, r.b, r.c, r.obj) for r in got.rows]
    scales = [(r.sa, r.sb) for r in got.rows]
    error = got.error
    if rows:
        sa = sb = None
        if p.scale_fmt is not None:
            s = p.scale_fmt.spec
            one = [s.bias << s.mbits] * p.n_scales  # a row without scale factors: all 1
            sa = np.array([x[0] if x[0] is not None else one for x in scales], dtype=np.uint64)
            sb = np.array([x[1] if x[1] is not None else one for x in scales], dtype=np.uint64)
        d = simulate_params(
            p,
            np.array([r[0] for r in rows], dtype=np.uint64),
            np.array([r[1] for r in rows], dtype=np.uint64),
            np.array([r[2] for r in rows], dtype=np.uint64),
            None,
            sa,
            sb,
            engine=engine,
            meta=None if p.sparse == Sparsity.NONE else [r.metadata for r in got.rows],
        )
        lines = []
        for (_, _, _, obj), dv in zip(rows, d):
            obj = dict(obj)
            obj["d"] = format_hex(int(dv), p.d_fmt)
            lines.append(json.dumps(obj))
        payload = "\n".join(lines) + "\n"
        if dst:
            _write(dst, payload)
        else:
            click.echo(payload, nl=False)
    if error:
        written = f" ({len(rows)} rows before it written)" if rows else ""
        raise UserError(error + written)
