"""`tcsmt hardware`: the GPU campaign's commands (tensorcore_smt.hardware): property vectors
(no GPU), the run on a GPU machine, the recheck of a past run, and its report.
`python -m tensorcore_smt hardware ...` and `make hardware` / `make hardware-vectors`
run these commands."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import ExitCode, UserError
from ..hardware.plan import PROBED
from ..hardware.validation import ORACLE_TIMEOUT
from .base import Group, main
from .options import Ranged, cluster_options


@main.group("hardware", cls=Group)
def hardware_group() -> None:
    """The hardware campaign: probes, random validation and identify on a real GPU, with
    what the silicon returned under results/hardware/<gpu>/ (docs/hardware.md)."""


_ARCH = click.option(
    "--arch", default="hopper", show_default=True, type=click.Choice(sorted(PROBED))
)


@hardware_group.command("vectors")
@_ARCH
@click.option(
    "--out", default="results/hardware/vectors", show_default=True, help="Where the files go."
)
@click.option(
    "--timeout",
    type=Ranged("timeout", float),
    default=120.0,
    show_default=True,
    help="Seconds per solver question.",
)
@click.option("--property", "properties", multiple=True, help="Only this property (repeat).")
@click.option("--instr", "instrs", multiple=True, help="Only this instruction (repeat).")
def vectors_cmd(
    arch: str, out: str, timeout: float, properties: tuple[str, ...], instrs: tuple[str, ...]
) -> None:
    """Property vectors for the probed instructions (solvers, no GPU): every property's
    witnesses as vector files under OUT/<instr>/<property>.vectors.json."""
    from ..hardware.probes import make_vectors

    make_vectors(arch, Path(out), timeout, list(properties) or None, list(instrs) or None)


@hardware_group.command("run")
@_ARCH
@click.option(
    "--vectors",
    default="results/hardware/vectors",
    show_default=True,
    help="The property vector files to probe (tcsmt hardware vectors).",
)
@click.option(
    "--out", default="results/hardware", show_default=True, help="Results go to OUT/<gpu>/."
)
@click.option(
    "--rows",
    type=Ranged("rows", int),
    default=1_000_000,
    show_default=True,
    help="Random rows per probed instruction.",
)
@click.option(
    "--rows-others",
    type=Ranged("rows", int),
    default=100_000,
    show_default=True,
    help="Random rows per instruction outside the probed list.",
)
@click.option(
    "--seed",
    type=Ranged("seed", int),
    default=0,
    show_default=True,
    help="Seed of the random rows (instruction i uses SEED + i).",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1, max=1 << 20),
    default=200,
    show_default=True,
    help="identify: most vectors sent to the GPU per instruction.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=0, max=1024),
    default=0,
    help="nvcc builds at once (default: the core count).",
)
@click.option(
    "--steps",
    default="probes,validate,sparse,identify",
    show_default=True,
    help="Comma-separated steps to run (also: cases, the public cases; gemm, torch's GEMMs "
    "recorded under OUT/<gpu>/gemm; sparse, the mma.sp forms against their hypotheses).",
)
@click.option(
    "--validate-instr",
    default="",
    help="validate only the instructions whose name matches this regular expression.",
)
@click.option(
    "--sparse-rows",
    type=Ranged("rows", int),
    default=200_000,
    show_default=True,
    help="Random rows per mma.sp instruction (step sparse).",
)
@click.option(
    "--identify-instr",
    multiple=True,
    help="identify only these instructions (repeat; default: the probed list).",
)
@click.option(
    "--identify-jobs",
    type=click.IntRange(min=1, max=64),
    default=1,
    show_default=True,
    help="identify runs at once (threads of this process).",
)
@click.option(
    "--identify-timeout",
    type=Ranged("timeout", float),
    default=20.0,
    show_default=True,
    help="identify: seconds per solver question.",
)
@click.option(
    "--keep-rows",
    type=Ranged("keep", int),
    default=0,
    show_default=True,
    help="Rows (with the GPU's d) kept per mismatching instruction, as .rows.npz.",
)
@click.option("--keep-dir", default="", help="Where kept rows go (default OUT/<gpu>/rows).")
@click.option(
    "--chunk",
    "chunk_rows",
    type=Ranged("chunk", int),
    default=None,
    help="Rows per validation task (default: validate's, 100,000).",
)
@click.option(
    "--oracle-timeout",
    type=Ranged("oracle_timeout", float),
    default=ORACLE_TIMEOUT,
    show_default=True,
    help="Seconds the GPU's batch runner may take for one validation chunk.",
)
@cluster_options
def run_cmd(
    arch: str,
    vectors: str,
    out: str,
    rows: int,
    rows_others: int,
    seed: int,
    budget: int,
    jobs: int,
    steps: str,
    validate_instr: str,
    sparse_rows: int,
    identify_instr: tuple[str, ...],
    identify_jobs: int,
    identify_timeout: float,
    keep_rows: int,
    keep_dir: str,
    chunk_rows: int | None,
    oracle_timeout: float,
    workers: int | None,
    scheduler: str | None,
    dashboard: bool,
) -> None:
    """The GPU campaign (on a machine with an NVIDIA GPU and nvcc; elsewhere one line and
    exit 2): probes, validation of every instruction with the cuda oracle, identify."""
    from ..hardware.campaign import STEPS, campaign

    picked = tuple(s.strip() for s in steps.split(",") if s.strip())
    bad = [s for s in picked if s not in STEPS]
    if bad or not picked:
        raise UserError(
            f"--steps: unknown step {bad[0]!r}; known: {', '.join(STEPS)}"
            if bad
            else f"--steps: none given; known: {', '.join(STEPS)}"
        )
    campaign(
        arch=arch,
        vectors=Path(vectors),
        out=Path(out),
        rows=rows,
        rows_others=rows_others,
        seed=seed,
        budget=budget,
        jobs=jobs,
        steps=picked,
        validate_instr=validate_instr,
        sparse_rows=sparse_rows,
        identify_instr=identify_instr,
        identify_jobs=identify_jobs,
        identify_timeout=identify_timeout,
        keep_rows=keep_rows,
        keep_dir=Path(keep_dir) if keep_dir else None,
        workers=workers,
        scheduler=scheduler,
        chunk_rows=chunk_rows,
        oracle_timeout=oracle_timeout,
    )


@hardware_group.command("recheck")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--against", required=True, help="The variant the run validated.")
@click.option("--instr", default="", help="Only instructions matching this expression.")
def recheck_cmd(folder: str, against: str, instr: str) -> None:
    """Does the preset still agree with a past run? (no GPU) The run's rows are drawn
    again from their seeds; exit 0 when, on every instruction, the preset and AGAINST
    differ exactly on the rows the GPU disagreed with, 1 otherwise."""
    from ..hardware.validation import recheck

    try:
        rows = recheck(Path(folder), against, instr)
    except (ValueError, OSError, KeyError) as e:
        raise UserError(f"recheck {folder}: {e}") from None
    if not all(r["agrees"] for r in rows):
        sys.exit(ExitCode.REFUTED)


@hardware_group.command("report")
@click.argument("folder", type=click.Path(file_okay=False, exists=True))
def report_cmd(folder: str) -> None:
    """Rewrite FOLDER/README.md from a run's JSON files (and FOLDER/FINDINGS.md)."""
    from ..hardware.report import write_report

    f = Path(folder)
    findings = f / "FINDINGS.md"
    click.echo(write_report(f, findings.read_text() if findings.exists() else ""))


@hardware_group.command("fit-gemm")
@click.argument("folder", default="results/hardware/h100", type=click.Path())
@click.option(
    "--candidates",
    default=None,
    help="The candidate list (default: schedules/gemm-fit.toml).",
)
@click.option("--call", "calls", multiple=True, help="Only this call (repeat), e.g. fp16.")
@click.option("--shape", "shapes", multiple=True, help="Only this shape (repeat).")
def fit_gemm_cmd(
    folder: str, candidates: str | None, calls: tuple[str, ...], shapes: tuple[str, ...]
) -> None:
    """Which GEMM hypotheses reproduce torch's recorded GEMMs (FOLDER/gemm, no GPU): per
    call and shape, the first candidate that reproduces every kept element of D bit for
    bit; writes FOLDER/gemm/FIT.md and FIT.json. Exit 1 when a shape is not reproduced."""
    from ..hardware.gemm_fit import CANDIDATES, fit_gemm

    report = fit_gemm(
        Path(folder),
        Path(candidates) if candidates else CANDIDATES,
        calls,
        shapes,
        progress=click.echo,
    )
    if any(s["fit"] is None for c in report["calls"] for s in c["shapes"]):
        sys.exit(ExitCode.REFUTED)
