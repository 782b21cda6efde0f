"""The campaign's report: results/hardware/<gpu>/README.md written from the JSON files
a run leaves in its folder (machine, SASS opcodes, validation, probes, identify)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .plan import ALTERNATIVES


def _md_table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return out


def _validation_section(val: list[dict], meta: dict, title: str, what: str) -> list[str]:
    """A validation.json as a table: rows, mismatches and each named alternative's."""
    total = sum(v["rows"] for v in val)
    bad = sum(v["mismatches"] for v in val)
    counts = sorted({v["rows"] for v in val}, reverse=True)
    per = " or ".join(f"{n:,}" for n in counts) + " per instruction"
    lines = [
        f"## {title}",
        "",
        f"{len(val)} instructions ({what}), {total:,} random rows ({per}; the mix "
        f"of tensorcore_smt/validation/rows.py and int_rows.py), computed by the GPU "
        f"through the batch runner and compared bit for bit with the vector interpreter "
        f"of the hopper preset: **{bad:,} mismatches**. Beside it, how many rows each "
        "named alternative mispredicts (a non-zero count is that hypothesis refuted on "
        "this instruction).",
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
        ["instruction", "rows", "mismatches", "SASS", *alt_names],
        [
            [
                v["instruction"],
                f"{v['rows']:,}",
                v["mismatches"]
                if not v["mismatches"]
                else f"**{v['mismatches']}** ({v['mismatch_file']})",
                ", ".join(f"{o} x{n}" for o, n in (v.get("sass") or {}).items()),
                *[v["alternatives"].get(a, "") for a in alt_names],
            ]
            for v in val
        ],
    )
    return [*lines, ""]


def _probes_section(pr: list[dict], title: str, sub: str) -> list[str]:
    ok = sum(1 for r in pr if r.get("ok"))
    lines = [
        f"## {title}",
        "",
        f"{len(pr)} probe programs (property witnesses, results/hardware/vectors), built, "
        f"run and checked with `tcsmt probe --check`: {ok} matched the hopper preset on "
        f"every vector. Raw outputs and reports: {sub}probes/.",
        "",
    ]
    lines += _md_table(
        ["instruction", "property", "verdict"],
        [
            [r["instruction"], r.get("property") or "", r.get("verdict") or r.get("error")]
            for r in pr
        ],
    )
    return [*lines, ""]


def _sparse_section(sp: list[dict]) -> list[str]:
    names = sorted({h for e in sp for h in e.get("hypotheses", {})})
    lines = [
        "## Structured sparsity (mma.sp)",
        "",
        "Random rows whose groups all keep one pattern (drawn per row; hardware/sparse.py), "
        "run through each form's batch runner with the metadata word, against each "
        "hypothesis: the number of rows it mispredicts (sparse/sparse.json; the first "
        "rows' GPU answers in sparse/*.d.npy).",
        "",
    ]
    lines += _md_table(
        ["instruction", "rows", "SASS", *names],
        [
            [
                e["instruction"],
                f"{e['rows']:,}",
                ", ".join(f"{o} x{n}" for o, n in (e.get("sass") or {}).items()),
                *[
                    e["hypotheses"][h]["mismatches"] if h in e.get("hypotheses", {}) else ""
                    for h in names
                ],
            ]
            for e in sp
        ],
    )
    return [*lines, ""]


def _cpu_section(folder: Path) -> list[str]:
    val = json.loads((folder / "validate.json").read_text())
    cpu = (folder / "cpu.txt").read_text().split("\n")[0] if (folder / "cpu.txt").exists() else ""
    cpu = cpu.split(":", 1)[-1].strip()
    lines = [
        "## The host CPU's VDPBF16PS",
        "",
        f"The GPU machine's CPU ({cpu}, AVX512_BF16): `tcsmt validate --arch x86-avx512bf16 "
        f"--oracle cpu:avx512bf16 --rows {val['rows']:,}`: **{val['mismatches']} "
        f"mismatches** (cpu/validate.json).",
    ]
    ident = folder / "identify.json"
    if ident.exists():
        r = json.loads(ident.read_text())
        st = r.get("standing", {})
        surv = ", ".join(s["variant"] for s in r.get("survivors", []))
        lines.append(
            f"`tcsmt identify --arch x86-avx512bf16 --oracle cpu:avx512bf16`: {st.get('classes')} "
            f"class ({surv}), established: {st.get('established')}, after "
            f"{r.get('oracle_vectors')} vectors in {r.get('oracle_calls')} calls "
            "(cpu/identify.json)."
        )
    return [*lines, ""]


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
    for sub, what in (("", "every floating-point instruction"), ("integer/", "the integer ones")):
        val_path = out / sub / "validation.json" if sub else out / "validation" / "validation.json"
        if val_path.exists():
            title = "Random validation" + (f" ({sub.rstrip('/')})" if sub else "")
            lines += _validation_section(json.loads(val_path.read_text()), meta, title, what)
        pr_path = out / sub / "probes.json"
        if pr_path.exists():
            title = "Property probes" + (f" ({sub.rstrip('/')})" if sub else "")
            lines += _probes_section(json.loads(pr_path.read_text()), title, sub)
    sp_path = out / "sparse" / "sparse.json"
    if sp_path.exists():
        lines += _sparse_section(json.loads(sp_path.read_text()))
    cpu_path = out / "cpu" / "validate.json"
    if cpu_path.exists():
        lines += _cpu_section(out / "cpu")
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


__all__ = ["write_report"]
