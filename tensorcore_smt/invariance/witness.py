"""Inputs on which two recipes give row 0 of a call different bits, found by running
inputs through tc.matmul under each recipe, and re-checked there. Only row 0 of A matters
to row 0 of D, so each try is one row of A against columns of B.

Two kinds of input are tried. First the cancellation probe of order/probes.py (Xie et
al. 2025): row 0 holds +big at position i, each column -big at its own position j and
units elsewhere, so an output counts the products summed outside the smallest subtree
holding i and j; two recipes whose summation trees differ give different counts on some
pair, and the pairs tried are spread over K and its split and block boundaries. Then
seeded library inputs (library_inputs: cancelling, normal and wide values), which also
tell apart recipes with one tree and different roundings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hardware.library_calls import ALPHA, BETA, CallClass, Op
from ..hardware.library_inputs import BITS_DTYPE, Kind, Operand, block
from .sources import Recipe

COLUMNS = 8
"""Columns of B per try."""

KINDS = (Kind.CANCEL, Kind.NORMAL, Kind.WIDE)


PROBE_COLUMNS = 256
"""Columns of B (pairs (i, j)) per cancellation-probe try."""


@dataclass(frozen=True)
class Witness:
    """Row 0 of A and column `col` of B, regenerated from (kind, seed) by
    library_inputs.block (A: rows [0], B: columns [col]), or, with `pair` (i, j), the
    cancellation probe of order/probes.pair_inputs with `values` (s, t, w, d); and what
    each recipe gives."""

    kind: Kind | None
    seed: int
    col: int
    bits: tuple[int, int]
    width: int
    pair: tuple[int, int] | None = None
    values: tuple[float, float, float, float] | None = None

    def as_dict(self) -> dict:
        if self.pair is not None:
            s, t, w, d = self.values
            return {
                "kind": "pair-probe",
                "pair": list(self.pair),
                "values": [s, t, w, d],
                "row": 0,
                "d": [f"0x{b:0{self.width // 4}x}" for b in self.bits],
                "inputs": f"A row 0: {t!r} everywhere but {s!r} at k = {self.pair[0]}; "
                f"B column: {w!r} everywhere but {d!r} at k = {self.pair[1]} "
                "(tensorcore_smt.order.probes.pair_inputs)",
            }
        return {
            "kind": self.kind.value,
            "seed": self.seed,
            "column": self.col,
            "row": 0,
            "d": [f"0x{b:0{self.width // 4}x}" for b in self.bits],
            "inputs": "tensorcore_smt.hardware.library_inputs.block(kind, format, seed, "
            "Operand.A, [0], range(K)) and block(..., Operand.B, range(K), [column])",
        }


def row0(recipe: Recipe, cls: CallClass, a: np.ndarray, b: np.ndarray, extra) -> np.ndarray:
    """Row 0 of D (a: 1 x K, b: K x C) under a recipe, as bits."""
    from ..gemm.emulate import matmul

    kw: dict = {"out_dtype": cls.output_format.spec.name, "instr": recipe.instr}
    if cls.op == Op.ADDMM:
        kw |= {"alpha": ALPHA, "beta": BETA}
    d = matmul(recipe.hypothesis, a, b, extra, **kw)
    return np.asarray(d).view(BITS_DTYPE[cls.output_format]).reshape(-1)


def _pair_values(cls: CallClass, k: int):
    """Cancellation-probe values for the call's operands (None where the formats cannot
    hold them, e.g. FP8 operands)."""
    from ..errors import UserError
    from ..formats import Format
    from ..order.probes import pair_values

    fmt = cls.operand_format
    for out in (cls.output_format, Format.FP32):
        for sub in (False, True):
            try:
                return pair_values(fmt, out, k, 24, subnormal_inputs=sub)
            except (UserError, KeyError):
                continue
    return None


def _pairs(k: int, seed: int) -> list[tuple[int, int]]:
    """Pairs (i, j), i < j, spread over K: i at the start, just below and above the
    power-of-two block boundaries and at random, j likewise, PROBE_COLUMNS of them."""
    rng = np.random.default_rng(seed)
    marks = {0, 1, k - 1, k // 2, k // 2 - 1}
    b = 16
    while b < k:
        for m in range(b, k, b) if k // b <= 64 else []:
            marks |= {m - 1, m}
        b *= 2
    marks = sorted(x for x in marks if 0 <= x < k)
    out: set[tuple[int, int]] = set()
    for i in marks[:8]:
        for j in marks:
            if j > i:
                out.add((i, j))
    while len(out) < 4 * PROBE_COLUMNS and len(out) < k * (k - 1) // 2:
        i, j = sorted(int(x) for x in rng.integers(0, k, 2))
        if i != j:
            out.add((i, j))
    pairs = sorted(out)
    rng.shuffle(pairs)
    return [tuple(p) for p in pairs]


def _probe_row0(recipe: Recipe, cls: CallClass, pv, i: int, js: list[int], k: int):
    from ..order.probes import pair_inputs

    a, b = pair_inputs(pv, np.array([i]), np.array(js), k)
    fmt = cls.operand_format.spec.name
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    extra = None
    if cls.extra is not None:
        extra = np.zeros((1, len(js)), np.float32)
    return row0(recipe, cls, _as(a32, fmt), _as(b32, fmt), extra)


def _as(x: np.ndarray, fmt: str):
    """fp32 values (exact in `fmt`) as the call's operand dtype."""
    if fmt == "fp32":
        return x
    if fmt == "fp16":
        return x.astype(np.float16)
    import ml_dtypes

    return x.astype(ml_dtypes.bfloat16 if fmt == "bf16" else getattr(ml_dtypes, fmt))


def probe_search(r1: Recipe, r2: Recipe, cls: CallClass, k: int, seed: int = 0) -> Witness | None:
    """A cancellation-probe witness that r1 and r2 give row 0 different bits (None when
    the formats cannot hold the probe or no pair tried tells them apart)."""
    pv = _pair_values(cls, k)
    if pv is None or k < 2:
        return None
    pairs = _pairs(k, seed)
    by_i: dict[int, list[int]] = {}
    for i, j in pairs:
        by_i.setdefault(i, []).append(j)
    width = cls.output_format.spec.storage
    for i, js in by_i.items():
        for lo in range(0, len(js), PROBE_COLUMNS):
            part = js[lo : lo + PROBE_COLUMNS]
            d1 = _probe_row0(r1, cls, pv, i, part, k)
            d2 = _probe_row0(r2, cls, pv, i, part, k)
            diff = np.flatnonzero(d1 != d2)
            if diff.size:
                c = int(diff[0])
                values = (pv.s, pv.t, pv.w, pv.d)
                return Witness(None, seed, c, (int(d1[c]), int(d2[c])), width, (i, part[c]), values)
    return None


def search(
    r1: Recipe, r2: Recipe, cls: CallClass, n: int, k: int, tries: int, seed: int = 0
) -> Witness | None:
    """A witness that r1 and r2 give row 0 different bits: the cancellation probe first,
    then `tries` seeded inputs (each try: COLUMNS columns of one seeded input, the kinds
    in turn); None when neither tells them apart."""
    w = probe_search(r1, r2, cls, k, seed)
    if w is not None:
        return w
    fmt = cls.operand_format
    cols = np.arange(min(COLUMNS, n))
    for t in range(tries):
        kind = KINDS[t % len(KINDS)]
        s = seed + t
        a = block(kind, fmt, s, Operand.A, np.array([0]), np.arange(k))
        b = block(kind, fmt, s, Operand.B, np.arange(k), cols)
        extra = None
        if cls.extra == "bias":
            extra = block(kind, fmt, s, Operand.EXTRA, np.array([0]), cols)
        elif cls.extra == "c":
            extra = block(kind, fmt, s, Operand.EXTRA, np.array([0]), cols)
        d1, d2 = row0(r1, cls, a, b, extra), row0(r2, cls, a, b, extra)
        diff = np.flatnonzero(d1 != d2)
        if diff.size:
            c = int(diff[0])
            width = cls.output_format.spec.storage
            return Witness(kind, s, int(cols[c]), (int(d1[c]), int(d2[c])), width)
    return None


def confirm(w: Witness, r1: Recipe, r2: Recipe, cls: CallClass, k: int) -> bool:
    """Re-run the witness alone (one row, one column) under both recipes: bits differ and
    are those reported."""
    if w.pair is not None:
        from ..order.probes import PairValues

        pv = PairValues(*w.values)
        d1 = _probe_row0(r1, cls, pv, w.pair[0], [w.pair[1]], k)
        d2 = _probe_row0(r2, cls, pv, w.pair[0], [w.pair[1]], k)
        got = (int(d1[0]), int(d2[0]))
        return got == w.bits and got[0] != got[1]
    fmt = cls.operand_format
    a = block(w.kind, fmt, w.seed, Operand.A, np.array([0]), np.arange(k))
    b = block(w.kind, fmt, w.seed, Operand.B, np.arange(k), np.array([w.col]))
    extra = None
    if cls.extra is not None:
        extra = block(w.kind, fmt, w.seed, Operand.EXTRA, np.array([0]), np.array([w.col]))
    got = (int(row0(r1, cls, a, b, extra)[0]), int(row0(r2, cls, a, b, extra)[0]))
    return got == w.bits and got[0] != got[1]


__all__ = ["Witness", "confirm", "probe_search", "row0", "search"]
