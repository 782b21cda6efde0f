"""Every published model of a unit beside the preset and the others, proved equal or
separated: results/published.md (`make published`).

For every instruction that two or more models speak of (the published hypotheses of
archs/published.toml and the project's preset), every pair is asked the solvers'
question "do they ever differ on finite inputs?" through the same path `tcsmt diff`
takes (smt.resolve.make_query, smt.solve.answer): a witness is re-checked on the
concrete model by `answer` and re-run here on both models with `tc.simulate_one`; an
unsat is confirmed by a second solver when the budget allows; two models with the same
parameters are equal by construction; a separated pair is asked again on normal inputs
only (whether the difference needs subnormal inputs). A witness that separates a model from the preset
is written as a vector file with its probe program under results/published/, so that
one short GPU run settles it. Each model is also run on the H100 recordings of
results/hardware/ (the property probes' vectors with the GPU's outputs, and the held-out
rows of tests/data/h100_silicon.jsonl) and the count it reproduces is reported.

    python bench/make_published.py [--budget 60] [--only NAME ...] [--out results/published.md]
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tensorcore_smt as tc  # noqa: E402
from tensorcore_smt.api import from_bits  # noqa: E402
from tensorcore_smt.errors import UserError  # noqa: E402
from tensorcore_smt.formats import format_hex  # noqa: E402
from tensorcore_smt.inputs.constraints import Constraint  # noqa: E402
from tensorcore_smt.inputs.kinds import ConstraintKind  # noqa: E402
from tensorcore_smt.smt.query import Goal  # noqa: E402
from tensorcore_smt.smt.resolve import make_query  # noqa: E402
from tensorcore_smt.smt.solve import Limits, Outcome, Verdict, answer  # noqa: E402
from tensorcore_smt.solvers.result import Answer  # noqa: E402
from tensorcore_smt.spec import published  # noqa: E402
from tensorcore_smt.validation import vectors as vec  # noqa: E402

HW = ROOT / "results" / "hardware"
H100_PROBES = HW / "h100" / "probes"
H100_VECTORS = HW / "vectors"
H100_ROWS = ROOT / "tests" / "data" / "h100_silicon.jsonl"
DOMAIN = "finite inputs"


@dataclass
class Pair:
    """One question: do models x and y of one instruction ever differ?"""

    arch: str
    instr: str
    x: str
    y: str
    verdict: str = ""  # equal | separated | undecided | error
    domain: str = DOMAIN
    normal_only: str = ""  # a separated pair asked again on normal (and zero) inputs only
    how: str = ""
    seconds: float = 0.0
    outputs: tuple[str, str] | None = None
    inputs: dict = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


def instructions(only: set[str]) -> dict[tuple[str, str], list[str]]:
    """(preset, instruction) -> the models that speak of it: the preset first, then the
    published hypotheses in table order."""
    out: dict[tuple[str, str], list[str]] = {}
    for name, h in published.hypotheses().items():
        if only and name not in only:
            continue
        for instr in h.instructions:
            out.setdefault((h.base, instr), [h.base]).append(name)
    return out


def _same_params(x: str, y: str, instr: str) -> bool:
    return tc.parse_variant(x).params(instr) == tc.parse_variant(y).params(instr)


def _who(o: Outcome) -> str:
    runs = [r for r in [o.result, *o.confirmations] if r is not None]
    unsat = [r.solver for r in runs if r.answer == Answer.UNSAT]
    return ", ".join(dict.fromkeys(unsat))


def ask(pair: Pair, budget: float) -> Outcome | None:
    """Answer the pair's question and fill in its verdict."""
    t0 = time.monotonic()
    if _same_params(pair.x, pair.y, pair.instr):
        pair.verdict, pair.how = "equal", "by construction (the same parameters)"
        pair.domain = "all inputs"
        pair.seconds = time.monotonic() - t0
        return None
    try:
        q = make_query(
            pair.x, pair.y, pair.instr, Goal.DIFFER, (Constraint(ConstraintKind.FINITE),)
        )
        o = answer(q, Limits(timeout=budget, search=min(10.0, budget / 4)))
    except UserError as e:
        pair.verdict, pair.how = "error", str(e)
        return None
    pair.seconds = o.seconds
    if o.verdict == Verdict.WITNESS:
        pair.verdict = "separated"
        by = o.result.solver if o.result else "?"
        pair.how = f"witness ({by}), re-checked on the concrete model"
    elif o.verdict.unsat:
        who = _who(o)
        pair.verdict = "equal"
        if o.by_construction:
            pair.how = "by construction (both build the same term)"
        elif o.verdict == Verdict.UNSAT_BY_ARGUMENT:
            pair.how = f"argument; {o.note}"
        else:
            confirmed = (
                "confirmed" if len(who.split(", ")) > 1 else "not confirmed by a second solver"
            )
            pair.how = f"unsat ({who}; {confirmed})"
    elif o.verdict == Verdict.BAD_WITNESS:
        pair.verdict, pair.how = "error", "a solver witness did not reproduce (a bug)"
    else:
        pair.verdict, pair.how = "undecided", f"no solver answered within {budget:g} s"
    return o


def ask_normal_only(pair: Pair, budget: float) -> None:
    """Ask a separated pair again on normal inputs only: whether their difference needs
    subnormal inputs."""
    cons = (Constraint(ConstraintKind.FINITE), Constraint(ConstraintKind.NORMAL_ONLY))
    q = make_query(pair.x, pair.y, pair.instr, Goal.DIFFER, cons)
    o = answer(q, Limits(timeout=budget, search=min(10.0, budget / 4)))
    if o.verdict == Verdict.WITNESS:
        pair.normal_only = f"separated ({o.seconds:.1f} s)"
    elif o.verdict.unsat:
        pair.normal_only = f"equal: the difference needs subnormal inputs ({o.seconds:.1f} s)"
    else:
        pair.normal_only = f"undecided ({o.seconds:.1f} s)"


def rerun(pair: Pair, o: Outcome) -> dict:
    """The witness re-run on both models with tc.simulate_one; its vector fields."""
    fields = o.query.vector_fields(o.witness.inputs)
    outs = []
    for model in (pair.x, pair.y):
        d = tc.simulate_one(
            model, pair.instr, fields["a"], fields["b"], fields["c"],
            sa_bits=fields["sa"], sb_bits=fields["sb"],
        )  # fmt: skip
        outs.append(d)
    if outs[0] == outs[1] or tuple(outs) != tuple(o.witness.outputs):
        raise AssertionError(f"{pair.x} vs {pair.y} on {pair.instr}: the witness does not re-run")
    d_fmt = o.query.p.d_fmt
    pair.outputs = (format_hex(outs[0], d_fmt), format_hex(outs[1], d_fmt))
    return fields


def _rel(path: Path) -> str:
    """A path as the report names it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _slug(text: str) -> str:
    keep = "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in text)
    return keep.strip("_")


def write_witness(pair: Pair, o: Outcome, fields: dict, folder: Path) -> None:
    """The witness as a vector file with both models' outputs, and its probe program."""
    from tensorcore_smt.probe import cuda, hip

    folder.mkdir(parents=True, exist_ok=True)
    stem = _slug(f"{pair.instr}__{pair.x}__vs__{pair.y}")
    d = {pair.x: None, pair.y: None}
    for model in d:
        d[model] = tc.simulate_one(
            model, pair.instr, fields["a"], fields["b"], fields["c"],
            sa_bits=fields["sa"], sb_bits=fields["sb"],
        )  # fmt: skip
    vf = vec.VectorFile(
        arch=pair.arch,
        instruction=pair.instr,
        variants=[pair.x, pair.y],
        vectors=[
            vec.Vector(
                **fields,
                predicted=d,
                note=f"published: {pair.x} vs {pair.y} ({DOMAIN})",
            )
        ],
    )
    vpath = folder / f"{stem}.json"
    vec.save(vf, vpath)
    pair.files.append(_rel(vpath))
    inst = vf.instr()
    amd = inst.kind in ("mfma", "wmma")
    ppath = folder / f"{stem}.{'hip' if amd else 'cu'}"
    rel = _rel(vpath)
    try:
        if amd:
            src = hip.generate_hip(vf, source_name=ppath.name, vectors_name=rel)
        else:
            src = cuda.generate(vf, source_name=ppath.name, vectors_name=rel)
    except UserError as e:
        pair.files.append(f"(no probe program: {e})")
        return
    ppath.write_text(src)
    pair.files.append(_rel(ppath))


# --- hardware recordings -----------------------------------------------------------------


@dataclass
class Recorded:
    """Recorded inputs and the GPU's outputs for one instruction."""

    rows: list[tuple[list[int], list[int], int, int, list | None, list | None]]
    what: str


def recordings(instr: str) -> list[Recorded]:
    """The H100 recordings of `instr`: property-probe vectors with their outputs, and
    held-out random rows."""
    from tensorcore_smt.probe.check import parse_output

    out: list[Recorded] = []
    folder = H100_VECTORS / instr
    probe_rows = []
    for vpath in sorted(folder.glob("*.vectors.json")) if folder.is_dir() else []:
        prop = vpath.name.removesuffix(".vectors.json")
        opath = H100_PROBES / f"{instr}__{prop}.out.txt"
        if not opath.exists():
            continue
        vf = vec.load(vpath)
        seen = parse_output(opath.read_text(), len(vf.vectors), vf.formats()["d"])
        for v, d in zip(vf.vectors, seen):
            probe_rows.append((v.a, v.b, v.c, d, v.sa, v.sb))
    if probe_rows:
        out.append(Recorded(probe_rows, "H100 property-probe vectors"))
    rows = []
    for line in H100_ROWS.read_text().splitlines():
        r = json.loads(line)
        if r["instr"] == instr:
            rows.append(
                ([int(x, 16) for x in r["a"]], [int(x, 16) for x in r["b"]], int(r["c"], 16), int(r["d"], 16), None, None)
            )  # fmt: skip
    if rows:
        out.append(Recorded(rows, "H100 held-out random rows"))
    return out


def reproduces(model: str, instr: str, rec: Recorded) -> int:
    """How many of the recorded rows the model reproduces bit for bit."""
    n = 0
    for a, b, c, d, sa, sb in rec.rows:
        n += tc.simulate_one(model, instr, a, b, c, sa_bits=sa, sb_bits=sb) == d
    return n


# --- the published numeric witnesses ----------------------------------------------------

OZAKI = {"ampere": 29331462, "cdna3": 29331464}
"""TC-EFT's A100 witness: seven products 2047 * 2047, c = 0: the tensor core's output
and CDNA3's (the exact sum is 29331463)."""
OZAKI_INSTR = {"ampere": "m16n8k16.f32.f16.f16.f32", "cdna3": "v_mfma_f32_16x16x16_f16"}


def ozaki_rows() -> list[str]:
    """The TC-EFT witness run on the presets, beside the printed values."""
    lines = []
    for arch, printed in OZAKI.items():
        K = tc.resolve(arch, OZAKI_INSTR[arch]).K
        a = [2047.0] * 7 + [0.0] * (K - 7)
        d = tc.simulate(arch, OZAKI_INSTR[arch], [a], [a], [0.0])
        got = int(from_bits(d, tc.resolve(arch, OZAKI_INSTR[arch]).d_fmt)[0])
        ok = "yes" if got == printed else "**no**"
        lines.append(f"| {arch} | {OZAKI_INSTR[arch]} | {printed} | {got} | {ok} |")
    return lines


# --- the report --------------------------------------------------------------------------


def _stated(h: published.Hypothesis) -> str:
    s = ", ".join(f"{k} = {published.spell(v)}" for k, v in h.stated)
    if h.implied:
        s += "; implied: " + ", ".join(f"{k} = {published.spell(v)}" for k, v in h.implied)
    return s


def report(
    pairs: list[Pair],
    hw: dict[tuple[str, str], list[tuple[str, str, int, int]]],
    budget: float,
    total: float,
) -> str:
    srcs = published.sources()
    hyps = published.hypotheses()
    read_words = {
        published.Read.TEXT: "its text",
        published.Read.CODE: "its published code",
        published.Read.SUMMARY: "**not read here**: values as issue 44 summarises them",
    }
    L = [
        "# Published models of the units, proved equal or separated",
        "",
        "Written by `make published` (bench/make_published.py; the models: archs/published.toml,",
        "docs/published.md). Every pair of models of one instruction (the preset and each",
        "published hypothesis that speaks of it) is asked whether they ever differ on",
        f"{DOMAIN} (NaN and infinity inputs left out; outputs compared bit for bit), through",
        f"the path `tcsmt diff` takes, {budget:g} s a question (a concrete search first, then",
        "the solver portfolio; an unsat confirmed by a second solver when the budget allows).",
        "A witness is re-checked on the concrete model and re-run on both models, and a",
        "separated pair is asked again on normal (and zero) inputs only; a witness that",
        "separates a model from the preset is a vector file with its probe program under",
        "results/published/ (`nvcc` it, run it, `tcsmt probe --check FILE.json OUTPUT`).",
        f"Machine: {platform.machine()}, {platform.system()}, Python {platform.python_version()};",
        f"all questions together {total:.0f} s.",
        "",
        "## Sources",
        "",
        "| source | publication | where | values taken from |",
        "| --- | --- | --- | --- |",
    ]
    for s in srcs.values():
        L.append(f"| {s.cite} | {s.authors}, *{s.title}* | {s.where} | {read_words[s.read]} |")
    L += [
        "",
        "TC-EFT defines no hypothesis here (no parameter value of it is known); its printed",
        "witness is checked below.",
        "",
        "## Hypotheses",
        "",
        "| name | source | where | stated | variant |",
        "| --- | --- | --- | --- | --- |",
    ]
    for h in hyps.values():
        L.append(f"| `{h.name}` | {h.source.cite} | {h.where} | {_stated(h)} | `{h.variant}` |")
    L += ["", "## Pairs", ""]
    counts: dict[str, int] = {}
    by_instr: dict[tuple[str, str], list[Pair]] = {}
    for p in pairs:
        by_instr.setdefault((p.arch, p.instr), []).append(p)
        kind = p.verdict
        if p.verdict == "equal":
            how = p.how.split(";")[0].split(" (")[0]
            kind = "equal " + {"argument": "by argument", "unsat": "by a solver's unsat"}.get(
                how, how
            )
        counts[kind] = counts.get(kind, 0) + 1
    for verdict in ("separated", "undecided"):
        counts.setdefault(verdict, 0)
    L.append(
        f"{len(pairs)} pairs on {len(by_instr)} instructions: "
        + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        + ". An equality by argument that no solver confirmed within the budget says so in"
        + " its row."
    )
    for (arch, instr), ps in by_instr.items():
        L += ["", f"### {arch} `{instr}`", ""]
        L += [
            "| X | Y | domain | verdict | how | time | witness: d of X, d of Y | normal inputs only "
            "| files |"
        ]
        L += ["| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for p in ps:
            outs = f"{p.outputs[0]}, {p.outputs[1]}" if p.outputs else ""
            files = "<br>".join(p.files)
            L.append(
                f"| `{p.x}` | `{p.y}` | {p.domain} | **{p.verdict}** | {p.how} | {p.seconds:.1f} s "
                f"| {outs} | {p.normal_only} | {files} |"
            )
        if (arch, instr) not in hw:
            L += ["", "No hardware recording of this instruction here."]
        else:
            L += ["", "H100 recordings reproduced bit for bit:", ""]
            L += ["| model | recording | reproduced |", "| --- | --- | --- |"]
            for model, what, n, total_rows in hw[(arch, instr)]:
                L.append(f"| `{model}` | {what} | {n} of {total_rows} |")
    L += [
        "",
        "## The published numeric witnesses",
        "",
        "TC-EFT's A100 Ozaki sum: seven products 2047 * 2047 and c = 0, exactly 29331463 (25",
        "significant bits, one more than fp32 holds): truncated to 29331462 by the tensor",
        "core, rounded to nearest even (29331464) by CDNA3. tests/test_published.py checks",
        "the same on the presets.",
        "",
        "| preset | instruction | printed | computed | agree |",
        "| --- | --- | --- | --- | --- |",
        *ozaki_rows(),
        "",
    ]
    exact = 7 * Fraction(2047) ** 2
    assert exact == 29331463
    return "\n".join(L)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=60.0, help="seconds a question (60)")
    ap.add_argument("--only", nargs="*", default=[], help="only these published hypotheses")
    ap.add_argument("--out", default=str(ROOT / "results" / "published.md"))
    ap.add_argument("--files", default=str(ROOT / "results" / "published"))
    args = ap.parse_args()
    folder = Path(args.files)
    pairs: list[Pair] = []
    hw: dict[tuple[str, str], list[tuple[str, str, int, int]]] = {}
    t0 = time.monotonic()
    for (arch, instr), models in instructions(set(args.only)).items():
        for x, y in itertools.combinations(models, 2):
            pair = Pair(arch, instr, x, y)
            o = ask(pair, args.budget)
            if pair.verdict == "separated" and o is not None:
                fields = rerun(pair, o)
                ask_normal_only(pair, args.budget)
                if arch in (x, y):
                    write_witness(pair, o, fields, folder)
            pairs.append(pair)
            print(f"{arch} {instr}: {x} vs {y}: {pair.verdict} ({pair.how}; {pair.seconds:.1f} s)")
        if arch == "hopper":
            for rec in recordings(instr):
                for m in models:
                    hw.setdefault((arch, instr), []).append(
                        (m, rec.what, reproduces(m, instr, rec), len(rec.rows))
                    )
    text = report(pairs, hw, args.budget, time.monotonic() - t0)
    Path(args.out).write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
