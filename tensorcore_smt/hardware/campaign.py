"""The hardware campaign: every probe, the random validation and `identify` on a real GPU,
with everything the silicon returned written under results/hardware/<gpu>/.

Two halves, so that GPU time is spent on runs only:

- ``python -m tensorcore_smt.hardware vectors`` (no GPU; `make hardware-vectors`): every
  property of the library on every probed instruction of the architecture, answered by
  the solvers here; the witnesses become vector files under
  results/hardware/vectors/<instr>/<property>.vectors.json (committed).
- ``python -m tensorcore_smt.hardware run`` (`make hardware`, on the GPU machine): builds
  the probe of every vector file, keeps the SASS excerpt of every instruction (which
  HMMA / HGMMA / QMMA / DMMA the PTX became), runs the probes and checks their output
  (`tcsmt probe --check`), validates every instruction on random rows (`rows.py`) bit for
  bit against the vector interpreter through the batch runner (`probe/runner.py`),
  matching the mismatches against the named competing hypotheses, and runs
  `tcsmt identify --oracle cuda` on the probed instructions. Without a GPU it exits 2 with
  one line.
- ``python -m tensorcore_smt.hardware recheck DIR --against VARIANT`` (no GPU): after a
  change of the preset, whether it still agrees with every row of a past run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..spec.formats import format_hex
from ..spec.presets import PRESETS, parse_variant
from ..version import __version__

PROBED: dict[str, tuple[str, ...]] = {
    # The instructions every property is probed on: each operand type and output type of
    # the legacy mma.sync path and of the warpgroup (wgmma) path.
    "hopper": (
        "m16n8k16.f32.f16.f16.f32",
        "m16n8k16.f16.f16.f16.f16",
        "m16n8k16.f32.bf16.bf16.f32",
        "m16n8k8.f32.tf32.tf32.f32",
        "m16n8k32.f32.e4m3.e4m3.f32",
        "m16n8k32.f16.e4m3.e4m3.f16",
        "m16n8k32.f32.e5m2.e5m2.f32",
        "wgmma.m64n8k16.f32.f16.f16",
        "wgmma.m64n8k16.f16.f16.f16",
        "wgmma.m64n8k16.f32.bf16.bf16",
        "wgmma.m64n8k8.f32.tf32.tf32",
        "wgmma.m64n8k32.f32.e4m3.e4m3",
        "wgmma.m64n8k32.f16.e4m3.e4m3",
    ),
}

FDA_INPUTS = r"\.(f16|bf16|tf32|e4m3|e5m2)\."
"""The instructions of the fused dot-product unit (not DMMA's f64 FMA chain)."""

ALTERNATIVES: dict[str, tuple[tuple[str, str], ...]] = {
    # Competing hypotheses whose agreement with the silicon the validation also counts
    # (a mismatch of the preset is then explained, or not, by a named belief), each with
    # the instructions it is a belief about (a regular expression on the name).
    "hopper": (
        ("matlab-h100-fp8", r"\.f32\.e[45]m[23]\."),
        ("matlab-h100-fp8-f16", r"\.f16\.e[45]m[23]\."),
        ("hopper[F=24]", FDA_INPUTS),
        ("hopper[F=26]", FDA_INPUTS),
        ("hopper[e_zero=none]", FDA_INPUTS),
        ("hopper[product_exponent=normalized]", FDA_INPUTS),
    ),
}

MISMATCHES_KEPT = 500
"""Mismatching rows saved per instruction as a vector file (all are counted)."""

SASS_OPS = re.compile(
    r"\b(HMMA|HGMMA|QGMMA|QMMA|DMMA|IMMA|F2FP|HFMA2|HADD2|FADD|FFMA|DFMA|I2F|F2F)\S*"
)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


# --- the CPU half: property vectors ---------------------------------------------------


def make_vectors(
    arch: str,
    out: Path,
    timeout: float,
    properties: list[str] | None,
    instrs: list[str] | None = None,
) -> None:
    """Every property on every probed instruction of `arch` (or of `instrs`): vector
    files under `out`."""
    from ..smt.find import find, save_vectors
    from ..smt.library import load_all
    from ..smt.solve import Limits

    limits = Limits(timeout=timeout)
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for instr in instrs or PROBED[arch]:
        row = summary.setdefault(instr, {})
        for name, prop in load_all().items():
            if properties and name not in properties:
                continue
            t0 = time.monotonic()
            try:
                answers = find(prop, arch, instr, limits)
            except UserError as e:
                row[name] = {"not_applicable": str(e)}
                continue
            path = out / _safe(instr) / f"{name}.vectors.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                saved = save_vectors(prop, arch, answers, path)
            except UserError as e:
                saved = None
                row[name] = {"no_vectors": str(e)}
            if saved is not None or name not in row:
                row[name] = {
                    "answers": [a.answer for a in answers],
                    "vectors": str(path.relative_to(out)) if saved else None,
                    "seconds": round(time.monotonic() - t0, 1),
                }
            print(f"{instr:34s} {name:24s} {row[name]}", flush=True)
            summary_path.write_text(json.dumps(summary, indent=2) + "\n")


# --- the GPU half -------------------------------------------------------------------------


@dataclass
class Gpu:
    name: str
    sm: int
    driver: str

    @property
    def slug(self) -> str:
        """Folder name under results/hardware: h100, h200, … (else the name, made safe)."""
        m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", self.name.upper())
        return (m.group(1).lower() if m else _safe(self.name).lower()) or "gpu"


def detect_gpu() -> Gpu:
    """GPU 0, from nvidia-smi; UserError (one line) where there is none or no nvcc."""
    if shutil.which("nvidia-smi") is None:
        raise UserError("make hardware needs an NVIDIA GPU: nvidia-smi is not installed here")
    r = subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=name,compute_cap,driver_version",
            "--format=csv,noheader",
        ],
        capture_output=True,
        text=True,
    )
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        raise UserError("make hardware needs an NVIDIA GPU: nvidia-smi lists none")
    name, cap, driver = (x.strip() for x in lines[0].split(","))
    major, _, minor = cap.partition(".")
    if shutil.which("nvcc") is None:
        raise UserError("make hardware needs nvcc (the CUDA compiler) on PATH")
    return Gpu(name, int(major) * 10 + int(minor or 0), driver)


def _run(cmd: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def sass_ops(sass: str) -> dict[str, int]:
    """Counts of the matrix and conversion opcodes (with their suffixes) in SASS text."""
    counts: dict[str, int] = {}
    for line in sass.splitlines():
        if "/*" not in line:
            continue
        for m in SASS_OPS.finditer(line):
            counts[m.group(0)] = counts.get(m.group(0), 0) + 1
    return dict(sorted(counts.items()))


def sass_excerpt(sass: str) -> str:
    """The SASS lines with matrix or conversion opcodes."""
    return "\n".join(ln.strip() for ln in sass.splitlines() if SASS_OPS.search(ln) and "/*" in ln)


def run_probes(arch: str, gpu: Gpu, vec_root: Path, out: Path, jobs: int) -> list[dict]:
    """Build, disassemble, run and check every probe; one summary row per vector file."""
    from ..probe import check, cuda
    from ..validation.vectors import load

    build = out / "build"
    build.mkdir(parents=True, exist_ok=True)
    files = sorted(vec_root.glob("*/*.vectors.json"))
    jobs_list = []
    for f in files:
        vf = load(f)
        inst = vf.instr()
        req = cuda.requirement(inst)
        sm = f"{gpu.sm}{'a' if req.arch_specific else ''}"
        stem = build / f"{f.parent.name}__{f.name.removesuffix('.vectors.json')}"
        src = cuda.generate(vf, sm=sm, source_name=stem.name + ".cu", vectors_name=str(f))
        stem.with_suffix(".cu").write_text(src)
        jobs_list.append((f, vf, stem, sm))

    def compile_one(job):
        f, vf, stem, sm = job
        r = _run(["nvcc", f"-arch=sm_{sm}", "-O2", "-o", str(stem), str(stem.with_suffix(".cu"))])
        return r.returncode, r.stderr[-400:]

    with ThreadPoolExecutor(jobs) as pool:
        built = list(pool.map(compile_one, jobs_list))
    rows = []
    sass_dir = out / "sass"
    sass_dir.mkdir(exist_ok=True)
    raw_dir = out / "probes"
    raw_dir.mkdir(exist_ok=True)
    seen_sass: dict[str, dict] = {}
    for (f, vf, stem, sm), (rc, err) in zip(jobs_list, built):
        row = {"file": str(f), "instruction": vf.instruction, "property": vf.property, "sm": sm}
        if rc != 0:
            row["error"] = f"nvcc: {err.strip().splitlines()[-1] if err.strip() else rc}"
            rows.append(row)
            continue
        if vf.instruction not in seen_sass:
            s = _run(["cuobjdump", "--dump-sass", str(stem)])
            text = s.stdout
            (sass_dir / f"{_safe(vf.instruction)}.sass.txt").write_text(sass_excerpt(text) + "\n")
            seen_sass[vf.instruction] = sass_ops(text)
        row["sass"] = seen_sass[vf.instruction]
        r = _run([str(stem)])
        name = f"{f.parent.name}__{f.name.removesuffix('.vectors.json')}"
        (raw_dir / f"{name}.out.txt").write_text(r.stdout)
        if r.returncode != 0:
            row["error"] = f"probe exit {r.returncode}: {r.stderr.strip()[-300:]}"
            rows.append(row)
            continue
        try:
            rep = check.check_output(vf, r.stdout)
        except UserError as e:
            row["error"] = str(e)
            rows.append(row)
            continue
        (raw_dir / f"{name}.check.txt").write_text(check.report_text(rep, f"{name}.out.txt"))
        rj = rep.to_json()
        (raw_dir / f"{name}.check.json").write_text(json.dumps(rj, indent=2) + "\n")
        row["verdict"] = rep.verdict()
        row["survivors"] = rj.get("survivors")
        row["ok"] = rep.ok()
        rows.append(row)
        print(f"probe {name:60s} {row['verdict']}", flush=True)
    return rows


def _simulate_chunk(args) -> tuple[str, np.ndarray]:
    from ..api import simulate_params

    variant, instr, a, b, c = args
    return variant, simulate_params(parse_variant(variant).params(instr), a, b, c)


def validate(
    arch: str,
    gpu: Gpu,
    rows: int,
    seed: int,
    out: Path,
    jobs: int,
    instrs: list[str] | None = None,
    keep_rows: int = 0,
    keep_dir: Path | None = None,
    rows_others: int | None = None,
) -> list[dict]:
    """Every instruction of `arch` runnable on this GPU on random rows (`rows` for the
    probed instructions, `rows_others` for the rest; default `rows`): the GPU's d against
    the preset's and each alternative's; mismatching rows saved as vectors."""
    from ..probe.runner import build_runner, run_binary, runner_target
    from ..validation import vectors
    from ..validation.rows import KINDS, random_rows

    preset = PRESETS[arch]
    vdir = out / "validation"
    vdir.mkdir(parents=True, exist_ok=True)
    names = instrs or list(preset.instructions)
    runnable = []
    for name in names:
        inst = preset.instructions[name]
        try:
            runner_target(inst, gpu.sm)
        except UserError:
            continue
        runnable.append(name)
    with ThreadPoolExecutor(jobs) as pool:
        cmds = dict(
            zip(
                runnable,
                pool.map(lambda n: build_runner(arch, n, out / "build" / "runners"), runnable),
            )
        )
    sass_dir = out / "sass"
    sass_dir.mkdir(exist_ok=True)
    sass = {}
    for name in runnable:
        text = _run(["cuobjdump", "--dump-sass", cmds[name][0]]).stdout
        (sass_dir / f"{_safe(name)}.runner.sass.txt").write_text(sass_excerpt(text) + "\n")
        sass[name] = sass_ops(text)
    (sass_dir / "opcodes.json").write_text(json.dumps(sass, indent=2) + "\n")
    report = []
    probed = set(PROBED.get(arch, ()))
    total = rows
    for i, name in enumerate(runnable):
        p = preset.instructions[name].params
        rows = total if name in probed or rows_others is None else rows_others
        t0 = time.monotonic()
        a, b, c, kind = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, rows, seed + i)
        tg = time.monotonic()
        d_gpu = run_binary(cmds[name], a, b, c, out / "build" / "tmp")
        t_gpu = time.monotonic() - tg
        variants = [arch] + [
            v
            for v, about in ALTERNATIVES.get(arch, ())
            if re.search(about, name) and _applies(v, name)
        ]
        step = max(1, rows // jobs)
        tasks = [
            (v, name, a[lo : lo + step], b[lo : lo + step], c[lo : lo + step])
            for v in variants
            for lo in range(0, rows, step)
        ]
        preds: dict[str, list[np.ndarray]] = {v: [] for v in variants}
        with ProcessPoolExecutor(jobs) as pool:
            for v, d in pool.map(_simulate_chunk, tasks):
                preds[v].append(d)
        model = {v: np.concatenate(preds[v]) for v in variants}
        bad = model[arch] != d_gpu
        n_bad = int(bad.sum())
        entry = {
            "instruction": name,
            "rows": rows,
            "seed": seed + i,
            "mismatches": n_bad,
            "mismatches_by_kind": {
                k.value: int((bad & (kind == j)).sum()) for j, k in enumerate(KINDS)
            },
            "alternatives": {v: int((model[v] != d_gpu).sum()) for v in variants[1:]},
            "gpu_seconds": round(t_gpu, 2),
            "seconds": round(time.monotonic() - t0, 1),
            "mismatch_file": None,
            "sass": sass.get(name),
        }
        if n_bad and keep_rows:
            m = min(rows, keep_rows)
            np.savez_compressed(
                keep_dir / f"{_safe(name)}.rows.npz",
                a=_narrow(a[:m], p.a_fmt),
                b=_narrow(b[:m], p.b_fmt),
                c=_narrow(c[:m], p.c_fmt),
                d=_narrow(d_gpu[:m], p.d_fmt),
            )
        if n_bad:
            idx = np.flatnonzero(bad)[:MISMATCHES_KEPT]
            vf = vectors.VectorFile(
                arch=arch,
                instruction=name,
                variants=[arch],
                vectors=[
                    vectors.Vector(
                        a=[int(x) for x in a[j]],
                        b=[int(x) for x in b[j]],
                        c=int(c[j]),
                        predicted={arch: int(model[arch][j])},
                        note=f"GPU d={format_hex(int(d_gpu[j]), p.d_fmt)} "
                        f"({KINDS[int(kind[j])].value} row {int(j)} of seed {seed + i})",
                    )
                    for j in idx
                ],
                property=None,
                meta={
                    "gpu": gpu.name,
                    "observed": [format_hex(int(d_gpu[j]), p.d_fmt) for j in idx],
                },
            )
            path = vdir / f"{_safe(name)}.mismatches.json"
            vectors.save(vf, path)
            entry["mismatch_file"] = str(path.relative_to(out))
        report.append(entry)
        print(
            f"validate {name:36s} rows {rows} mismatches {n_bad} "
            f"alternatives {entry['alternatives']} ({entry['seconds']} s)",
            flush=True,
        )
        (vdir / "validation.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def _narrow(x: np.ndarray, fmt) -> np.ndarray:
    """Bit patterns in the narrowest unsigned dtype of the format's storage."""
    bits = fmt.spec.storage
    dtype = (
        np.uint8
        if bits <= 8
        else np.uint16
        if bits <= 16
        else np.uint32
        if bits <= 32
        else np.uint64
    )
    return x.astype(dtype)


def _applies(variant: str, instr: str) -> bool:
    """Whether a named alternative is a different model of `instr` (not the preset's own,
    nor inapplicable)."""
    try:
        v = parse_variant(variant)
        return v.params(instr) != v.preset.instructions[instr].params
    except (UserError, KeyError, ValueError):
        return False


def run_identify(
    arch: str,
    instrs: tuple[str, ...],
    out: Path,
    budget: int,
    jobs: int = 1,
    timeout: float = 20.0,
) -> list[dict]:
    """`tcsmt identify --oracle cuda` on each instruction (`jobs` at once, each a process
    of its own); reports under out/identify/."""
    idir = out / "identify"
    idir.mkdir(parents=True, exist_ok=True)
    exe = [sys.executable, "-c", "from tensorcore_smt.cli import main; main()"]

    def one(name: str) -> dict:
        t0 = time.monotonic()
        cmd = [*exe, "identify", "--arch", arch, "--instr", name, "--oracle", "cuda"]
        cmd += ["--budget", str(budget), "--timeout", str(timeout), "--json"]
        try:
            r = _run(cmd, timeout=3600)
        except subprocess.TimeoutExpired:
            return {"instruction": name, "exit": None, "error": "timed out after 3600 s"}
        (idir / f"{_safe(name)}.json").write_text(r.stdout)
        (idir / f"{_safe(name)}.stderr.txt").write_text(r.stderr)
        row = {"instruction": name, "exit": r.returncode, "seconds": round(time.monotonic() - t0)}
        try:
            js = json.loads(r.stdout)
            row["survivors"] = [s.get("variant") for s in js.get("survivors", [])]
            row["oracle_vectors"] = js.get("oracle_vectors")
        except json.JSONDecodeError:
            row["error"] = (r.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"identify {name:36s} {row}", flush=True)
        return row

    rows: list[dict] = []
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for row in pool.map(one, instrs):
            rows.append(row)
            (idir / "identify.json").write_text(json.dumps(rows, indent=2) + "\n")
    return rows


def campaign(args: argparse.Namespace) -> int:
    """The GPU half (see the module docstring)."""
    try:
        gpu = detect_gpu()
    except UserError as e:
        print(f"tcsmt hardware: {e}", file=sys.stderr)
        return 2
    out = Path(args.out) / gpu.slug
    out.mkdir(parents=True, exist_ok=True)
    jobs = args.jobs or os.cpu_count() or 1
    meta = {
        "gpu": gpu.name,
        "sm": gpu.sm,
        "driver": gpu.driver,
        "nvcc": (_run(["nvcc", "--version"]).stdout.strip().splitlines() or [""])[-1],
        "tcsmt": __version__,
        "python": platform.python_version(),
        "rows_per_probed_instruction": args.rows,
        "rows_per_other_instruction": args.rows_others,
        "seed": args.seed,
    }
    (out / "machine.json").write_text(json.dumps(meta, indent=2) + "\n")
    t0 = time.monotonic()
    steps = args.steps.split(",")
    if "probes" in steps:
        rows = run_probes(args.arch, gpu, Path(args.vectors), out, jobs)
        (out / "probes.json").write_text(json.dumps(rows, indent=2) + "\n")
    if "validate" in steps:
        keep = Path(args.keep_dir) if args.keep_dir else out / "rows"
        keep.mkdir(parents=True, exist_ok=True)
        validate(
            args.arch,
            gpu,
            args.rows,
            args.seed,
            out,
            jobs,
            None,
            args.keep_rows,
            keep,
            args.rows_others,
        )
    if "identify" in steps:
        instrs = tuple(args.identify_instr or PROBED[args.arch])
        run_identify(args.arch, instrs, out, args.budget, args.identify_jobs, args.identify_timeout)
    shutil.rmtree(out / "build", ignore_errors=True)
    findings = out / "FINDINGS.md"
    write_report(out, findings.read_text() if findings.exists() else "")
    print(f"hardware campaign: {time.monotonic() - t0:.0f} s, results in {out}", flush=True)
    return 0


def recheck(folder: Path, against: str, pattern: str = "") -> list[dict]:
    """Whether a change of the preset keeps agreeing with a past run: the run's random rows
    are drawn again from their seeds (rows.py), and the preset and `against` (the model
    the run validated) computed on them. The preset agrees with every row the GPU returned
    when the two differ exactly on the rows the run reported as mismatches."""
    from ..api import simulate_params
    from ..validation.rows_legacy import random_rows

    val = json.loads((folder / "validation" / "validation.json").read_text())
    arch = json.loads((folder / "machine.json").read_text()).get("arch", "hopper")
    out = []
    for e in val:
        name = e["instruction"]
        if not re.search(pattern, name):
            continue
        p_new, p_old = (parse_variant(v).params(name) for v in (arch, against))
        rows = e["rows"]
        a, b, c, _ = random_rows(p_new.a_fmt, p_new.b_fmt, p_new.c_fmt, p_new.K, rows, e["seed"])
        differ: set[int] = set()
        for lo in range(0, rows, 100_000):
            s = slice(lo, lo + 100_000)
            d_new = simulate_params(p_new, a[s], b[s], c[s])
            d_old = simulate_params(p_old, a[s], b[s], c[s])
            differ |= {int(j) + lo for j in np.flatnonzero(d_new != d_old)}
        reported: set[int] = set()
        if e.get("mismatch_file"):
            mf = json.loads((folder / e["mismatch_file"]).read_text())
            for v in mf["vectors"]:
                j = int(v["note"].split(" row ")[1].split()[0])
                if [int(x, 16) for x in v["a"]] != a[j].tolist():
                    raise UserError(f"{name}: the rows do not regenerate from seed {e['seed']}")
                reported.add(j)
        row = {
            "instruction": name,
            "rows": rows,
            "differ": len(differ),
            "reported": len(reported),
            "agrees": differ == reported and e["mismatches"] == len(reported),
        }
        print(
            f"recheck {name:36s} rows {rows:>9,} models differ on {row['differ']:>6} "
            f"reported {row['reported']:>6} -> {'agrees' if row['agrees'] else 'DISAGREES'}",
            flush=True,
        )
        out.append(row)
    return out


# --- the report -------------------------------------------------------------------------


def _md_table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return out


def write_report(out: Path, findings: str = "") -> Path:
    """results/hardware/<gpu>/README.md from the campaign's JSON files in `out`."""
    meta = json.loads((out / "machine.json").read_text())
    lines = [
        f"# {meta['gpu']} (sm_{meta['sm']}): what the silicon returned",
        "",
        f"Driver {meta['driver']}, {meta['nvcc']}, tcsmt {meta['tcsmt']}, Python "
        f"{meta['python']}. Regenerate with `make hardware` on a machine with the GPU "
        "(`make hardware-vectors` first, on any machine, for new property vectors).",
        "",
    ]
    if findings:
        lines += [findings.strip(), ""]
    ops_path = out / "sass" / "opcodes.json"
    if ops_path.exists():
        ops = json.loads(ops_path.read_text())
        lines += ["## SASS: what each PTX instruction became", ""]
        lines += _md_table(
            ["instruction", "SASS (count)"],
            [[k, ", ".join(f"{o} x{n}" for o, n in v.items()) or "?"] for k, v in ops.items()],
        )
        lines += ["", "Excerpts: sass/*.sass.txt.", ""]
    val_path = out / "validation" / "validation.json"
    if val_path.exists():
        val = json.loads(val_path.read_text())
        total = sum(v["rows"] for v in val)
        bad = sum(v["mismatches"] for v in val)
        counts = sorted({v["rows"] for v in val}, reverse=True)
        per = " or ".join(f"{n:,}" for n in counts) + " per instruction"
        lines += [
            "## Random validation",
            "",
            f"{len(val)} instructions, {total:,} random rows ({per}; the mix "
            f"of tensorcore_smt/rows.py: normal, cancelling, wide-range, subnormal, zero, "
            f"Inf/NaN and raw-bit rows), computed by the GPU through the batch runner and "
            f"compared bit for bit with the vector interpreter of the hopper preset: "
            f"**{bad:,} mismatches**. Beside it, how many rows each named alternative "
            "mispredicts (a non-zero count is that hypothesis refuted on this instruction).",
            "",
        ]
        # only the beliefs about each instruction (ALTERNATIVES), whatever a run counted
        about = dict(ALTERNATIVES.get(meta.get("arch", "hopper"), ()))
        for v in val:
            v["alternatives"] = {
                a: n
                for a, n in v["alternatives"].items()
                if a not in about or re.search(about[a], v["instruction"])
            }
        alt_names = sorted({a for v in val for a in v["alternatives"]})
        lines += _md_table(
            ["instruction", "rows", "mismatches", *alt_names],
            [
                [
                    v["instruction"],
                    f"{v['rows']:,}",
                    v["mismatches"]
                    if not v["mismatches"]
                    else f"**{v['mismatches']}** ({v['mismatch_file']})",
                    *[v["alternatives"].get(a, "") for a in alt_names],
                ]
                for v in val
            ],
        )
        lines.append("")
    pr_path = out / "probes.json"
    if pr_path.exists():
        pr = json.loads(pr_path.read_text())
        ok = sum(1 for r in pr if r.get("ok"))
        lines += [
            "## Property probes",
            "",
            f"{len(pr)} probe programs (every property's witnesses on every probed "
            f"instruction, results/hardware/vectors), built, run and checked with "
            f"`tcsmt probe --check`: {ok} matched the hopper preset on every vector. Raw "
            "outputs and reports: probes/.",
            "",
        ]
        lines += _md_table(
            ["instruction", "property", "verdict"],
            [
                [r["instruction"], r.get("property") or "", r.get("verdict") or r.get("error")]
                for r in pr
            ],
        )
        lines.append("")
    id_path = out / "identify" / "identify.json"
    if id_path.exists():
        ids = json.loads(id_path.read_text())
        lines += [
            "## identify --oracle cuda",
            "",
            "The default space of hypotheses, narrowed by the GPU's answers (reports with "
            "every step's evidence: identify/*.json).",
            "",
        ]
        lines += _md_table(
            ["instruction", "exit", "survivors", "oracle vectors", "s"],
            [
                [
                    r["instruction"],
                    r["exit"],
                    ", ".join(r.get("survivors") or []) or r.get("error", ""),
                    r.get("oracle_vectors", ""),
                    r["seconds"],
                ]
                for r in ids
            ],
        )
        lines.append("")
    path = out / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tensorcore_smt.hardware", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("vectors", help="property vectors for the probed instructions (no GPU)")
    v.add_argument("--arch", default="hopper", choices=sorted(PROBED))
    v.add_argument("--out", default="results/hardware/vectors")
    v.add_argument("--timeout", type=float, default=120.0)
    v.add_argument("--property", action="append", default=None)
    v.add_argument("--instr", action="append", default=None)
    r = sub.add_parser("run", help="the GPU campaign")
    r.add_argument("--arch", default="hopper", choices=sorted(PROBED))
    r.add_argument("--vectors", default="results/hardware/vectors")
    r.add_argument("--out", default="results/hardware")
    r.add_argument("--rows", type=int, default=1_000_000)
    r.add_argument(
        "--rows-others",
        type=int,
        default=100_000,
        help="rows for the instructions outside the probed list (default 10^5)",
    )
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--budget", type=int, default=200)
    r.add_argument("--jobs", type=int, default=0)
    r.add_argument("--steps", default="probes,validate,identify")
    r.add_argument(
        "--identify-instr",
        action="append",
        default=None,
        help="identify only these instructions (repeat; default: the probed list)",
    )
    r.add_argument("--identify-jobs", type=int, default=1, help="identify runs at once")
    r.add_argument(
        "--identify-timeout", type=float, default=20.0, help="seconds per solver question"
    )
    r.add_argument(
        "--keep-rows",
        type=int,
        default=0,
        help="rows (with the GPU's d) kept per mismatching instruction",
    )
    r.add_argument("--keep-dir", default="", help="where kept rows go (default OUT/GPU/rows)")
    w = sub.add_parser("report", help="rewrite README.md of a campaign folder")
    w.add_argument("folder")
    k = sub.add_parser(
        "recheck", help="does the preset still agree with a past run? (no GPU; see recheck())"
    )
    k.add_argument("folder")
    k.add_argument("--against", required=True, help="the variant the run validated")
    k.add_argument("--instr", default="", help="only instructions matching this expression")
    args = ap.parse_args(argv)
    if args.cmd == "recheck":
        try:
            rows = recheck(Path(args.folder), args.against, args.instr)
        except (UserError, ValueError, OSError) as e:
            print(f"tcsmt hardware: {e}", file=sys.stderr)
            return 2
        return 0 if all(r["agrees"] for r in rows) else 1
    if args.cmd == "report":
        f = Path(args.folder)
        findings = f / "FINDINGS.md"
        print(write_report(f, findings.read_text() if findings.exists() else ""))
        return 0
    if args.cmd == "vectors":
        make_vectors(args.arch, Path(args.out), args.timeout, args.property, args.instr)
        return 0
    if args.rows <= 0:
        print("tcsmt hardware: --rows must be positive", file=sys.stderr)
        return 2
    return campaign(args)


if __name__ == "__main__":
    sys.exit(main())
