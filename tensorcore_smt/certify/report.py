"""A certificate as text and as JSON (exact rationals as "p/q" strings)."""

from __future__ import annotations

import math
import shlex
from enum import Enum
from fractions import Fraction

from ..formats import format_hex, to_float
from ..model.measure import exact_value
from ..smt.query import EXACT
from .bound import Certificate, fmt_fraction, fmt_value


def rational(x: Fraction | float | None) -> str | None:
    """An exact value as "p/q" ("inf" for an infinite measure, None when unknown)."""
    if x is None:
        return None
    if isinstance(x, float):
        return "inf" if math.isinf(x) else repr(x)
    return f"{x.numerator}/{x.denominator}"


class Status(Enum):
    """How a search ended."""

    CLOSED = "closed"  # U <= L (1 + R)
    OPEN = "open"  # the budget ended first
    INTERRUPTED = "interrupted"  # Ctrl-C


def status(cert: Certificate) -> Status:
    """How the search of `cert` ended."""
    if cert.closed:
        return Status.CLOSED
    return Status.INTERRUPTED if cert.interrupted else Status.OPEN


def _witness_hex(cert: Certificate) -> dict | None:
    if cert.witness is None:
        return None
    q = cert.query
    p = q.p
    w = cert.witness
    out = {
        "a": [format_hex(w[f"a{i}"], p.a_fmt) for i in range(p.K)],
        "b": [format_hex(w[f"b{i}"], p.b_fmt) for i in range(p.K)],
        "c": format_hex(w["c"], p.c_fmt),
        "d": format_hex(cert.witness_outputs[0], p.d_fmt),
    }
    if q.against_exact:
        e, _ = exact_value(
            [w[f"a{i}"] for i in range(p.K)],
            [w[f"b{i}"] for i in range(p.K)],
            w["c"],
            (p.a_fmt, p.b_fmt, p.c_fmt),
        )
        out["exact"] = rational(e)
    else:
        out["y"] = format_hex(cert.witness_outputs[1], p.d_fmt)
    if q.meta is not None:
        out["meta"] = list(q.meta)  # a: the uncompressed row, +0 where none is kept
    return out


def reproduce_command(cert: Certificate) -> str | None:
    """The `tcsmt simulate` line that re-runs the witness."""
    if cert.witness is None:
        return None
    q = cert.query
    p = q.p
    v = q.vector_fields(cert.witness)  # the unit's entries of A (and a sparse one's metadata)
    arch = ["--arch", cert.hypothesis]
    if cert.against != EXACT:
        arch += ["--arch", cert.against]
    ops = ["--a", ",".join(format_hex(x, p.a_fmt) for x in v["a"])]
    ops += ["--b", ",".join(format_hex(x, p.b_fmt) for x in v["b"]), "--c"]
    ops.append(format_hex(v["c"], p.c_fmt))
    if v["metadata"] is not None:
        ops += ["--meta", ",".join(map(str, v["metadata"]))]
    if q.instr_y is not None:  # one simulate per side, each on its own instruction
        sides = [(cert.hypothesis, cert.instruction), (cert.against, q.instr_y)]
        return "; ".join(
            " ".join(shlex.quote(a) for a in ["tcsmt", "simulate", "--arch", h, "--instr", i, *ops])
            for h, i in sides
        )
    args = ["tcsmt", "simulate", *arch, "--instr", cert.instruction, *ops]
    return " ".join(shlex.quote(a) for a in args)


def to_json(cert: Certificate) -> dict:
    """The certificate as a JSON object."""
    return {
        "hypothesis": cert.hypothesis,
        "against": cert.against,
        "instr": cert.instruction,
        "against_instr": _against_instr(cert),
        "measure": cert.measure.value,
        "formula": cert.measure.formula,
        "class": [c.describe() for c in cert.constraints],
        "lower": rational(cert.lower if cert.witness is not None else Fraction(0)),
        "upper": rational(cert.upper),
        "upper_method": cert.upper_method,
        "argument": cert.argument,
        "status": status(cert).value,
        "resolution": rational(cert.resolution),
        "witness": _witness_hex(cert),
        "reproduce": reproduce_command(cert),
        "steps": [
            {
                "threshold": rational(s.threshold),
                "answer": s.verdict.value,
                "solver": s.solver,
                "confirmed_by": s.confirmed_by,
                "measure": rational(s.measure),
                "seconds": round(s.seconds, 3),
            }
            for s in cert.steps
        ],
        "seconds": round(cert.seconds, 3),
    }


def _against_instr(cert: Certificate) -> str | None:
    """The reference variant's instruction where it is not the hypothesis's."""
    return None if cert.query is None else cert.query.instr_y


def to_text(cert: Certificate) -> str:
    """The certificate as a report a person reads."""
    ref = "the exact result" if cert.against == EXACT else cert.against
    if _against_instr(cert) is not None:
        ref += f" ({_against_instr(cert)})"
    lines = [
        f"question:  worst {cert.measure.value} error {cert.measure.formula} of "
        f"{cert.hypothesis} ({cert.instruction}), r = {ref}",
        "class:     " + (" ".join(c.describe() for c in cert.constraints) or "all inputs"),
    ]
    lo = cert.lower if cert.witness is not None else Fraction(0)
    up = fmt_value(cert.upper) if cert.upper is not None else "not proved"
    lines.append(
        f"lower:     {fmt_value(lo)}" + ("  (attained by the witness)" if cert.witness else "")
    )
    how = {
        "solver": "  (proved by a solver: no input of the class exceeds it)",
        "composed": "  (proved by the composed argument below: no input of the class exceeds it)",
        "argument": "  (unsat by a stated argument whose extreme rows reproduce on the model)",
    }
    lines.append(f"upper:     {up}" + how.get(cert.upper_method or "", ""))
    for x in cert.argument:
        lines.append(f"  argument: {x}")
    st = status(cert)
    if st == Status.CLOSED:
        lines.append(f"interval:  closed to resolution {rational(cert.resolution)}")
    else:
        why = "interrupted" if cert.interrupted else "the budget ended first"
        lines.append(
            f"interval:  open ({why}): the worst case lies in [lower, upper]; nothing "
            "more is claimed"
        )
    wh = _witness_hex(cert)
    if wh is not None:
        p = cert.query.p
        lines.append("witness:")
        lines.append(f"  a = {' '.join(wh['a'])}")
        lines.append(f"  b = {' '.join(wh['b'])}")
        lines.append(f"  c = {wh['c']}")
        d = to_float(cert.witness_outputs[0], p.d_fmt)
        lines.append(f"  d = {wh['d']} ({d!r})")
        if "exact" in wh:
            e = Fraction(wh["exact"])
            lines.append(f"  exact = {wh['exact']} ({float(e)!r})")
        else:
            lines.append(f"  y = {wh['y']} ({to_float(cert.witness_outputs[1], p.d_fmt)!r})")
        lines.append(f"  measure = {fmt_value(cert.lower)}, re-run on the concrete model")
        lines.append(f"reproduce: {reproduce_command(cert)}")
    lines.append("steps:")
    lines += [f"  {s.describe()} [{s.seconds:.1f} s]" for s in cert.steps]
    lines.append(f"seconds:   {cert.seconds:.1f}")
    return "\n".join(lines)


__all__ = [
    "Status",
    "fmt_fraction",
    "rational",
    "reproduce_command",
    "status",
    "to_json",
    "to_text",
]
