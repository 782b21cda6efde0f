"""The root of the `tcsmt` command line: the group every command registers on, and the
rule that a user error prints one line and exits 2, never a traceback."""

from __future__ import annotations

import sys

import click

from .. import __version__
from ..presets import UserError

EXIT_USAGE = 2


def fail(msg: str) -> None:
    click.echo(f"tcsmt: error: {msg}", err=True)
    sys.exit(EXIT_USAGE)


class Group(click.Group):
    """Turns user errors into one line and exit code 2, and hides internal tracebacks."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (UserError, ValueError) as e:
            fail(str(e))
        except OSError as e:
            fail(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))


@click.group(cls=Group)
@click.version_option(__version__, prog_name="tcsmt")
def main() -> None:
    """Formal model of GPU matrix-unit arithmetic: simulate, compare, find discriminating inputs."""
