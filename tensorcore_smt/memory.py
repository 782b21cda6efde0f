"""The machine's memory, and refusing work that cannot fit in it before it starts.

A command asked for matrices or a file larger than the memory would start allocating
(or reading) until the system runs out: `fits` refuses it up front, in one UserError
line with the size needed and the memory this machine has (Linux /proc/meminfo, else
os.sysconf), and `read_text` reads an input text file without ever holding more than
the memory allows, refusing files that are no text (NUL bytes: /dev/zero) at the first
chunk.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import UserError

CHUNK = 1 << 20
"""Bytes read at a time from a file that is not a regular one (a device, a pipe)."""


def _meminfo(field: str) -> int | None:
    """A /proc/meminfo field in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name == field:
                    return int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _sysconf(name: str) -> int | None:
    try:
        return os.sysconf(name) * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def total_bytes() -> int | None:
    """The machine's physical memory in bytes (None where it cannot be read)."""
    return _meminfo("MemTotal") or _sysconf("SC_PHYS_PAGES")


def available_bytes() -> int | None:
    """Memory available to a new allocation now, in bytes (None where unknown)."""
    return _meminfo("MemAvailable") or _sysconf("SC_AVPHYS_PAGES") or total_bytes()


def size_text(n: float) -> str:
    """Bytes in words: 16.0 GiB, 512.0 MiB, 12 bytes."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{int(n)} bytes"


def machine_text() -> str:
    """This machine's memory in words, for a refusal."""
    avail, total = available_bytes(), total_bytes()
    if avail is None:
        return "this machine's memory is unknown"
    if total is None or total == avail:
        return f"this machine has {size_text(avail)}"
    return f"this machine has {size_text(avail)} available of {size_text(total)}"


def fits(need: int, what: str, advice: str = "") -> None:
    """UserError when `need` bytes (`what` needs them) exceed the available memory;
    `advice` says how to ask for less."""
    avail = available_bytes()
    if avail is not None and need > avail:
        raise UserError(
            f"{what} needs about {size_text(need)}; {machine_text()}"
            + (f" ({advice})" if advice else "")
        )


def _where(what: str, path: Path) -> str:
    return f"{what} {path}" if what else str(path)


def read_text(path: Path, what: str = "") -> str:
    """The text of `path` (UTF-8), refused up front when it cannot fit in memory: a
    regular file by its size, a device or pipe while it is read (and at its first NUL
    byte, which no text file holds). UserError naming `what` and the path."""
    try:
        info = path.stat()
    except OSError as e:
        raise UserError(f"{_where(what, path)}: cannot read ({e.strerror or e})") from None
    limit = available_bytes()
    if stat.S_ISREG(info.st_mode):
        if limit is not None:
            fits(info.st_size, f"{_where(what, path)} ({size_text(info.st_size)})")
        try:
            return path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"{_where(what, path)}: cannot read ({e})") from None
    chunks: list[bytes] = []
    got = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                if b"\0" in chunk:
                    raise UserError(f"{_where(what, path)}: not a text file (it holds NUL bytes)")
                got += len(chunk)
                if limit is not None and got > limit:
                    raise UserError(
                        f"{_where(what, path)}: more than {size_text(got)} read and not ended; "
                        f"{machine_text()}"
                    )
                chunks.append(chunk)
        return b"".join(chunks).decode()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{_where(what, path)}: cannot read ({e})") from None
