"""`tcsmt list archs|properties|solvers|params|schedules`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import UserError
from ..model.params import ModelParams
from ..spec.presets import ALIASES, PRESETS
from .base import main


@main.group("list", invoke_without_command=True)
@click.pass_context
def list_(ctx: click.Context) -> None:
    """List architectures, properties, solvers, model parameters or GEMM schedules."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_archs)


def _param_summary(p: ModelParams) -> str:
    from ..model.params import Algorithm
    from ..model.terms import AlignMode

    fmts = f"{p.a_fmt.spec.name}x{p.b_fmt.spec.name}+{p.c_fmt.spec.name}->{p.d_fmt.spec.name}"
    scales = ""
    if p.scale_fmt is not None:  # block scaling: one scale of a and of b per block
        scales = f" x{p.scale_fmt.spec.name}/{p.scale_block}"
    if p.algorithm == Algorithm.FDA:
        groups = len(p.groups())
        rnd = f"{p.rounding.value}" + (f"/{p.rounding_fmt.spec.name}" if p.rounding_fmt else "")
        fbits = "exact" if p.align == AlignMode.EXACT else p.F
        return (
            f"FDA{'x' + str(groups) if groups > 1 else ''} K={p.K} L={p.L} F={fbits} "
            f"carry={p.carry_bits} e_zero={p.e_zero} {rnd} {fmts}{scales}"
        )
    if p.algorithm == Algorithm.GDFS:
        return f"GDFS K={p.K} G={p.G} F={p.F} e_zero={p.e_zero} {p.rounding.value} {fmts}{scales}"
    if p.algorithm == Algorithm.GPS:
        return f"GPS K={p.K} G={p.G} ftz {fmts}"
    if p.algorithm in (Algorithm.FDRDA, Algorithm.GFDRDA):
        groups = len(p.groups())
        return (
            f"{p.algorithm.name}{'x' + str(groups) if groups > 1 else ''} K={p.K} L={p.L} "
            f"F={p.F} F2={p.F2} {fmts}"
        )
    if p.algorithm == Algorithm.INTEGER:
        op = "" if p.bit_op.value == "mul" else f" {p.bit_op.value}.popc"
        return f"INTEGER K={p.K} L={p.L} {p.int_clamp.value}{op} {fmts}"
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
                "sources": {k: i.source for k, i in pr.instructions.items() if i.source},
                "units": _units(pr.instructions),
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
            note = f": {inst.note}" if inst.note else ""
            source = f"  ({inst.source})" if inst.source else ""
            click.echo(
                f"  {mark} {k:48s} {_param_summary(inst.params)}  [{inst.unit}{note}]{source}"
            )
        shared = ", ".join(f"{u} x{len(names)}" for u, names in _units(pr.instructions).items())
        click.echo(f"    units: {shared} (the instructions of one unit run on it)")
    if not arch:
        click.echo("\nNamed hypotheses (usable wherever a variant is):")
        for k, (expr, why) in ALIASES.items():
            click.echo(f"  {k:16s} = {expr:45s} {why}")
        click.echo(
            "\n* default instruction. Variants: ARCH[param=value,...], e.g. volta[carry_bits=2]."
        )


def _units(instructions: dict) -> dict[str, list[str]]:
    """Instruction names grouped by the unit that runs them."""
    out: dict[str, list[str]] = {}
    for name, inst in instructions.items():
        out.setdefault(inst.unit, []).append(name)
    return out


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
    from ..smt.library import load_all

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
    from ..solvers.backends import all_backends

    usable = []
    for name, backend in all_backends().items():
        try:
            version = backend.version()
            usable.append(name)
        except Exception as e:  # noqa: BLE001 - any import failure means "not available"
            version = f"not available ({type(e).__name__}: {str(e).splitlines()[0][:60]})"
        click.echo(f"{name:10s} {version}")
    click.echo(f"{'portfolio':10s} " + (", ".join(usable) if usable else "no solver available"))


@list_.command("params")
def list_params() -> None:
    """Model parameters a variant can override, each with its allowed values."""
    from ..model.params import describe_range, param_names

    for name in param_names():
        click.echo(f"{name:16s} {describe_range(name)}")


@list_.command("schedules")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_schedules(as_json: bool) -> None:
    """GEMM schedules (schedules/*.toml) with their sources, and the schedule fields."""
    from ..gemm.schedule import describe_field, field_names, named_schedules

    named = named_schedules()
    if as_json:
        doc = {
            "schedules": {
                n: {"schedule": s.schedule.text(), "description": s.description, "source": s.source}
                for n, s in named.items()
            },
            "fields": {f: describe_field(f) for f in field_names()},
        }
        click.echo(json.dumps(doc, indent=1))
        return
    for n, s in named.items():
        click.echo(f"{n:15s} {s.description}")
        click.echo(f"{'':15s} = {s.schedule.text()}")
        click.echo(f"{'':15s} source: {s.source}")
    click.echo("")
    click.echo("fields (SCHEDULE[field=value,...]):")
    width = max(map(len, field_names()))
    for f in field_names():
        click.echo(f"  {f:{width}s} {describe_field(f)}")
