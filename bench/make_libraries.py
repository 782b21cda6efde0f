"""results/libraries.md (`make libraries`): the accumulation orders `tcsmt reveal` learns
from the libraries on this machine (numpy's OpenBLAS, torch's CPU kernels) and from the
H100 recordings (results/hardware/h100/gemm), with the GEMM hypothesis of every class of
output positions, checked bit for bit on 10^6 random outputs, the oracle calls and the
seconds, against the goals (K = 256 in at most 16 calls, K = 1024 in under 10 s); and
the calls users make (HELDOUT_RUNS) measured on 10^5 held-out outputs each
(order/heldout.py), with the load of the machine they ran under."""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np

import tensorcore_smt as tc
from tensorcore_smt.errors import UserError
from tensorcore_smt.order import tree as trees
from tensorcore_smt.order.tree import render

RUNS = [
    # oracle, dtype, K values
    ("numpy:dot", "fp32", (32, 256, 1024)),
    ("numpy:gemv", "fp32", (32, 256, 1024)),
    ("numpy:matmul", "fp32", (32, 256, 1024)),
    ("torch:cpu", "fp32", (32, 256, 1024)),
    ("torch:cpu", "bf16", (32, 256)),
    ("h100:fp16-f32out", "fp16", (32, 256, 1024)),
    ("h100:bf16-f32out", "bf16", (32, 256, 1024)),
    ("h100:tf32", "fp32", (32, 256, 1024)),
    ("h100:fp32", "fp32", (32, 256, 1024)),
]
CHECK_OUTPUTS = 10**6
HELDOUT_RUNS = [
    # oracle, dtype, K, shape (None: the oracle's default, K x K up to K = 4096);
    # the quick rows first
    *[("numpy:dot", "fp32", k, None) for k in (40, 64, 96, 100, 300, 1000)],
    *[("torch:cpu", "fp32", k, None) for k in (40, 64, 96, 100, 300)],
    ("torch:cpu", "bf16", 96, None),
    ("torch:cpu", "fp16", 100, None),
    ("numpy:gemv", "fp32", 100, None),
    ("numpy:gemv", "fp32", 100, (37, 1)),
    ("numpy:matmul", "fp32", 100, None),
    ("torch:cpu", "fp32", 300, (37, 53)),
    ("numpy:matmul", "fp32", 300, (37, 53)),
    ("torch:cpu", "fp32", 1000, (1, 256)),
    ("torch:cpu", "fp32", 1000, (256, 1)),
    ("numpy:matmul", "fp32", 1000, (1, 256)),
    ("numpy:matmul", "fp32", 1000, (256, 1)),
    ("torch:cpu", "bf16", 200, (1, 64)),
    ("numpy:gemv", "fp32", 1000, None),
    ("torch:cpu", "fp32", 16384, None),
    ("torch:cpu", "fp32", 4096, (256, 256)),
    ("numpy:dot", "fp32", 4096, None),
]
"""The calls users make (K of LLM layers and odd K, M = 1 and N = 1, unaligned shapes)
measured on held-out inputs (order/heldout.py)."""
HELDOUT_OUTPUTS = 10**5
HELDOUT_SECTION = "## Held-out outputs of this machine's numpy and torch"
CALL_GOAL = (256, 16)  # K, oracle calls at most
SECONDS_GOAL = (1024, 10.0)  # K, probing seconds under


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _blas() -> str:
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '?')}"
    except Exception:  # an older numpy: no dict form
        return "its BLAS"


def _random_call_schedules(r) -> list[str]:
    """For a recorded oracle whose hypothesis did not reproduce its random call (another
    shape than the probe's): the schedules of the same instruction that do, simplest
    first."""
    from tensorcore_smt.gemm.emulate import matmul
    from tensorcore_smt.order.hypothesis import schedules
    from tensorcore_smt.order.oracles import make_oracle

    o = make_oracle(r.oracle)
    a, b, d = o.random(r.k, 0)
    arch = r.hypothesis.split("/", 1)[0]
    hits = []
    for s in schedules(r.k, tc.resolve(arch, r.instr).K):
        try:
            h = np.asarray(matmul(f"{arch}/{s.text()}", a, b, instr=r.instr, engine="numpy"))
        except UserError:
            continue
        if (h.astype(np.float32).view(np.uint32) == d.view(np.uint32)).all():
            hits.append(f"{arch}/{s.text()}")
    return hits


def _row(oracle: str, dtype: str, k: int, outputs: int) -> tuple[str, list[str], list[str]]:
    """One measured row: (table line, notes, goal lines)."""
    notes: list[str] = []
    goals: list[str] = []
    try:
        with trees.deep(k):
            r = tc.reveal(oracle, k, dtype=dtype, check_outputs=outputs)
            text = render(r.tree)
            class_trees = [render(c.tree) for c in r.classes]
    except (UserError, ValueError) as e:
        return f"| {oracle} | {dtype} | {k} | - | {str(e)[:80]} | - | - | - | - |", [], []
    rep = r.reproduced
    rep_text = "-" if rep is None else f"{'yes' if rep else 'no'} ({r.checked_outputs:,})"
    hyps = sorted({c.hypothesis or "-" for c in r.classes})
    hyp = r.hypothesis or "-"
    if len(hyps) > 1:
        hyp += f" (+{len(hyps) - 1} more)"
    line = (
        f"| {oracle} | {dtype} | {k} | {len(r.classes)} | {_short(text)} | "
        f"{_short(hyp, 90)} | {rep_text} | {r.oracle_calls} | {r.seconds:.2f} |"
    )
    if len(r.classes) > 1:
        parts = [
            f"class {i} ({c.outputs} outputs, {len(c.blocks)} blocks): "
            f"{_short(t, 80)} = " + (f"`{c.hypothesis}`" if c.hypothesis else "no hypothesis")
            for i, (c, t) in enumerate(zip(r.classes, class_trees))
        ]
        notes.append(f"- {oracle} {dtype} K = {k}: " + "; ".join(parts))
    elif r.hypothesis and len(r.hypothesis) > 90:
        notes.append(f"- {oracle} {dtype} K = {k}: `{r.hypothesis}`")
    if r.note:
        notes.append(f"- {oracle} {dtype} K = {k}: {r.note}")
    if oracle.startswith("h100") and rep is False:
        hits = _random_call_schedules(r)
        shape = f"{r.check_shape[0]} x {r.check_shape[1]} x {k}"
        notes.append(
            f"- {oracle} {dtype} K = {k}: the recorded {shape} call is reproduced "
            + (
                f"by {len(hits)} schedule(s) of the same instruction, the simplest "
                f"`{hits[0]}`: its tree is not the probe's, a kernel chosen for the "
                "smaller shape"
                if hits
                else "by no schedule of the same instruction"
            )
        )
    if oracle == "numpy:matmul" and k == CALL_GOAL[0]:
        ok = r.oracle_calls <= CALL_GOAL[1]
        goals.append(
            f"- numpy:matmul K = {k}: {r.oracle_calls} oracle calls (goal: at most "
            f"{CALL_GOAL[1]}): {'met' if ok else 'missed'}"
        )
    if not oracle.startswith("h100") and k == SECONDS_GOAL[0]:
        ok = r.seconds < SECONDS_GOAL[1]
        goals.append(
            f"- {oracle} {dtype} K = {k}: {r.seconds:.2f} s, {r.oracle_calls} calls "
            f"(goal: under {SECONDS_GOAL[1]:.0f} s): {'met' if ok else 'missed'}"
        )
    return line, notes, goals


def _keyed(lines: list[str], oracle: str, dtype: str, k: int) -> list[str]:
    """The lines of a previous file that belong to row (oracle, dtype, K)."""
    keys = (f"| {oracle} | {dtype} | {k} |", f"- {oracle} {dtype} K = {k}:")
    goal = f"- {oracle} K = {k}:" if oracle == "numpy:matmul" else None
    return [ln for ln in lines if ln.startswith(keys) or (goal and ln.startswith(goal))]


def _without_heldout(lines: list[str]) -> list[str]:
    """`lines` without the held-out section (from its heading to the next heading)."""
    out, inside = [], False
    for ln in lines:
        if ln.startswith("## "):
            inside = ln == HELDOUT_SECTION
        if not inside:
            out.append(ln)
    while out and not out[-1]:
        out.pop()
    return out


def _load_json(path: Path):
    import json

    with trees.deep(4096):  # a K-deep chain is a K-deep nested list
        return json.loads(path.read_text())


def _recorded_sections() -> list[str]:
    """The units measured on the H100 machine (results/hardware/h100): torch:cuda's orders
    revealed on the GPU, and identify against the host CPU's VDPBF16PS with the vectors
    that decided it."""
    out: list[str] = []
    tc_dir = HARDWARE / "torch_cuda"
    if tc_dir.exists():
        out += [
            "",
            "## torch:cuda on the H100",
            "",
            f"`tcsmt reveal --oracle torch:cuda` run on the GPU ({(tc_dir / 'versions.txt').read_text().strip()}; "
            "results/hardware/h100/torch_cuda): reproduced on fresh random calls.",
            "",
            "| dtype | K | tree of output (0, 0) | hypothesis | reproduced | calls | s |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for f in sorted(
            tc_dir.glob("*_k*.json"),
            key=lambda f: (f.stem.split("_k")[0], int(f.stem.split("_k")[1])),
        ):
            r = _load_json(f)
            rep = f"{'yes' if r['reproduced'] else 'no'} ({r['checked_outputs']})"
            out.append(
                f"| {r['dtype']} | {r['k']} | {_short(r['tree_text'])} | {_short(r['hypothesis'], 90)} "
                f"| {rep} | {r['oracle_calls']} | {r['seconds']:.2f} |"
            )
    ident = HARDWARE / "cpu" / "identify.json"
    if ident.exists():
        r = _load_json(ident)
        cpu = (HARDWARE / "cpu" / "cpu.txt").read_text().splitlines()[0].split(":", 1)[-1].strip()
        st = r["standing"]
        vectors = [v for s in r["steps"] for v in s["vectors"]]
        out += [
            "",
            "## The CPU's bf16 dot-product instruction (VDPBF16PS)",
            "",
            f"`tcsmt identify --arch x86-avx512bf16 --oracle cpu:avx512bf16` on the H100 machine's "
            f"{cpu} (AVX512_BF16): {st['classes']} class, "
            f"{', '.join(s['variant'] for s in r['survivors'])}, established: "
            f"{st['established']}, after {r['oracle_vectors']} vectors in {r['oracle_calls']} "
            "calls (results/hardware/h100/cpu). The vectors that decided (a, b, c as bits; "
            "the unit's d; the refuted hypothesis's d):",
            "",
            "| refuted | a | b | c | unit's d | its d |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for s in r["steps"]:
            for kill in s["killed"]:
                v = vectors[kill["vector"]]
                out.append(
                    f"| {kill['hypothesis']} | {' '.join(v['a'])} | {' '.join(v['b'])} | {v['c']} "
                    f"| {v['d']} | {kill['predicted']} |"
                )
    return out


HARDWARE = Path(__file__).resolve().parents[1] / "results" / "hardware" / "h100"


def _heldout_row(oracle: str, dtype: str, k: int, shape, outputs: int) -> str:
    """One held-out row: reveal (its own check on 10^4 outputs of each class), then
    `outputs` fresh outputs compared with the library by order/heldout.py."""
    import time

    from tensorcore_smt.order.heldout import measure

    shape_text = f"{shape[0]} x {shape[1]}" if shape else "default"
    head = f"| {oracle} | {dtype} | {k} | {shape_text} |"
    t0 = time.monotonic()
    try:
        with trees.deep(k):
            r = tc.reveal(oracle, k, dtype=dtype, shape=shape)
    except (UserError, ValueError) as e:
        return f"{head} - | refused: {_short(str(e), 110)} | - | - | - | - |"
    took = time.monotonic() - t0
    h = measure(r, outputs, seed=1)
    hyps = [c.hypothesis for c in r.classes]
    named = sum(x is not None for x in hyps)
    hyp = _short(next((x for x in hyps if x), "none"), 70)
    if len(r.classes) > 1:
        hyp += f" ({named} of {len(r.classes)} classes named)"
    rep = {True: "yes", False: "no", None: "not claimed"}[r.reproduced]
    held = ("all" if h.reproduced else "NOT all") + f": {h.text()}"
    return (
        f"{head} {len(r.classes)} | {hyp} | {rep} ({r.checked_outputs:,}) | {held} | "
        f"{took:.1f} | {h.seconds:.1f} |"
    )


def _heldout_section(outputs: int, write=None) -> list[str]:
    """The held-out table, with the machine's load before and after; `write(section)`
    called after each row with the rows so far (a long run keeps what it measured)."""
    before = os.getloadavg()[0]
    rows: list[str] = []
    for oracle, dtype, k, shape in HELDOUT_RUNS:
        rows.append(_heldout_row(oracle, dtype, k, shape, outputs))
        print(rows[-1], flush=True)
        if write is not None:
            write(_heldout_text(outputs, rows, before, len(HELDOUT_RUNS)))
    return _heldout_text(outputs, rows, before, len(rows))


def _heldout_text(outputs: int, rows: list[str], before: float, total: int) -> list[str]:
    import torch

    after = os.getloadavg()[0]
    done = "" if len(rows) == total else f" ({len(rows)} of {total} rows measured so far)"
    return [
        "",
        HELDOUT_SECTION,
        "",
        f"`tcsmt reveal` on the calls users make, then {outputs:,} outputs of each "
        "revealed model compared bit for bit with the library on inputs reveal never saw "
        "(order/heldout.py: fresh wide-range, cancelling, subnormal and tiny-and-huge rows "
        "from a generator of their own), about as many of each class: by the GEMM "
        "hypothesis through tc.matmul and by the tree under its learnt arithmetic "
        f"(evaluate.py). {_cpu()}, {os.cpu_count()} cores shared (load average "
        f"{before:.1f} before, {after:.1f} after: the seconds are wall time under that "
        f"load), numpy {np.__version__} with {_blas()}, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads). reveal: `reproduced` from reveal's own "
        "check (10,000 discriminating outputs of each class); s: wall seconds of reveal "
        "(probing and its check) and of the held-out comparison. Rerun: "
        f"`python bench/make_libraries.py --write results --heldout`{done}.",
        "",
        "| oracle | dtype | K | M x N | classes | hypothesis | reveal | held-out outputs "
        "reproduced (hypothesis / tree) | reveal s | held-out s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", default=None, help="folder for libraries.md")
    ap.add_argument("--outputs", type=int, default=CHECK_OUTPUTS, help="random outputs a row")
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ORACLE:DTYPE:K",
        help="measure only this row (repeat) and keep the others of the existing file",
    )
    ap.add_argument(
        "--heldout",
        action="store_true",
        help="measure only the held-out section and keep the rest of the existing file",
    )
    args = ap.parse_args()
    import torch

    only = {tuple(x.rsplit(":", 2)) for x in args.only}
    if args.heldout:
        if not args.write:
            ap.error("--heldout rewrites a section of an existing file: give --write")
        out = Path(args.write) / "libraries.md"
        kept = _without_heldout(out.read_text().splitlines())

        def write(section: list[str]) -> None:
            out.write_text("\n".join(kept + section) + "\n")

        write(_heldout_section(HELDOUT_OUTPUTS, write))
        print(f"wrote {out}", file=sys.stderr)
        return
    if only and not args.write:
        ap.error("--only rewrites rows of an existing file: give --write")
    old = (Path(args.write) / "libraries.md").read_text().splitlines() if only else []
    lines = [
        "# Accumulation orders of real libraries and units",
        "",
        f"Measured by `bench/make_libraries.py` (`make libraries`) with `tc.reveal` on "
        f"{_cpu()} ({os.cpu_count()} cores): numpy {np.__version__} with {_blas()}, torch "
        f"{torch.__version__} on the CPU ({torch.get_num_threads()} threads), and the H100 "
        "recordings of results/hardware/h100/gemm (torch 2.11.0+cu130, cuBLAS 13.0). "
        "Classes: the output positions of one K x K call that sum alike (a dot is one "
        "output, a GEMV one column); tree: that of output (0, 0), leaves k indices, [..] one "
        "addition of its members (n-ary for a fused add), chain(i..j) a left-to-right "
        "chain; hypothesis: the GEMM hypothesis of that class (CPU libraries: schedules of "
        "x86-fma's fp32 FMA, VFMADD231PS); reproduced: every class's hypothesis run through "
        "tc.matmul on the random outputs of that class, bit for bit, and how many outputs "
        "(the H100 rows: the outputs recorded); calls: library calls of the probing; s: "
        "seconds of the probing and the rebuild (not of the check).",
        "",
        "| oracle | dtype | K | classes | tree of output (0, 0) | hypothesis | reproduced "
        "| calls | s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes: list[str] = []
    goals: list[str] = []
    for oracle, dtype, ks in RUNS:
        for k in ks:
            if only and (oracle, dtype, str(k)) not in only:
                kept = _keyed(old, oracle, dtype, k)  # measured by an earlier run
                lines += [ln for ln in kept if ln.startswith("|")]
                goals += [ln for ln in kept if ln.startswith("-") and "(goal:" in ln]
                notes += [ln for ln in kept if ln.startswith("-") and "(goal:" not in ln]
                continue
            line, n, g = _row(oracle, dtype, k, args.outputs)
            lines.append(line)
            notes += n
            goals += g
            print(line, flush=True)
    lines += ["", "Goals:", "", *goals]
    if notes:
        lines += ["", "Notes:", "", *notes]
    lines += _recorded_sections()
    lines += _heldout_section(HELDOUT_OUTPUTS)
    text = "\n".join(lines) + "\n"
    if args.write:
        out = Path(args.write) / "libraries.md"
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    else:
        print(text)


if __name__ == "__main__":
    main()
