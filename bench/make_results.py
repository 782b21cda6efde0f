"""Regenerate results/: every property of the library on every architecture it applies to.

    python bench/make_results.py [--arch A ...] [--timeout S] [--out results] [--workers N]

Every query of every (arch, property) is one task on a Dask cluster (an embedded
LocalCluster of --workers processes, or --scheduler ADDRESS / $TCSMT_SCHEDULER); the
concrete search and the solver portfolio inside each task are those `tcsmt find` runs
(--search: the search's seconds, 0: none). For each (arch, property)
it writes results/ARCH/PROPERTY.json (the `tcsmt find --json`
report: witnesses re-checked on the concrete model, unsat answers with the solvers that
agreed) and, when there are witnesses, results/ARCH/PROPERTY.vectors.json (test vectors
with every variant's prediction, ready for `tcsmt probe`). results/README.md summarises
them in one table per architecture, followed by the Markidis vs Ootomo-Yokota witnesses
with both errors; results/summary.json holds the same rows. Finally the feature matrix
(tensorcore_smt.smt.features: every witness run through the presets, beside FTTN Table IV,
Valpey et al. 2025 and MMA-Sim Table III) is written to results/features.md and features.json;
`--features-only` rebuilds just that from the vectors already there.

`--sparse` asks every property that applies of the sparse form SPARSE_FORM instead (on
each preset that has it, every group of the metadata keeping its first pattern):
results/ARCH/sparse/PROPERTY.json (and .vectors.json, with the metadata) and the tables
of results/sparse.md; `make results` runs both.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from tensorcore_smt import __version__
from tensorcore_smt.errors import UserError
from tensorcore_smt.smt import features
from tensorcore_smt.smt.find import QueryAnswer, QueryTask, query_tasks, save_vectors, sweep
from tensorcore_smt.smt.library import load_all
from tensorcore_smt.smt.search import SEARCH_S
from tensorcore_smt.smt.solve import Limits
from tensorcore_smt.solvers import available
from tensorcore_smt.spec.presets import PRESETS
from tensorcore_smt.validation.distributed import TaskFailure, connect


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", default=None, help="architecture (repeatable)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per solver run")
    ap.add_argument("--out", default="results", help="output directory")
    ap.add_argument("--property", action="append", default=None, help="property (repeatable)")
    ap.add_argument("--features-only", action="store_true", help="only rebuild the matrix")
    ap.add_argument(
        "--sparse", action="store_true", help=f"the properties on {SPARSE_FORM} instead"
    )
    ap.add_argument(
        "--search", type=float, default=SEARCH_S, help="seconds of concrete search per query"
    )
    ap.add_argument(
        "--workers", type=int, default=None, help="Dask worker processes (default: cores)"
    )
    ap.add_argument(
        "--scheduler", default=None, help="an existing Dask scheduler (or $TCSMT_SCHEDULER)"
    )
    args = ap.parse_args()
    archs = args.arch or list(PRESETS)
    out = Path(args.out)
    if args.features_only:
        write_features(out)
        return
    props = load_all()
    limits = Limits(timeout=args.timeout, search=args.search)
    if args.sparse:
        sparse_main(props, archs, limits, out, args)
        return
    summary_path = out / "summary.json"
    rows = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    tasks: dict[tuple[str, str], list[QueryTask]] = {}
    for arch in archs:
        rows[arch] = {} if args.property is None else rows.get(arch, {})
        (out / arch).mkdir(parents=True, exist_ok=True)
        for name, prop in props.items():
            if args.property and name not in args.property:
                continue
            why = prop.not_applicable(PRESETS[arch])
            if why:
                rows[arch][name] = {"not_applicable": why.split(": ", 1)[-1]}
            else:
                tasks[(arch, name)] = query_tasks(prop, arch, None, limits)
    run_tasks(tasks, props, out, rows, summary_path, args)
    for arch in archs:  # the library's order, whatever order the tasks finished in
        r = rows[arch]
        rows[arch] = {n: r[n] for n in props if n in r} | {n: r[n] for n in r if n not in props}
    summary_path.write_text(json.dumps(rows, indent=2) + "\n")
    (out / "README.md").write_text(render(rows, args.timeout) + render_p5(out, rows))
    write_features(out)


SPARSE_FORM = "mma.sp.m16n8k32.f32.f16.f16.f32"
"""The sparse form `--sparse` asks about: f16 2:4, K = 32, whose 16 kept products are one
fused group or two as the hypothesis says (model/sparse.py)."""

SPARSE_DIR = "sparse"
"""results/ARCH/SPARSE_DIR/: the answers on SPARSE_FORM."""


def run_tasks(tasks: dict, props: dict, out: Path, rows: dict, summary: Path, args, sub="") -> None:
    """Every query is one Dask task; a property's files (under out/ARCH/`sub`) are
    written as soon as its last query is answered, and `summary` after each, so nothing
    finished is lost."""
    done: dict[tuple[str, str], dict[str, QueryAnswer]] = {k: {} for k in tasks}
    flat = [t for ts in tasks.values() for t in ts]
    t0 = time.monotonic()
    with connect(args.workers, args.scheduler) as client:
        for t, r in sweep(client, flat):
            if isinstance(r, TaskFailure):
                print(f"{t.arch:14s} {t.prop:24s} {t.query_id}: task failed: {r.error}", flush=True)
                continue
            key = (t.arch, t.prop)
            done[key][t.query_id] = r
            if len(done[key]) == len(tasks[key]):
                answers = [done[key][x.query_id] for x in tasks[key]]
                write_property(out / t.arch / sub, props[t.prop], t.arch, answers, rows)
                print(
                    f"{t.arch:14s} {t.prop:24s} {time.monotonic() - t0:7.1f} s (elapsed)",
                    flush=True,
                )
                summary.write_text(json.dumps(rows, indent=2) + "\n")


def sparse_main(props: dict, archs: list[str], limits: Limits, out: Path, args) -> None:
    """`--sparse`: every property that applies on SPARSE_FORM of each preset that has
    it, into results/ARCH/sparse/ and results/sparse.md (and sparse.json)."""
    summary = out / "sparse.json"
    rows: dict = json.loads(summary.read_text()) if summary.exists() else {}
    tasks: dict[tuple[str, str], list[QueryTask]] = {}
    for arch in archs:
        inst = PRESETS[arch].instructions.get(SPARSE_FORM)
        if inst is None:
            continue
        rows[arch] = {} if args.property is None else rows.get(arch, {})
        (out / arch / SPARSE_DIR).mkdir(parents=True, exist_ok=True)
        for name, prop in props.items():
            if args.property and name not in args.property:
                continue
            why = "a question about GEMM hypotheses" if prop.gemm else prop.not_applicable_to(inst)
            if why:
                rows[arch][name] = {"not_applicable": why}
            else:
                tasks[(arch, name)] = query_tasks(prop, arch, SPARSE_FORM, limits)
    run_tasks(tasks, props, out, rows, summary, args, SPARSE_DIR)
    for arch in rows:
        r = rows[arch]
        rows[arch] = {n: r[n] for n in props if n in r}
    summary.write_text(json.dumps(rows, indent=2) + "\n")
    write_features(out)
    title = f"# Results: the property library on the sparse form {SPARSE_FORM}"
    intro = [
        "Each preset's compressed hypothesis (the dense unit of the 16 kept products; the",
        "presets, confirmed on an H100: results/hardware/h100) asked every property that",
        "applies, for the metadata that keeps positions 0 and 1 of every group of four",
        "(`tcsmt find --instr SPARSE --meta 0,1` answers the same). The inputs are A's",
        "uncompressed row, +0 where the metadata keeps nothing; the properties' conditions",
        "are judged on the dense unit (docs/model.md, structured-sparse mma.sp). Files:",
        "ARCH/sparse/PROPERTY.json and .vectors.json (with the metadata, for `tcsmt probe`).",
        "",
    ]
    (out / "sparse.md").write_text(render(rows, args.timeout, title, intro))


def write_property(folder: Path, prop, arch: str, answers: list[QueryAnswer], rows: dict) -> None:
    """FOLDER/PROPERTY.json (and .vectors.json) and the property's summary row."""
    name = prop.name
    out = folder
    report = {
        "property": name,
        "question": " ".join(prop.question.split()),
        "source": prop.source,
        "arch": arch,
        "instruction": answers[0].outcome.query.instruction,
        "queries": [a.to_json() for a in answers],
    }
    (out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    try:
        save_vectors(prop, arch, answers, out / f"{name}.vectors.json")
    except UserError as e:  # e.g. split algorithms: fp32 inputs, no one-instruction vector
        print(f"{arch:14s} {name:24s} no test vectors: {e}", flush=True)
    rows[arch][name] = {
        "instruction": report["instruction"],
        "queries": [
            {
                "id": a.spec.id,
                "variants": list(a.outcome.query.variants),
                "answer": a.answer,
                "as_expected": a.as_expected,
                "solver": "argument"
                if a.outcome.argued
                else "construction"
                if a.outcome.by_construction
                else (a.outcome.result.solver if a.outcome.result else ""),
                "agreeing": a.to_json()["agreeing_solvers"],
                "seconds": round(a.outcome.seconds, 2),
                "conclusion": a.conclusion,
            }
            for a in answers
        ],
    }


def write_features(out: Path) -> None:
    """results/features.md and features.json from the vectors under `out`."""
    matrix = features.build(out, list(PRESETS))
    sparse = features.build_sparse(out)
    text = json.dumps(features.to_json(matrix, sparse), indent=2) + "\n"
    (out / "features.json").write_text(text)
    (out / "features.md").write_text(features.to_markdown(matrix, sparse=sparse))
    print(f"feature matrix: {out / 'features.md'}")


def render_p5(out: Path, rows: dict) -> str:
    """The Markidis vs Ootomo-Yokota witnesses (Valpey et al. 2025 §6, Property 5) with both errors."""
    lines = [
        "## Markidis vs Ootomo-Yokota (Valpey et al. 2025 §6, Property 5)",
        "",
        "fp32 inputs split into fp16 + residual on each architecture's fp16 unit; a and b in",
        "O-Y's Type 1 range 2^-15..2^14, c free. `markidis-more-accurate` is Property 5: a",
        "witness where Markidis's error is smaller than O-Y's; `ootomo-more-accurate` asks the",
        "converse. Errors are |d - exact| with the exact c + sum a*b in rational arithmetic.",
        "",
        "| arch | query | a | b | c | exact | Markidis d (error) | O-Y d (error) | solver | s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    found = False
    for arch in rows:
        f = out / arch / "markidis-vs-ootomo.json"
        if not f.exists():
            continue
        for q in json.loads(f.read_text())["queries"]:
            w = q.get("witness")
            if not w:
                lines.append(f"| {arch} | {q['id']} | {q['verdict']} | | | | | | | |")
                continue
            found = True
            ins = w["inputs"]
            k = sum(1 for n in ins if n.startswith("a"))
            a = ", ".join(ins[f"a{i}"]["hex"] for i in range(k))
            b = ", ".join(ins[f"b{i}"]["hex"] for i in range(k))
            outs = list(w["outputs"].values())
            errs = w.get("errors", {})
            by_method = {}
            for v, o in zip(q["variants"], outs):
                key = "m" if "markidis" in v else "oy"
                by_method[key] = f"{o['hex']} ({errs.get(v, '?')})"
            who = (q.get("solver") or {}).get("solver", "")
            lines.append(
                f"| {arch} | {q['id']} | {a} | {b} | {ins['c']['hex']} | {errs.get('exact', '?')} "
                f"| {by_method.get('m', '')} | {by_method.get('oy', '')} | {who} | {q['seconds']} |"
            )
    return "\n".join(lines) + "\n" if found else ""


def render(rows: dict, timeout: float, title: str = "", intro: list[str] | None = None) -> str:
    """The tables of results/README.md (or, with `title` and `intro`, of another page)."""
    solvers = ", ".join(f"{k} {v}" for k, v in available().items())
    lines = [
        title or "# Results: the property library on every architecture",
        "",
        *(intro or []),
        f"Generated by `make results` (tcsmt {__version__}; solvers: {solvers}; "
        f"{timeout:g} s per solver run; machine: {platform.machine()}, "
        f"{platform.python_implementation()} {platform.python_version()}).",
        "",
        "Every `sat` is a witness re-checked on the concrete model (inputs, both variants'",
        "outputs: ARCH/PROPERTY.json; test vectors for `tcsmt probe`: ARCH/PROPERTY.vectors.json).",
        "Every `unsat` names the solvers that agreed; `construction` means both variants build",
        "the same term on this instruction; `argument` (verdict unsat-by-argument) means a",
        "stated argument proved it (model/integer_sums.py, model/monotone.py, model/integer.py),",
        "its extreme rows at the bound ran through the concrete model, and a solver confirmed it",
        "within the budget where one answered; `search` means the witness came from the concrete",
        "search before the solvers (tensorcore_smt/smt/search.py; re-checked the same way, no",
        "solver run). `UNEXPECTED` marks an answer that differs from the one the property expects.",
        "",
    ]
    for arch, props in rows.items():
        lines += [
            f"## {arch}",
            "",
            "| property | instruction | query | answer | solvers | s | conclusion |",
        ]
        lines.append("| --- | --- | --- | --- | --- | --- | --- |")
        for name, r in props.items():
            if "not_applicable" in r:
                lines.append(f"| {name} | — | — | n/a | | | {r['not_applicable']} |")
                continue
            for q in r["queries"]:
                ans = q["answer"] + (" UNEXPECTED" if q["as_expected"] is False else "")
                who = ", ".join(q["agreeing"]) or q["solver"]
                lines.append(
                    f"| {name} | {r['instruction']} | {q['id']} | {ans} | {who} | "
                    f"{q['seconds']} | {q['conclusion']} |"
                )
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
