"""The slow queries of the property library: seconds before (as recorded) and now; and
every solver alone over the property library.

    python bench/bench_slow_queries.py [--over 30] [--timeout 240] [--write results] [--update]
        [--library-arch volta] [--library-timeout 10] [--library-only | --no-library]

A query is slow when its recorded "seconds" in results/ARCH/PROPERTY.json exceed --over,
or when results/solver_speed.json (an earlier run of this bench) lists it: that file keeps
each query's first recorded figure as "before", so the list survives results/ being
updated with faster answers. Every slow query is run as `tcsmt find` runs it (the
concrete search, the solver portfolio, the re-check of a witness and the confirmation of
an unsat by a second solver) within --timeout seconds, one query at a time; the load
average is read before and after each (the machine may be shared: compare with care).

--write DIR writes DIR/solver_speed.md (the table) and DIR/solver_speed.json. --update
also rewrites results/ARCH/PROPERTY.json (and its .vectors.json, the rows of
results/summary.json and results/README.md) for every property whose queries it ran: the
property's other queries are run again with it, as `make results` would. A property whose
new answers say less than the recorded ones (an unsat that lost its confirmation within
the budget, an unknown) keeps its recorded file.

The second part (`library`) runs every installed solver alone (bitwuzla, z3, cvc5, and
Yices and Boolector through pySMT) on every instruction-level query of the property
library that applies to --library-arch, one run at a time, each bounded by
--library-timeout seconds (a run that reaches it is reported as "> T s", never as a
time): the solver's own query time (parse + check, solvers/result.py), its answer, and
for a sat answer the concrete re-check of the witness. No concrete search, argument or
confirmation: the solvers alone. GEMM-level queries are left out (their solver is the
GEMM solve, docs/gemm-solvers.md). --library-only runs only this part (`make bench`),
--no-library only the first; the part not run keeps what solver_speed.json holds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from solverbench.run import run_solver

from tensorcore_smt import __version__
from tensorcore_smt.errors import UserError
from tensorcore_smt.smt.find import QueryAnswer
from tensorcore_smt.smt.gemm_solve import answer_query
from tensorcore_smt.smt.library import get, load_all
from tensorcore_smt.smt.query import Query, smtlib
from tensorcore_smt.smt.search import SEARCH_S
from tensorcore_smt.smt.solve import Limits, Verdict
from tensorcore_smt.solvers import available

ROOT = Path(__file__).resolve().parents[1]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def slow_queries(results: Path, over: float) -> list[dict]:
    """(arch, property, id, before seconds, before verdict, before solver), the earlier
    run's list first."""
    seen: dict[tuple[str, str, str], dict] = {}
    prev = results / "solver_speed.json"
    if prev.exists():
        for r in json.loads(prev.read_text())["queries"]:
            key = (r["arch"], r["property"], r["id"])
            seen[key] = {k: r[k] for k in ("arch", "property", "id", "before")}
    for f in sorted(results.glob("*/*.json")):
        if f.name.endswith(".vectors.json"):
            continue
        try:
            rep = json.loads(f.read_text())
        except json.JSONDecodeError:
            continue
        if not isinstance(rep, dict) or "queries" not in rep or "property" not in rep:
            continue
        for q in rep["queries"]:
            s = q.get("seconds")
            key = (rep["arch"], rep["property"], q["id"])
            if s is not None and s > over and key not in seen:
                solver = q.get("solver") or {}
                seen[key] = {
                    "arch": rep["arch"],
                    "property": rep["property"],
                    "id": q["id"],
                    "before": {
                        "seconds": s,
                        "verdict": q["verdict"],
                        "solver": solver.get("solver", ""),
                        "agreeing": q.get("agreeing_solvers", []),
                    },
                }
    return list(seen.values())


def run_property(arch: str, name: str, limits: Limits) -> list[tuple[QueryAnswer, str, str]]:
    """Every query of the property on `arch`, each with the load before and after it."""
    prop = get(name)
    out = []
    for spec, q in prop.bind(arch, None):
        before = load()
        a = QueryAnswer(spec, answer_query(q, limits))
        out.append((a, before, load()))
    return out


def library_queries(arch: str) -> list[tuple[str, str, Query]]:
    """(property, query id, query) of every instruction-level query of the property library
    that applies to `arch`."""
    out = []
    for name, prop in load_all().items():
        try:
            pairs = list(prop.bind(arch, None))
        except UserError:  # the property does not apply to this architecture
            continue
        out += [(name, spec.id, q) for spec, q in pairs if isinstance(q, Query)]
    return out


def run_library(arch: str, solvers: list[str], timeout: float) -> dict:
    """Every solver alone on every query of `library_queries(arch)`, with the 1-minute load
    average before each query's runs."""
    t0 = time.monotonic()
    start = load()
    rows = []
    for name, qid, q in library_queries(arch):
        text = smtlib(q)
        row = {"property": name, "id": qid, "chars": len(text), "load": load(), "runs": {}}
        for s in solvers:
            r = run_solver(q, text, s, timeout)
            row["runs"][s] = {
                "answer": r.answer.value,
                "solver_s": None if r.solver_s is None else round(r.solver_s, 4),
                "seconds": round(r.seconds, 3),
                "reason": r.reason,
                "reproduces": r.reproduces,
            }
            print(f"  {name} {qid} {s}: {_run_cell(row['runs'][s], timeout)}", flush=True)
        rows.append(row)
    return {
        "arch": arch,
        "timeout_s": timeout,
        "solvers": {s: available()[s] for s in solvers},
        "load_start": start,
        "load_end": load(),
        "total_s": round(time.monotonic() - t0, 1),
        "rows": rows,
    }


def _run_cell(r: dict, timeout: float) -> str:
    """One run as a table cell: the solver's own time and answer, or "> T s"."""
    if r["answer"] == "unknown":
        return f"> {timeout:g} s" if "timeout" in r["reason"] else f"unknown ({r['reason'][:40]})"
    s = r["solver_s"] if r["solver_s"] is not None else r["seconds"]
    text = f"{s:.2f} s {r['answer']}" if s >= 0.01 else f"{s * 1000:.1f} ms {r['answer']}"
    if r["reproduces"] is False:
        text += " (witness BAD)"
    return text


def render_library(lib: dict) -> list[str]:
    """The library part of solver_speed.md."""
    solvers = list(lib["solvers"])
    t = lib["timeout_s"]
    lines = [
        f"## Every solver alone over the property library ({lib['arch']})",
        "",
        f"Each instruction-level query of the property library that applies to {lib['arch']}"
        f" ({len(lib['rows'])}),",
        "run by each solver alone, one run at a time in a fresh child process, bounded by"
        f" {t:g} s:",
        "the solver's own query time (parse + check), and its answer; every sat witness was re-run",
        "on the concrete model (marked BAD where it did not reproduce). No concrete search, stated",
        "argument or confirmation: what each solver does on its own. "
        + ", ".join(f"{k} {v}" for k, v in lib["solvers"].items())
        + f"; total {lib['total_s']:g} s.",
        f"Load average {lib['load_start']} at the start, {lib['load_end']} at the end (1, 5 and 15",
        "minutes; 2 cores shared with other work); `load`: the 1-minute load before the"
        " query's runs.",
        "",
        "| property | query | SMT-LIB chars | " + " | ".join(solvers) + " | load |",
        "| --- | --- | --- | " + " | ".join("---" for _ in solvers) + " | --- |",
    ]
    for r in lib["rows"]:
        cells = [_run_cell(r["runs"][s], t) if s in r["runs"] else "—" for s in solvers]
        lines.append(
            f"| {r['property']} | {r['id']} | {r['chars']:,} | "
            + " | ".join(cells)
            + f" | {r['load'].split()[0]} |"
        )
    answered = []
    for s in solvers:
        runs = [r["runs"][s] for r in lib["rows"] if s in r["runs"]]
        done = [x for x in runs if x["answer"] != "unknown"]
        total = sum(x["solver_s"] or x["seconds"] for x in done)
        answered.append(f"{len(done)} of {len(runs)}, {total:.1f} s")
    lines += [
        "| **answered, and their total time** | | | " + " | ".join(answered) + " | |",
        "",
        "A solver's total counts only the queries it answered; a `> T s` query is one it did not",
        "answer within the bound, not a time.",
        "",
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(ROOT / "results"), help="results directory")
    ap.add_argument("--over", type=float, default=30.0, help="slow: recorded seconds above")
    ap.add_argument("--timeout", type=float, default=240.0, help="budget of one query (s)")
    ap.add_argument("--search", type=float, default=SEARCH_S, help="concrete search (s)")
    ap.add_argument("--write", default=None, help="write solver_speed.md/.json here")
    ap.add_argument("--update", action="store_true", help="rewrite the properties' results")
    ap.add_argument("--library-arch", default="volta", help="architecture of the library part")
    ap.add_argument(
        "--library-timeout", type=float, default=10.0, help="bound of one solver run (s)"
    )
    part = ap.add_mutually_exclusive_group()
    part.add_argument("--library-only", action="store_true", help="only the library part")
    part.add_argument("--no-library", action="store_true", help="only the slow queries")
    args = ap.parse_args()
    results = Path(args.results)
    prev_path = Path(args.write or args.results) / "solver_speed.json"
    prev = json.loads(prev_path.read_text()) if prev_path.exists() else {}
    if args.library_only:
        lib = run_library(args.library_arch, list(available()), args.library_timeout)
        report = {**prev, "library": lib}
        print(f"library: total {lib['total_s']:g} s; load average at the end {lib['load_end']}")
        if args.write:
            write_report(Path(args.write), report, args.over)
        return
    todo = slow_queries(results, args.over)
    limits = Limits(timeout=args.timeout, search=args.search)
    t0 = time.monotonic()
    start_load = load()
    rows = []
    by_prop: dict[tuple[str, str], list] = {}
    for item in todo:
        by_prop.setdefault((item["arch"], item["property"]), []).append(item)
    answered: dict[tuple[str, str], list[QueryAnswer]] = {}
    for (arch, name), items in by_prop.items():
        ran = run_property(arch, name, limits)
        answered[(arch, name)] = [a for a, _, _ in ran]
        for item in items:
            a, l0, l1 = next(r for r in ran if r[0].spec.id == item["id"])
            o = a.outcome
            now = {
                "seconds": round(o.seconds, 3),
                "verdict": o.verdict.value,
                "method": o.method,
                "solver": o.result.solver if o.result else "",
                "agreeing": a.to_json()["agreeing_solvers"],
                "load_before": l0,
                "load_after": l1,
            }
            rows.append({**item, "now": now})
            b = item["before"]
            print(
                f"{arch:14s} {name:20s} {item['id']:24s} {b['seconds']:8.1f} s {b['verdict']:8s}"
                f" -> {now['seconds']:7.2f} s {now['verdict']:8s} {now['method']:7s}"
                f" {','.join(now['agreeing']) or now['solver']:16s} load {l1}",
                flush=True,
            )
    total = time.monotonic() - t0
    report = {
        "version": __version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "solvers": available(),
        "timeout_s": args.timeout,
        "search_s": args.search,
        "load_start": start_load,
        "load_end": load(),
        "total_s": round(total, 1),
        "queries": rows,
    }
    print(f"total {total:.1f} s; load average {start_load} at the start, {load()} at the end")
    if args.no_library:
        if "library" in prev:
            report["library"] = prev["library"]
    else:
        report["library"] = run_library(args.library_arch, list(available()), args.library_timeout)
    if args.write:
        write_report(Path(args.write), report, args.over)
    if args.update:
        update_results(results, answered)


def write_report(out: Path, report: dict, over: float) -> None:
    """DIR/solver_speed.json and DIR/solver_speed.md (the parts the report holds)."""
    (out / "solver_speed.json").write_text(json.dumps(report, indent=2) + "\n")
    text = render(report, over) if "queries" in report else ""
    if "library" in report:
        text = text + "\n".join(render_library(report["library"]))
    (out / "solver_speed.md").write_text(text)
    print(f"wrote {out / 'solver_speed.md'}")


def render(rep: dict, over: float) -> str:
    solvers = ", ".join(f"{k} {v}" for k, v in rep["solvers"].items())
    n_over = sum(1 for r in rep["queries"] if r["now"]["seconds"] > over)
    lines = [
        "# Slow queries of the property library: before and now",
        "",
        f"Generated by `make bench-slow` (bench/bench_slow_queries.py; tcsmt {rep['version']};",
        f"{solvers}; {rep['machine']}). A query is listed when its recorded time in",
        f'results/ was over {over:g} s ("before": that record). Each ran as `tcsmt find` runs',
        f"it: the concrete search ({rep['search_s']:g} s, tensorcore_smt/smt/search.py), then the",
        "solver portfolio, the re-check of a witness and the confirmation of an unsat by a",
        f"second solver, within a budget of {rep['timeout_s']:g} s per query; total"
        f" {rep['total_s']:g} s.",
        "",
        f"The machine is shared: load average {rep['load_start']} at the start and",
        f"{rep['load_end']} at the end (1, 5 and 15 minutes); each row notes the 1-minute",
        "load after it. `search`: the witness came from the concrete search and was re-run on",
        "the concrete model; no solver was run. An unsat names the solvers that agreed (the",
        "proof and its confirmation).",
        "",
        "| arch | property | query | before | answer (before) | now | answer (now) | by | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rep["queries"]:
        b, n = r["before"], r["now"]
        who_b = ", ".join(b["agreeing"]) or b["solver"]
        who_n = ", ".join(n["agreeing"]) or n["solver"]
        if Verdict(n["verdict"]) == Verdict.UNSAT and len(n["agreeing"]) < 2:
            who_n += " only (not confirmed within the budget)"
        lines.append(
            f"| {r['arch']} | {r['property']} | {r['id']} | {b['seconds']:.1f} s | "
            f"{b['verdict']} ({who_b}) | {n['seconds']:.2f} s | {n['verdict']} | {who_n} | "
            f"{n['load_after'].split()[0]} |"
        )
    lines += [
        "",
        f"Over {over:g} s now: {n_over} of {len(rep['queries'])}. With --update,"
        " results/ARCH/PROPERTY.json takes",
        "the new answers unless one says less than the record (an unsat not confirmed within",
        "the budget, an unknown): then the recorded file stays.",
        "",
    ]
    return "\n".join(lines)


def _weaker(old: dict, new: dict) -> str:
    """Why the new answer of a query says less than the recorded one ('' if it does not):
    no definite answer where there was one, or an unsat that fewer solvers agree on."""
    was, now = Verdict(old["verdict"]), Verdict(new["verdict"])
    if was in (Verdict.WITNESS, Verdict.UNSAT) and now != was:
        return f"{was.value} before, {now.value} now"
    if was == Verdict.UNSAT and not old.get("by_construction"):
        a, b = len(old["agreeing_solvers"]), len(new["agreeing_solvers"])
        if b < a:
            return f"unsat confirmed by {a} solvers before, {b} now"
    return ""


def update_results(results: Path, answered: dict[tuple[str, str], list[QueryAnswer]]) -> None:
    """results/ARCH/PROPERTY.json and .vectors.json, the rows of summary.json and of
    README.md, for every property whose new answers say no less than the recorded ones
    (a proof that lost its confirmation within the budget keeps the recorded file)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import make_results as mr

    summary_path = results / "summary.json"
    rows = json.loads(summary_path.read_text())
    readme = results / "README.md"
    text = readme.read_text()
    for (arch, name), answers in answered.items():
        path = results / arch / f"{name}.json"
        old = {q["id"]: q for q in json.loads(path.read_text())["queries"]}
        why = [
            f"{a.spec.id}: {w}"
            for a in answers
            if a.spec.id in old and (w := _weaker(old[a.spec.id], a.to_json()))
        ]
        if why:
            print(f"kept {path} (the new answers say less: {'; '.join(why)})")
            continue
        mr.write_property(results / arch, get(name), arch, answers, rows)
        text = _readme_rows(text, arch, name, rows[arch][name])
        print(f"updated {path}")
    summary_path.write_text(json.dumps(rows, indent=2) + "\n")
    head, sep, _ = text.partition("## Markidis vs Ootomo-Yokota")
    readme.write_text(head + mr.render_p5(results, rows) if sep else text)


def _readme_rows(text: str, arch: str, name: str, row: dict) -> str:
    """README.md with the property's rows of the architecture's table rewritten (the
    line format of make_results.render)."""
    lines = text.split("\n")
    start = lines.index(f"## {arch}")
    for q in row["queries"]:
        ans = q["answer"] + (" UNEXPECTED" if q["as_expected"] is False else "")
        who = ", ".join(q["agreeing"]) or q["solver"]
        new = (
            f"| {name} | {row['instruction']} | {q['id']} | {ans} | {who} | "
            f"{q['seconds']} | {q['conclusion']} |"
        )
        prefix = f"| {name} | {row['instruction']} | {q['id']} |"
        for i in range(start + 1, len(lines)):
            if lines[i].startswith("## "):
                break
            if lines[i].startswith(prefix):
                lines[i] = new
                break
    return "\n".join(lines)


if __name__ == "__main__":
    main()
