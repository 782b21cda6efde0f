"""Read a library recording (library_record.py's folder) back into calls on any CPU: each
call's class, shape, the recorded outputs, and its operands regenerated from the seed:
only the rows of A and columns of B the kept outputs need (`operands`), or whole
(`rerun`, to run the call again through torch on this machine).

`compare(call, hypothesis)` runs the kept outputs through tc.matmul and counts the
elements whose bits differ, the check a profile's recipes are judged by.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from ..formats import Format
from .library_calls import ALPHA, BETA, CallClass, Op
from .library_inputs import BITS_DTYPE, Kind, Operand, block, device_operand
from .library_record import MANIFEST, checksum, kept_bits


@dataclass
class RecordedCall:
    """One recorded call: what ran and what came back (the kept elements' bits, batch x
    rows x cols; None when torch refused the call, `error` then says why)."""

    part: str
    cls: CallClass
    m: int
    n: int
    k: int
    kind: Kind
    seed: int
    holdout: bool
    rows: np.ndarray
    cols: np.ndarray
    d: np.ndarray | None
    checksum: int | None = None
    error: str | None = None
    cublaslt: dict | None = None
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def batch(self) -> int:
        return self.cls.batch

    def operands(self, batch: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """A[rows, :], B[:, cols] and the extra operand (bias[cols] or C[rows, cols]) of
        batch `batch`, regenerated from the seed, as numpy values of the operand format."""
        fmt = self.cls.operand_format
        a = block(self.kind, fmt, self.seed, Operand.A, self.rows, np.arange(self.k), batch)
        b = block(self.kind, fmt, self.seed, Operand.B, np.arange(self.k), self.cols, batch)
        extra = None
        if self.cls.extra == "bias":
            extra = block(self.kind, fmt, self.seed, Operand.EXTRA, np.array([0]), self.cols)
        elif self.cls.extra == "c":
            extra = block(self.kind, fmt, self.seed, Operand.EXTRA, self.rows, self.cols)
        return a, b, extra

    def rerun(self, device: str = "cpu") -> tuple[np.ndarray, int]:
        """Run the call again through torch on `device` on the whole regenerated operands:
        (the kept elements' bits, the whole output's checksum)."""
        from .library_calls import run

        fmt, b = self.cls.operand_format, self.batch
        A = device_operand(self.kind, fmt, self.seed, Operand.A, (self.m, self.k), b, device)
        B = device_operand(self.kind, fmt, self.seed, Operand.B, (self.k, self.n), b, device)
        extra = None
        if self.cls.extra == "bias":
            extra = device_operand(self.kind, fmt, self.seed, Operand.EXTRA, (1, self.n), 1, device)
            extra = extra[0, 0]
        elif self.cls.extra == "c":
            extra = device_operand(
                self.kind, fmt, self.seed, Operand.EXTRA, (self.m, self.n), 1, device
            )[0]
        D = run(self.cls, A, B, extra)
        return kept_bits(D, self.rows, self.cols), checksum(D)

    def model(self, hypothesis: str, instr: str | None = None) -> np.ndarray:
        """The kept elements as tc.matmul computes them under `hypothesis` (the call's
        alpha, beta, bias or C, output format), bits, batch x rows x cols; `instr` the
        instruction (None: the library default for the operand format)."""
        from ..gemm.emulate import matmul

        out = []
        for bt in range(self.batch):
            a, b, extra = self.operands(bt)
            kw: dict[str, Any] = {"out_dtype": self.cls.output_format.spec.name}
            if self.cls.op == Op.ADDMM:
                kw |= {"alpha": ALPHA, "beta": BETA}
            c = None
            if extra is not None:
                c = np.broadcast_to(extra, (len(self.rows), len(self.cols)))
            d = matmul(hypothesis, a, b, c, instr=instr, **kw)
            out.append(np.asarray(d).view(BITS_DTYPE.get(self.cls.output_format, np.uint16)))
        return np.stack(out)


@dataclass
class Recording:
    """A recording folder: its manifest and its calls, part by part."""

    path: Path
    manifest: dict
    calls: list[RecordedCall]

    def part(self, name: str) -> list[RecordedCall]:
        return [c for c in self.calls if c.part == name]

    def holdout(self, held: bool = True) -> list[RecordedCall]:
        return [c for c in self.calls if c.holdout == held]


def _bits(hex_text: str, fmt: Format, shape: tuple[int, ...]) -> np.ndarray:
    width = fmt.spec.storage // 4
    vals = [int(hex_text[i : i + width], 16) for i in range(0, len(hex_text), width)]
    return np.array(vals, dtype=BITS_DTYPE[fmt]).reshape(shape)


def _call(part: str, r: dict) -> RecordedCall:
    cls = CallClass.parse(r["class"])
    rows, cols = np.array(r["rows"], np.int64), np.array(r["cols"], np.int64)
    d = None
    if "d" in r:
        d = _bits(r["d"], cls.output_format, (cls.batch, len(rows), len(cols)))
    return RecordedCall(
        part,
        cls,
        r["m"],
        r["n"],
        r["k"],
        Kind(r["kind"]),
        r["seed"],
        bool(r["holdout"]),
        rows,
        cols,
        d,
        int(r["checksum"]) if "checksum" in r else None,
        r.get("error"),
        r.get("cublaslt"),
        r,
    )


def _lines(path: Path) -> Iterator[dict]:
    """The complete JSON lines of a part file, plain or gzip-compressed (a truncated last
    line is skipped)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        for line in f:
            if not line.endswith("\n"):
                return  # cut short by a crash: not a record
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                return


def load(path: str | Path) -> Recording:
    """The recording in folder `path` (UserError, one line, when it is not one)."""
    p = Path(path)
    mf = p / MANIFEST
    if not mf.is_file():
        raise UserError(f"{p}: no {MANIFEST}; not a library recording")
    try:
        manifest = json.loads(mf.read_text())
    except json.JSONDecodeError as e:
        raise UserError(f"{mf}: not JSON ({e.msg}, line {e.lineno})") from None
    calls: list[RecordedCall] = []
    for entry in manifest.get("parts", []):
        f = p / f"{entry['name']}.jsonl"
        if not f.is_file():
            f = f.with_name(f.name + ".gz")  # stored compressed (results/hardware)
        if f.is_file():
            calls += [_call(entry["name"], r) for r in _lines(f)]
    return Recording(p, manifest, calls)


__all__ = ["RecordedCall", "Recording", "load"]
