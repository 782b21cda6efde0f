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
            f"of tensorcore_smt/validation/rows.py: normal, cancelling, wide-range, subnormal, zero, "
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


__all__ = ["write_report"]
