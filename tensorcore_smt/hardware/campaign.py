"""The hardware campaign: every probe, the random validation and `identify` on a real GPU,
with everything the silicon returned written under results/hardware/<gpu>/.

Two halves, so that GPU time is spent on runs only (`tcsmt hardware ...`, cli/hardware.py;
`python -m tensorcore_smt hardware ...` runs the same commands):

- ``tcsmt hardware vectors`` (no GPU; `make hardware-vectors`): every property of the
  library on every probed instruction of the architecture, answered by the solvers here;
  the witnesses become vector files under
  results/hardware/vectors/<instr>/<property>.vectors.json (committed). (probes.py)
- ``tcsmt hardware run`` (`make hardware`, on the GPU machine): builds the probe of every
  vector file, keeps the SASS excerpt of every instruction (which HMMA / HGMMA / QMMA /
  DMMA the PTX became), runs the probes and checks their output (probes.py); validates
  every instruction with the cuda oracle on validate's seeded chunks and Dask cluster,
  counting the named competing hypotheses' mismatches beside the preset's
  (validation.py); and runs identify with the cuda oracle on the probed instructions, in
  process (identify.py). Without a GPU it exits 2 with one line.
- ``tcsmt hardware recheck DIR --against VARIANT`` (no GPU): after a change of the preset,
  whether it still agrees with every row of a past run (validation.py).
- ``tcsmt hardware report DIR``: rewrite a run folder's README.md (report.py).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import time
from pathlib import Path

from ..version import __version__
from .cases import run_cases
from .gpu import detect_gpu, run_cmd
from .identify import run_identify
from .plan import PROBED
from .probes import run_probes
from .recordings import record
from .report import write_report
from .sparse import run_sparse
from .validation import ORACLE_TIMEOUT, validate_gpu

STEPS = ("probes", "validate", "sparse", "identify", "cases", "gemm")
"""The steps of a run, in order (`--steps` picks some; the default leaves out the last
two): sparse compares the mma.sp forms with their hypotheses (sparse.py),
cases runs the public cases (cases.py), gemm records torch's GEMMs (recordings.py)
under OUT/<gpu>/gemm/."""

DEFAULT_STEPS = ("probes", "validate", "sparse", "identify")


def campaign(
    *,
    arch: str = "hopper",
    vectors: Path = Path("results/hardware/vectors"),
    out: Path = Path("results/hardware"),
    rows: int = 1_000_000,
    rows_others: int | None = 100_000,
    seed: int = 0,
    budget: int = 200,
    jobs: int = 0,
    steps: tuple[str, ...] = DEFAULT_STEPS,
    validate_instr: str = "",
    sparse_rows: int = 200_000,
    identify_instr: tuple[str, ...] = (),
    identify_jobs: int = 1,
    identify_timeout: float = 20.0,
    keep_rows: int = 0,
    keep_dir: Path | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    chunk_rows: int | None = None,
    oracle_timeout: float = ORACLE_TIMEOUT,
) -> Path:
    """The GPU half (see the module docstring); returns the run's folder, out/<gpu>.
    UserError (one line) without a GPU or nvcc."""
    from ..validation.validate import CHUNK_ROWS

    gpu = detect_gpu()
    folder = out / gpu.slug
    folder.mkdir(parents=True, exist_ok=True)
    jobs = jobs or os.cpu_count() or 1
    meta = {
        "arch": arch,
        "gpu": gpu.name,
        "sm": gpu.sm,
        "driver": gpu.driver,
        "nvcc": (run_cmd(["nvcc", "--version"]).stdout.strip().splitlines() or [""])[-1],
        "tcsmt": __version__,
        "python": platform.python_version(),
        "rows_per_probed_instruction": rows,
        "rows_per_other_instruction": rows_others,
        "seed": seed,
    }
    (folder / "machine.json").write_text(json.dumps(meta, indent=2) + "\n")
    t0 = time.monotonic()
    if "probes" in steps:
        result = run_probes(arch, gpu, vectors, folder, jobs)
        (folder / "probes.json").write_text(json.dumps(result, indent=2) + "\n")
    if "validate" in steps:
        validate_gpu(
            arch,
            gpu,
            folder,
            rows=rows,
            seed=seed,
            rows_others=rows_others,
            keep_rows=keep_rows,
            keep_dir=keep_dir or folder / "rows",
            jobs=jobs,
            workers=workers,
            scheduler=scheduler,
            chunk_rows=chunk_rows or CHUNK_ROWS,
            oracle_timeout=oracle_timeout,
            pattern=validate_instr,
        )
    if "sparse" in steps:
        report = run_sparse(arch, gpu, folder, sparse_rows, seed, jobs)
        (folder / "sparse" / "sparse.json").write_text(json.dumps(report, indent=2) + "\n")
    if "cases" in steps:
        run_cases(folder)
    if "gemm" in steps:
        record(folder / "gemm", seed=seed)
    if "identify" in steps:
        instrs = identify_instr or PROBED[arch]
        run_identify(arch, tuple(instrs), folder, budget, identify_jobs, identify_timeout)
    shutil.rmtree(folder / "build", ignore_errors=True)
    findings = folder / "FINDINGS.md"
    write_report(folder, findings.read_text() if findings.exists() else "")
    print(f"hardware campaign: {time.monotonic() - t0:.0f} s, results in {folder}", flush=True)
    return folder


__all__ = ["DEFAULT_STEPS", "STEPS", "campaign"]
