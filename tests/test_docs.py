"""README.md and docs/*.md run as written: every checked example is run and its printed
output compared with what the page shows.

The convention (for whoever writes a page):

- A fenced block whose info string is ``console`` is checked. Each line starting with
  ``$ `` is a command; the lines after it, up to the next ``$ `` line or the end of the
  block, are its expected output (stdout and stderr together, as a terminal shows them).
  A command line ending in a backslash continues on the next line. Commands are
  ``tcsmt ...`` (run in process with click's CliRunner, 80 columns, no terminal) and
  ``echo $?``, which prints the exit status of the command before it. A command that is
  not followed by ``echo $?`` must exit 0.
- A fenced block whose info string is ``pycon`` is checked the same way for Python:
  ``>>> `` starts a statement (``... `` continues it), the lines after it are its output;
  statements of one page share one namespace, as in one interpreter session. An exception
  prints its traceback as the interpreter does (show it as ``Traceback (most recent call
  last):``, a ``...`` line, and the exception's last line).
- Every other block (``sh``, ``text``, ``python``, ``toml``, ``json``) is illustrative and
  not run: that is where commands go that need a GPU, nvcc, hipcc, torch or the mmasim
  extra, that take more than a few seconds, or that write into the checkout (``make ...``).
  The ``tcsmt ...`` lines of ``sh`` blocks are still parsed against the current commands
  and options (nothing runs), unless they use ``[optional]`` syntax or ``...``.
- A ``sh`` command whose exit status or duration a reader plans around states both at
  the end of its comment (or of the comment lines right below it): ``[exit 3, under 15
  minutes]``, ``[exit 0 or 3, a few minutes]``, ``[exit 0, seconds]`` (the phrases:
  ``DURATIONS`` and ``under N minutes``, measured on the project's loaded 2-core
  machine). README's bound, exact and identify examples must. ``make test`` checks the
  form; ``make test-slow`` runs each such command and checks its exit status and that
  its time is within a factor ``SLACK`` of the stated span.
- Elision: an expected line that is exactly ``...`` stands for any number of lines (none
  included); ``...`` inside a line stands for any text on that line. That is how figures
  that vary between runs (times, solver versions, throughput) and long listings are
  shortened. Trailing spaces and trailing blank lines are ignored.
- The commands of one page run in order in one temporary directory, so a file one command
  writes (``--out v.json``, ``tcsmt export``'s queries/) is there for the next; that
  directory links to the checkout's tests/, results/, properties/, spaces/ and schedules/
  folders, so a page may read the files there.

On a mismatch the test prints the command, what the page expects and what ran. After a
deliberate change of output, ``python tests/test_docs.py --update [PAGE ...]`` rewrites the
expected output of every command that no longer matches (then put back any ``...`` the
page needs); ``make docs`` does that for every page.

The curated SMT-LIB exports committed in queries/ are also checked against a fresh export.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
LINKED = ("tests", "results", "properties", "spaces", "schedules")
WIDTH = 80


@dataclass
class Example:
    """One command (or Python statement) of a page and the output the page shows for it."""

    kind: str  # "console" or "pycon"
    command: str  # the command line without "$ " (continuations joined), or Python source
    expected: list[str]  # expected output lines
    line: int  # 1-based line of the command in the page
    out_start: int  # 0-based index of the first expected line in the page
    out_end: int  # 0-based index one past the last expected line


@dataclass
class Page:
    path: Path
    lines: list[str]
    examples: list[Example] = field(default_factory=list)


FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)")


def parse(path: Path) -> Page:
    """The checked examples of a Markdown page, in order."""
    lines = path.read_text().splitlines()
    page = Page(path, lines)
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        if info in ("console", "pycon"):
            try:
                page.examples += _examples(info, lines, i + 1, j)
            except ValueError as e:
                raise ValueError(f"{path.name}: {e}") from None
        i = j + 1
    return page


def _examples(kind: str, lines: list[str], start: int, end: int) -> list[Example]:
    prompt, cont = ("$ ", None) if kind == "console" else (">>> ", "... ")
    out: list[Example] = []
    i = start
    while i < end:
        if not lines[i].startswith(prompt):
            raise ValueError(f"line {i + 1}: a {kind} block starts with {prompt.strip()!r}")
        first = i
        text = lines[i][len(prompt) :]
        i += 1
        if kind == "console":
            while text.endswith("\\") and i < end:
                text = text[:-1] + " " + lines[i].strip()
                i += 1
        else:
            src = [text]
            while i < end and lines[i].startswith(cont):
                src.append(lines[i][len(cont) :])
                i += 1
            text = "\n".join(src)
        o = i
        while i < end and not lines[i].startswith(prompt):
            i += 1
        out.append(Example(kind, text, lines[o:i], first + 1, o, i))
    return out


def matches(expected: list[str], actual: str) -> bool:
    """Whether `actual` is what `expected` shows, with the page's "..." elisions."""
    exp = _trim(expected)
    parts = []
    for line in exp:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            esc = r"[^\n]*".join(re.escape(p) for p in line.split("..."))
            parts.append(esc + r"\n")
    text = "".join(x + "\n" for x in _trim(actual.splitlines()))
    return re.fullmatch("".join(parts), text) is not None


def _trim(lines: list[str]) -> list[str]:
    out = [x.rstrip() for x in lines]
    while out and not out[-1]:
        out.pop()
    return out


@contextlib.contextmanager
def _workdir(tmp: Path):
    for name in LINKED:
        if (ROOT / name).exists() and not (tmp / name).exists():
            (tmp / name).symlink_to(ROOT / name)
    old = Path.cwd()
    os.chdir(tmp)
    try:
        yield
    finally:
        os.chdir(old)


def run_page(page: Page, tmp: Path) -> list[tuple[Example, str]]:
    """Run every example of the page; return each with what it printed."""
    from tensorcore_smt.cli import main

    runner = CliRunner(env={"TCSMT_SCHEDULER": None, "COLUMNS": str(WIDTH)})
    ns: dict = {"__name__": "__docs__"}
    results: list[tuple[Example, str]] = []
    last_status = 0
    with _workdir(tmp):
        for k, ex in enumerate(page.examples):
            if ex.kind == "pycon":
                results.append((ex, _run_python(ex.command, ns)))
                continue
            argv = shlex.split(ex.command)
            if argv == ["echo", "$?"]:
                results.append((ex, f"{last_status}\n"))
                continue
            if not argv or argv[0] != "tcsmt":
                raise AssertionError(
                    f"{page.path.name}:{ex.line}: only `tcsmt ...` and `echo $?` run in a "
                    f"console block (use a sh block for illustrative commands): {ex.command}"
                )
            r = runner.invoke(main, argv[1:], terminal_width=WIDTH, prog_name="tcsmt")
            if r.exception is not None and not isinstance(r.exception, SystemExit):
                raise AssertionError(
                    f"{page.path.name}:{ex.line}: `{ex.command}` raised "
                    f"{type(r.exception).__name__}: {r.exception}\n{r.output}"
                )
            last_status = r.exit_code
            nxt = page.examples[k + 1] if k + 1 < len(page.examples) else None
            checked = nxt is not None and nxt.kind == "console" and nxt.command == "echo $?"
            if r.exit_code != 0 and not checked:
                raise AssertionError(
                    f"{page.path.name}:{ex.line}: `{ex.command}` exited {r.exit_code} "
                    f"(show `$ echo $?` after a command that fails on purpose)\n{r.output}"
                )
            results.append((ex, r.output))
    return results


def _run_python(source: str, ns: dict) -> str:
    """Run one statement like the interactive interpreter (expression values echoed)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            compiled = compile(source + "\n", "<docs>", "single")
        except SyntaxError:
            compiled = compile(source + "\n", "<docs>", "exec")
        try:
            exec(compiled, ns)
        except Exception:  # shown as the interpreter shows it; the page's "..." skips frames
            traceback.print_exc(file=buf)
    return buf.getvalue()


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in found if parse(p).examples]


def _report(page: Page, results) -> list[str]:
    bad = []
    for ex, out in results:
        if not matches(ex.expected, out):
            bad.append(
                f"{page.path.relative_to(ROOT)}:{ex.line}: `{ex.command}`\n"
                f"--- the page shows:\n" + "\n".join(_trim(ex.expected)) + "\n"
                "--- it printed:\n" + "\n".join(_trim(out.splitlines()))
            )
    return bad


@pytest.mark.parametrize("path", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_print_what_the_page_shows(path: Path, tmp_path: Path):
    page = parse(path)
    bad = _report(page, run_page(page, tmp_path))
    assert not bad, "\n\n".join(bad) + "\n\n(python tests/test_docs.py --update rewrites them)"


# The curated exports in queries/ (the rest is `make queries`, not committed): each file
# must be what `tcsmt export` writes today for the property and architecture that made it.
CURATED = {
    ("carry-bits", "volta"): ["carry-bits-k-minus-1-volta", "carry-bits-k-plus-1-volta"],
    ("carry-bits", "ampere"): ["carry-bits-k-minus-1-ampere"],
    ("rounding-accumulator", "volta"): ["rounding-accumulator-effective-subtraction-volta"],
}


def test_curated_queries_are_what_export_writes_today(tmp_path: Path):
    from tensorcore_smt.cli import main

    committed = sorted(p.stem for p in (ROOT / "queries").glob("*.smt2"))
    tracked = sorted(n for names in CURATED.values() for n in names)
    assert set(tracked) <= set(committed), "a curated export is missing: run `make queries`"
    for (prop, arch), names in CURATED.items():
        out = tmp_path / f"{prop}-{arch}"
        r = CliRunner().invoke(
            main, ["export", "--property", prop, "--arch", arch, "--out", str(out)]
        )
        assert r.exit_code == 0, r.output
        for name in names:
            fresh = (out / f"{name}.smt2").read_text()
            assert (ROOT / "queries" / f"{name}.smt2").read_text() == fresh, (
                f"queries/{name}.smt2 is not what `tcsmt export` writes now: run `make queries`"
            )


def _sh_lines(path: Path):
    """(line, argv, comment) of every `tcsmt ...` line in the page's sh blocks
    (continuations joined; `comment`: the text after its `#` and of the comment-only lines
    right below it), except templates with [optional] parts or "..."."""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        k = i + 1
        while info in ("sh", "bash") and k < j:
            first, text = k + 1, lines[k]
            k += 1
            while text.rstrip().endswith("\\") and k < j:
                text = text.rstrip()[:-1] + " " + lines[k].strip()
                k += 1
            argv = shlex.split(text, comments=True)
            comment = text.partition(" #")[2] if argv else ""
            while argv and k < j and lines[k].lstrip().startswith("#"):
                comment += " " + lines[k].lstrip()[1:]
                k += 1
            if argv[:1] == ["tcsmt"] and not any(a.startswith("[") or a == "..." for a in argv):
                yield first, argv, comment.strip()
        i = j + 1


def _sh_commands(path: Path):
    """(line, argv) of every `tcsmt ...` line in the page's sh blocks (continuations
    joined, comments dropped), except templates with [optional] parts or "..."."""
    for line, argv, _ in _sh_lines(path):
        yield line, argv


STATED = re.compile(r"\[exit (\d+(?: or \d+)*), ([^\]]+)\]")
"""What an illustrative command's comment states about its run: `[exit 3, under 15
minutes]` (its exit status, or several as `exit 0 or 3`, and how long it takes on the
project's shared 2-core machine). tests check the statement's form in `make test` and run
each stated command in `make test-slow`."""

DURATIONS = {
    "seconds": (0.0, 30.0),
    "under a minute": (0.0, 60.0),
    "a few minutes": (30.0, 600.0),
}
"""Duration phrases and the seconds they span; also `under N minutes`."""

SLACK = 3.0
"""How far a measured time may fall outside its stated span (a loaded machine)."""

MUST_STATE = ("bound", "exact", "identify")
"""README commands whose time and exit status a reader plans around: each says them."""


def stated_span(phrase: str) -> tuple[float, float] | None:
    """The (least, most) seconds a duration phrase states; None for an unknown one."""
    m = re.fullmatch(r"under (\d+) minutes", phrase.strip())
    if m:
        return 0.0, 60.0 * int(m.group(1))
    return DURATIONS.get(phrase.strip())


def stated_runs():
    """(page:line, argv, exit statuses, (least, most) seconds) of every illustrative
    command whose comment states its run."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for line, argv, comment in _sh_lines(path):
            m = STATED.search(comment)
            if m:
                exits = tuple(int(x) for x in m.group(1).split(" or "))
                yield f"{path.relative_to(ROOT)}:{line}", argv, exits, stated_span(m.group(2))


def test_stated_runs_are_well_formed():
    """Every stated exit status is one of the documented codes, every duration a known
    phrase, and README's bound, exact and identify examples (GPU ones aside) state both."""
    from tensorcore_smt.errors import ExitCode

    runs = list(stated_runs())
    codes = {int(c) for c in ExitCode}
    for where, _argv, exits, span in runs:
        assert set(exits) <= codes, f"{where}: exit {exits} is not an ExitCode"
        assert span is not None, f"{where}: unknown duration phrase ({', '.join(DURATIONS)})"
    stated = {(w.split(":")[0], tuple(a)) for w, a, _, _ in runs}
    for line, argv, _ in _sh_lines(ROOT / "README.md"):
        gpu = any(x in ("cuda", "hip") for x in argv)
        if argv[1] in MUST_STATE and not gpu:
            assert ("README.md", tuple(argv)) in stated, f"README.md:{line} states no [exit, time]"
    assert len(runs) >= 8
    assert STATED.search("# open [exit 3, under 15 minutes]").group(2) == "under 15 minutes"
    assert stated_span("under 15 minutes") == (0.0, 900.0) and stated_span("soon") is None


@pytest.mark.slow  # each stated command runs in full: up to a quarter of an hour each
@pytest.mark.parametrize(
    "where,argv,exits,span", list(stated_runs()), ids=[r[0] for r in stated_runs()]
)
def test_stated_runs_exit_and_take_what_they_say(where, argv, exits, span, tmp_path):
    """Each command whose comment states its exit status and duration, run as a user
    would (the installed script, in a scratch directory): the exit status is a stated
    one, the time within SLACK of the stated span."""
    import subprocess
    import time

    lo, hi = span
    exe = Path(sys.executable).parent / "tcsmt"
    with _workdir(tmp_path):
        t0 = time.monotonic()
        r = subprocess.run(
            [str(exe), *argv[1:]], capture_output=True, text=True, timeout=SLACK * hi + 60
        )
        took = time.monotonic() - t0
    assert r.returncode in exits, f"{where}: exit {r.returncode}\n{r.stderr[-2000:]}"
    assert lo / SLACK <= took <= SLACK * hi, f"{where}: took {took:.0f} s, stated {span}"


def test_illustrative_commands_parse(monkeypatch):
    """The commands shown but not run (sh blocks) name commands and options that exist,
    with values their types accept: each is parsed by click with every command's body
    replaced by a no-op."""
    import click

    from tensorcore_smt.cli import main

    def leaves(cmd):
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):  # loads each (the root group loads on demand)
                yield from leaves(cmd.get_command(ctx, name))
        else:
            yield cmd

    for cmd in leaves(main):
        monkeypatch.setattr(cmd, "callback", lambda *a, **k: None)
    bad, seen = [], 0
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for line, argv in _sh_commands(path):
            seen += 1
            r = CliRunner().invoke(main, argv[1:], prog_name="tcsmt")
            if r.exit_code != 0:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {shlex.join(argv)}\n{r.output}")
    assert seen > 10
    assert not bad, "\n".join(bad)


def test_elision_rule():
    """The "..." rule itself: whole lines, parts of a line, and real mismatches."""
    assert matches(["a", "...", "d"], "a\nb\nc\nd\n")
    assert matches(["a", "...", "b"], "a\nb\n")
    assert matches(["x = ... s"], "x = 1.25 s\n")
    assert matches(["a", ""], "a\n\n\n")
    assert not matches(["a", "...", "d"], "a\nb\nc\n")
    assert not matches(["x = ... s"], "x = 1.25 ms\ny\n")
    assert not matches(["d = 0x34000000"], "d = 0x34000001\n")


def update(paths: list[Path]) -> None:
    """Rewrite the expected output of every example that no longer matches."""
    import tempfile

    for path in paths:
        page = parse(path)
        with tempfile.TemporaryDirectory() as tmp:
            results = run_page(page, Path(tmp))
        lines = list(page.lines)
        changed = 0
        for ex, out in reversed(results):
            if not matches(ex.expected, out):
                lines[ex.out_start : ex.out_end] = _trim(out.splitlines())
                changed += 1
        if changed:
            path.write_text("\n".join(lines) + "\n")
        print(f"{path.relative_to(ROOT)}: {changed} example(s) rewritten")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--update"]:
        sys.exit("usage: python tests/test_docs.py --update [PAGE ...]")
    sys.path.insert(0, str(ROOT))
    args = [Path(a).resolve() for a in sys.argv[2:]]
    update(args or pages())
