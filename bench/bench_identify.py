"""Identify figures: `identify --oracle variant:P` on every preset's default instruction
(and a few other forms), then on hidden variants drawn at random from the default space.

Writes results/identify.md (a table: case, oracle vectors, seconds, recovered?) and the
rows as results/identify-presets.json and results/identify-random.json. `--part gemm`
times `tcsmt identify --gemm` on GEMM_CASES (a hidden FP8 split-K schedule with
promotion, goal under 120 s at K = 512) and writes results/identify_gemm.md. Usage:
python bench/bench_identify.py [--part all|presets|random|report|gemm] [--random N]
[--timeout S] [--out DIR] [--gemm-k K ...] [--gemm-wall S]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tensorcore_smt.identify.loop import identify
from tensorcore_smt.identify.oracle import make_oracle
from tensorcore_smt.identify.report import recovered
from tensorcore_smt.identify.space import resolve_space
from tensorcore_smt.smt.solve import Limits
from tensorcore_smt.spec.presets import PRESETS

EXTRA = [
    ("hopper", "wgmma.m64n8k32.f32.e4m3.e4m3"),
    ("ampere", "m16n8k8.f32.tf32.tf32.f32"),
    ("hopper", "m16n8k16.f16.f16.f16.f16"),
    ("hopper", "m16n8k32.f32.e4m3.e4m3.f32"),
]
"""Forms beside the defaults: Hopper FP8 wgmma, Ampere TF32, an fp16-output form, and
Hopper FP8 mma.sync (two f16 HMMAs on unpacked bytes, c added after: results/hardware)."""

RANDOM_ON = [("volta", None), ("ampere", None), ("hopper", None)]
"""The spaces random hidden variants are drawn from (in turn)."""


def run_case(arch: str, instr: str | None, hidden: str, timeout: float, budget: int) -> dict:
    """One identification of the hidden variant `hidden` on `arch`'s `instr`."""
    space = resolve_space(arch, instr, None)
    oracle = make_oracle(f"variant:{hidden}", space.base, space.arch, space.instr)
    t0 = time.monotonic()
    res = identify(space, oracle, budget, Limits(timeout=timeout))
    seconds = time.monotonic() - t0
    return {
        "arch": arch,
        "instr": space.instr,
        "hidden": hidden,
        "oracle_vectors": res.oracle_vectors,
        "oracle_calls": res.oracle_calls,
        "seconds": round(seconds, 1),
        "classes": len(res.classes),
        "survivors": [h.expr(space.arch) for c in res.classes for h in c],
        "recovered": recovered(res, oracle.hidden),
        "stopped": res.stopped,
    }


GEMM_HIDDEN = "hopper/serial[split_k=2,split=contiguous,promote=128]"
GEMM_INSTR = "wgmma.m64n8k32.f32.e4m3.e4m3"
GEMM_GOAL_SECONDS = 120.0
"""Issue 45: the K = 512 case ends in under 120 s with every survivor split_k = 2 and
promote = 128 or proved equal to one."""


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def gemm_case(k: int, wall: float) -> dict:
    """`tcsmt identify --gemm` against GEMM_HIDDEN at depth k (the command a user runs,
    --json), stopped with SIGINT after `wall` seconds (it then reports what it has)."""
    tcsmt = str(Path(sys.executable).parent / "tcsmt")
    cmd = [tcsmt, "identify", "--gemm", "--arch", "hopper", "--k", str(k), "--instr"]
    cmd += [GEMM_INSTR, "--oracle", f"variant:{GEMM_HIDDEN}", "--json"]
    load = _load()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=wall)
        cut = False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate()
        cut = True
    seconds = time.monotonic() - t0
    row = {"k": k, "seconds": round(seconds, 1), "cut": cut, "load_start": load}
    row["load_end"] = _load()
    try:
        doc = json.loads(out)
    except json.JSONDecodeError:
        row["error"] = (err or out).strip().splitlines()[-1:] or ["no output"]
        return row
    survivors = []
    for sv in doc["survivors"]:
        p = sv["params"]
        hit = p.get("schedule.split_k") == "2" and p.get("schedule.promote") == "128"
        survivors.append(
            {
                "variant": sv["variant"],
                "target": hit,
                "standing": sv["standing"],
                "how": _how(doc, doc["survivors"][0]["variant"], sv["variant"]),
            }
        )
    firsts = [s for s in survivors if s["standing"] == "first of its class"]
    proved = all(
        s["target"]
        or s["standing"].startswith(
            ("proved equal", "equal by construction", "equal by a stated argument")
        )
        for s in survivors
    )
    row.update(
        survivors=survivors,
        classes=doc["classes"],
        stopped=doc["stopped"],
        oracle_vectors=doc["oracle_vectors"],
        goal=(not cut and bool(firsts) and all(s["target"] for s in firsts) and proved),
    )
    return row


def _how(doc: dict, first: str, variant: str) -> str:
    """How a survivor's equality to its class's first was established, from the proofs of
    the --json document: by construction, by solvers (confirmed by a second or not), or by
    a stated argument (its name), and in how many seconds."""
    if variant == first:
        return ""
    for pr in doc["proofs"]:
        if {pr["a"], pr["b"]} != {first, variant}:
            continue
        if pr["by_construction"]:
            return "by construction"
        if pr["verdict"] not in ("unsat", "unsat-by-argument"):
            return f"{pr['verdict']} after {pr['seconds']:.1f} s"
        who = pr["solvers"]
        if who == ["argument"]:
            name = pr["note"].partition("(")[2].partition(",")[0] or "a stated argument"
            return f"{name}, its extreme rows checked on the model, {pr['seconds']:.1f} s"
        unconfirmed = "not confirmed by a second solver" in pr["note"]
        return f"{' and '.join(who)}, {pr['seconds']:.1f} s" + (
            "; not confirmed by a second solver" if unconfirmed else ""
        )
    return "by construction (the same model written two ways)"


def write_gemm_report(out: Path, rows: list[dict]) -> None:
    """results/identify_gemm.md from the gemm case rows."""
    text = [
        "# identify --gemm: a hidden split-K schedule",
        "",
        "Generated by `python bench/bench_identify.py --part gemm` on a 2-core machine "
        "shared with other work (wall-clock seconds of the whole command, the load average "
        f"beside them): `tcsmt identify --gemm --arch hopper --k K --instr {GEMM_INSTR} "
        f"--oracle 'variant:{GEMM_HIDDEN}'`. Goal (issue 45): at K = 512 under "
        f"{GEMM_GOAL_SECONDS:g} s, every survivor split_k = 2 and promote = 128 or proved "
        "equal to one. Beside each member: how its equality to the first was established "
        "(by construction; by solvers, and whether a second one confirmed; or by a stated "
        "argument whose extreme rows gave the same d on the model, no solver asked: "
        "docs/gemm-solvers.md).",
        "",
        "| K | seconds | load (start / end) | oracle vectors | classes | survivors "
        "(split_k=2, promote=128 / all) | stopped | goal met? |",
        "| ---: | ---: | --- | ---: | ---: | --- | --- | --- |",
    ]
    for r in rows:
        if "error" in r:
            text.append(
                f"| {r['k']} | {r['seconds']:.0f} | {r['load_start']} / "
                f"{r['load_end']} | | | | error: {r['error'][0]} | no |"
            )
            continue
        hit = sum(s["target"] for s in r["survivors"])
        stop = "cut at the wall-clock limit" if r["cut"] else r["stopped"]
        goal = "yes" if r["goal"] and (r["k"] != 512 or r["seconds"] < GEMM_GOAL_SECONDS) else "no"
        text.append(
            f"| {r['k']} | {r['seconds']:.0f} | {r['load_start']} / {r['load_end']} | "
            f"{r['oracle_vectors']} | {r['classes']} | {hit} / {len(r['survivors'])} | "
            f"{stop} | {goal} |"
        )
    text.append("")
    for r in rows:
        if r.get("survivors"):
            text += [f"Survivors at K = {r['k']}:", ""]
            text += [
                f"- `{s['variant']}`: {s['standing']}" + (f" ({s['how']})" if s.get("how") else "")
                for s in r["survivors"]
            ]
            text.append("")
    (out / "identify_gemm.md").write_text("\n".join(text))


def random_cases(n: int, seed: int) -> list[tuple[str, str | None, str]]:
    """`n` hidden variants drawn from the default spaces of RANDOM_ON (fixed seed): every
    other one from the preset's own family (the fused unit's parameters), the rest from
    any family."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        arch, instr = RANDOM_ON[i % len(RANDOM_ON)]
        space = resolve_space(arch, instr, None)
        h = space.sample(rng, space.families[0].name if i % 2 == 0 else None)
        out.append((arch, space.instr, h.expr(space.arch)))
    return out


def table(rows: list[dict]) -> list[str]:
    lines = [
        "| case | instruction | hidden variant | oracle vectors | seconds | recovered? | survivors |",
        "| --- | --- | --- | ---: | ---: | --- | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['instr']} | `{r['hidden']}` | {r['oracle_vectors']} | "
            f"{r['seconds']:.0f} | {'yes' if r['recovered'] else 'NO'} | {len(r['survivors'])} |"
        )
    return lines


def summary(rows: list[dict]) -> str:
    if not rows:
        return "none"
    vec = [r["oracle_vectors"] for r in rows]
    sec = [r["seconds"] for r in rows]
    ok = sum(r["recovered"] for r in rows)
    return (
        f"{ok} of {len(rows)} recovered; oracle vectors median {statistics.median(vec):g}, "
        f"max {max(vec)}; seconds median {statistics.median(sec):.0f}, max {max(sec):.0f}"
    )


def write_report(out: Path, rows: list[dict], seed: int, timeout: float, budget: int) -> None:
    """results/identify.md from the rows of both parts."""
    fixed = [r for r in rows if not r["case"].startswith("random")]
    rand = [r for r in rows if r["case"].startswith("random")]
    text = [
        "# identify: recovering hidden models",
        "",
        "Generated by `make bench` (bench/bench_identify.py): `tcsmt identify --oracle "
        "variant:HIDDEN` on each preset's default instruction and a few other forms, then on "
        f"{len(rand)} hidden variants drawn from the default space (seed {seed}; every other "
        "one from the fused family). "
        f"Solver questions {timeout:g} s each, budget {budget} oracle vectors, on a 2-core "
        "machine shared with other work (seconds are wall-clock). "
        "*Recovered*: one class is left and it holds the hidden model (or a model that "
        "gives its bits on 65536 fresh rows). *Survivors*: the members of that class, "
        "which the instruction cannot tell apart or the solvers did not separate in time.",
        "",
        f"Presets and forms: {summary(fixed)}.",
        "",
        f"Random hidden variants: {summary(rand)}.",
        "",
        f"All: {summary(rows)}.",
        "",
        *table(rows),
        "",
    ]
    missed = [r for r in rows if not r["recovered"]]
    if missed:
        text += ["Not recovered:", ""]
        for r in missed:
            first = r["survivors"][0] if r["survivors"] else "nothing"
            text.append(
                f"- `{r['hidden']}` ({r['instr']}): stopped ({r['stopped']}) with "
                f"{r['classes']} class(es) led by `{first}`, which reproduces every vector "
                "asked but differs from the hidden model on fresh rows: no step asked a row "
                "that separates them."
            )
        text.append("")
    (out / "identify.md").write_text("\n".join(text))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=20, help="Random hidden variants (default 20).")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--timeout", type=float, default=5.0, help="Seconds per solver question.")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--out", default="results")
    ap.add_argument(
        "--part",
        choices=["all", "presets", "random", "report", "gemm"],
        default="all",
        help="Run the presets, the random draws, both, or only rewrite identify.md from "
        "the parts' JSON (identify-presets.json, identify-random.json).",
    )
    ap.add_argument("--gemm-k", type=int, nargs="+", default=[512], help="K of the gemm part")
    ap.add_argument("--gemm-wall", type=float, default=1200.0, help="Seconds before SIGINT")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.part == "gemm":
        grows = []
        for k in args.gemm_k:
            grows.append(gemm_case(k, args.gemm_wall))
            print(json.dumps(grows[-1]), flush=True)
        write_gemm_report(out, grows)
        return 0 if all(r.get("goal") for r in grows) else 1
    parts = {"all": ["presets", "random"], "report": []}.get(args.part, [args.part])
    for part in parts:
        if part == "presets":
            cases = [(p, None, p, "preset") for p in PRESETS]
            cases += [(a, i, a, "form") for a, i in EXTRA]
        else:
            cases = [(a, i, h, "random") for a, i, h in random_cases(args.random, args.seed)]
        rows = []
        for arch, instr, hidden, kind in cases:
            r = run_case(arch, instr, hidden, args.timeout, args.budget)
            r["case"] = f"{kind}: {arch}"
            rows.append(r)
            print(
                f"{r['case']:18s} {r['instr']:32s} {hidden:40s} {r['oracle_vectors']:4d} "
                f"vectors {r['seconds']:6.1f} s recovered={r['recovered']}",
                flush=True,
            )
            (out / f"identify-{part}.json").write_text(json.dumps(rows, indent=2) + "\n")
    rows = []
    for part in ("presets", "random"):
        path = out / f"identify-{part}.json"
        if path.exists():
            rows += json.loads(path.read_text())
    write_report(out, rows, args.seed, args.timeout, args.budget)
    print(f"all: {summary(rows)}")
    return 0 if all(r["recovered"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
