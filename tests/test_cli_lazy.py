"""The root group loads a command's module only when that command is used: `tcsmt --help`
lists the commands from the table in cli/commands.py, and the table cannot drift from
the commands' own help. Checked in fresh interpreters through sys.modules (behaviour,
not timing)."""

from __future__ import annotations

import json
import subprocess
import sys

import click

from tensorcore_smt.cli import main
from tensorcore_smt.cli.commands import COMMANDS

HEAVY = ("torch", "z3", "cvc5", "bitwuzla", "dask", "distributed", "rich", "pysmt")
MODULES = sorted(
    {f"tensorcore_smt.cli.{m}" for e in COMMANDS.values() for m in (e.module, *e.extends)}
)


def _fresh(code: str) -> dict:
    """Run `code` in a fresh interpreter; the last stdout line is a JSON object."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


_LOADED = (
    "import json, sys\n"
    f"print(json.dumps(sorted(m for m in {[*HEAVY, *MODULES]!r} if m in sys.modules)))\n"
)


def _run_then_report(argv: list[str]) -> str:
    return (
        "from tensorcore_smt.cli import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    try:\n        main({argv!r}, prog_name='tcsmt')\n"
        "    except SystemExit as e:\n        assert e.code in (0, None), e.code\n" + _LOADED
    )


def test_help_loads_no_command_module_and_no_heavy_library():
    assert _fresh(_run_then_report(["--help"])) == []


def test_simulate_loads_its_own_module_only():
    argv = ["simulate", "--arch", "volta", "--a", "3c00,3c00,3c00,3c00"]
    argv += ["--b", "3c00,3c00,3c00,3c00", "--c", "0"]
    assert _fresh(_run_then_report(argv)) == ["tensorcore_smt.cli.simulate"]


def test_table_names_each_command_with_its_own_summary():
    ctx = click.Context(main)
    for name, entry in COMMANDS.items():
        cmd = main.get_command(ctx, name)
        assert cmd is not None and cmd.name == name, name
        assert cmd.callback.__module__ == f"tensorcore_smt.cli.{entry.module}", name
        assert not cmd.hidden and not cmd.short_help, name
        assert entry.summary == cmd.get_short_help_str(10**6), name
    # every command a module registers is in the table (else `tcsmt --help` hides it)
    assert set(main.commands) == set(COMMANDS)


def test_lazy_listing_is_the_listing_of_the_loaded_commands():
    """The help before any command is loaded equals the help after all are, at widths
    that cut the summaries differently."""
    code = (
        "import click, json\n"
        "from tensorcore_smt.cli import main\n"
        "def text(w):\n"
        "    return main.get_help(click.Context(main, info_name='tcsmt', terminal_width=w))\n"
        "widths = (40, 60, 80, 120, 400)\n"
        "before = [text(w) for w in widths]\n"
        "for n in main.list_commands(None):\n    main.get_command(None, n)\n"
        "after = [text(w) for w in widths]\n"
        "print(json.dumps([before, after, sorted(main.commands)]))\n"
    )
    before, after, loaded = _fresh(code)
    assert loaded == sorted(COMMANDS)
    assert before == after
    assert all("Commands:" in t and "simulate" in t for t in before)


def test_the_table_loads_every_subcommand_the_modules_define():
    """Loading the commands through the table gives the same command tree as importing
    every module of tensorcore_smt.cli (a module that adds a subcommand to a group is
    named in the group's entry)."""
    code = (
        "import click, importlib, json, pkgutil\n"
        "import tensorcore_smt.cli as cli\n"
        "from tensorcore_smt.cli import main\n"
        "def tree(group, prefix=''):\n"
        "    ctx = click.Context(group)\n"
        "    out = []\n"
        "    for n in group.list_commands(ctx):\n"
        "        cmd = group.get_command(ctx, n)\n"
        "        out.append(prefix + n)\n"
        "        if isinstance(cmd, click.Group):\n"
        "            out += tree(cmd, prefix + n + ' ')\n"
        "    return out\n"
        "by_table = tree(main)\n"
        "for m in pkgutil.iter_modules(cli.__path__):\n"
        "    importlib.import_module('tensorcore_smt.cli.' + m.name)\n"
        "print(json.dumps([by_table, tree(main)]))\n"
    )
    by_table, by_import = _fresh(code)
    assert "profile record" in by_import and "vectors show" in by_import
    assert by_table == by_import


def test_a_group_whose_module_was_imported_first_still_gets_its_added_subcommands():
    code = (
        "import click, json\n"
        "import tensorcore_smt.cli.profile\n"
        "from tensorcore_smt.cli import main\n"
        "g = main.get_command(None, 'profile')\n"
        "print(json.dumps(g.list_commands(click.Context(g))))\n"
    )
    assert "record" in _fresh(code)
