"""The campaign's random validation: `validate` with the cuda oracle (the batch runner of
`probe/runner.py` on the local GPU) on every runnable instruction, on the same seeded
chunks and Dask cluster as `tcsmt validate`, with the named alternatives' mismatches
counted beside the preset's; and `recheck`, which redraws a past run's rows from their
seeds to ask whether a changed preset still agrees with every row the GPU returned.

Instruction i of a run with seed S uses seed S + i; its rows are
`validation.validate.random_chunks(rows, S + i, chunk_rows)` (row stream 2, recorded in
validation.json as `stream` and `chunk_rows`). Runs recorded before (results/hardware/h100)
drew each instruction's rows in one call of stream 1 (`validation.rows_legacy`); recheck
redraws those with it.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..api import bits_dtype, simulate_params
from ..bv.chunks import spans
from ..errors import UserError
from ..spec.presets import PRESETS, parse_variant
from ..validation.rows import STREAM
from ..validation.validate import (
    CHUNK_ROWS,
    Job,
    chunk_inputs,
    mismatch_file,
    random_chunks,
    run_validation,
)
from .gpu import Gpu, run_cmd, safe_name, sass_excerpt, sass_ops
from .plan import MISMATCHES_KEPT, PROBED, alternatives

ORACLE_TIMEOUT = 600.0
"""Seconds the GPU runner may take for one chunk."""


def runnable(arch: str, sm: int, instrs: list[str] | None = None) -> list[str]:
    """The instructions of `arch` (or `instrs`) the batch runner can run on an sm_`sm` GPU."""
    from ..probe.cuda import probe_layout
    from ..probe.runner import runner_target

    preset = PRESETS[arch]
    out = []
    for name in instrs or list(preset.instructions):
        try:
            runner_target(preset.instructions[name], sm)
            probe_layout(preset.instructions[name])  # a form without a probe yet
        except UserError:
            continue
        out.append(name)
    return out


def build_runners(arch: str, names: list[str], out: Path, jobs: int) -> Path:
    """Compile the batch runner of every instruction (`jobs` at once) into out/build/
    runners, where the cuda oracle finds them (cached by source); their SASS excerpts and
    opcode counts go to out/sass/. Returns the runners' folder."""
    from ..probe.runner import build_runner

    work = out / "build" / "runners"
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        cmds = dict(zip(names, pool.map(lambda n: build_runner(arch, n, work), names)))
    sass_dir = out / "sass"
    sass_dir.mkdir(parents=True, exist_ok=True)
    ops = {}
    for name in names:
        text = run_cmd(["cuobjdump", "--dump-sass", cmds[name][0]]).stdout
        (sass_dir / f"{safe_name(name)}.runner.sass.txt").write_text(sass_excerpt(text) + "\n")
        ops[name] = sass_ops(text)
    (sass_dir / "opcodes.json").write_text(json.dumps(ops, indent=2) + "\n")
    return work


def validate_gpu(
    arch: str,
    gpu: Gpu,
    out: Path,
    *,
    rows: int,
    seed: int,
    rows_others: int | None = None,
    instrs: list[str] | None = None,
    keep_rows: int = 0,
    keep_dir: Path | None = None,
    jobs: int = 1,
    workers: int | None = None,
    scheduler: str | None = None,
    chunk_rows: int = CHUNK_ROWS,
    oracle_timeout: float = ORACLE_TIMEOUT,
    pattern: str = "",
) -> list[dict]:
    """Every dense instruction of `arch` runnable on this GPU (those whose name matches
    the regular expression `pattern`, when given), on random rows (`rows` for the
    probed instructions, `rows_others` for the rest; default `rows`): the GPU's d (cuda
    oracle) against the preset's and each alternative's, in seeded chunks on a Dask
    cluster. Writes out/validation/validation.json (one entry per instruction, rewritten
    after each) and each mismatching instruction's mismatch file (validate's format);
    with `keep_rows`, the first `keep_rows` rows and the GPU's d as .rows.npz."""
    from ..identify.oracle import make_oracle
    from ..validation.distributed import connect

    vdir = out / "validation"
    vdir.mkdir(parents=True, exist_ok=True)
    names = [
        n
        for n in runnable(arch, gpu.sm, instrs)
        if not n.startswith("mma.sp") and (not pattern or re.search(pattern, n))
    ]
    if not names:
        raise UserError(f"validate: no runnable dense instruction of {arch} matches {pattern!r}")
    work = build_runners(arch, names, out, jobs)
    opcodes = json.loads((out / "sass" / "opcodes.json").read_text())
    probed = set(PROBED.get(arch, ()))
    report: list[dict] = []
    with connect(workers, scheduler) as client:
        for i, name in enumerate(names):
            p = PRESETS[arch].instructions[name].params
            oracle = make_oracle(f"cuda:{work}", p, arch, name, timeout=oracle_timeout)
            n = rows if name in probed or rows_others is None else rows_others
            entry, interrupted = validate_instruction(
                arch,
                name,
                oracle,
                out,
                rows=n,
                seed=seed + i,
                chunk_rows=chunk_rows,
                gpu_name=gpu.name,
                keep_rows=keep_rows,
                keep_dir=keep_dir,
                client=client,
            )
            entry["sass"] = opcodes.get(name)
            report.append(entry)
            (vdir / "validation.json").write_text(json.dumps(report, indent=2) + "\n")
            if interrupted:
                raise KeyboardInterrupt
    return report


def validate_instruction(
    arch: str,
    name: str,
    oracle,
    out: Path,
    *,
    rows: int,
    seed: int,
    chunk_rows: int = CHUNK_ROWS,
    gpu_name: str = "",
    keep_rows: int = 0,
    keep_dir: Path | None = None,
    client=None,
    workers: int | None = None,
) -> tuple[dict, bool]:
    """One instruction of a run: `validate` of the preset against `oracle` (the GPU's
    runner; any oracle in tests) on `rows` random rows of `seed` in chunks of
    `chunk_rows`, counting the named alternatives' mismatches too; its mismatch file
    (validate's format) under out/validation/. (validation.json entry, interrupted)."""
    p = PRESETS[arch].instructions[name].params
    others = tuple((v, parse_variant(v).params(name)) for v in alternatives(arch, name))
    job = Job(p=p, oracle=oracle, keep=MISMATCHES_KEPT, others=others)
    chunks = random_chunks(rows, seed, chunk_rows)
    run = run_validation(job, chunks, client=client, workers=workers, label=f"hardware {name}")
    t = run.tally
    entry = {
        "instruction": name,
        "rows": t.rows,
        "seed": seed,
        "stream": STREAM,
        "chunk_rows": chunk_rows,
        "mismatches": t.mismatches,
        "mismatches_by_kind": t.by_kind,
        "alternatives": t.others,
        "seconds": round(run.seconds, 1),
        "rows_per_s": round(run.rows_per_s),
        "mismatch_file": None,
        "failed": [{"chunk": f.input, "error": f.error} for f in run.failures],
    }
    if t.kept:
        meta = {"model": arch, "oracle": oracle.spec, "gpu": gpu_name, "seed": seed}
        meta |= {"rows_checked": t.rows, "mismatches": t.mismatches, "kept": len(t.kept)}
        vdir = out / "validation"
        vdir.mkdir(parents=True, exist_ok=True)
        path = vdir / f"{safe_name(name)}.mismatches.json"
        mismatch_file(t, p, arch, name, arch, oracle.spec, None, meta, path)
        entry["mismatch_file"] = str(path.relative_to(out))
        if keep_rows:
            _keep_rows(p, chunks, oracle, min(keep_rows, t.rows), keep_dir or vdir, name)
    print(
        f"validate {name:36s} rows {t.rows} mismatches {t.mismatches} "
        f"alternatives {t.others} ({entry['seconds']} s)",
        flush=True,
    )
    return entry, run.interrupted


def _keep_rows(p, chunks, oracle, m: int, folder: Path, name: str) -> Path:
    """The run's first `m` rows, redrawn from their seeds, and the GPU's d for them (asked
    again), in the narrowest dtypes: folder/<instr>.rows.npz."""
    parts = []
    for ch in chunks:
        if sum(len(x[2]) for x in parts) >= m:
            break
        parts.append(chunk_inputs(p, ch))
    a, b, c = (np.concatenate([x[j] for x in parts])[:m] for j in range(3))
    d = np.asarray(oracle.ask(a, b, c), dtype=np.uint64)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{safe_name(name)}.rows.npz"
    np.savez_compressed(
        path,
        a=a.astype(bits_dtype(p.a_fmt)),
        b=b.astype(bits_dtype(p.b_fmt)),
        c=c.astype(bits_dtype(p.c_fmt)),
        d=d.astype(bits_dtype(p.d_fmt)),
    )
    return path


def _run_rows(entry: dict, p):
    """A past run's rows of one instruction, chunk by chunk: (first row, a, b, c)."""
    rows, seed = entry["rows"], entry["seed"]
    if entry.get("stream", 1) == 1:  # one call of the frozen stream 1
        from ..validation.rows_legacy import random_rows

        a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, rows, seed)
        for lo, hi in spans(rows, CHUNK_ROWS):
            yield lo, a[lo:hi], b[lo:hi], c[lo:hi]
        return
    if entry["stream"] != STREAM:
        raise UserError(f"{entry['instruction']}: rows of stream {entry['stream']} unknown")
    for ch in random_chunks(rows, seed, entry["chunk_rows"]):
        yield (ch.start, *chunk_inputs(p, ch))


def _reported_row(v: dict) -> int:
    """The row number of a mismatch file's vector: its source ("row N"; validate's format)
    or, in files written before it, its note ("... row N of seed S)")."""
    src = v.get("source", "")
    if src.startswith("row "):
        return int(src.split()[1])
    return int(v["note"].split(" row ")[1].split()[0])


def recheck(folder: Path, against: str, pattern: str = "") -> list[dict]:
    """Whether a change of the preset keeps agreeing with a past run: the run's random rows
    are drawn again from their seeds, and the preset and `against` (the model the run
    validated) computed on them. The preset agrees with every row the GPU returned when
    the two differ exactly on the rows the run reported as mismatches."""
    val = json.loads((folder / "validation" / "validation.json").read_text())
    arch = json.loads((folder / "machine.json").read_text()).get("arch", "hopper")
    out = []
    for e in val:
        name = e["instruction"]
        if not re.search(pattern, name):
            continue
        p_new, p_old = (parse_variant(v).params(name) for v in (arch, against))
        differ: set[int] = set()
        first: dict[int, list[int]] = {}
        reported: dict[int, list[int]] = {}
        if e.get("mismatch_file"):
            mf = json.loads((folder / e["mismatch_file"]).read_text())
            reported = {_reported_row(v): [int(x, 16) for x in v["a"]] for v in mf["vectors"]}
        for lo, a, b, c in _run_rows(e, p_new):
            d_new = simulate_params(p_new, a, b, c)
            d_old = simulate_params(p_old, a, b, c)
            differ |= {int(j) + lo for j in np.flatnonzero(d_new != d_old)}
            first |= {j: a[j - lo].tolist() for j in reported if lo <= j < lo + len(c)}
        if any(first.get(j) != a for j, a in reported.items()):
            raise UserError(f"{name}: the rows do not regenerate from seed {e['seed']}")
        row = {
            "instruction": name,
            "rows": e["rows"],
            "differ": len(differ),
            "reported": len(reported),
            "agrees": differ == set(reported) and e["mismatches"] == len(reported),
        }
        print(
            f"recheck {name:36s} rows {e['rows']:>9,} models differ on {row['differ']:>6} "
            f"reported {row['reported']:>6} -> {'agrees' if row['agrees'] else 'DISAGREES'}",
            flush=True,
        )
        out.append(row)
    return out


__all__ = [
    "ORACLE_TIMEOUT",
    "build_runners",
    "recheck",
    "runnable",
    "validate_gpu",
    "validate_instruction",
]
