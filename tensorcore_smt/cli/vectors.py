"""`tcsmt vectors ...` and `tcsmt probe ...` commands (test vectors and GPU probe programs).

Exit codes: 0 success; 2 bad input (one line on stderr); `tcsmt probe --check` exits 1
when some vector matched no variant.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import ExitCode, UserError
from ..formats import format_hex
from ..smt.answers import describe
from ..spec.presets import PRESETS, parse_variant
from ..validation import vectors as vec
from .base import check_out, main, write_or_print


@main.group("vectors")
def vectors_group() -> None:
    """Hardware test-vector files (JSON or CSV): show, merge, convert, predict."""


@vectors_group.command("show")
@click.argument("path", type=click.Path(dir_okay=False))
def vectors_show(path: str) -> None:
    """Print a vector file as a table: inputs and every variant's prediction, in hex and
    decimal; flags predictions this tcsmt's model does not reproduce."""
    vf = vec.load(path)
    f = vf.formats()
    prop = f", property {vf.property}" if vf.property else ""
    click.echo(
        f"{path}: {vf.arch} {vf.instruction} ({f['a'].spec.name} x {f['b'].spec.name} + "
        f"{f['c'].spec.name} -> {f['d'].spec.name}, K={vf.params.K}), "
        f"{len(vf.vectors)} vectors, {len(vf.variants)} variants{prop}"
    )
    stale = {(i, v): new for i, v, _, new in vec.stale_predictions(vf)}
    width = max([len(v) for v in vf.variants] + [1])
    for i, v in enumerate(vf.vectors):
        click.echo(f"vector {i}" + (f"  ({v.note})" if v.note else ""))
        for name, xs, fmt in (("a", v.a, f["a"]), ("b", v.b, f["b"])):
            for j, x in enumerate(xs):
                click.echo(f"  {name}[{j}]".ljust(width + 6) + f"= {describe(x, fmt)}")
        click.echo("  c".ljust(width + 6) + f"= {describe(v.c, f['c'])}")
        distinct = len(set(v.predicted.values()))
        for var in vf.variants:
            label = f"  d[{var}]".ljust(width + 6)
            if var not in v.predicted:
                click.echo(f"{label}= (no prediction)")
                continue
            line = f"{label}= {describe(v.predicted[var], f['d'])}"
            if (i, var) in stale:
                line += f"  [this tcsmt computes {format_hex(stale[(i, var)], f['d'])}]"
            click.echo(line)
        if len(vf.variants) > 1:
            click.echo(f"  ({distinct} distinct predictions)")
    if stale:
        click.echo(
            f"{len(stale)} stored predictions differ from this tcsmt's model "
            f"(`tcsmt vectors predict {path}` recomputes them)"
        )


@vectors_group.command("merge")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Merged file.")
def vectors_merge(paths: tuple[str, ...], out: str) -> None:
    """Merge vector files of one arch and instruction: union of the variants, each input
    once, predictions combined."""
    check_out(out)
    files = [vec.load(p) for p in paths]
    try:
        merged = vec.merge(files)
    except UserError as e:
        msg = str(e)
        if msg.startswith("files["):
            n = int(msg[6 : msg.index("]")])
            msg = f"{paths[n]}{msg[msg.index(']') + 1 :]}"
        raise UserError(msg) from None
    if not write_or_print(Path(out), vec.dumps(merged, out), "merged vectors"):
        return
    click.echo(
        f"wrote {out}: {len(merged.vectors)} vectors "
        f"({sum(len(f.vectors) for f in files)} read), {len(merged.variants)} variants"
    )


@vectors_group.command("csv")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--out", type=click.Path(dir_okay=False), default=None, help="CSV file (default: stdout)."
)
def vectors_csv(path: str, out: str | None) -> None:
    """Convert a vector file to CSV (a `# tcsmt-vectors {...}` header line, then one row
    per vector; `tcsmt` reads it back anywhere it reads JSON)."""
    check_out(out)
    text = vec.to_csv(vec.load(path))
    if out:
        write_or_print(Path(out), text, "CSV")
    else:
        click.echo(text, nl=False)


@vectors_group.command("predict")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--variant",
    "add",
    multiple=True,
    help="Add a variant (repeatable), e.g. 'volta[carry_bits=2]'.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Output file (.json or .csv; default: rewrite PATH).",
)
def vectors_predict(path: str, add: tuple[str, ...], out: str | None) -> None:
    """(Re)compute every variant's prediction for every vector with the model."""
    check_out(out or path)
    vf = vec.load(path)
    for v in add:
        parse_variant(v)
        if v not in vf.variants:
            vf.variants.append(v)
    try:
        vf.validate()
    except UserError as e:
        raise UserError(f"--variant: {e}") from None
    before = {(i, k): d for i, v in enumerate(vf.vectors) for k, d in v.predicted.items()}
    new = vec.predict(vf)
    changed = sum(
        1
        for i, v in enumerate(new.vectors)
        for k, d in v.predicted.items()
        if before.get((i, k)) != d
    )
    dst = out or path
    if not write_or_print(Path(dst), vec.dumps(new, dst), "predicted vectors"):
        return
    click.echo(
        f"wrote {dst}: {len(new.vectors)} vectors x {len(new.variants)} variants, "
        f"{changed} predictions new or changed"
    )


@vectors_group.command("new")
@click.option("--arch", required=True, help="Target architecture (a preset name).")
@click.option("--instr", default=None, help="Instruction (default: the preset's).")
@click.option(
    "--variant", "variants", multiple=True, help="Variant to predict (repeatable; default: ARCH)."
)
@click.option("--property", "prop", default=None, help="Property the vectors come from.")
@click.option(
    "--rows",
    required=True,
    type=click.Path(dir_okay=False),
    help='JSONL rows {"a": [hex...], "b": [hex...], "c": hex, "note": "..."}.',
)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help=".json or .csv")
def vectors_new(
    arch: str, instr: str | None, variants: tuple[str, ...], prop: str | None, rows: str, out: str
) -> None:
    """Make a vector file from hand-written JSONL rows, with every variant's prediction."""
    check_out(out)
    if arch not in PRESETS:
        raise UserError(f"--arch: unknown architecture {arch!r}; known: {', '.join(PRESETS)}")
    inst = parse_variant(arch).instruction(instr)
    vf = vec.VectorFile(arch, inst.name, list(variants) or [arch], [], prop)
    vf.validate()
    p = inst.params
    src = Path(rows)
    for r in vec.read_rows(src, p).rows:
        vf.vectors.append(
            vec.Vector(r.a, r.b, r.c, {}, r.obj.get("note", ""), str(src), r.sa, r.sb, r.metadata)
        )
    vf = vec.predict(vf)
    if not write_or_print(Path(out), vec.dumps(vf, out), "vectors"):
        return
    click.echo(f"wrote {out}: {len(vf.vectors)} vectors x {len(vf.variants)} variants")


# --- probes ----------------------------------------------------------------------------


@main.command("probe")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="CUDA (or, for AMD MFMA, HIP) source to write (default: stdout).",
)
@click.option(
    "--sm",
    default=None,
    help="GPU target, e.g. 90a, 89, 120a, gfx90a, gfx942 (default: the file's arch).",
)
@click.option(
    "--block-scale",
    is_flag=True,
    help="Run an rtx-blackwell .kind::f8f6f4 f32 file through the block-scaled "
    ".kind::mxf8f6f4 form with unit ue8m0 scale factors.",
)
@click.option(
    "--check",
    "check_mode",
    is_flag=True,
    help="Read a probe's output: tcsmt probe --check VECTORS.json OUTPUT.txt ('-': stdin).",
)
@click.option("--json", "as_json", is_flag=True, help="With --check: a JSON report.")
def probe(
    files: tuple[str, ...],
    out: str | None,
    sm: str | None,
    block_scale: bool,
    check_mode: bool,
    as_json: bool,
) -> None:
    """Write a CUDA (NVIDIA) or HIP (AMD MFMA) program that runs a vector file on the GPU,
    or check its output.

    \b
    tcsmt probe VECTORS.json --out probe.cu [--sm 90a]
    nvcc -arch=sm_XX -o probe probe.cu && ./probe > probe_output.txt
    tcsmt probe CDNA3_VECTORS.json --out probe.hip
    hipcc --offload-arch=gfx942 -o probe probe.hip && ./probe > probe_output.txt
    tcsmt probe --check VECTORS.json probe_output.txt [--json]

    --check exits 0 when every vector matched at least one variant, 1 when some vector
    matched none, 2 on a malformed or truncated output or vector file.
    """
    from ..probe import cuda, hip
    from ..probe.check import check_output, report_text

    if files and _is_gemm_file(files[0]):
        _gemm_probe(files, out, sm, block_scale, check_mode, as_json)
        return
    if check_mode:
        if out or sm or block_scale:
            raise UserError(
                "--check reads an output; --out, --sm and --block-scale are for writing a probe"
            )
        if len(files) != 2:
            raise UserError(
                "--check needs the vector file and the program's output: "
                "tcsmt probe --check VECTORS.json OUTPUT.txt"
            )
        vpath, opath = files
        vf = vec.load(vpath)
        if opath == "-":
            text, oname = sys.stdin.read(), "<stdin>"
        else:
            try:
                text = Path(opath).read_text()
            except FileNotFoundError:
                raise UserError(f"{opath}: no such file") from None
            except (OSError, UnicodeDecodeError) as e:
                raise UserError(f"{opath}: cannot read ({e})") from None
            oname = opath
        try:
            rep = check_output(vf, text)
        except UserError as e:
            where = vpath if str(e).startswith("variants:") else oname
            raise UserError(f"{where}: {e}") from None
        if as_json:
            click.echo(json.dumps(rep.to_json(), indent=2))
        else:
            click.echo(report_text(rep, oname))
        sys.exit(ExitCode.OK if rep.ok else ExitCode.REFUTED)
    if as_json:
        raise UserError("--json goes with --check")
    if len(files) != 1:
        raise UserError("give one vector file: tcsmt probe VECTORS.json --out probe.cu")
    check_out(out)
    vpath = files[0]
    vf = vec.load(vpath)
    amd = vf.instr().kind in ("mfma", "wmma") or vf.instr().name.startswith("v_dot")
    name = Path(out).name if out else ("probe.hip" if amd else "probe.cu")
    try:
        if amd:
            if block_scale:
                raise UserError("--block-scale: MFMA instructions have no block-scaled form")
            src = hip.generate_hip(vf, arch=sm, source_name=name, vectors_name=vpath)
        else:
            src = cuda.generate(
                vf, sm=sm, source_name=name, vectors_name=vpath, block_scale=block_scale
            )
    except UserError as e:
        msg = str(e)
        raise UserError(msg if msg.startswith("--") else f"{vpath}: {msg}") from None
    if amd:
        target = hip.hip_target(vf, sm)
        cmd = hip.hipcc_command(target, name)
    else:
        target, _ = cuda.choose_target(vf, sm)
        cmd = cuda.nvcc_command(target, name)
    summary = (
        f"{len(vf.vectors)} vectors, {vf.arch} {vf.instruction}, target {target}\n"
        f"build: {cmd}\n"
        f"run:   ./{cmd.split(' -o ')[1].split()[0]} > probe_output.txt\n"
        f"check: tcsmt probe --check {vpath} probe_output.txt"
    )
    _emit_probe(src, out, summary)


def _is_gemm_file(path: str) -> bool:
    """Whether `path` is a GEMM vector file (read errors are left to the loaders)."""
    from ..validation.gemm_vectors import is_gemm_vector_json

    try:
        return is_gemm_vector_json(Path(path).read_text())
    except (OSError, UnicodeDecodeError):
        return False


def _read_output(opath: str) -> tuple[str, str]:
    if opath == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        return Path(opath).read_text(), opath
    except FileNotFoundError:
        raise UserError(f"{opath}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{opath}: cannot read ({e})") from None


def _gemm_probe(
    files: tuple[str, ...],
    out: str | None,
    sm: str | None,
    block_scale: bool,
    check_mode: bool,
    as_json: bool,
) -> None:
    """`tcsmt probe` of a GEMM vector file: a Python program (torch on cuda), or
    --check of its output (exit 0 when some hypothesis explains every vector of every
    call, 1 otherwise)."""
    from ..probe import torch_gemm
    from ..validation import gemm_vectors as gv

    if sm or block_scale:
        raise UserError("--sm and --block-scale are for CUDA probes; a GEMM probe runs torch")
    if check_mode:
        if out:
            raise UserError("--check reads an output; --out is for writing a probe")
        if len(files) != 2:
            raise UserError(
                "--check needs the vector file and the program's output: "
                "tcsmt probe --check GEMM_VECTORS.json OUTPUT.txt"
            )
        gf = gv.load(files[0])
        text, oname = _read_output(files[1])
        try:
            results = torch_gemm.check_gemm_output(gf, text)
        except UserError as e:
            raise UserError(f"{oname}: {e}") from None
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "arch": gf.arch,
                        "instruction": gf.instruction,
                        "K": gf.K,
                        "hypotheses": gf.hypotheses,
                        "calls": [
                            {
                                "call": r.call,
                                "observed": [format_hex(d, gf.formats()["d"]) for d in r.observed],
                                "matched": r.matched,
                                "survivors": r.survivors,
                                "verdict": r.verdict(),
                            }
                            for r in results
                        ],
                    },
                    indent=2,
                )
            )
        else:
            click.echo(torch_gemm.report_text(gf, results, oname))
        sys.exit(ExitCode.OK if all(r.survivors for r in results) else ExitCode.REFUTED)
    if as_json:
        raise UserError("--json goes with --check")
    if len(files) != 1:
        raise UserError("give one vector file: tcsmt probe GEMM_VECTORS.json --out probe.py")
    check_out(out)
    gf = gv.load(files[0])
    if not gf.vectors:
        raise UserError(f"{files[0]}: vectors: the file has no vectors to probe")
    try:
        src = torch_gemm.generate(gf, vectors_name=files[0])
    except UserError as e:
        raise UserError(f"{files[0]}: {e}") from None
    summary = (
        f"{len(gf.vectors)} GEMM vectors, {gf.arch} {gf.instruction}, K={gf.K}\n"
        f"run:   python3 {Path(out).name if out else 'probe.py'} > gemm_output.txt  "
        "(torch with a CUDA GPU)\n"
        f"check: tcsmt probe --check {files[0]} gemm_output.txt"
    )
    _emit_probe(src, out, summary)


def _emit_probe(src: str, out: str | None, summary: str) -> None:
    """The probe program to --out (printed on stdout instead with the summary, exit 2,
    when the write fails after all) or to stdout with the summary on stderr."""
    if out:
        if not write_or_print(Path(out), src, "probe source"):
            click.echo(summary)
            sys.exit(int(ExitCode.USAGE))
        click.echo(f"wrote {out}: {summary}")
    else:
        click.echo(src, nl=False)
        click.echo(summary, err=True)
