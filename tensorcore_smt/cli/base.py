"""The root of the `tcsmt` command line: the group every command registers on, and the
rules every command follows at its edges:

- a user error prints one line and exits 2 (`ExitCode.USAGE`), never a traceback;
- Ctrl-C (SIGINT) and SIGTERM end the command with exit 130 (`ExitCode.INTERRUPTED`);
  a command that has finished work reports it before (validate, find, identify), any
  other prints `tcsmt: interrupted`; child processes are ended on the way out
  (tensorcore_smt.solvers.runner, tensorcore_smt.validation.distributed);
- a closed output pipe (`tcsmt list archs | head -1`) ends the command quietly, exit 0,
  as Unix filters do; a standard output closed before the start (`tcsmt list archs >&-`)
  ends the first write with one line and exit 2;
- output files are checked before any work (`check_out`), and a write that still fails
  prints the result on stdout and says where it could not be written (`write_or_print`).
"""

from __future__ import annotations

import errno
import io
import logging
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from ..errors import ExitCode, UserError
from ..version import __version__
from .commands import COMMANDS, Entry

QUIET_LOGGERS = ("asyncio", "distributed", "tornado")
"""Loggers of the libraries under the commands, silenced while a command runs."""


def fail(msg: str, code: ExitCode = ExitCode.USAGE) -> None:
    """One line on stderr, then exit with `code` (default: bad input, 2)."""
    click.echo(f"tcsmt: error: {' '.join(str(msg).split())}", err=True)
    sys.exit(int(code))


def interrupted(what: str = "") -> None:
    """Exit 130 after a Ctrl-C (or SIGTERM), saying what was kept (if anything)."""
    click.echo(f"tcsmt: interrupted{': ' + what if what else ''}", err=True)
    sys.exit(int(ExitCode.INTERRUPTED))


def _pipe_closed() -> None:
    """The reader of stdout went away: stop quietly, exit 0 (nothing more is wanted)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (tests): nothing to flush later
    sys.exit(int(ExitCode.OK))


def check_out(path: str | Path | None, option: str = "--out") -> Path | None:
    """Refuse an output path that cannot be written (a missing or read-only folder, a
    folder in place of the file, an empty path) before any work starts. None passes."""
    if path is None:
        return None
    if not str(path).strip():
        raise UserError(f"{option}: empty path")
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{option} {p}: is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise UserError(f"{option} {p}: directory {parent} does not exist")
    if not parent.is_dir():
        raise UserError(f"{option} {p}: {parent} is not a directory")
    if p.exists() and not os.access(p, os.W_OK):
        raise UserError(f"{option} {p}: not writable")
    if not p.exists() and not os.access(parent, os.W_OK):
        raise UserError(f"{option} {p}: directory {parent} is not writable")
    return p


def write_or_print(path: Path, text: str, what: str = "result") -> bool:
    """Write `text` to `path`; if that fails after all, print it on stdout and say on
    stderr where it could not be written (nothing computed is lost). True if written."""
    try:
        path.write_text(text)
        return True
    except OSError as e:
        click.echo(text, nl=not text.endswith("\n"))
        reason = e.strerror or str(e)
        click.echo(
            f"tcsmt: error: could not write the {what} to {path} ({reason}); it is printed above",
            err=True,
        )
        return False


def _usage_line(e: click.UsageError) -> str:
    """A command-line error on one line (click's own display adds usage and hint lines)."""
    cmd = e.ctx.command_path if e.ctx is not None else "tcsmt"
    return f"{cmd}: " + " ".join(e.format_message().split())


MEMORY_OPTIONS: dict[str, str] = {
    "--rows": "fewer --rows",
    "--chunk": "a smaller --chunk",
    "--workers": "fewer --workers",
    "--random": "a smaller --random M,N,K",
    "--compare": "fewer --compare",
    "--k": "a smaller --k",
}
"""The options that bound a command's memory, and how to turn each down."""


def memory_advice(group: click.Group, ctx: click.Context) -> str:
    """The out-of-memory line, naming only options the failed command has."""
    cmd = group.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
    names = {o for p in (cmd.params if cmd else ()) for o in getattr(p, "opts", ())}
    tips = [tip for opt, tip in MEMORY_OPTIONS.items() if opt in names]
    return "out of memory" + (f" (try {', '.join(tips)})" if tips else "")


class ClosedOutput(io.TextIOBase):
    """Standard output when the process started with it closed (sys.stdout is None): a
    write raises OSError (EBADF), so the command ends in one line instead of printing
    nowhere."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")

    def flush(self) -> None:
        pass


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt so that every `finally` and every handler of
    Ctrl-C runs (children killed, the finished work reported)."""


def _on_sigterm(signum, frame) -> None:
    raise Terminated()


@contextmanager
def _signals() -> Iterator[None]:
    """SIGTERM raises `Terminated` while a command runs (main thread only)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.getsignal(signal.SIGTERM)
    if old not in (signal.SIG_DFL, None):  # someone else handles it (an embedding program)
        yield
        return
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


class Group(click.Group):
    """Turns user errors into one line and exit code 2, Ctrl-C into exit 130, a closed
    pipe into a quiet exit, and hides internal tracebacks."""

    def main(self, *args, **kwargs):
        # Library logs are no part of a command's output: an interrupted Dask start-up
        # leaves asyncio tasks whose errors asyncio would log at exit.
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        if sys.stdout is None:
            sys.stdout = ClosedOutput()
        with _signals():
            try:
                return super().main(*args, **kwargs)
            except SystemExit:
                try:
                    sys.stdout.flush()
                except BrokenPipeError:
                    _pipe_closed()
                except (OSError, ValueError):
                    pass
                raise
            except KeyboardInterrupt:  # between click's handlers (while it exits)
                interrupted()
            except OSError as e:  # a write outside a command (--help, --version)
                fail(e.strerror or str(e))

    group_class = type  # subgroups (`tcsmt vectors`, `tcsmt list`, ...) follow these rules too

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.NoArgsIsHelpError:
            if ctx.parent is None:  # `tcsmt` alone: its help, on stdout
                click.echo(ctx.get_help())
                sys.exit(int(ExitCode.OK))
            fail(
                f"{ctx.command_path}: give a command: {', '.join(self.list_commands(ctx))} "
                f"({ctx.command_path} --help)"
            )
        except click.UsageError as e:
            fail(_usage_line(e))

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as e:
            fail(_usage_line(e))
        except KeyboardInterrupt:
            interrupted()
        except BrokenPipeError:
            _pipe_closed()
        except (UserError, ValueError) as e:
            fail(str(e))
        except MemoryError:
            fail(memory_advice(self, ctx))
        except OSError as e:
            fail(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))


class LazyGroup(Group):
    """A group that lists its commands from a table (commands.COMMANDS) and imports a
    command's module only when that command is looked up: to run it, or for its own
    help. `tcsmt --help` shows the table's summaries, cut to the width as click cuts a
    command's own help. Subgroups made from it (`main.group`) have an empty table and
    behave as `Group`."""

    def __init__(self, *args, table: dict[str, Entry] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.table: dict[str, Entry] = dict(table or {})
        self._imported: set[str] = set()

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.table})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.table and cmd_name not in self._imported:
            import importlib

            entry = self.table[cmd_name]
            module = importlib.import_module(f"{__package__}.{entry.module}")
            for extra in entry.extends:  # even where the module itself was imported before
                importlib.import_module(f"{__package__}.{extra}")
            self.commands[cmd_name] = getattr(module, entry.attribute)
            self._imported.add(cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of the help, from the table for commands not yet loaded."""
        rows = [
            (name, self.commands.get(name) or click.Command(name, help=self.table[name].summary))
            for name in self.list_commands(ctx)
        ]
        rows = [(name, cmd) for name, cmd in rows if not cmd.hidden]
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(n, cmd.get_short_help_str(limit)) for n, cmd in rows])


@click.group(cls=LazyGroup, table=COMMANDS)
@click.version_option(__version__, prog_name="tcsmt")
def main() -> None:
    """Formal model of GPU matrix-unit arithmetic: simulate, compare, find discriminating inputs."""
