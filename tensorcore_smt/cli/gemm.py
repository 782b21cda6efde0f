"""`tcsmt gemm`: run a whole GEMM under a GEMM hypothesis (ARCH[...]/SCHEDULE[...]) on
given or random matrices; report the instruction, schedule, time, MAC/s and the error
against the exact product and an fp64 matmul; compare hypotheses; plot errors.

Ctrl-C stops the GEMM that is running; the hypotheses that finished before it are
reported (and --out written when the first did), then the command exits 130."""

from __future__ import annotations

import json
import time

import click
import numpy as np

from ..errors import UserError
from ..formats import Format
from ..gemm.hypothesis import DEFAULT_INPUT, parse_gemm
from ..gemm.measure import (
    NOT_MEASURED,
    Dist,
    Measured,
    differ,
    parse_shape,
    random_matrix,
    run_measured,
)
from ..gemm.profile_call import Decision
from ..gemm.profiles import Profile, load_profile
from ..intake import DTYPE_FORMAT, DTYPE_INTEGER
from .base import check_out, fail, interrupted, main
from .gemm_io import input_format, load_matrix, plot_format, random_fits, save_array
from .gemm_plot import SweepPoint, draw
from .gemm_profile import profile_class_key, profile_recipe
from .options import Ranged


def _stats_json(m: Measured) -> dict:
    r = m.run
    return {
        "hypothesis": r.hypothesis.describe(),
        "instruction": r.instr,
        "schedule": r.schedule.text(),
        "k_block": r.params.K,
        "steps_per_output": r.plan.steps(),
        "out": m.out_fmt.spec.name,
        "engine": r.engine.value,
        "seconds": m.seconds,
        "macs_per_s": m.macs_per_s,
        "error_seconds": m.error_seconds,
        "exact": m.exact.as_dict() if m.exact else {"unavailable": m.why_exact},
        "fp64_matmul": m.fp64.as_dict() if m.fp64 else {"unavailable": m.why_fp64},
    }


def _err_line(s, why: str) -> str:
    if s is None:
        return f"n/a ({why})"
    line = (
        f"max {s.max_ulps:.4g} ulp, median {s.median_ulps:.4g} ulp; "
        f"relative max {s.max_rel:.3g}, median {s.median_rel:.3g}, normwise {s.normwise:.3g}"
    )
    if s.nonfinite:
        line += f"; {s.nonfinite} non-finite outputs"
    return line


def _print(m: Measured, first: Measured | None) -> None:
    r = m.run
    click.echo(f"hypothesis   {r.hypothesis.describe()}")
    click.echo(f"instruction  {r.instr} (K={r.params.K}, {r.plan.steps()} steps per output)")
    click.echo(f"schedule     {r.schedule.text()}")
    click.echo(f"engine       {r.engine.value}")
    click.echo(f"seconds      {m.seconds:.3f}")
    click.echo(f"MAC/s        {m.macs_per_s:.3g}")
    if m.exact is None and m.fp64 is None and m.why_exact == NOT_MEASURED:
        return _print_differ(m, first)
    click.echo(f"errors in    {m.error_seconds:.3f} s")
    click.echo(f"vs exact     {_err_line(m.exact, m.why_exact)}")
    click.echo(f"vs fp64      {_err_line(m.fp64, m.why_fp64)}")
    _print_differ(m, first)


def _print_differ(m: Measured, first: Measured | None) -> None:
    if first is not None:
        n = differ(m.D, first.D)
        click.echo(f"differs      {n} of {m.D.size} outputs from {first.run.hypothesis.describe()}")


def sweep_ks(K: int) -> list[int]:
    ks, k = [], 16
    while k < K:
        ks.append(k)
        k *= 2
    return ks + [K]


@main.command()
@click.option(
    "--arch", "hyp", default=None, metavar="HYP", help="GEMM hypothesis ARCH[...]/SCHEDULE[...]."
)
@click.option(
    "--profile",
    "profile_name",
    default=None,
    metavar="PROFILE",
    help="A library profile (h100; docs/profiles.md) picks the recipe instead of --arch.",
)
@click.option(
    "--call",
    "call_class",
    default=None,
    metavar="CLASS",
    help="With --profile: the call class (tcsmt profile show), which sets the input and "
    "output formats, flags and layouts (default: torch.matmul on --dtype inputs, torch's "
    "default flags).",
)
@click.option(
    "--instr", default=None, metavar="INSTR", help="Instruction (default: what libraries run)."
)
@click.option("--a", "a_path", default=None, metavar="A.npy", help="A as an (M, K) .npy matrix.")
@click.option("--b", "b_path", default=None, metavar="B.npy", help="B as a (K, N) .npy matrix.")
@click.option(
    "--c", "c_path", default=None, metavar="C.npy", help="C as an (M, N) .npy matrix (optional)."
)
@click.option(
    "--random", "shape", default=None, metavar="M,N,K", help="Random A, B of shape M,N,K instead."
)
@click.option(
    "--dist",
    type=click.Choice([d.value for d in Dist]),
    default="normal",
    show_default=True,
    help="Distribution of --random inputs.",
)
@click.option(
    "--seed", type=Ranged("seed", int), default=0, show_default=True, help="Seed of --random."
)
@click.option(
    "--dtype",
    default=None,
    metavar="FMT",
    help="Input format of --random (default: the instruction's, else fp16) and of "
    "unsigned .npy patterns; float .npy arrays carry their own.",
)
@click.option(
    "--out",
    "out_path",
    default=None,
    metavar="D.npy",
    help="Write D of --arch to this path (.npy data; no extension added).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "--compare",
    "others",
    multiple=True,
    metavar="HYP",
    help="Another hypothesis on the same matrices (repeat); counts differing outputs.",
)
@click.option(
    "--plot",
    "plot_path",
    default=None,
    metavar="FILE.png",
    help="Draw the error distributions (cumulative; format by extension, default png).",
)
@click.option("--k-sweep", is_flag=True, help="With --random: errors for K = 16, 32, ..., K.")
@click.option(
    "--engine",
    type=click.Choice(["numpy", "compiled"]),
    default=None,
    help="Interpreter of the GEMM (default: compiled for large GEMMs, numpy for small).",
)
@click.option(
    "--errors/--no-errors",
    default=True,
    show_default=True,
    help="Measure D against the exact product and an fp64 matmul.",
)
def gemm(
    hyp,
    profile_name,
    call_class,
    instr,
    a_path,
    b_path,
    c_path,
    shape,
    dist,
    seed,
    dtype,
    out_path,
    as_json,
    others,
    plot_path,
    k_sweep,
    engine,
    errors,
) -> None:
    """Emulate D = A*B (+ C) as a GPU kernel computes it, and measure its error."""
    t_start = time.perf_counter()
    check_out(out_path, "--out")  # output paths refused before any work
    fig_fmt = plot_format(plot_path)
    profile = _profile_args(hyp, profile_name, call_class, instr, dtype)
    for h in others:
        parse_gemm(h, instr)  # every hypothesis checked before any work
    if profile is None:
        parse_gemm(hyp, instr)
    if instr is not None and profile is None:  # a named instruction a GEMM cannot chain
        for h in (hyp, *others):
            try:
                parse_gemm(h, instr).params()
            except UserError as e:
                raise UserError(f"--instr: {e}") from None
    fmt = input_format(dtype)
    instrs = {}  # hypothesis -> the instruction it runs (None: the inputs' default)
    if profile is None and instr is None and fmt is not None and fmt.spec.is_integer:
        # integer operands but s8 come as bit patterns, which carry no format: each
        # hypothesis runs its library instruction for --dtype, named as --instr would
        instrs = {h: parse_gemm(h).instruction(fmt, fmt).name for h in (hyp, *others)}
    if profile is not None and call_class is not None:
        fmt = Format.parse(profile_class_key(profile, call_class).a)
    if shape is not None:
        if a_path or b_path or c_path:
            raise UserError("give either --random or --a/--b (--c), not both")
        M, N, K = parse_shape(shape)
        fa = fb = fmt or DEFAULT_INPUT
        if fmt is None and instr and hyp:  # A and B in the named instruction's formats
            named = parse_gemm(hyp, instr).params()
            fa, fb = named.a_fmt, named.b_fmt
        random_fits(shape, M, N, K, fa, fb, 1 + len(others), errors)
        rng = np.random.default_rng(seed)
        A = random_matrix((M, K), fa, Dist(dist), rng)
        B = random_matrix((K, N), fb, Dist(dist), rng)
        C = None
    else:
        if k_sweep:
            raise UserError("--k-sweep needs --random M,N,K")
        if a_path is None or b_path is None:
            raise UserError("give --a and --b (.npy), or --random M,N,K")
        A, B = load_matrix(a_path, "a", fmt), load_matrix(b_path, "b", fmt)
        C = load_matrix(c_path, "c", fmt)
        if A.shape[1] != B.shape[0]:
            raise UserError(f"--a {A.shape} and --b {B.shape}: inner dimensions differ")
        if C is not None and C.shape != (A.shape[0], B.shape[1]):
            raise UserError(f"--c has shape {C.shape}; expected {(A.shape[0], B.shape[1])}")
    ks = sweep_ks(A.shape[1]) if k_sweep else None
    if (ks is not None or plot_path) and not errors:
        raise UserError("--k-sweep and --plot show errors; leave --no-errors out")
    decision = None
    if profile is not None:
        hyp, B, decision = profile_recipe(profile, call_class, A, B, C)
    hyps = [hyp, *others]
    series: list[list[SweepPoint]] = []
    try:
        for h in hyps:
            # a profile's recipe (a hypothesis object) runs the instruction it names
            h_instr = instrs.get(h, instr) if isinstance(h, str) else instr
            series.append(_run_series(h, A, B, C, h_instr, engine, ks, errors))
    except KeyboardInterrupt:  # the GEMM running stopped; the finished ones are kept
        if not series:
            raise
        wall = time.perf_counter() - t_start
        _report(A, B, series, ks, as_json, [out_path] if out_path else [], wall, decision)
        _write_out(out_path, series, as_json)
        interrupted(f"{len(series)} of {len(hyps)} hypotheses finished, reported above")
    files = [f for f in (out_path, plot_path) if f]
    _report(A, B, series, ks, as_json, files, time.perf_counter() - t_start, decision)
    _write_out(out_path, series, as_json)
    if plot_path:
        title = f"M={A.shape[0]} N={B.shape[1]} K={A.shape[1]}, {_name(A)} x {_name(B)} inputs"
        if dist and shape is not None:
            title += f" ({dist}, seed {seed})"
        try:
            draw(plot_path, fig_fmt, title, series, ks is not None)
        except OSError as e:
            fail(f"--plot {plot_path}: could not write the figure ({e.strerror or e})")
        _wrote(plot_path, "plot of the errors", as_json)


def _profile_args(
    hyp: str | None, name: str | None, call_class: str | None, instr: str | None, dtype
) -> Profile | None:
    """The profile of --profile (None without it), the options checked against it."""
    if name is None:
        if hyp is None:
            raise UserError("give --arch HYP or --profile PROFILE")
        if call_class is not None:
            raise UserError("--call names a call class of a --profile; give --profile")
        return None
    if hyp is not None:
        raise UserError("give --arch or --profile, not both (a profile picks the hypothesis)")
    if instr is not None:
        raise UserError("--profile picks the instruction; leave --instr out")
    profile = load_profile(name)
    if call_class is not None:
        want = profile_class_key(profile, call_class).a
        if dtype is not None and input_format(dtype).spec.name != want:
            raise UserError(f"--call {call_class} takes {want} inputs; --dtype is {dtype}")
    return profile


def _run_series(
    h: str,
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray | None,
    instr: str | None,
    engine: str | None,
    ks: list[int] | None,
    errors: bool = True,
) -> list[SweepPoint]:
    """One hypothesis run on the whole GEMM, or (--k-sweep) on every K of the sweep; a
    K the schedule cannot cut (split-K with too few k-tiles) is skipped with the reason.
    `errors` False (--no-errors): D only, no error measured."""
    full = run_measured(h, A, B, C, instr, errors, engine)
    if ks is None:
        return [(A.shape[1], full, "")]
    points: list[SweepPoint] = []
    for k in ks[:-1]:
        try:
            points.append((k, run_measured(h, A[:, :k], B[:k], None, instr, errors, engine), ""))
        except UserError as e:
            points.append((k, None, str(e)))
    return points + [(ks[-1], full, "")]


def _write_out(out_path: str | None, series: list[list[SweepPoint]], as_json: bool) -> None:
    """D of the first hypothesis to --out (after the report: a failed write loses
    nothing printed); exit 2 when the write fails."""
    if not out_path:
        return
    try:
        save_array(out_path, series[0][-1][1].D)
    except OSError as e:
        fail(f"--out {out_path}: could not write D ({e.strerror or e}); the report is above")
    _wrote(out_path, f"D of {series[0][-1][1].run.hypothesis.describe()}", as_json)


def _wrote(path: str, what: str, as_json: bool) -> None:
    """The line saying a file was written (none with --json: the JSON's "files" says)."""
    if not as_json:
        click.echo(f"wrote        {path} ({what})")


def _report(
    A: np.ndarray,
    B: np.ndarray,
    series: list[list[SweepPoint]],
    ks: list[int] | None,
    as_json: bool,
    files: list[str],
    wall: float,
    decision: Decision | None = None,
) -> None:
    """The report of the finished hypotheses, text or JSON; `files`: the files written
    after it, `wall`: seconds since the command started (inputs, GEMMs, errors);
    `decision`: the profile's choice of the first hypothesis (--profile)."""
    first = series[0][-1][1]
    if as_json:
        doc = {
            "shape": {"M": A.shape[0], "N": B.shape[1], "K": A.shape[1]},
            "inputs": [_name(A), _name(B)],
            "runs": [],
            "files": files,
            "wall_seconds": wall,
        }
        if decision is not None:
            doc["decision"] = decision.as_dict()
        for s in series:
            m = s[-1][1]
            entry = _stats_json(m)
            if s is not series[0]:
                entry["differ_from_first"] = differ(m.D, first.D)
            if ks is not None:
                entry["k_sweep"] = [
                    {"K": k, "skipped": why}
                    if p is None
                    else {"K": k, **(p.exact.as_dict() if p.exact else {})}
                    for k, p, why in s
                ]
            doc["runs"].append(entry)
        click.echo(json.dumps(doc, indent=1))
        return
    click.echo(
        f"shape        M={A.shape[0]} N={B.shape[1]} K={A.shape[1]} "
        f"({_name(A)} x {_name(B)} -> {first.out_fmt.spec.name})"
    )
    if decision is not None:
        click.echo(
            f"profile      {decision.profile}: class {decision.call_class or 'none'}, "
            f"{decision.source.value} ({decision.reason})"
        )
    for s in series:
        click.echo("")
        _print(s[-1][1], first if s is not series[0] else None)
        if ks is not None:
            click.echo("K sweep      K: median / max ulp vs exact")
            for k, m, why in s:
                if m is None:
                    click.echo(f"  {k:>6}     skipped: {why}")
                elif m.exact:
                    click.echo(f"  {k:>6}     {m.exact.median_ulps:.4g} / {m.exact.max_ulps:.4g}")
                else:
                    click.echo(f"  {k:>6}     n/a")
    click.echo("")
    click.echo(f"wall         {wall:.3f} s (the command after start-up: inputs, GEMMs, errors)")


def _name(x: np.ndarray) -> str:
    f = DTYPE_FORMAT.get(x.dtype) or DTYPE_INTEGER.get(x.dtype)
    return f.spec.name if f is not None else str(x.dtype)
