"""`tcsmt gemm`: run a whole GEMM under a GEMM hypothesis (ARCH[...]/SCHEDULE[...]) on
given or random matrices; report the instruction, schedule, time, MAC/s and the error
against the exact product and an fp64 matmul; compare hypotheses; plot errors.

Ctrl-C stops the GEMM that is running; the hypotheses that finished before it are
reported (and --out written when the first did), then the command exits 130."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import numpy as np

from ..errors import UserError
from ..gemm.arrays import DTYPE_FORMAT, FORMAT_DTYPE, UINT
from ..gemm.hypothesis import parse_gemm
from ..gemm.measure import (
    NOT_MEASURED,
    Dist,
    Measured,
    differ,
    parse_shape,
    random_matrix,
    run_measured,
)
from ..spec.formats import Format
from .base import check_out, interrupted, main
from .options import Ranged


def _load(path: str | None, what: str, fmt: Format | None) -> np.ndarray | None:
    """An .npy matrix; unsigned or raw (void) arrays are read as `fmt` (--dtype)."""
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--{what}: {path}: no such file")
    try:
        x = np.load(p, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise UserError(f"--{what}: {path}: not a .npy array ({e})") from None
    if x.dtype.kind in "uV":
        if fmt is None:
            raise UserError(f"--{what}: {path} holds {x.dtype} patterns; give --dtype")
        w = fmt.spec.storage
        if x.dtype.itemsize * 8 != w:
            raise UserError(f"--{what}: {x.dtype} patterns are not {w}-bit {fmt.spec.name}")
        x = x.view(UINT[w]).view(FORMAT_DTYPE[fmt])
    if x.dtype not in DTYPE_FORMAT:
        raise UserError(f"--{what}: dtype {x.dtype} is not a GEMM input")
    if x.ndim != 2:
        raise UserError(f"--{what}: {path} has shape {x.shape}; expected a 2-D matrix")
    return x


def _dtype(text: str | None) -> Format | None:
    if text is None:
        return None
    try:
        f = Format.parse(text)
    except ValueError:
        f = None
    if f is None or f not in FORMAT_DTYPE:
        known = ", ".join(sorted(x.spec.name for x in FORMAT_DTYPE))
        raise UserError(f"--dtype: {text!r} is not an input format; allowed: {known}")
    return f


def _stats_json(m: Measured) -> dict:
    r = m.run
    return {
        "hypothesis": r.hypothesis.describe(),
        "instruction": r.instr,
        "schedule": r.schedule.text(),
        "k_block": r.params.K,
        "steps_per_output": r.plan.steps(),
        "out": m.out_fmt.spec.name,
        "engine": r.engine,
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
    click.echo(f"engine       {r.engine}")
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


def _sweep_ks(K: int) -> list[int]:
    ks, k = [], 16
    while k < K:
        ks.append(k)
        k *= 2
    return ks + [K]


def _plot(path: str, runs: list[list[Measured]], ks: list[int] | None) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'tensorcore-smt[plot]'") from None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if ks is not None:
        for series in runs:
            name = series[0].run.hypothesis.describe()
            med = [m.exact.median_ulps if m.exact else np.nan for m in series]
            top = [m.exact.max_ulps if m.exact else np.nan for m in series]
            (line,) = ax.plot(ks, med, marker="o", label=f"{name} median")
            ax.plot(ks, top, marker="^", ls="--", color=line.get_color(), label=f"{name} max")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("K")
        ax.set_yscale("symlog", linthresh=0.5)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("error vs exact product (ulps of the output)")
    else:
        for series in runs:
            m = series[-1]
            if m.exact is None:
                continue
            u = np.sort(m.exact.ulps[np.isfinite(m.exact.ulps)].reshape(-1))
            frac = np.arange(1, len(u) + 1) / max(len(u), 1)
            ax.step(u, frac, where="post", label=m.run.hypothesis.describe())
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(left=0)
        ax.set_xlabel("error vs exact product (ulps of the output)")
        ax.set_ylabel("fraction of outputs with at most this error")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@main.command()
@click.option(
    "--arch", "hyp", required=True, metavar="HYP", help="GEMM hypothesis ARCH[...]/SCHEDULE[...]."
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
    help="Input format of --random (default: the instruction's, else fp16); also reads "
    "unsigned .npy patterns as this format.",
)
@click.option(
    "--out", "out_path", default=None, metavar="D.npy", help="Write D of --arch to this .npy file."
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
    help="Draw the error distributions (PNG; cumulative).",
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
    check_out(plot_path, "--plot")
    hyps = [hyp, *others]
    for h in hyps:
        parse_gemm(h, instr)  # every hypothesis checked before any work
    fmt = _dtype(dtype)
    if shape is not None:
        if a_path or b_path or c_path:
            raise UserError("give either --random or --a/--b (--c), not both")
        M, N, K = parse_shape(shape)
        if fmt is None:
            h0 = parse_gemm(hyp, instr)
            fmt = h0.params().a_fmt if instr else Format.FP16
        rng = np.random.default_rng(seed)
        A = random_matrix((M, K), fmt, Dist(dist), rng)
        B = random_matrix((K, N), fmt, Dist(dist), rng)
        C = None
    else:
        if k_sweep:
            raise UserError("--k-sweep needs --random M,N,K")
        if a_path is None or b_path is None:
            raise UserError("give --a and --b (.npy), or --random M,N,K")
        A, B, C = _load(a_path, "a", fmt), _load(b_path, "b", fmt), _load(c_path, "c", fmt)
        if A.shape[1] != B.shape[0]:
            raise UserError(f"--a {A.shape} and --b {B.shape}: inner dimensions differ")
        if C is not None and C.shape != (A.shape[0], B.shape[1]):
            raise UserError(f"--c has shape {C.shape}; expected {(A.shape[0], B.shape[1])}")
    ks = _sweep_ks(A.shape[1]) if k_sweep else None
    if (ks is not None or plot_path) and not errors:
        raise UserError("--k-sweep and --plot show errors; leave --no-errors out")
    series: list[list[Measured]] = []
    cut = False
    try:
        for h in hyps:
            if ks is None:
                series.append([run_measured(h, A, B, C, instr, errors, engine)])
            else:
                series.append(
                    [run_measured(h, A[:, :k], B[:k], None, instr, errors, engine) for k in ks]
                )
    except KeyboardInterrupt:  # the GEMM running stopped; the finished ones are kept
        cut = True
    if not series:
        interrupted()
    _report(series, ks, A, B, out_path, plot_path, as_json, time.perf_counter() - t_start)
    if cut:
        interrupted(f"{len(series)} of {len(hyps)} hypotheses finished, reported above")


def _report(series, ks, A, B, out_path, plot_path, as_json, wall: float) -> None:
    """Write --out and --plot and print the runs (text or --json)."""
    if out_path:
        np.save(out_path, series[0][-1].D)
    if plot_path:
        _plot(plot_path, series, ks)
    first = series[0][-1]
    if as_json:
        doc = {
            "shape": {"M": A.shape[0], "N": B.shape[1], "K": A.shape[1]},
            "inputs": [_name(A), _name(B)],
            "runs": [],
            "wall_seconds": wall,
        }
        for s in series:
            entry = _stats_json(s[-1])
            if s is not series[0]:
                entry["differ_from_first"] = differ(s[-1].D, first.D)
            if ks is not None:
                entry["k_sweep"] = [
                    {"K": k, **(m.exact.as_dict() if m.exact else {})} for k, m in zip(ks, s)
                ]
            doc["runs"].append(entry)
        click.echo(json.dumps(doc, indent=1))
        return
    click.echo(
        f"shape        M={A.shape[0]} N={B.shape[1]} K={A.shape[1]} "
        f"({_name(A)} x {_name(B)} -> {first.out_fmt.spec.name})"
    )
    for s in series:
        click.echo("")
        _print(s[-1], first if s is not series[0] else None)
        if ks is not None:
            click.echo("K sweep      K: median / max ulp vs exact")
            for k, m in zip(ks, s):
                e = m.exact
                click.echo(
                    f"  {k:>6}     {e.median_ulps:.4g} / {e.max_ulps:.4g}"
                    if e
                    else f"  {k:>6}     n/a"
                )
    click.echo("")
    click.echo(f"wall         {wall:.3f} s (the command after start-up: inputs, GEMMs, errors)")


def _name(x: np.ndarray) -> str:
    return DTYPE_FORMAT[x.dtype].spec.name
