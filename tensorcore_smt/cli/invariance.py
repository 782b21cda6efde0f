"""`tcsmt invariance`: batch invariance of a torch call: the M at which row 0's recipe
changes (from a library profile, GEMM hypotheses on ranges of M, or torch asked live), a
witness input for each change re-run through tc.matmul, and with --against whether the
call gives the same bits under a second profile (invariance/).

Exit codes: 0 invariant (same recipe for every M; --against: the same bits for every M);
1 varies (a witness shows different bits); 2 bad input; 3 recipes change but no witness
was found within --tries.
"""

from __future__ import annotations

import json
import sys

import click

from ..errors import ExitCode, UserError
from .base import main

EXIT = {"invariant": ExitCode.OK, "varies": ExitCode.REFUTED, "unknown": ExitCode.INCOMPLETE}


def _call_class(call: str, dtype: str, reduced: bool):
    from ..hardware.library_calls import REDUCED_PRECISIONS, CallClass, Op, Precision

    try:
        op, prec = Op(call), Precision(dtype)
    except ValueError:
        raise UserError(f"--call {call} --dtype {dtype}: unknown call or dtype") from None
    try:
        return CallClass(op, prec, reduced if prec in REDUCED_PRECISIONS else None)
    except ValueError as e:
        raise UserError(f"--call {call} --dtype {dtype}: {e}") from None


def _source(name: str | None, hyps: tuple[str, ...], cls, n: int, k: int, what: str):
    from ..invariance.sources import HypothesisRanges, ProfileSource

    if name is not None:
        return ProfileSource(name, cls, n, k)
    if hyps:
        return HypothesisRanges(list(hyps))
    raise UserError(f"give {what}")


@main.command("invariance")
@click.option("--profile", "profile", metavar="PROFILE", help="Library profile (h100, ...).")
@click.option(
    "--hypothesis",
    "hyps",
    multiple=True,
    metavar="HYP[@LO..HI]",
    help="GEMM hypothesis for every M, or for the M in LO..HI (LO.. : to any M); repeat "
    "for several ranges.",
)
@click.option(
    "--oracle",
    metavar="NAME",
    help="torch:cpu or torch:cuda: ask torch for row 0 at every M directly.",
)
@click.option(
    "--against",
    "against_profile",
    metavar="PROFILE",
    help="A second profile: does each M give the same bits under both?",
)
@click.option(
    "--against-hypothesis",
    "against_hyps",
    multiple=True,
    metavar="HYP[@LO..HI]",
    help="As --against, with hypotheses on ranges of M.",
)
@click.option(
    "--call",
    default="matmul",
    show_default=True,
    help="matmul, linear, linear-bias, addmm, bmm, matmul-at, matmul-bt, scaled-mm, "
    "scaled-mm-fast.",
)
@click.option("--dtype", default="bf16", show_default=True, help="fp16, bf16, fp32, tf32, e4m3.")
@click.option(
    "--reduced/--no-reduced",
    default=True,
    show_default=True,
    help="torch's allow_fp16/bf16_reduced_precision_reduction.",
)
@click.option("--n", "n", type=click.IntRange(1, 1 << 20), required=True, metavar="N")
@click.option("--k", "k", type=click.IntRange(1, 1 << 20), required=True, metavar="K")
@click.option("--m", "m_text", required=True, metavar="RANGE", help="M values: 1..4096, 1,2,8.")
@click.option(
    "--tries",
    type=click.IntRange(1, 1000),
    default=6,
    show_default=True,
    help="Seeded inputs tried for a witness per pair of recipes.",
)
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
def invariance_cmd(
    profile: str | None,
    hyps: tuple[str, ...],
    oracle: str | None,
    against_profile: str | None,
    against_hyps: tuple[str, ...],
    call: str,
    dtype: str,
    reduced: bool,
    n: int,
    k: int,
    m_text: str,
    tries: int,
    seed: int,
    as_json: bool,
) -> None:
    """Batch invariance of a torch call: the M at which row 0 of D = A[:M] @ B changes its
    recipe, each change with a witness input whose row 0 changes bits (re-run through
    tc.matmul under both recipes), or with --against whether every M gives the same bits
    under two profiles.

    Exit 0: invariant; 1: varies (a witness); 3: recipes change, no witness found.
    """
    from ..invariance.sources import parse_ms

    ms = parse_ms(m_text)
    cls = _call_class(call, dtype, reduced)
    given = sum(x is not None and x != () for x in (profile, hyps, oracle))
    if given != 1:
        raise UserError("give one of --profile, --hypothesis, --oracle")
    if oracle is not None:
        _live(oracle, cls, n, k, ms, seed, as_json, bool(against_profile or against_hyps))
        return
    from ..invariance.scan import against, scan

    src = _source(profile, hyps, cls, n, k, "--profile or --hypothesis")
    if against_profile or against_hyps:
        if against_profile and against_hyps:
            raise UserError("give --against or --against-hypothesis, not both")
        other = _source(against_profile, against_hyps, cls, n, k, "--against")
        rep = against(src, other, cls, n, k, ms, tries)
    else:
        rep = scan(src, cls, n, k, ms, tries)
    if as_json:
        click.echo(json.dumps(rep.as_dict()))
    else:
        _text(rep)
    sys.exit(int(EXIT[rep.verdict.value]))


def _text(rep) -> None:
    click.echo(f"call        {rep.cls.name}, N={rep.n}, K={rep.k}, M {_ms(rep.ms)}")
    click.echo(f"source      {rep.source}" + (f" against {rep.against}" if rep.against else ""))
    for s in rep.segments:
        span = f"M {s.lo}..{s.hi}" if s.hi > s.lo else f"M {s.lo}"
        line = f"{span:<14}{s.recipe.hypothesis}"
        if s.other is not None:
            line += f"  |  {s.other.hypothesis}: {_step(s.step, s.witness, rep.tries)}"
        click.echo(line)
    for c in rep.changes:
        click.echo(f"change      M {c.m_before} -> {c.m}: {_step(c.step, c.witness, rep.tries)}")
    click.echo(f"verdict     {rep.verdict.value}")


def _step(step, w, tries: int) -> str:
    if step.value == "same-recipe":
        return "same recipe, same bits"
    if w is None:
        return f"recipes differ; no witness found in {tries} tries"
    d = w.as_dict()
    where = (
        f"the pair probe (i, j) = ({d['pair'][0]}, {d['pair'][1]})"
        if "pair" in d
        else f"{d['kind']} inputs seed {d['seed']}, column {d['column']}"
    )
    return f"row 0 differs on {where}: {d['d'][0]} vs {d['d'][1]} (re-run through tc.matmul)"


def _ms(ms: list[int]) -> str:
    return f"{ms[0]}..{ms[-1]} ({len(ms)} values)" if len(ms) > 1 else str(ms[0])


def _live(oracle, cls, n, k, ms, seed, as_json, with_against) -> None:
    from ..hardware.library_inputs import Kind
    from ..hardware.library_record import parse_oracle
    from ..invariance.live import live_scan

    if with_against:
        raise UserError("--against compares recipes; it does not apply to --oracle")
    rep = live_scan(parse_oracle(oracle), cls, n, k, ms, Kind.CANCEL, seed)
    if as_json:
        click.echo(json.dumps(rep.as_dict()))
    else:
        click.echo(f"call        {cls.name}, N={n}, K={k}, M {_ms(ms)}")
        click.echo(f"source      {rep.oracle} (cancel inputs, seed {seed})")
        for c in rep.changes:
            w = c.as_dict()["witness"]
            click.echo(
                f"change      M {c.m_before} -> {c.m}: row 0 column {w['column']} "
                f"{w['d'][0]} -> {w['d'][1]}"
            )
        click.echo(f"verdict     {rep.verdict}")
    sys.exit(int(ExitCode.REFUTED if rep.changes else ExitCode.OK))
