"""The library recorder: run a plan's calls through torch on a device and write what
came back to a folder, part by part, so that the analysis runs later on any CPU.

The folder:
- ``manifest.json``: torch, CUDA and cuBLAS versions, the device's name, the plan (name,
  seed, calls per part, the estimate), the input generator (library_inputs), and each
  part's status (``pending``, ``running``, ``done``, ``interrupted``, ``budget``: stopped by
  the time budget) with its seconds; rewritten (atomically) whenever a part changes state;
- ``<part>.jsonl``: one JSON line per call, appended and flushed as soon as the call
  returns: its class, shape, input kind and seed, ``holdout``, the kept rows and columns,
  the kept outputs' bits (one hex string, the output format's width per element, row by
  row, batch by batch), their sha256, a checksum of the whole output (sum over elements
  of bits * (index mod 65521 + 1), mod 2^64, computed on the device), the seconds, and
  cuBLASLt's heuristic fields (CUDA only; omitted where the query fails). A call torch
  refuses is a line with ``error``.

A crash or Ctrl-C loses at most the call under way: every finished line is on disk, and
the reader ignores a truncated last line.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from .library_calls import CallClass
from .library_inputs import POOL, Operand, device_operand
from .library_plan import Plan, Probe, estimate_seconds

SCHEMA = 1
CHECKSUM_PRIME = 65521
MANIFEST = "manifest.json"


class Status(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    INTERRUPTED = "interrupted"
    BUDGET = "budget"


class Oracle(str, Enum):
    """Where the calls run."""

    CPU = "torch:cpu"
    CUDA = "torch:cuda"

    @property
    def device(self) -> str:
        return self.value.split(":")[1]


def parse_oracle(text: str) -> Oracle:
    """The oracle named, checked usable here (UserError, one line, when not)."""
    try:
        oracle = Oracle(text)
    except ValueError:
        names = ", ".join(o.value for o in Oracle)
        raise UserError(f"--oracle {text!r}: expected one of {names}") from None
    try:
        import torch
    except ImportError:
        raise UserError(f"--oracle {text}: torch is not installed") from None
    if oracle == Oracle.CUDA and not torch.cuda.is_available():
        raise UserError(f"--oracle {text}: torch sees no CUDA device on this machine")
    return oracle


def environment(oracle: Oracle) -> dict:
    """Versions and the device: what a profile is keyed by."""
    import torch

    env = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "host": platform.machine(),
        "oracle": oracle.value,
    }
    if oracle == Oracle.CUDA:
        env["device"] = torch.cuda.get_device_name(0)
        cap = torch.cuda.get_device_capability(0)
        env["compute_capability"] = f"{cap[0]}.{cap[1]}"
        env["cublas"] = _cublas_version()
        env["driver"] = _driver_version()
    else:
        env["device"] = f"cpu ({platform.processor() or platform.machine()})"
        env["cublas"] = None
    return env


def _cublas_version() -> int | None:
    """cuBLASLt's version number (cublasLtGetVersion); None where it cannot be read."""
    import ctypes

    from .cublaslt import SONAMES

    for name in SONAMES:
        try:
            return int(ctypes.CDLL(name).cublasLtGetVersion())
        except (OSError, AttributeError):
            continue
    return None


def _driver_version() -> str | None:
    try:
        import torch

        return str(torch.cuda.driver_version()) if hasattr(torch.cuda, "driver_version") else None
    except Exception:  # noqa: BLE001 - informative only
        return None


GENERATOR = {
    "module": "tensorcore_smt.hardware.library_inputs",
    "pool": POOL,
    "rule": "X[i,j] = pool[mix(i, j, salt)]; pool from numpy PCG64([seed, operand, kind])",
    "operands": {o.name: int(o) for o in Operand},
}


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def checksum(D: Any) -> int:
    """sum over all elements of bits * (flat index mod 65521 + 1), mod 2^64 (int64 sums
    wrap alike on every device), as an unsigned integer."""
    import torch

    width = D.element_size() * 8
    raw = D.contiguous().view({16: torch.int16, 32: torch.int32, 8: torch.int8}[width])
    bits = raw.reshape(-1).to(torch.int64) & ((1 << width) - 1)
    w = torch.arange(bits.numel(), device=D.device, dtype=torch.int64) % CHECKSUM_PRIME + 1
    return int((bits * w).sum().item()) & ((1 << 64) - 1)


def kept_bits(D: Any, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """D[:, rows][:, :, cols] as unsigned bit patterns (numpy, batch x rows x cols)."""
    import torch

    from ..intake import from_torch

    r = torch.as_tensor(rows, device=D.device)
    c = torch.as_tensor(cols, device=D.device)
    sub = D.index_select(1, r).index_select(2, c)
    x = from_torch(sub)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


def hex_bits(bits: np.ndarray) -> str:
    """Bits as one hex string, fixed width per element, in C order."""
    digits = bits.dtype.itemsize * 2
    return "".join(f"{int(x):0{digits}x}" for x in bits.reshape(-1))


@dataclass
class Inputs:
    """The operands of one input group, built on the device once for all its classes."""

    key: tuple
    A: Any
    B: Any
    bias: Any
    C: Any


def _inputs(p: Probe, device: str) -> Inputs:
    fmt, b = p.cls.operand_format, p.cls.batch
    A = device_operand(p.kind, fmt, p.seed, Operand.A, (p.m, p.k), b, device)
    B = device_operand(p.kind, fmt, p.seed, Operand.B, (p.k, p.n), b, device)
    bias = C = None  # in the operands' dtype (torch.addmm and F.linear require it)
    if p.cls.extra == "bias":
        bias = device_operand(p.kind, fmt, p.seed, Operand.EXTRA, (1, p.n), 1, device)[0, 0]
    elif p.cls.extra == "c":
        C = device_operand(p.kind, fmt, p.seed, Operand.EXTRA, (p.m, p.n), 1, device)[0]
    return Inputs(_group_key(p), A, B, bias, C)


def _group_key(p: Probe) -> tuple:
    return (p.m, p.n, p.k, p.kind, p.seed, p.cls.operand_format, p.cls.batch, p.cls.extra)


def record_call(p: Probe, inp: Inputs, device: str, lt: bool) -> dict:
    """Run one probe and return its JSON record."""
    import torch

    from . import library_calls

    rows, cols = p.keep.pick(p.m, p.n, p.seed)
    rec: dict = {
        "class": p.cls.name,
        "m": p.m,
        "n": p.n,
        "k": p.k,
        "batch": p.cls.batch,
        "kind": p.kind.value,
        "seed": p.seed,
        "holdout": p.holdout,
        "rows": rows.tolist(),
        "cols": cols.tolist(),
    }
    if p.cls.op in (library_calls.Op.ADDMM,):
        rec["alpha"], rec["beta"] = library_calls.ALPHA, library_calls.BETA
    t0 = time.perf_counter()
    try:
        D = library_calls.run(p.cls, inp.A, inp.B, inp.bias if inp.bias is not None else inp.C)
        bits = kept_bits(D, rows, cols)
        rec["checksum"] = str(checksum(D))
        if device != "cpu":
            torch.cuda.synchronize()
    except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:
        rec["error"] = " ".join(str(e).split())[:300]
        return rec
    rec["seconds"] = round(time.perf_counter() - t0, 6)
    rec["out"] = p.cls.output_format.spec.name
    rec["d"] = hex_bits(bits)
    rec["sha256"] = hashlib.sha256(bits.tobytes()).hexdigest()
    if lt:
        from .cublaslt import heuristic

        fields, why = heuristic(p.cls, p.m, p.n, p.k)
        if fields is not None:
            rec["cublaslt"] = fields
        else:
            rec["cublaslt_error"] = why
    return rec


def record(
    plan: Plan,
    plan_name: str,
    out: Path,
    oracle: Oracle,
    budget_s: float | None = None,
    log: Callable[[str], None] = print,
    after_call: Callable[[int], None] | None = None,
) -> dict:
    """Run `plan` on the oracle's device into `out` (created); returns the manifest.
    `after_call(i)` runs after the i-th call is written (tests use it to interrupt)."""
    device = oracle.device
    out.mkdir(parents=True, exist_ok=True)
    if (out / MANIFEST).exists():
        raise UserError(f"--out {out}: already holds a recording ({MANIFEST}); give a new folder")
    manifest = {
        "schema": SCHEMA,
        "environment": environment(oracle),
        "generator": GENERATOR,
        "plan": {
            "name": plan_name,
            "seed": plan.seed,
            "calls": plan.calls,
            "estimate_seconds_h100": round(estimate_seconds(plan), 1),
        },
        "budget_seconds": budget_s,
        "cublaslt_workspace": None,
        "status": Status.RUNNING.value,
        "parts": [
            {"name": p.name, "doc": p.doc, "calls": len(p.probes), "status": "pending"}
            for p in plan.parts
        ],
    }
    lt = oracle == Oracle.CUDA
    if lt:
        from .cublaslt import workspace_bytes

        manifest["cublaslt_workspace"] = workspace_bytes()
    _write_json(out / MANIFEST, manifest)
    t_start = time.monotonic()
    done = 0
    status = Status.DONE
    try:
        for part, entry in zip(plan.parts, manifest["parts"]):
            if status == Status.BUDGET:
                entry["status"] = Status.BUDGET.value
                continue
            entry["status"] = Status.RUNNING.value
            _write_json(out / MANIFEST, manifest)
            t0 = time.monotonic()
            written = 0
            inp: Inputs | None = None
            lt_seen: set = set()
            with open(out / f"{part.name}.jsonl", "a") as f:
                try:
                    for p in part.probes:
                        if budget_s is not None and time.monotonic() - t_start > budget_s:
                            status = Status.BUDGET
                            break
                        if inp is None or inp.key != _group_key(p):
                            inp = None
                            inp = _inputs(p, device)
                        key = (p.cls.name, p.m, p.n, p.k)
                        rec = record_call(p, inp, device, lt and key not in lt_seen)
                        lt_seen.add(key)
                        f.write(json.dumps(rec, separators=(",", ":")) + "\n")
                        f.flush()
                        written += 1
                        done += 1
                        if after_call is not None:
                            after_call(done)
                finally:
                    f.flush()
                    os.fsync(f.fileno())
                    entry["recorded"] = written
                    entry["seconds"] = round(time.monotonic() - t0, 2)
            entry["status"] = (
                Status.BUDGET.value if written < len(part.probes) else Status.DONE.value
            )
            _write_json(out / MANIFEST, manifest)
            log(f"part {part.name}: {written} of {len(part.probes)} calls, {entry['seconds']} s")
    except KeyboardInterrupt:
        for entry in manifest["parts"]:
            if entry["status"] in (Status.RUNNING.value, Status.PENDING.value):
                entry["status"] = Status.INTERRUPTED.value
        manifest["status"] = Status.INTERRUPTED.value
        manifest["seconds"] = round(time.monotonic() - t_start, 2)
        _write_json(out / MANIFEST, manifest)
        raise
    manifest["status"] = status.value
    manifest["seconds"] = round(time.monotonic() - t_start, 2)
    _write_json(out / MANIFEST, manifest)
    return manifest


def classes_of(plan: Plan) -> list[CallClass]:
    """The distinct call classes of a plan, in first-use order."""
    return list(dict.fromkeys(p.cls for part in plan.parts for p in part.probes))


__all__ = ["Oracle", "Status", "checksum", "environment", "parse_oracle", "record"]
