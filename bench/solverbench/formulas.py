"""SMT-LIB text timed beside the queries: Valpey et al.'s (2025) own formulas (the calibration) and
the smallest formulas of a Table 4 question (the floor)."""

from __future__ import annotations

from collections.abc import Callable

# --- the paper's own formulas, for calibration ------------------------------------------

_FP16 = "(_ FloatingPoint 5 11)"
_FP32 = "(_ FloatingPoint 8 24)"


def _decl(*names: str) -> str:
    return "".join(f"(declare-const {n} {_FP16})\n" for n in names)


def _f32(x: str) -> str:
    return f"((_ to_fp 8 24) RTZ {x})"


def _in_fp16(x: str) -> str:
    """x (fp32) is an fp16 value: rounding it to fp16 and back gives it again."""
    return f"(= {x} {_f32(f'((_ to_fp 5 11) RNE {x})')})"


def _finite(*xs: str) -> str:
    return "".join(f"(assert (not (or (fp.isNaN {x}) (fp.isInfinite {x}))))\n" for x in xs)


def _listing_1_1() -> str:
    """Listing 1.1: for every rounding mode the fp16 product differs from the fp32 one."""
    out = _decl("a", "b")
    for rm in ("RNE", "RTZ", "RTN", "RTP"):
        half = _f32(f"(fp.mul {rm} a b)")
        single = f"(fp.mul {rm} {_f32('a')} {_f32('b')})"
        out += f"(assert (not (= {half} {single})))\n"
    return out


def _property_1() -> str:
    """Property 1: a*b + c*d in fp16 arithmetic differs from the fp32 sum of the fp32
    products, where the fp32 sum is an fp16 value and neither product is (finite inputs)."""
    out = _decl("a", "b", "c", "d") + _finite("a", "b", "c", "d")
    out += f"(define-fun p () {_FP32} (fp.mul RNE {_f32('a')} {_f32('b')}))\n"
    out += f"(define-fun q () {_FP32} (fp.mul RNE {_f32('c')} {_f32('d')}))\n"
    out += f"(define-fun s () {_FP32} (fp.add RTZ p q))\n"
    out += f"(define-fun h () {_FP16} (fp.add RNE (fp.mul RNE a b) (fp.mul RNE c d)))\n"
    out += f"(assert (not {_in_fp16('p')}))\n(assert (not {_in_fp16('q')}))\n"
    out += f"(assert {_in_fp16('s')})\n" + _finite("s")
    out += f"(assert (not (= {_f32('h')} s)))\n"
    return out


def _property_2() -> str:
    """Property 2: one fp32 product of fp16 inputs rounded to fp16 with RNE vs RZ."""
    out = _decl("a", "b")
    out += f"(define-fun p () {_FP32} (fp.mul RNE {_f32('a')} {_f32('b')}))\n"
    out += "(assert (not (= ((_ to_fp 5 11) RNE p) ((_ to_fp 5 11) RTZ p))))\n"
    return out


def _property_3() -> str:
    """Property 3: (p1 + p2) + p3 vs p1 + (p2 + p3), RZ additions of fp32 products."""
    out = _decl("a1", "a2", "a3", "b1", "b2", "b3")
    for i in (1, 2, 3):
        out += f"(define-fun p{i} () {_FP32} (fp.mul RNE {_f32(f'a{i}')} {_f32(f'b{i}')}))\n"
    out += (
        "(assert (not (= (fp.add RTZ (fp.add RTZ p1 p2) p3) (fp.add RTZ p1 (fp.add RTZ p2 p3)))))\n"
    )
    return out


PAPER_FORMULAS: dict[str, tuple[str, Callable[[], str]]] = {
    "mul": ("Listing 1.1 (four rounding modes)", _listing_1_1),
    "add16": ("Property 1 (with its side conditions)", _property_1),
    "rfinal": ("Property 2 (RNE vs RTZ)", _property_2),
    "order": ("Property 3", _property_3),
}
"""Table 4 rows whose query the paper states in floating-point terms (§4): the formula as
SMT-LIB text. 'Rounding of Accumulator' and 'Normalization' use the paper's own
bit-vector accumulator, and the carry-bit rows its parametric model: no text to rewrite."""


# --- the floor: the smallest formulas, timed the same way ---------------------------------

_BARE_RFINAL = """(declare-fun a () (_ BitVec 16))
(declare-fun b () (_ BitVec 16))
(define-fun p () (_ BitVec 22) (bvmul ((_ zero_extend 11) (concat #b1 ((_ extract 9 0) a)))
                                      ((_ zero_extend 11) (concat #b1 ((_ extract 9 0) b)))))
(define-fun hi () Bool (= ((_ extract 21 21) p) #b1))
(define-fun rest () (_ BitVec 11) (ite hi ((_ extract 10 0) p) (concat #b0 ((_ extract 9 0) p))))
(define-fun half () (_ BitVec 11) (ite hi #b10000000000 #b01000000000))
(define-fun lsb () Bool (= #b1 (ite hi ((_ extract 11 11) p) ((_ extract 10 10) p))))
(assert (not (= ((_ extract 14 10) a) #b00000)))
(assert (not (= ((_ extract 14 10) b) #b00000)))
(assert (or (bvugt rest half) (and (= rest half) lsb)))
"""

FLOOR_FORMULAS: dict[str, tuple[str, str]] = {
    "one variable": (
        "`x = 0x3c00` for one 16-bit x: what any query costs",
        "(declare-fun x () (_ BitVec 16))\n(assert (= x #x3c00))\n",
    ),
    "bare rfinal": (
        "the question of Rounding of Final Result and nothing else: two normal fp16 "
        "significands whose 22-bit product rounds differently to 11 bits under RNE and RZ "
        "(no exponents, subnormals, specials, alignment or unit)",
        _BARE_RFINAL,
    ),
}
"""Formulas smaller than any model query, timed like the queries: the cost below which
no encoding of a Table 4 question can go on this machine (docs/encoding.md, study x)."""
