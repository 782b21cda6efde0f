"""The argument parser of the hardware modules' command lines (`python -m
tensorcore_smt.hardware.X`): a usage error is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import sys


class OneLineParser(argparse.ArgumentParser):
    """argparse with usage errors as one line, `PROG: message`, and exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        print(f"{self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


__all__ = ["OneLineParser"]
