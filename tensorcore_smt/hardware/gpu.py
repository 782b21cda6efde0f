"""The GPU machine: which GPU is here (nvidia-smi), commands run with a time limit, and
the matrix and conversion opcodes of SASS text (cuobjdump --dump-sass)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from ..errors import UserError

SASS_OPS = re.compile(
    r"\b(HMMA|HGMMA|QGMMA|QMMA|DMMA|IMMA|IGMMA|BMMA|F2FP|HFMA2|HADD2|FADD|FFMA|DFMA|I2F|F2F)\S*"
)
"""The opcodes a matrix instruction's SASS is read for (with their suffixes)."""


def safe_name(name: str) -> str:
    """`name` as a file name (an instruction's dots kept)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


@dataclass
class Gpu:
    """GPU 0: its name, compute capability as an integer (90 for sm_90) and driver."""

    name: str
    sm: int
    driver: str

    @property
    def slug(self) -> str:
        """Folder name under results/hardware: h100, h200, … (else the name, made safe)."""
        m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", self.name.upper())
        return (m.group(1).lower() if m else safe_name(self.name).lower()) or "gpu"


def detect_gpu() -> Gpu:
    """GPU 0, from nvidia-smi; UserError (one line) where there is none or no nvcc."""
    if shutil.which("nvidia-smi") is None:
        raise UserError("tcsmt hardware run needs an NVIDIA GPU: nvidia-smi is not installed here")
    r = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    )
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        raise UserError("tcsmt hardware run needs an NVIDIA GPU: nvidia-smi lists none")
    name, cap, driver = (x.strip() for x in lines[0].split(","))
    major, _, minor = cap.partition(".")
    if shutil.which("nvcc") is None:
        raise UserError("tcsmt hardware run needs nvcc (the CUDA compiler) on PATH")
    return Gpu(name, int(major) * 10 + int(minor or 0), driver)


def run_cmd(cmd: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `cmd` with its output captured (nvcc, cuobjdump, a probe)."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def sass_ops(sass: str) -> dict[str, int]:
    """Counts of the matrix and conversion opcodes (with their suffixes) in SASS text."""
    counts: dict[str, int] = {}
    for line in sass.splitlines():
        if "/*" not in line:
            continue
        for m in SASS_OPS.finditer(line):
            counts[m.group(0)] = counts.get(m.group(0), 0) + 1
    return dict(sorted(counts.items()))


def sass_excerpt(sass: str) -> str:
    """The SASS lines with matrix or conversion opcodes."""
    return "\n".join(ln.strip() for ln in sass.splitlines() if SASS_OPS.search(ln) and "/*" in ln)


__all__ = ["Gpu", "detect_gpu", "run_cmd", "safe_name", "sass_excerpt", "sass_ops"]
