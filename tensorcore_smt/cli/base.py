"""The root of the `tcsmt` command line: the group every command registers on, and the
rule that a user error prints one line and exits 2, never a traceback."""

from __future__ import annotations

import sys

import click

from ..errors import UserError
from ..version import __version__

EXIT_USAGE = 2


def fail(msg: str) -> None:
    click.echo(f"tcsmt: error: {msg}", err=True)
    sys.exit(EXIT_USAGE)


def _usage_line(e: click.UsageError) -> str:
    """A command-line error on one line (click's own display adds usage and hint lines)."""
    cmd = e.ctx.command_path if e.ctx is not None else "tcsmt"
    return f"{cmd}: " + " ".join(e.format_message().split())


class Group(click.Group):
    """Turns user errors into one line and exit code 2, and hides internal tracebacks."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as e:
            fail(_usage_line(e))

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as e:
            fail(_usage_line(e))
        except (UserError, ValueError) as e:
            fail(str(e))
        except OSError as e:
            fail(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))


@click.group(cls=Group)
@click.version_option(__version__, prog_name="tcsmt")
def main() -> None:
    """Formal model of GPU matrix-unit arithmetic: simulate, compare, find discriminating inputs."""
