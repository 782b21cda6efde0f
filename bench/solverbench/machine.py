"""What a benchmark ran on: the machine, the model's source revision, the solvers' versions."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from tensorcore_smt.solvers import SolveJob, available, solve


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": mem_gib,
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "source": source_revision(),
    }


def source_revision() -> str:
    """The package's version and git commit (marked when the package differs from it)."""
    from tensorcore_smt import __version__

    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "tensorcore_smt"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"tensorcore-smt {__version__}"
    return f"tensorcore-smt {__version__} at {rev}" + (
        " with uncommitted changes in tensorcore_smt/" if dirty else ""
    )


def solver_versions(solvers: list[str]) -> dict[str, str]:
    """Each solver's own version string (asked in a child, like every solver call)."""
    out = {}
    for s in solvers:
        r = solve(SolveJob("(declare-fun v () (_ BitVec 1))\n", ("v",), timeout=10), s)
        out[s] = r.version or available().get(s, "?")
    return out


def machine_line(info: dict, versions: dict[str, str]) -> list[str]:
    load = info.get("load_average")
    load_s = " / ".join(f"{x:.2f}" for x in load) if load else "?"
    return [
        f"machine: {info['cores']} cores, {info['cpu']}, {info['memory_gib']} GiB, "
        f"Python {info['python']}; load average at start {load_s} (1/5/15 min)",
        "solvers: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        f"model: {info.get('source', '?')}",
    ]


def print_machine(info: dict, versions: dict[str, str]) -> None:
    for line in machine_line(info, versions):
        print(line)
