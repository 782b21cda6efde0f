"""Read a probe program's output back and tell which variants the hardware matched.

The output has one line per vector, ``vector <index> d=0x<hex>`` (blank lines and lines
starting with ``#`` are ignored, so a user may annotate a file). A variant *survives*
when its prediction equals the hardware's bits on every vector; comparisons are
bit-exact (NaN payloads and signed zeros count). Missing predictions are computed with
the model first, so a file with inputs only can be checked too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import UserError
from ..formats import Format, format_hex, parse_hex, to_float
from ..validation.vectors import VectorFile, predict

_LINE = re.compile(r"^vector\s+(\d+)\s+d=(\S+)\s*$")


def output_lines(text: str, pattern: re.Pattern, expected: str) -> Iterator[tuple[int, re.Match]]:
    """(line number, match of `pattern`) for each line of a probe program's output, blank
    lines and `#` comments skipped; UserError (one line) on a line that does not match,
    naming the `expected` form."""
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = pattern.match(line)
        if not m:
            shown = line if len(line) <= 60 else line[:57] + "..."
            raise UserError(f"line {lineno}: expected '{expected}', got {shown!r}")
        yield lineno, m


def parse_output(text: str, n_vectors: int, d_fmt: Format) -> list[int]:
    """The D bits of each vector, in order. UserError (one line) on a malformed line, a
    repeated or out-of-range index, a pattern that does not fit the output format, or
    missing vectors (a truncated output)."""
    got: dict[int, int] = {}
    for lineno, m in output_lines(text, _LINE, "vector <index> d=0x<hex>"):
        idx = int(m.group(1))
        if idx >= n_vectors:
            raise UserError(
                f"line {lineno}: vector {idx} does not exist (the file has {n_vectors} vectors)"
            )
        if idx in got:
            raise UserError(f"line {lineno}: vector {idx} appears twice")
        try:
            got[idx] = parse_hex(m.group(2), d_fmt, f"line {lineno}: d")
        except ValueError as e:
            raise UserError(str(e)) from None
    missing = [i for i in range(n_vectors) if i not in got]
    if missing:
        first = ", ".join(str(i) for i in missing[:5]) + (", …" if len(missing) > 5 else "")
        raise UserError(
            f"truncated output: {len(got)} of {n_vectors} vectors reported "
            f"(missing {first}); did the program stop early?"
        )
    return [got[i] for i in range(n_vectors)]


@dataclass
class VectorResult:
    index: int
    observed: int
    matched: list[str]
    predicted: dict[str, int]
    note: str = ""


@dataclass
class CheckReport:
    """Per-vector matches and the variants that survive every vector."""

    vf: VectorFile
    results: list[VectorResult]
    survivors: list[str] = field(default_factory=list)

    @property
    def unexplained(self) -> list[int]:
        """Indices of vectors no variant predicts."""
        return [r.index for r in self.results if not r.matched]

    @property
    def ok(self) -> bool:
        """Every vector matched at least one variant."""
        return not self.unexplained

    def verdict(self) -> str:
        if self.survivors:
            if len(self.survivors) == 1:
                return f"the hardware follows {self.survivors[0]} on every vector"
            return (
                f"{len(self.survivors)} variants match every vector (not told apart by "
                f"these vectors): {', '.join(self.survivors)}"
            )
        if self.ok:
            return "every vector matched some variant, but no single variant matched all"
        return (
            f"no variant explains {len(self.unexplained)} of {len(self.results)} vectors: "
            "the hardware follows none of these hypotheses"
        )

    def to_json(self) -> dict:
        d_fmt = self.vf.params.d_fmt
        return {
            "arch": self.vf.arch,
            "instruction": self.vf.instruction,
            "variants": list(self.vf.variants),
            "vectors": [
                {
                    "index": r.index,
                    "observed": format_hex(r.observed, d_fmt),
                    "matched": r.matched,
                    "predicted": {v: format_hex(d, d_fmt) for v, d in r.predicted.items()},
                    **({"note": r.note} if r.note else {}),
                }
                for r in self.results
            ],
            "survivors": self.survivors,
            "unexplained": self.unexplained,
            "all_matched": self.ok,
            "verdict": self.verdict(),
        }


def check_output(vf: VectorFile, output_text: str) -> CheckReport:
    """Compare a probe's output with every variant's predictions."""
    if not vf.variants:
        raise UserError("variants: the vector file lists no variants to compare against")
    full = predict(vf, only_missing=True)
    d_fmt = full.params.d_fmt
    observed = parse_output(output_text, len(full.vectors), d_fmt)
    results = []
    for i, (vec, d) in enumerate(zip(full.vectors, observed)):
        matched = [v for v in full.variants if vec.predicted[v] == d]
        results.append(VectorResult(i, d, matched, dict(vec.predicted), vec.note))
    survivors = [v for v in full.variants if all(v in r.matched for r in results)]
    return CheckReport(full, results, survivors)


def _dec(bits: int, fmt: Format) -> str:
    return repr(to_float(bits, fmt))


def report_text(rep: CheckReport, output_name: str = "output") -> str:
    vf = rep.vf
    d_fmt = vf.params.d_fmt
    lines = [
        f"{vf.arch} {vf.instruction}: {len(rep.results)} vectors, "
        f"{len(vf.variants)} variants, hardware output {output_name}"
    ]
    for r in rep.results:
        head = f"vector {r.index}: d={format_hex(r.observed, d_fmt)} ({_dec(r.observed, d_fmt)})"
        if r.matched:
            lines.append(f"{head}  matches {', '.join(r.matched)}")
        else:
            preds = ", ".join(f"{v}: {format_hex(d, d_fmt)}" for v, d in r.predicted.items())
            lines.append(f"{head}  MISMATCH: no variant predicts it ({preds})")
        if r.note:
            lines.append(f"    note: {r.note}")
    surv = ", ".join(rep.survivors) if rep.survivors else "none"
    lines.append(f"survivors (match every vector): {surv}")
    lines.append(f"verdict: {rep.verdict()}")
    return "\n".join(lines)
