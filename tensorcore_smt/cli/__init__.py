"""The `tcsmt` command line. Each module holds one command (or group) and registers it on
the root group of base.py; the modules import base.py and options.py, never each other.
The root group imports a command's module only when that command is used (commands.py
lists them), so starting the command line loads none of them."""

from .base import main

__all__ = ["main"]
