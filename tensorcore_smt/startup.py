"""Ctrl-C while the `tcsmt` command line starts: one line and exit 130, not a traceback.

Importing the package takes a second or two (numpy, the instruction catalogue) before
the command's own handlers (cli/base.Group) are in place; an interrupt in that window
would end in Python's KeyboardInterrupt traceback. `guard_start` is the first thing the
package does: where the process is the command line (the installed `tcsmt` script or
`python -m tensorcore_smt`), an interrupt that no handler caught ends with
`tcsmt: interrupted` and exit 130 (errors.ExitCode.INTERRUPTED). A program that imports
the package is left alone: its Ctrl-C stays an ordinary KeyboardInterrupt.

Standard library only: it runs before anything else is imported, and importing this
module installs the guard.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROGRAM = "tcsmt"
MODULE = "tensorcore_smt"
INTERRUPTED = 130
"""errors.ExitCode.INTERRUPTED (errors.py is not imported here: this runs first)."""


def is_command_line(argv: list[str] | None = None, orig: list[str] | None = None) -> bool:
    """Whether this process is the `tcsmt` command line: the script named tcsmt, or
    `python -m tensorcore_smt` (`argv`, `orig`: sys.argv and sys.orig_argv)."""
    argv = sys.argv if argv is None else argv
    orig = list(getattr(sys, "orig_argv", [])) if orig is None else orig
    if argv and Path(argv[0]).name == PROGRAM:
        return True
    return any(a == "-m" and b == MODULE for a, b in zip(orig, orig[1:]))


def _on_uncaught(hook):
    """sys.excepthook that ends an uncaught KeyboardInterrupt in one line, exit 130."""

    def handle(kind, value, tb) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            hook(kind, value, tb)
            return
        try:
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
            if sys.stderr is not None:
                sys.stderr.write(f"{PROGRAM}: interrupted\n")
                sys.stderr.flush()
        except (OSError, ValueError):
            pass
        finally:
            os._exit(INTERRUPTED)  # nothing has started yet that needs cleaning up

    return handle


def guard_start() -> None:
    """Install the one-line ending of an early Ctrl-C, in the command line only."""
    if is_command_line() and not getattr(sys.excepthook, "_tcsmt", False):
        handle = _on_uncaught(sys.excepthook)
        handle._tcsmt = True  # type: ignore[attr-defined]
        sys.excepthook = handle


guard_start()
