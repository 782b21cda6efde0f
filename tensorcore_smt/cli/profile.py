"""`tcsmt profile`: library profiles (docs/profiles.md): show one, check it against GPU
recordings, build one from recordings and their fits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import ExitCode, UserError
from ..gemm.hypothesis import split_gemm_text
from ..gemm.profiles import CallClass, Profile, load_profile
from .base import Group, check_out, main


@main.group("profile", cls=Group)
def profile_group() -> None:
    """Library profiles: which GEMM recipe a GPU's BLAS library runs for each torch
    call class and shape (profiles/*.json; docs/profiles.md)."""


def _sched(recipe: str) -> str:
    return split_gemm_text(recipe)[1] or "serial"


def _counts(rep: int, el: int) -> str:
    return "all" if rep == el else f"{rep}/{el}"


def _boundaries(cls: CallClass) -> list[str]:
    """Where the recipe changes between adjacent recorded K at one (M, N)."""
    by: dict[tuple[int, int], dict[int, str]] = {}
    for s in cls.shapes:
        by.setdefault((s.m, s.n), {})[s.k] = s.recipe
    ks = sorted({s.k for s in cls.shapes})
    out = []
    for lo, hi in zip(ks, ks[1:]):
        at = [mn for mn, r in by.items() if lo in r and hi in r and r[lo] != r[hi]]
        if at:
            out.append(f"K {lo} -> {hi} ({len(at)} of the recorded M x N)")
    return out


def _when(when: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in when.items()) or "any shape"


def render_library(p: Profile) -> list[str]:
    """The tables and classes of a library profile (format 2)."""
    lines = [
        f"profile      {p.name}",
        f"device       {p.device}",
        "library      " + ", ".join(f"{k} {v}" for k, v in p.library.items()),
        f"default      {p.default} (TF32 operands rounded {p.tf32_round or 'as the recipe says'})",
    ]
    lines += [f"note         {n}" for n in p.notes]
    for t in p.tables:
        what = f"epilogue over {t.base}" if t.base else (t.instr or "library default instr")
        lines += ["", f"table {t.name}: {', '.join(t.classes)} ({what})", f"  source  {t.source}"]
        for i, r in enumerate(t.rules):
            gpu = f" [{', '.join(r.gpu)}]" if r.gpu else ""
            lines.append(f"  rule {i}{gpu}: {_when(r.when)} -> {r.recipe}")
    for c in p.classes:
        ok = sum(s.exact for s in c.shapes)
        lines += [
            "",
            f"class {c.name}: {c.key.text()}",
            f"  recorded     {len(c.shapes)} shapes, {ok} reproduced by their recipe "
            f"({len(c.shapes) - ok} recorded, not reproduced)",
            "  M x N x K              recipe (schedule)                      origin  reproduced",
        ]
        for s in sorted(c.shapes, key=lambda s: (s.k, s.m, s.n)):
            dims = "x".join(map(str, s.mnk))
            got = _counts(s.reproduced, s.elements)
            lines.append(f"  {dims:22s} {_sched(s.recipe):38s} {s.origin}  {got}")
    return lines


def render(p: Profile) -> str:
    if p.is_library:
        return "\n".join(render_library(p))
    lines = [
        f"profile      {p.name}",
        f"device       {p.device}",
        "library      " + ", ".join(f"{k} {v}" for k, v in p.library.items()),
        f"default      {p.default} (as tc.emulate({p.arch!r}) computes it)",
        f"rule         {p.rule.text}",
    ]
    lines += [f"note         {n}" for n in p.notes]
    for c in p.classes:
        held_ok = sum(h.exact for h in c.held_out)
        lines += [
            "",
            f"class {c.name}: {c.key.text()}",
            f"  instruction  {c.instr or 'the library default'}",
            f"  recorded     {len(c.shapes)} shapes, "
            f"{sum(s.exact for s in c.shapes)} reproduced by their recipe",
            f"  held out     {len(c.held_out)} shapes, {held_ok} reproduced by the rule's recipe",
        ]
        for b in _boundaries(c):
            lines.append(f"  recipe changes  {b}")
        lines.append("  M x N x K              recipe (schedule)                      reproduced")
        rows = [(s.mnk, s.recipe, _counts(s.reproduced, s.elements), "") for s in c.shapes]
        rows += [
            ((h.m, h.n, h.k), h.recipe, _counts(h.reproduced, h.elements), " held out")
            for h in c.held_out
        ]
        for mnk, recipe, got, tag in sorted(rows, key=lambda r: (r[0][2], r[0][0], r[0][1])):
            dims = "x".join(map(str, mnk))
            lines.append(f"  {dims:22s} {_sched(recipe):38s} {got}{tag}")
    return "\n".join(lines)


def _echo_checks(res: list, width: int) -> None:
    """One line per checked class: calls, calls and elements reproduced, by source."""
    click.echo(f"{'class':{width}s}  calls  reproduced  elements reproduced   by source")
    for r in res:
        srcs = ", ".join(f"{s.value} {v[1]}/{v[0]}" for s, v in r.by_source.items())
        click.echo(
            f"{r.name:{width}s} {r.calls:6d} {r.calls_exact:11d}  "
            f"{r.reproduced:>9d}/{r.elements:<9d}  {srcs}"
        )


@profile_group.command("show")
@click.argument("profile")
@click.option("--json", "as_json", is_flag=True, help="The profile's JSON document.")
def show_cmd(profile: str, as_json: bool) -> None:
    """Show PROFILE (a name such as h100 or h100-cublas-13.0, or a .json file): its call
    classes, each recorded shape's recipe, the held-out shapes and the rule."""
    p = load_profile(profile)
    if as_json:
        click.echo(Path(p.path).read_text().rstrip() if p.path else "{}")
        return
    click.echo(render(p))


@profile_group.command("check")
@click.argument("profile")
@click.option(
    "--recordings",
    "folder",
    default=None,
    metavar="DIR",
    help="GPU recordings: a library recording (DIR/manifest.json, e.g. results/hardware/"
    "h200/library/seed2) for a library profile, else DIR/gemm/<call>.npz or DIR/<call>.npz; "
    "default: the held-out library calls (library profile) or results/hardware/<gpu>.",
)
@click.option(
    "--heldout",
    is_flag=True,
    help="Library profile: the calls held out from building it (seeds 2, 3, 4 and the holdout "
    "parts of results/hardware/<gpu>/library; the default).",
)
@click.option(
    "--part",
    "parts",
    multiple=True,
    metavar="NAME",
    help="Library profile: only calls of this recording part (grid, llm, unaligned, ops, "
    "batch, holdout, random; repeat).",
)
@click.option(
    "--class",
    "classes",
    multiple=True,
    help="Only this call class (repeat; a library profile: one glob, e.g. 'matmul.*').",
)
@click.option(
    "--misses",
    type=click.IntRange(0, 1 << 20),
    default=20,
    show_default=True,
    metavar="N",
    help="Library profile: list at most N calls not reproduced (--json: all).",
)
@click.option(
    "--most",
    type=click.IntRange(1, 1 << 20),
    default=None,
    metavar="N",
    help="At most N rows and N columns of each recorded D (default: every kept element).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@click.option("--verbose", is_flag=True, help="A line per recorded shape as it is replayed.")
def check_cmd(profile, folder, heldout, parts, classes, misses, most, as_json, verbose) -> None:
    """Replay GPU recordings through PROFILE (the recipe it decides for each recorded
    call) and count the calls and elements reproduced bit for bit, per call class and
    per decision source (recorded, rule, default).

    Exit 0: every recorded call reproduced; 1: some not."""
    from ..hardware.profile_check import check_profile

    p = load_profile(profile)
    if p.is_library:
        _check_library(p, folder, heldout, parts, classes, misses, as_json, verbose)
        return
    if heldout or parts:
        raise UserError(f"--heldout and --part apply to library profiles; {p.name} is not one")
    where = Path(folder) if folder else Path("results/hardware") / p.gpu
    progress = (lambda s: click.echo(s, err=True)) if verbose else None
    res = check_profile(p, where, tuple(classes), most, progress=progress)
    ok = all(r.all_reproduced for r in res)
    if as_json:
        doc = {
            "profile": p.name,
            "recordings": str(where),
            "reproduced": ok,
            "classes": [r.as_dict() for r in res],
        }
        click.echo(json.dumps(doc, indent=1))
    else:
        click.echo(f"profile {p.name} on {where}")
        _echo_checks(res, 18)
        for r in res:
            for m in r.misses:
                click.echo(
                    f"not reproduced  {r.name} {m.tag} ({m.source.value} {_sched(m.recipe)}): "
                    f"{m.reproduced}/{m.elements}"
                )
    sys.exit(int(ExitCode.OK if ok else ExitCode.REFUTED))


def _check_library(p: Profile, folder, heldout, parts, classes, misses, as_json, verbose):
    """`profile check` of a library profile (hardware/library_profile_check.py)."""
    from ..hardware.library_fit import heldout_calls
    from ..hardware.library_profile_check import check_library, tag, totals
    from ..hardware.library_read import load

    if folder is not None and heldout:
        raise UserError("give --recordings DIR or --heldout, not both")
    if len(classes) > 1:
        raise UserError("a library profile takes one --class glob (e.g. 'matmul.*')")
    if folder is not None:
        rec = load(folder)
        calls, where = rec.calls, str(folder)
    else:
        calls, where = heldout_calls(p.gpu), f"the held-out calls of {p.gpu}"

    def progress(r) -> None:
        click.echo(
            f"{r.call.cls.name:22s} {tag(r.call):40s} {r.decision.source.value:8s} "
            f"{r.reproduced}/{r.elements}",
            err=True,
        )

    res = check_library(
        p, calls, classes[0] if classes else "*", tuple(parts), progress if verbose else None
    )
    if not res:
        raise UserError(f"{where}: no recorded call of the classes and parts asked for")
    tot = totals(res)
    ok = tot["calls"] == tot["calls_reproduced"]
    if as_json:
        doc = {"profile": p.name, "recordings": where, "reproduced": ok, "total": tot}
        click.echo(json.dumps(doc | {"classes": [r.as_dict() for r in res]}, indent=1))
        sys.exit(int(ExitCode.OK if ok else ExitCode.REFUTED))
    click.echo(f"profile {p.name} on {where}")
    _echo_checks(res, 22)
    pct = 100.0 * tot["calls_reproduced"] / tot["calls"]
    srcs = ", ".join(
        f"{s} {v['calls_reproduced']}/{v['calls']}" for s, v in tot["by_source"].items()
    )
    click.echo(
        f"total: {tot['calls_reproduced']} of {tot['calls']} calls ({pct:.2f} %), "
        f"{tot['elements_reproduced']} of {tot['elements']} elements; by source: {srcs}"
    )
    shown = [(r.name, m) for r in res for m in r.misses][:misses]
    for name, m in shown:
        click.echo(
            f"not reproduced  {name} {m.tag} ({m.source.value} {m.recipe}): "
            f"{m.reproduced}/{m.elements}"
        )
    left = tot["calls"] - tot["calls_reproduced"] - len(shown)
    if left > 0:
        click.echo(f"... and {left} more calls not reproduced (--misses N, --json)")
    sys.exit(int(ExitCode.OK if ok else ExitCode.REFUTED))


@profile_group.command("build")
@click.option(
    "--recordings",
    "folder",
    default=None,
    metavar="DIR",
    help="A GPU's results folder (DIR/gemm: <call>.npz, recordings.json, FIT.json).",
)
@click.option(
    "--from-library",
    "gpu",
    default=None,
    metavar="GPU",
    help="Build a library profile from results/hardware/GPU/library (its fit calls) and "
    "the decision tables of schedules/library.",
)
@click.option(
    "--out",
    "out_path",
    default=None,
    metavar="FILE.json",
    help="The profile (default with --from-library: profiles/<gpu>-cublas-<version>.json).",
)
@click.option(
    "--class",
    "class_glob",
    default="*",
    show_default=True,
    metavar="GLOB",
    help="--from-library: only call classes matching GLOB.",
)
@click.option(
    "--part",
    "parts",
    multiple=True,
    metavar="NAME",
    help="--from-library: only fit calls of this recording part (repeat).",
)
@click.option(
    "--every",
    type=click.IntRange(2, 1 << 20),
    metavar="N",
    default=3,
    show_default=True,
    help="Hold out every N-th distinct shape of each call (N >= 2).",
)
@click.option(
    "--offset",
    type=click.IntRange(0, 1 << 20),
    metavar="I",
    default=2,
    show_default=True,
    help="Index of the first held-out shape (0 <= I < N).",
)
@click.option(
    "--most",
    type=click.IntRange(1, 1 << 20),
    default=None,
    metavar="N",
    help="Replay at most N rows and N columns of each recorded D (default: all).",
)
@click.option("--verbose", is_flag=True, help="A line per shape as it is replayed.")
def build_cmd(folder, gpu, out_path, class_glob, parts, every, offset, most, verbose) -> None:
    """Build a profile: --from-library GPU from its library recordings (fit calls only)
    and the decision tables of schedules/library; --recordings DIR from a GPU's GEMM
    recordings and their fits (tcsmt hardware fit-gemm), holding out every N-th shape of
    each call and replaying the rule's recipe on them."""
    from ..gemm.profiles import parse_profile
    from ..hardware.profile_build import build_profile, write_profile

    progress = (lambda s: click.echo(s, err=True)) if verbose else None
    if (folder is None) == (gpu is None):
        raise UserError("give one of --recordings DIR and --from-library GPU")
    if gpu is not None:
        _build_library(gpu, out_path, class_glob, parts, progress)
        return
    if out_path is None:
        raise UserError("--recordings needs --out FILE.json")
    out = check_out(out_path, "--out")
    doc = build_profile(Path(folder), every, offset, most=most, progress=progress)
    parse_profile(doc, str(out))  # what is written must load
    write_profile(doc, out)
    held = [h for c in doc["classes"] for h in c["held_out"]]
    ok = sum(h["reproduced"] == h["elements"] for h in held)
    click.echo(
        f"wrote {out}: {len(doc['classes'])} call classes; held out {len(held)} shapes, "
        f"{ok} reproduced by the rule's recipe"
    )


def _build_library(gpu: str, out_path, class_glob: str, parts, progress) -> None:
    """`profile build --from-library GPU` (hardware/library_profile_build.py)."""
    from ..gemm.profiles import profiles_dir
    from ..hardware.library_fit import fit_calls, recording_dir
    from ..hardware.library_profile_build import build_library_profile, write_profile

    if not recording_dir(gpu, 0).parent.is_dir():
        raise UserError(f"--from-library {gpu}: no {recording_dir(gpu, 0).parent}")
    out = check_out(out_path, "--out") if out_path else None
    doc = build_library_profile(
        gpu, calls=fit_calls(gpu), classes=class_glob, progress=progress, parts=tuple(parts)
    )
    out = out or profiles_dir() / f"{doc['name']}.json"
    write_profile(doc, out)
    shapes = [s for c in doc["classes"] for s in c["shapes"]]
    ok = sum(s["reproduced"] == s["elements"] for s in shapes)
    click.echo(
        f"wrote {out}: {len(doc['classes'])} call classes, {len(shapes)} recorded shapes, "
        f"{ok} reproduced by their recipe; tables: {', '.join(t['name'] for t in doc['tables']) or 'none'}"
    )
