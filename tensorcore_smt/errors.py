"""The errors a user can cause and the exit codes of every command, in one table.

Every command exits with one of these codes; scripts and CI depend on them (README:
"Exit codes")."""

from __future__ import annotations

from enum import IntEnum


class UserError(ValueError):
    """Bad input from a user: reported as one line, exit code 2."""


class ExitCode(IntEnum):
    """Exit status of every `tcsmt` command."""

    OK = 0
    """The question was answered as asked: witness found, proof given, rows agree."""
    REFUTED = 1
    """The answer is the other one: a refuted proof, rows that disagree, a property that
    differs from its expectation, no hypothesis that reproduces the oracle."""
    USAGE = 2
    """Bad input: one line on stderr naming the field."""
    INCOMPLETE = 3
    """No answer within the limits: a solver said unknown or ran out of time; identify
    and fit: survivors are left that are not all proved equal (several classes, or
    members undecided or never asked)."""
    WITNESS_BUG = 4
    """A solver's witness failed its re-check on the concrete interpreter (a bug)."""
    INTERRUPTED = 130
    """Ctrl-C (SIGINT): what finished is reported before exiting."""
