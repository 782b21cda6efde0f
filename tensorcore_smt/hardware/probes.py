"""The property probes of the hardware campaign: every property's witnesses on every
probed instruction as vector files (`tcsmt hardware vectors`, solvers, no GPU), and, on the
GPU, each file's probe built, disassembled, run and checked (`tcsmt probe --check`)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import UserError
from .gpu import Gpu, run_cmd, safe_name, sass_excerpt, sass_ops
from .plan import PROBED


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
            path = out / safe_name(instr) / f"{name}.vectors.json"
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


def source_of(stem: Path) -> Path:
    """The CUDA source of a probe's executable `stem` (its name has the instruction's dots)."""
    return stem.parent / f"{stem.name}.cu"


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
        # Not stem.with_suffix: an instruction's dots would make every probe of it one file.
        source_of(stem).write_text(src)
        jobs_list.append((f, vf, stem, sm))

    def compile_one(job):
        f, vf, stem, sm = job
        r = run_cmd(["nvcc", f"-arch=sm_{sm}", "-O2", "-o", str(stem), str(source_of(stem))])
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
            s = run_cmd(["cuobjdump", "--dump-sass", str(stem)])
            text = s.stdout
            (sass_dir / f"{safe_name(vf.instruction)}.sass.txt").write_text(
                sass_excerpt(text) + "\n"
            )
            seen_sass[vf.instruction] = sass_ops(text)
        row["sass"] = seen_sass[vf.instruction]
        r = run_cmd([str(stem)])
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
        row["ok"] = rep.ok
        rows.append(row)
        print(f"probe {name:60s} {row['verdict']}", flush=True)
    return rows


__all__ = ["make_vectors", "run_probes", "source_of"]
