"""The tool version: written into every file tcsmt saves and into kernel-cache keys."""

__version__ = "0.1.0"
