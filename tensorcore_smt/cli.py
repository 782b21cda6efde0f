"""The `tcsmt` command line. User errors print one line and exit 2, never a traceback."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np

from . import __version__
from .api import simulate_params
from .formats import Format, format_hex, parse_hex, to_float
from .model.params import ModelParams
from .presets import ALIASES, PRESETS, UserError, parse_variant
from .report import describe

EXIT_USAGE = 2


def fail(msg: str) -> None:
    click.echo(f"tcsmt: error: {msg}", err=True)
    sys.exit(EXIT_USAGE)


class Group(click.Group):
    """Turns user errors into one line and exit code 2, and hides internal tracebacks."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (UserError, ValueError) as e:
            fail(str(e))
        except OSError as e:
            fail(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))


@click.group(cls=Group)
@click.version_option(__version__, prog_name="tcsmt")
def main() -> None:
    """Formal model of GPU matrix-unit arithmetic: simulate, compare, find discriminating inputs."""


@main.group("list", invoke_without_command=True)
@click.pass_context
def list_(ctx: click.Context) -> None:
    """List architectures, properties or solvers."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_archs)


def _param_summary(p: ModelParams) -> str:
    from .model.params import Algorithm

    fmts = f"{p.a_fmt.spec.name}x{p.b_fmt.spec.name}+{p.c_fmt.spec.name}->{p.d_fmt.spec.name}"
    if p.algorithm == Algorithm.FDA:
        groups = len(p.groups())
        rnd = f"{p.rounding.value}" + (f"/{p.rounding_fmt.spec.name}" if p.rounding_fmt else "")
        return (
            f"FDA{'x' + str(groups) if groups > 1 else ''} K={p.K} L={p.L} F={p.F} "
            f"carry={p.carry_bits} e_zero={p.e_zero} {rnd} {fmts}"
        )
    if p.algorithm == Algorithm.GPS:
        return f"GPS K={p.K} G={p.G} ftz {fmts}"
    if p.algorithm in (Algorithm.FDRDA, Algorithm.GFDRDA):
        groups = len(p.groups())
        return (
            f"{p.algorithm.name}{'x' + str(groups) if groups > 1 else ''} K={p.K} L={p.L} "
            f"F={p.F} F2={p.F2} {fmts}"
        )
    return f"{p.algorithm.name} K={p.K} {p.rounding.value} {fmts}"


@list_.command("archs")
@click.option("--arch", default=None, help="Only this architecture.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_archs(arch: str | None, as_json: bool) -> None:
    """Architecture presets, their instructions and model parameters."""
    names = [arch] if arch else list(PRESETS)
    for n in names:
        if n not in PRESETS:
            raise UserError(f"unknown architecture {n!r}; known: {', '.join(PRESETS)}")
    if as_json:
        out = {}
        for n in names:
            pr = PRESETS[n]
            out[n] = {
                "description": pr.description,
                "sm": pr.sm,
                "default": pr.default_instr,
                "instructions": {k: _params_json(i.params) for k, i in pr.instructions.items()},
            }
        click.echo(
            json.dumps({"archs": out, "aliases": {k: v[0] for k, v in ALIASES.items()}}, indent=2)
        )
        return
    for n in names:
        pr = PRESETS[n]
        click.echo(f"{n}: {pr.description}")
        for k, inst in pr.instructions.items():
            mark = "*" if k == pr.default_instr else " "
            click.echo(f"  {mark} {k:48s} {_param_summary(inst.params)}")
    if not arch:
        click.echo("\nNamed hypotheses (usable wherever a variant is):")
        for k, (expr, why) in ALIASES.items():
            click.echo(f"  {k:16s} = {expr:45s} {why}")
        click.echo(
            "\n* default instruction. Variants: ARCH[param=value,...], e.g. volta[carry_bits=2]."
        )


def _params_json(p: ModelParams) -> dict:
    out = {}
    for k, v in p.__dict__.items():
        if hasattr(v, "spec"):
            v = v.spec.name
        elif hasattr(v, "value"):
            v = v.value
        out[k] = v
    return out


@list_.command("properties")
@click.option(
    "--properties-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="List this directory's properties instead of the built-in library.",
)
@click.option("--arch", default=None, help="Say whether each property applies to ARCH.")
def list_properties(properties_dir: str | None, arch: str | None) -> None:
    """Properties in the property library (question, source, queries)."""
    from .library import load_all

    props = load_all(Path(properties_dir) if properties_dir else None)
    if arch and arch not in PRESETS:
        raise UserError(f"unknown architecture {arch!r}; known: {', '.join(PRESETS)}")
    if not props:
        click.echo("no properties found")
        return
    for name, prop in props.items():
        queries = ", ".join(f"{q.id} ({q.goal.value})" for q in prop.queries)
        click.echo(f"{name}: {' '.join(prop.question.split())}")
        click.echo(f"    source: {prop.source}")
        click.echo(f"    queries: {queries}")
        if arch:
            why = prop.not_applicable(PRESETS[arch])
            if why:
                click.echo(f"    {arch}: does not apply ({why.split(': ', 1)[-1]})")
            else:
                click.echo(f"    {arch}: {prop.instruction_for(PRESETS[arch]).name}")


@list_.command("solvers")
def list_solvers() -> None:
    """SMT solvers importable here, with their versions (portfolio order)."""
    from .solvers.backends import all_backends

    usable = []
    for name, backend in all_backends().items():
        try:
            version = backend.version()
            usable.append(name)
        except Exception as e:  # noqa: BLE001 - any import failure means "not available"
            version = f"not available ({type(e).__name__}: {str(e).splitlines()[0][:60]})"
        click.echo(f"{name:10s} {version}")
    click.echo(f"{'portfolio':10s} " + (", ".join(usable) if usable else "no solver available"))


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
    "--vectors", type=click.Path(dir_okay=False), default=None, help="JSONL file of rows {a, b, c}."
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write rows with d added (JSONL); default: standard output.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (single row).")
def simulate(
    archs: tuple[str, ...],
    instr: str | None,
    a_text: str | None,
    b_text: str | None,
    c_text: str | None,
    vectors: str | None,
    out: str | None,
    as_json: bool,
) -> None:
    """Bit-exact output of one instruction's dot product, or of every row of a file."""
    arch = archs[0]
    variant = parse_variant(arch)
    p = variant.params(instr)
    inst_name = variant.instruction(instr).name
    if vectors:
        if a_text or b_text or c_text:
            raise UserError("give either --vectors or --a/--b/--c, not both")
        if len(archs) > 1:
            raise UserError("--vectors takes one --arch")
        _simulate_file(p, Path(vectors), Path(out) if out else None)
        return
    if a_text is None or b_text is None or c_text is None:
        raise UserError("--a, --b and --c are required (or --vectors FILE)")
    models = [(arch, p)]
    for other in archs[1:]:
        q = parse_variant(other).params(inst_name)
        if (q.K, q.a_fmt, q.b_fmt, q.c_fmt) != (p.K, p.a_fmt, p.b_fmt, p.c_fmt):
            raise UserError(f"{other!r} takes different operands than {arch!r} on {inst_name}")
        models.append((other, q))
    a = _parse_list(a_text, p.a_fmt, "a", p.K)
    b = _parse_list(b_text, p.b_fmt, "b", p.K)
    c = parse_hex(c_text, p.c_fmt, "c")
    for name, pm in models:
        d = int(
            simulate_params(
                pm,
                np.array([a], dtype=np.uint64),
                np.array([b], dtype=np.uint64),
                np.array([c], dtype=np.uint64),
            )[0]
        )
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "arch": name,
                        "instr": inst_name,
                        "a": [format_hex(x, p.a_fmt) for x in a],
                        "b": [format_hex(x, p.b_fmt) for x in b],
                        "c": format_hex(c, p.c_fmt),
                        "d": format_hex(d, pm.d_fmt),
                        "d_value": to_float(d, pm.d_fmt),
                    }
                )
            )
            continue
        click.echo(f"{name} {inst_name}")
        click.echo(f"d = {describe(d, pm.d_fmt)}")


def _simulate_file(p: ModelParams, src: Path, dst: Path | None) -> None:
    """Simulate every valid row up to the first bad one; write them; then report it."""
    if not src.exists():
        raise UserError(f"{src}: no such file")
    rows: list[tuple[list[int], list[int], int, dict]] = []
    error: str | None = None
    try:
        text = src.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{src}: cannot read ({e})") from None
    from .vectors import is_vector_json, loads, parse_row

    if src.suffix.lower() == ".csv" or is_vector_json(text):
        # A tcsmt-vectors file (JSON or CSV): validated as a whole, rows as in JSONL.
        try:
            vf = loads(text, csv_format=src.suffix.lower() == ".csv")
        except UserError as e:
            raise UserError(f"{src}: {e}") from None
        q = vf.params
        if (q.K, q.a_fmt, q.b_fmt, q.c_fmt) != (p.K, p.a_fmt, p.b_fmt, p.c_fmt):
            raise UserError(
                f"{src}: its instruction {vf.instruction} takes other operands than the "
                f"one simulated; pass --instr {vf.instruction}"
            )
        for v in vf.vectors:
            obj = {
                "a": [format_hex(x, p.a_fmt) for x in v.a],
                "b": [format_hex(x, p.b_fmt) for x in v.b],
                "c": format_hex(v.c, p.c_fmt),
            }
            if v.note:
                obj["note"] = v.note
            rows.append((v.a, v.b, v.c, obj))
        text = ""
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            a, b, c, obj = parse_row(line, p)
        except (ValueError, json.JSONDecodeError) as e:
            error = f"{src}:{lineno}: {e}"
            break
        rows.append((a, b, c, obj))
    if rows:
        d = simulate_params(
            p,
            np.array([r[0] for r in rows], dtype=np.uint64),
            np.array([r[1] for r in rows], dtype=np.uint64),
            np.array([r[2] for r in rows], dtype=np.uint64),
        )
        lines = []
        for (_, _, _, obj), dv in zip(rows, d):
            obj = dict(obj)
            obj["d"] = format_hex(int(dv), p.d_fmt)
            lines.append(json.dumps(obj))
        payload = "\n".join(lines) + "\n"
        if dst:
            dst.write_text(payload)
        else:
            click.echo(payload, nl=False)
    if error:
        written = f" ({len(rows)} rows before it written)" if rows else ""
        raise UserError(error + written)


# Sub-command modules register themselves on `main` when imported.
from . import cli_find, cli_solve, cli_vectors  # noqa: E402,F401
