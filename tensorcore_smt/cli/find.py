"""`tcsmt find`: answer a property of the library on an architecture (or all of them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import ExitCode, UserError
from ..smt.find import QueryAnswer, QueryTask, find_iter, query_tasks, sweep, vectors_of
from ..smt.library import get, load_all
from ..smt.report import to_text
from ..smt.search import SEARCH_S
from ..smt.solve import PORTFOLIO, Limits, Verdict, solvers_for, with_search
from ..spec.presets import PRESETS
from ..validation import vectors as vec
from ..validation.distributed import TaskFailure, connect
from .base import check_out, main, write_or_print
from .options import (
    META_OPTION,
    Ranged,
    Spinner,
    check_vector_out,
    cluster_options,
    limits_from,
    parse_meta,
    solver_options_common,
)


def _dumps(vf, out) -> str:
    """The text of a vector file: instruction-level (JSON or CSV) or GEMM (JSON)."""
    from ..validation import gemm_vectors

    if isinstance(vf, gemm_vectors.GemmVectorFile):
        return gemm_vectors.dumps(vf)
    return vec.dumps(vf, out)


def _exit_code(answers: list[QueryAnswer]) -> int:
    verdicts = [a.outcome.verdict for a in answers]
    if Verdict.BAD_WITNESS in verdicts:
        return ExitCode.WITNESS_BUG
    if Verdict.UNKNOWN in verdicts:
        return ExitCode.INCOMPLETE
    if any(a.as_expected is False for a in answers):
        return ExitCode.REFUTED
    return ExitCode.OK


def budget_line(limits: Limits, n_queries: int) -> str:
    """What `find` says before solving: the wall-clock budget of each query."""
    search = f"the concrete search ({limits.search:g} s), " if limits.search > 0 else ""
    return (
        f"budget:      {limits.timeout:g} s per query ({search}every solver of the portfolio "
        f"and the unsat confirmation within it), {n_queries} quer{'y' if n_queries == 1 else 'ies'}"
    )


def _summary_line(a: QueryAnswer) -> str:
    o = a.outcome
    who = (
        f"by {o.method}"
        if o.by_construction or o.argued
        else (o.result.solver if o.result else "-")
    )
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
@click.option(
    "--search",
    "search_s",
    type=Ranged("search_seconds", float),
    default=None,
    help=f"Seconds of concrete search for a witness before the solvers (0: none; default "
    f"{SEARCH_S:g} with the portfolio, 0 with one --solver).",
)
@META_OPTION
@solver_options_common
@cluster_options
def find_cmd(
    prop_name: str | None,
    arch: str,
    instr: str | None,
    meta_text: str | None,
    run_all: bool,
    properties_dir: str | None,
    search_s: float | None,
    workers: int | None,
    scheduler: str | None,
    dashboard: bool,
    **opts,
) -> None:
    """Find a verified discriminating input (or a proof) for a property on an architecture.

    Exit 0: every query answered as the property expects; 1: an answer differs from the
    expectation (reported); 2: bad input or the property does not apply; 3: unknown;
    4: a solver witness that does not reproduce. With --all the queries run as tasks on a
    Dask cluster (--workers, --scheduler); a query whose task failed counts as unknown.
    """
    pdir = Path(properties_dir) if properties_dir else None
    if arch not in PRESETS:
        raise UserError(f"unknown architecture {arch!r}; known: {', '.join(PRESETS)}")
    limits = limits_from(opts)
    solvers_for(limits.solver)
    if search_s is None:
        search_s = SEARCH_S if limits.solver == PORTFOLIO else 0.0
    limits = with_search(limits, search_s)
    as_json, out = opts["as_json"], check_out(opts["out"])
    if run_all:
        if prop_name:
            raise UserError("give either --property or --all")
        if out is not None:
            raise UserError("--out writes the witnesses of one --property; not with --all")
        if meta_text is not None:
            raise UserError("--meta asks one sparse instruction (--property, --instr)")
        _find_all(arch, pdir, limits, as_json, workers, scheduler, dashboard)
        return
    if workers is not None or scheduler is not None or dashboard:
        raise UserError(
            "--workers, --scheduler and --dashboard spread the queries of --all; give --all"
        )
    if not prop_name:
        raise UserError("--property NAME (or --all) is required")
    prop = get(prop_name, pdir)
    meta = parse_meta(meta_text)
    bound = prop.bind(arch, instr, meta)  # not applicable -> exit 2 before any solving
    if bound:
        check_vector_out(bound[0][1], out)
    if sys.stderr.isatty() and not as_json:  # before solving, beside the spinner
        click.echo(budget_line(limits, len(bound)), err=True)
    spinner = Spinner(sys.stderr.isatty() and not as_json)
    answers: list[QueryAnswer] = []
    interrupted = False
    try:
        for a in find_iter(prop, arch, instr, limits, spinner, meta):
            answers.append(a)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        spinner.clear()
    if not answers:
        raise KeyboardInterrupt  # nothing finished: the plain interrupt line
    not_asked = prop.skipped(arch, instr)  # queries that are no question on this unit
    files = []
    if out:
        vf = vectors_of(prop, arch, answers)
        if vf is not None and write_or_print(out, _dumps(vf, out), "witness vectors"):
            files.append(str(out))
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
                    "budget_s": limits.timeout,
                    "interrupted": interrupted,
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
        click.echo(budget_line(limits, len(bound)))
        for f in files:
            click.echo(f"wrote:       {f}")
    if interrupted:
        click.echo(
            f"tcsmt: interrupted: {len(answers)} of {len(bound)} queries answered (reported above)",
            err=True,
        )
        sys.exit(ExitCode.INTERRUPTED)
    sys.exit(_exit_code(answers))


def _find_all(
    arch: str,
    pdir: Path | None,
    limits: Limits,
    as_json: bool,
    workers: int | None,
    scheduler: str | None,
    dashboard: bool = False,
) -> None:
    """Every applicable property on ARCH, one Dask task per query; a summary table."""
    from rich.console import Console
    from rich.table import Table

    props = load_all(pdir)
    preset = PRESETS[arch]
    why_not: dict[str, str] = {}
    tasks: dict[str, list[QueryTask]] = {}
    skipped: dict[str, list[tuple[str, str]]] = {}  # queries not asked on this unit
    for name, prop in props.items():
        why = prop.not_applicable(preset)
        if why:
            why_not[name] = why
        else:
            tasks[name] = query_tasks(prop, arch, None, limits, pdir)
            skipped[name] = prop.skipped(arch)
    done: dict[tuple[str, str], QueryAnswer | TaskFailure] = {}
    interrupted = False
    flat = [t for ts in tasks.values() for t in ts]
    if sys.stderr.isatty() and not as_json:
        click.echo(budget_line(limits, len(flat)), err=True)
    with connect(workers, scheduler, dashboard) as client:
        try:
            for t, r in sweep(client, flat, progress=sys.stderr.isatty() and not as_json):
                done[(t.prop, t.query_id)] = r
                if isinstance(r, TaskFailure):
                    click.echo(f"tcsmt: find: {r.input} failed: {r.error}", err=True)
        except KeyboardInterrupt:
            interrupted = True
    codes = []
    for ts in tasks.values():
        got = [done.get((t.prop, t.query_id)) for t in ts]
        answers = [r for r in got if isinstance(r, QueryAnswer)]
        if answers:
            codes.append(_exit_code(answers))
        if len(answers) < len(got):
            codes.append(ExitCode.INCOMPLETE)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "arch": arch,
                    "properties": {
                        n: (
                            {"not_applicable": why_not[n]}
                            if n in why_not
                            else [_task_json(t, done.get((t.prop, t.query_id))) for t in tasks[n]]
                        )
                        for n in props
                    },
                    "budget_s": limits.timeout,
                    "interrupted": interrupted,
                },
                indent=2,
            )
        )
    else:
        table = Table(title=f"tcsmt find --all --arch {arch}")
        for col in ("property", "query", "answer", "solver", "s", "conclusion"):
            table.add_column(col)
        for name in props:
            if name in why_not:
                table.add_row(name, "-", "n/a", "", "", why_not[name].split(": ", 1)[-1])
                continue
            for t in tasks[name]:
                r = done.get((t.prop, t.query_id))
                if isinstance(r, TaskFailure):
                    table.add_row(name, t.query_id, "error", "", "", r.error)
                    continue
                if r is None:
                    table.add_row(name, t.query_id, "not run", "", "", "interrupted")
                    continue
                o = r.outcome
                who = (
                    o.method
                    if o.by_construction or o.argued
                    else (o.result.solver if o.result else "")
                )
                flag = "" if r.as_expected is not False else " (UNEXPECTED)"
                table.add_row(
                    name, r.spec.id, r.answer + flag, who, f"{o.seconds:.2f}", r.conclusion
                )
            for qid, why in skipped.get(name, []):
                table.add_row(name, qid, "n/a", "", "", why)
        Console(width=160).print(table)
        click.echo(budget_line(limits, len(flat)))
    if interrupted:
        click.echo("tcsmt: interrupted: the queries that finished are reported above", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    sys.exit(max(codes) if codes else ExitCode.OK)


def _task_json(t: QueryTask, r: QueryAnswer | TaskFailure | None) -> dict:
    if isinstance(r, QueryAnswer):
        return r.to_json()
    if isinstance(r, TaskFailure):
        return {"id": t.query_id, "answer": "error", "error": r.error}
    return {"id": t.query_id, "answer": "not run", "error": "interrupted"}
