"""`tcsmt find`: answer a property of the library on an architecture (or all of them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..find import QueryAnswer, find, save_vectors
from ..library import get, load_all
from ..presets import PRESETS, UserError
from ..report import to_text
from ..solve import Limits, Verdict, solvers_for
from .base import main
from .options import Spinner, limits_from, solver_options_common

EXIT_UNEXPECTED = 1
EXIT_UNKNOWN = 3
EXIT_BAD_WITNESS = 4


def _exit_code(answers: list[QueryAnswer]) -> int:
    verdicts = [a.outcome.verdict for a in answers]
    if Verdict.BAD_WITNESS in verdicts:
        return EXIT_BAD_WITNESS
    if Verdict.UNKNOWN in verdicts:
        return EXIT_UNKNOWN
    if any(a.as_expected is False for a in answers):
        return EXIT_UNEXPECTED
    return 0


def _summary_line(a: QueryAnswer) -> str:
    o = a.outcome
    who = "by construction" if o.by_construction else (o.result.solver if o.result else "-")
    expected = a.spec.expect.value if a.spec.expect else ""
    exp = {True: "as expected", False: f"UNEXPECTED (expected {expected})", None: ""}
    exp = exp[a.as_expected]
    concl = f" - {a.conclusion}" if a.conclusion else ""
    return f"[{a.spec.id}] {a.answer} ({who}, {o.seconds:.2f} s) {exp}{concl}".rstrip()


@main.command("find")
@click.option(
    "--property", "prop_name", default=None, help="Property name (tcsmt list properties)."
)
@click.option("--arch", required=True, help="Architecture preset.")
@click.option("--instr", default=None, help="Instruction (default: the property's choice).")
@click.option("--all", "run_all", is_flag=True, help="Every property that applies to ARCH.")
@click.option(
    "--properties-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Read properties from this directory instead of the built-in library.",
)
@solver_options_common
def find_cmd(
    prop_name: str | None,
    arch: str,
    instr: str | None,
    run_all: bool,
    properties_dir: str | None,
    **opts,
) -> None:
    """Find a verified discriminating input (or a proof) for a property on an architecture.

    Exit 0: every query answered as the property expects; 1: an answer differs from the
    expectation (reported); 2: bad input or the property does not apply; 3: unknown;
    4: a solver witness that does not reproduce.
    """
    pdir = Path(properties_dir) if properties_dir else None
    if arch not in PRESETS:
        raise UserError(f"unknown architecture {arch!r}; known: {', '.join(PRESETS)}")
    limits = limits_from(opts)
    solvers_for(limits.solver)
    as_json, out = opts["as_json"], opts["out"]
    if run_all:
        if prop_name:
            raise UserError("give either --property or --all")
        _find_all(arch, pdir, limits, as_json, out)
        return
    if not prop_name:
        raise UserError("--property NAME (or --all) is required")
    prop = get(prop_name, pdir)
    prop.bind(arch, instr)  # not applicable -> exit 2 before any solving
    spinner = Spinner(sys.stderr.isatty() and not as_json)
    try:
        answers = find(prop, arch, instr, limits, spinner)
    finally:
        spinner.clear()
    not_asked = prop.skipped(arch, instr)  # queries that are no question on this unit
    files = []
    if out:
        saved = save_vectors(prop, arch, answers, Path(out))
        if saved:
            files.append(str(saved))
    if as_json:
        click.echo(
            json.dumps(
                {
                    "property": prop.name,
                    "question": prop.question,
                    "source": prop.source,
                    "arch": arch,
                    "instruction": answers[0].outcome.query.instruction,
                    "queries": [a.to_json() for a in answers],
                    "not_asked": dict(not_asked),
                    "files": files,
                },
                indent=2,
            )
        )
    else:
        q0 = answers[0].outcome.query
        click.echo(f"property:    {prop.name} ({prop.source})")
        click.echo(f"             {' '.join(prop.question.split())}")
        click.echo(f"arch:        {arch}, instruction {q0.instruction}")
        for a in answers:
            click.echo("")
            click.echo(_summary_line(a))
            click.echo(to_text(a.outcome, []))
        for qid, why in not_asked:
            click.echo("")
            click.echo(f"[{qid}] not asked on this instruction: {why}")
        click.echo("")
        for f in files:
            click.echo(f"wrote:       {f}")
    sys.exit(_exit_code(answers))


def _find_all(arch: str, pdir: Path | None, limits: Limits, as_json: bool, out: str | None):
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    props = load_all(pdir)
    preset = PRESETS[arch]
    rows: list[tuple[str, str, list[QueryAnswer] | None]] = []
    skipped: dict[str, list[tuple[str, str]]] = {}  # queries not asked on this unit
    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=as_json) as bar:
        task = bar.add_task(f"properties on {arch}", total=len(props))
        for name, prop in props.items():
            why = prop.not_applicable(preset)
            if why:
                rows.append((name, why, None))
            else:
                bar.update(task, description=f"{name} on {arch}")
                rows.append((name, "", find(prop, arch, None, limits)))
                skipped[name] = prop.skipped(arch)
            bar.advance(task)
    codes = [_exit_code(ans) for _, _, ans in rows if ans is not None]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "arch": arch,
                    "properties": {
                        n: ({"not_applicable": why} if ans is None else [a.to_json() for a in ans])
                        for n, why, ans in rows
                    },
                },
                indent=2,
            )
        )
    else:
        table = Table(title=f"tcsmt find --all --arch {arch}")
        for col in ("property", "query", "answer", "solver", "s", "conclusion"):
            table.add_column(col)
        for name, why, ans in rows:
            if ans is None:
                table.add_row(name, "-", "n/a", "", "", why.split(": ", 1)[-1])
                continue
            for a in ans:
                o = a.outcome
                who = "construction" if o.by_construction else (o.result.solver if o.result else "")
                flag = "" if a.as_expected is not False else " (UNEXPECTED)"
                table.add_row(
                    name, a.spec.id, a.answer + flag, who, f"{o.seconds:.2f}", a.conclusion
                )
            for qid, why in skipped.get(name, []):
                table.add_row(name, qid, "n/a", "", "", why)
        Console(width=160).print(table)
    sys.exit(max(codes) if codes else 0)
