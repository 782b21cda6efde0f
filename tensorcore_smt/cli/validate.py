"""`tcsmt validate`: a model against an oracle on many rows, in chunks on a Dask cluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..engine import Engine
from ..errors import ExitCode, UserError
from ..identify.oracle import make_oracle
from ..model.params import Sparsity
from ..model.sparse import refusal
from ..spec.presets import parse_variant
from ..validation.validate import (
    CHUNK_ROWS,
    KEEP,
    Job,
    given_chunks,
    mismatch_file,
    random_chunks,
    read_inputs_where,
    recorded_inputs,
    rows_jsonl,
    run_validation,
    write_rows,
)
from .base import check_out, main
from .options import (
    MAX_TASKS,
    OPTION_RANGES,
    Ranged,
    cluster_options,
    engine_option,
    oracle_timeout_option,
)

DEFAULT_OUT = "validate-mismatches.json"


def _oracle(spec: str, p, arch: str, instr: str, timeout: float):
    if spec.strip() == "mmasim":
        from ..validation.mmasim import make_mmasim_oracle

        return make_mmasim_oracle(spec, p, parse_variant(arch).preset.name, instr)
    return make_oracle(spec, p, arch, instr, timeout=timeout)


@main.command("validate")
@click.option("--arch", required=True, help="The model: a preset or variant (hopper[F=24]).")
@click.option("--instr", default=None, help="Instruction (default: the preset's).")
@click.option(
    "--oracle",
    "oracle_spec",
    required=True,
    metavar="SPEC",
    help="variant:EXPR, file:ROWS, cmd:PROGRAM, cuda[:DIR], or mmasim (the mmasim extra).",
)
@click.option(
    "--rows",
    "n_rows",
    type=Ranged("rows", int),
    default=None,
    help=f"Random rows of the documented mix (default {CHUNK_ROWS:,} unless --vectors).",
)
@click.option(
    "--vectors",
    type=click.Path(dir_okay=False),
    default=None,
    help="Rows from a file instead: JSONL {a, b, c} or a vector file (JSON/CSV).",
)
@click.option(
    "--seed",
    type=Ranged("seed", int),
    default=0,
    show_default=True,
    help="Seed of the random rows.",
)
@click.option(
    "--device",
    default=None,
    help="Run the model on torch: cpu, cuda, cuda:N (default: numpy; the torch extra).",
)
@click.option(
    "--keep",
    type=Ranged("keep", int),
    default=KEEP,
    show_default=True,
    help="Mismatching rows written to the mismatch file (all are counted).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help=f"Mismatch file (vector JSON, or CSV by extension; default {DEFAULT_OUT}).",
)
@click.option(
    "--chunk",
    "chunk_rows",
    type=Ranged("chunk", int),
    default=CHUNK_ROWS,
    show_default=True,
    help="Rows per task (random rows depend on the seed and this size).",
)
@click.option(
    "--nan-class",
    is_flag=True,
    help="Two NaN outputs agree whatever their payloads (on by default for the mmasim "
    "oracle on units whose NaN payload is unspecified: DMMA, MFMA).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
@oracle_timeout_option
@engine_option
@cluster_options
def validate_cmd(
    arch: str,
    instr: str | None,
    oracle_spec: str,
    n_rows: int | None,
    vectors: str | None,
    seed: int,
    device: str | None,
    keep: int,
    out: str | None,
    chunk_rows: int,
    nan_class: bool,
    as_json: bool,
    oracle_timeout: float,
    engine: Engine | None,
    workers: int | None,
    scheduler: str | None,
    dashboard: bool,
) -> None:
    """Compare ARCH with an oracle on random rows (or a file's), chunked over Dask workers.

    Prints rows, mismatches and throughput, and writes the mismatching rows as a test-vector
    file. Exit 0: every row agrees; 1: mismatches (written); 2: bad input; 3: some chunks
    failed (each reported with its rows); 130: interrupted (what finished is reported).
    """
    out_path = check_out(out or DEFAULT_OUT)
    assert out_path is not None
    if n_rows is not None and -(-n_rows // chunk_rows) > MAX_TASKS:
        need = -(-n_rows // MAX_TASKS)
        if need > OPTION_RANGES["chunk"].hi:
            raise UserError(
                f"--rows {n_rows} is more than one run takes here ({MAX_TASKS:,} tasks of at "
                f"most {int(OPTION_RANGES['chunk'].hi):,} rows); split it into runs"
            )
        raise UserError(
            f"--rows {n_rows} in chunks of {chunk_rows} makes more than {MAX_TASKS:,} tasks; "
            f"raise --chunk to at least {need}"
        )
    variant = parse_variant(arch)
    inst = variant.instruction(instr)
    p = variant.params(inst.name)
    if p.sparse != Sparsity.NONE:
        raise UserError("--instr: " + refusal(inst.name, p, "validate's rows carry no metadata"))
    if device is not None and engine == Engine.COMPILED and device.strip().startswith("cuda"):
        from ..engine.cuda import check_gpu

        check_gpu(device.strip())  # binding, driver and GPU present: exit 2 here, not per chunk
    elif device is not None and engine in (None, Engine.TORCH):
        from ..bv.devices import array_backend

        array_backend(device)  # torch and the device present: exit 2 here, not per chunk
    oracle = _oracle(oracle_spec, p, arch, inst.name, oracle_timeout)
    if not oracle.can_ask:
        if n_rows is not None or vectors is not None:
            raise UserError(
                f"oracle {oracle_spec}: recorded answers only; its own rows are validated "
                "(drop --rows / --vectors)"
            )
        chunks = given_chunks(*recorded_inputs(oracle.recorded()), chunk_rows=chunk_rows)
        source = f"{sum(c.n for c in chunks)} recorded rows of {oracle_spec}"
        sources = getattr(oracle, "labels", None) or None
    elif vectors is not None:
        if n_rows is not None:
            raise UserError("give either --rows or --vectors")
        arrays, sources = read_inputs_where(Path(vectors), p)
        chunks = given_chunks(*arrays, chunk_rows=chunk_rows)
        source = f"{sum(c.n for c in chunks)} rows of {vectors}"
    else:
        n = n_rows or CHUNK_ROWS
        sources = None  # random rows are named by their row number (seed and row)
        chunks = random_chunks(n, seed, chunk_rows)
        source = f"{n} random rows, seed {seed}"
    if oracle_spec.strip() == "mmasim":
        from ..validation.mmasim import nan_payload_unspecified

        nan_class = nan_class or nan_payload_unspecified(p, arch)
    job = Job(p=p, oracle=oracle, keep=keep, device=device, nan_class=nan_class, engine=engine)
    run = run_validation(
        job,
        chunks,
        workers=workers,
        scheduler=scheduler,
        dashboard=dashboard,
        label=f"validate {arch}",
        progress=sys.stderr.isatty() and not as_json,
        on_failure=lambda r: click.echo(f"tcsmt: validate: {r.input} failed: {r.error}", err=True),
    )
    tally, failures, interrupted, seconds = run.tally, run.failures, run.interrupted, run.seconds
    n_workers = run.workers
    hidden = oracle_spec.partition(":")[2].strip() if oracle_spec.startswith("variant:") else None
    written = None
    if tally.kept:
        meta = {
            "model": arch,
            "oracle": oracle_spec,
            "rows": source,
            "rows_checked": tally.rows,
            "mismatches": tally.mismatches,
            "kept": len(tally.kept),
        }
        try:
            try:
                written = mismatch_file(
                    tally,
                    p,
                    variant.preset.name,
                    inst.name,
                    arch,
                    oracle_spec,
                    hidden,
                    meta,
                    out_path,
                    sources,
                )
            except UserError as e:  # e.g. a split model: its inputs are not the unit's operands
                written = write_rows(tally, p, out_path.with_suffix(".jsonl"))
                click.echo(f"tcsmt: validate: no vector file ({e}); rows as JSONL", err=True)
        except OSError as e:  # checked before the run, but the disk may fill or go away
            click.echo(rows_jsonl(tally, p), nl=False)
            click.echo(
                f"tcsmt: error: could not write the mismatching rows to {out_path} "
                f"({e.strerror or e}); they are printed above as JSONL",
                err=True,
            )
    rate = run.rows_per_s
    report = {
        "rows": tally.rows,
        "mismatches": tally.mismatches,
        "seconds": round(seconds, 3),
        "rows_per_s": round(rate, 1),
        "mismatch_file": str(written) if written else None,
        "arch": arch,
        "instruction": inst.name,
        "oracle": oracle_spec,
        "workers": n_workers,
        "nan_class": nan_class,
        "startup_seconds": round(run.startup_seconds, 3),
        "failed": [{"chunk": f.input, "error": f.error} for f in failures],
        "interrupted": interrupted,
    }
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"model:       {arch}, instruction {variant.run_name(inst.name)}")
        click.echo(f"oracle:      {oracle_spec}")
        click.echo(f"rows:        {tally.rows:,} checked ({source})")
        click.echo(f"mismatches:  {tally.mismatches:,}")
        click.echo(
            f"throughput:  {rate:,.0f} rows/s ({seconds:.2f} s on {n_workers} worker{'s' if n_workers != 1 else ''}, "
            f"{run.startup_seconds:.1f} s to start)"
        )
        if written:
            click.echo(f"wrote:       {written} (first {len(tally.kept)} mismatching rows)")
        if failures:
            click.echo(f"failed:      {len(failures)} chunks (listed above)")
        if interrupted:
            click.echo("interrupted: the rows above are those of the chunks that finished")
    if interrupted:
        sys.exit(ExitCode.INTERRUPTED)
    if tally.mismatches:
        sys.exit(ExitCode.REFUTED)
    if failures:
        sys.exit(ExitCode.INCOMPLETE)
