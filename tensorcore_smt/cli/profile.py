"""`tcsmt profile`: library profiles (docs/profiles.md): show one, check it against GPU
recordings, build one from recordings and their fits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import ExitCode
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


def render(p: Profile) -> str:
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
    help="GPU recordings (DIR/gemm/<call>.npz or DIR/<call>.npz); default results/hardware/<gpu>.",
)
@click.option("--class", "classes", multiple=True, help="Only this call class (repeat).")
@click.option(
    "--most",
    type=click.IntRange(1, 1 << 20),
    default=None,
    metavar="N",
    help="At most N rows and N columns of each recorded D (default: every kept element).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@click.option("--verbose", is_flag=True, help="A line per recorded shape as it is replayed.")
def check_cmd(profile, folder, classes, most, as_json, verbose) -> None:
    """Replay GPU recordings through PROFILE (the recipe it decides for each recorded
    call) and count the calls and elements reproduced bit for bit, per call class.

    Exit 0: every recorded call reproduced; 1: some not."""
    from ..hardware.profile_check import check_profile

    p = load_profile(profile)
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
        click.echo("class               calls  reproduced  elements reproduced   by source")
        for r in res:
            srcs = ", ".join(f"{s.value} {v[1]}/{v[0]}" for s, v in r.by_source.items())
            click.echo(
                f"{r.name:18s} {r.calls:6d} {r.calls_exact:11d}  "
                f"{r.reproduced:>9d}/{r.elements:<9d}  {srcs}"
            )
        for r in res:
            for m in r.misses:
                click.echo(
                    f"not reproduced  {r.name} {m.tag} ({m.source.value} {_sched(m.recipe)}): "
                    f"{m.reproduced}/{m.elements}"
                )
    sys.exit(int(ExitCode.OK if ok else ExitCode.REFUTED))


@profile_group.command("build")
@click.option(
    "--recordings",
    "folder",
    required=True,
    metavar="DIR",
    help="A GPU's results folder (DIR/gemm: <call>.npz, recordings.json, FIT.json).",
)
@click.option("--out", "out_path", required=True, metavar="FILE.json", help="The profile.")
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
def build_cmd(folder, out_path, every, offset, most, verbose) -> None:
    """Build a profile from a GPU's GEMM recordings and their fits (tcsmt hardware
    fit-gemm), holding out every N-th shape of each call and replaying the rule's
    recipe on them."""
    from ..gemm.profiles import parse_profile
    from ..hardware.profile_build import build_profile, write_profile

    out = check_out(out_path, "--out")
    progress = (lambda s: click.echo(s, err=True)) if verbose else None
    doc = build_profile(Path(folder), every, offset, most=most, progress=progress)
    parse_profile(doc, str(out))  # what is written must load
    write_profile(doc, out)
    held = [h for c in doc["classes"] for h in c["held_out"]]
    ok = sum(h["reproduced"] == h["elements"] for h in held)
    click.echo(
        f"wrote {out}: {len(doc['classes'])} call classes; held out {len(held)} shapes, "
        f"{ok} reproduced by the rule's recipe"
    )
