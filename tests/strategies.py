"""Input generators shared by the agreement tests: the distinct instruction models of
every preset, bit patterns of interesting values, and random dot-product rows.

Rows are mixtures (each row picks one kind of `ROW_KINDS`, the tests' kinds of the
shared vocabulary `tensorcore_smt.validation.kinds`), realised here as:

- ``bits``: every operand is fully random bits (NaN, Inf, zeros and subnormals occur
  at their natural rates, high for the narrow formats);
- ``normal``: exponents drawn from a narrow window, c's exponent near the products', random
  signs, so terms overlap, carries happen and sums cancel partly;
- ``cancel``: a ``normal`` row whose second half of products negates the first half (with
  a perturbed low mantissa bit now and then) and whose c is near zero or near the
  negated sum, so the result cancels to zero or to a few low bits;
- ``special``: a ``normal`` row with many operands replaced by special patterns (signed
  zeros, smallest/largest subnormals and normals, Inf, NaNs, TF32 patterns whose
  ignored low bits are set).

The same generators exist as numpy functions (large runs) and as hypothesis strategies
(shrinkable, for the default run).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from hypothesis import strategies as st

from tensorcore_smt.formats import Format, FormatSpec, Specials
from tensorcore_smt.model.params import ModelParams, Sparsity
from tensorcore_smt.spec.presets import PRESETS
from tensorcore_smt.validation.kinds import TESTS, RowKind

ROW_KINDS: tuple[RowKind, ...] = TESTS


# --- the models under test ------------------------------------------------------------


def distinct_models() -> list[tuple[ModelParams, list[tuple[str, str]]]]:
    """Every distinct ModelParams of every preset, with the (arch, instruction) names that
    share it, in a stable order (presets and instructions in definition order). Sparse
    instructions (mma.sp) take metadata and fewer a than b: tests/test_sparse.py covers
    them (their dense units are among these)."""
    seen: dict[ModelParams, list[tuple[str, str]]] = {}
    for arch, preset in PRESETS.items():
        for name, ins in preset.instructions.items():
            if ins.params.sparse != Sparsity.NONE:
                continue
            seen.setdefault(ins.params, []).append((arch, name))
    return list(seen.items())


def fast_run_params(models: list) -> list:
    """`models` as pytest parameters, those of CDNA4's scaled f8f6f4 family with two
    different operand formats marked slow: the default run takes its 10 forms with
    a = b (every format, both shapes), `-m slow` all 50."""
    import pytest

    out = []
    for m in models:
        p, names = m
        arch, name = names[0]
        mixed = name.startswith("v_mfma_scale_") and p.a_fmt != p.b_fmt
        marks = [pytest.mark.slow] if mixed else []
        out.append(pytest.param(m, id=model_id(m), marks=marks))
    return out


def model_id(entry: tuple[ModelParams, list[tuple[str, str]]]) -> str:
    """A readable pytest id: the first arch/instruction that uses the model."""
    arch, name = entry[1][0]
    return f"{arch}:{name}".replace("::", "-")  # "::" would split a pytest node id


# --- interesting bit patterns -----------------------------------------------------------


def _body(s: FormatSpec) -> int:
    return s.ebits + s.mbits


def _pack(s: FormatSpec, sign: int, e: int, m: int) -> int:
    sign_bit = (sign << _body(s)) if s.signed else 0
    return (sign_bit | (e << s.mbits) | m) << s.ignored_low


def special_patterns(fmt: Format) -> list[int]:
    """Signed zeros, extreme subnormals and normals, one, Inf and NaNs of `fmt` (storage
    width patterns, sorted, without duplicates); for an integer format its extremes, 0
    and +-1."""
    s = fmt.spec
    if s.is_integer:
        lo, hi = s.int_range
        vals = {lo, lo + 1, max(lo, -1), 0, min(hi, 1), hi - 1, hi}
        return sorted({v % (1 << s.storage) for v in vals})
    top_e = (1 << s.ebits) - 1
    m_all = (1 << s.mbits) - 1
    out: set[int] = set()
    signs = (0, 1) if s.signed else (0,)
    for sg in signs:
        out.add(_pack(s, sg, 0, 0))  # zero
        if s.mbits:
            out.add(_pack(s, sg, 0, 1))  # smallest subnormal
            out.add(_pack(s, sg, 0, m_all))  # largest subnormal
        out.add(_pack(s, sg, 1, 0))  # smallest normal
        out.add(_pack(s, sg, s.bias, 0) if 0 < s.bias <= top_e else _pack(s, sg, 1, 0))  # one
        out.add(_pack(s, sg, top_e - 1, m_all))  # large finite
        out.add(_pack(s, sg, top_e, 0))  # Inf (IEEE), a large finite otherwise
        out.add(_pack(s, sg, top_e, m_all))  # NaN (IEEE, FN) or max finite (NONE)
        if s.mbits > 1:
            out.add(_pack(s, sg, top_e, 1))  # signalling NaN (IEEE)
            out.add(_pack(s, sg, top_e, 1 << (s.mbits - 1)))  # quiet NaN (IEEE)
            out.add(_pack(s, sg, top_e, m_all - 1))  # max finite (FN)
    if s.specials == Specials.FNUZ:
        out.add(1 << (s.storage - 1))  # the only NaN
    if s.ignored_low:
        # Low bits a TF32 unit drops: a NaN with only low payload bits reads as Inf, and
        # a finite value's low bits must be ignored.
        low = (1 << s.ignored_low) - 1
        for base in list(out):
            out.add(base | low)
            out.add(base | 1)
    if s.ignored_high:
        out |= {x | (1 << (s.storage - 1)) for x in list(out)}
    return sorted(x for x in out if x < (1 << s.storage))


# --- numpy generators --------------------------------------------------------------------


def rand_bits(rng: np.random.Generator, width: int, shape) -> np.ndarray:
    """Uniform random `width`-bit patterns as uint64 (any width up to 64)."""
    hi = rng.integers(0, 1 << 32, size=shape, dtype=np.uint64)
    lo = rng.integers(0, 1 << 32, size=shape, dtype=np.uint64)
    v = (hi << np.uint64(32)) | lo
    if width < 64:
        v &= np.uint64((1 << width) - 1)
    return v


def _compose(s: FormatSpec, sign, e, m) -> np.ndarray:
    """Patterns from sign, biased-exponent and mantissa arrays (uint64)."""
    v = (e.astype(np.uint64) << np.uint64(s.mbits)) | m.astype(np.uint64)
    if s.signed:
        v |= sign.astype(np.uint64) << np.uint64(_body(s))
    return v << np.uint64(s.ignored_low)


def _random_low(rng: np.random.Generator, s: FormatSpec, shape) -> np.ndarray:
    """Bits below the payload (TF32's ignored bits): random, or zero half of the time."""
    if not s.ignored_low:
        return np.zeros(shape, dtype=np.uint64)
    low = rand_bits(rng, s.ignored_low, shape)
    return np.where(rng.random(shape) < 0.5, low, np.uint64(0))


def _windowed(rng: np.random.Generator, s: FormatSpec, centre: np.ndarray, width: int, shape):
    """Values whose biased exponents lie within `width` of `centre` (clipped to the
    finite range, 0 meaning subnormal), random sign and mantissa."""
    top = (1 << s.ebits) - 1
    e_hi = top - 1 if s.specials in (Specials.IEEE, Specials.E8M0) else top
    off = rng.integers(-width, width + 1, size=shape)
    e = np.clip(centre.reshape(-1, *([1] * (len(shape) - 1))) + off, 0, e_hi)
    m = rand_bits(rng, s.mbits, shape) if s.mbits else np.zeros(shape, dtype=np.uint64)
    # Mantissas with only high or only low bits set make carries and sticky bits likely.
    pick = rng.random(shape)
    if s.mbits:
        m = np.where(pick < 0.15, np.uint64((1 << s.mbits) - 1), m)
        m = np.where((pick >= 0.15) & (pick < 0.25), np.uint64(1 << (s.mbits - 1)), m)
        m = np.where((pick >= 0.25) & (pick < 0.3), np.uint64(1), m)
    sign = rng.integers(0, 2, size=shape)
    v = _compose(s, sign, e, m) | _random_low(rng, s, shape)
    if s.specials == Specials.FN:  # the all-ones pattern is NaN: keep windows finite
        nan = ((v >> np.uint64(s.ignored_low)) & np.uint64((1 << _body(s)) - 1)) == np.uint64(
            (1 << _body(s)) - 1
        )
        v = np.where(nan, v - np.uint64(1 << s.ignored_low), v)
    if s.specials == Specials.FNUZ:  # 0x80 is NaN, not -0
        v = np.where(v == np.uint64(1 << (s.storage - 1)), np.uint64(0), v)
    return v


def _exp_of(s: FormatSpec, bits: np.ndarray) -> np.ndarray:
    """Unbiased exponents (emin for subnormals) as int64."""
    e = ((bits >> np.uint64(s.ignored_low + s.mbits)) & np.uint64((1 << s.ebits) - 1)).astype(
        np.int64
    )
    return np.maximum(e, 1) - s.bias


def _negate(s: FormatSpec, bits: np.ndarray) -> np.ndarray:
    if not s.signed:
        return bits
    return bits ^ np.uint64(1 << (s.storage - 1 - s.ignored_high))


def random_rows(
    rng: np.random.Generator, p: ModelParams, n: int, kinds: Iterable[RowKind] = ROW_KINDS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`n` rows (a (n,K), b (n,K), c (n,)) of uint64 patterns for model `p`, each row of
    a kind drawn uniformly from `kinds`."""
    kinds = list(kinds)
    K = p.K
    if p.a_fmt.spec.is_integer:  # integer units: the validation mix read for integers
        from tensorcore_smt.validation.int_rows import integer_rows

        a, b, c, _ = integer_rows(p.a_fmt, p.b_fmt, p.c_fmt, K, n, int(rng.integers(1 << 31)))
        return a, b, c
    sa, sb, sc = p.a_fmt.spec, p.b_fmt.spec, p.c_fmt.spec
    kind = rng.integers(0, len(kinds), size=n)
    a = rand_bits(rng, sa.storage, (n, K))
    b = rand_bits(rng, sb.storage, (n, K))
    c = rand_bits(rng, sc.storage, (n,))

    # normal (window) rows: a and b exponents around random centres, c near their product.
    ca = rng.integers(0, (1 << sa.ebits), size=n)
    cb = rng.integers(0, (1 << sb.ebits), size=n)
    wa = _windowed(rng, sa, ca, int(rng.integers(0, 3)), (n, K))
    wb = _windowed(rng, sb, cb, int(rng.integers(0, 3)), (n, K))
    prod_e = _exp_of(sa, wa).max(axis=1) + _exp_of(sb, wb).max(axis=1)
    cc = np.clip(prod_e + sc.bias + rng.integers(-3, 4, size=n), 0, (1 << sc.ebits) - 1)
    wc = _windowed(rng, sc, cc, 1, (n,))

    # cancel rows: the second half of the products negates the first half.
    xa, xb, xc = wa.copy(), wb.copy(), wc.copy()
    h = K // 2
    if h:
        xa[:, h : 2 * h] = _negate(sa, wa[:, :h])
        xb[:, h : 2 * h] = wb[:, :h]
        flip = rng.random((n, h)) < 0.3  # perturb one low mantissa bit
        xa[:, h : 2 * h] = np.where(
            flip, xa[:, h : 2 * h] ^ np.uint64(1 << sa.ignored_low), xa[:, h : 2 * h]
        )
        swap = rng.random((n, h)) < 0.5  # and the operand order
        ta, tb = xa[:, h : 2 * h].copy(), xb[:, h : 2 * h].copy()
        if p.a_fmt == p.b_fmt:
            xa[:, h : 2 * h] = np.where(swap, tb, ta)
            xb[:, h : 2 * h] = np.where(swap, ta, tb)
    small_c = rng.random(n) < 0.5
    xc = np.where(small_c, wc & np.uint64(((1 << (sc.mbits + 1)) - 1) << sc.ignored_low), xc)

    # special rows: normal rows with special patterns sprinkled in.
    pa, pb, pc = (
        np.array(special_patterns(f), dtype=np.uint64) for f in (p.a_fmt, p.b_fmt, p.c_fmt)
    )
    ya = np.where(rng.random((n, K)) < 0.3, rng.choice(pa, size=(n, K)), wa)
    yb = np.where(rng.random((n, K)) < 0.3, rng.choice(pb, size=(n, K)), wb)
    yc = np.where(rng.random(n) < 0.5, rng.choice(pc, size=n), wc)

    for idx, name in enumerate(kinds):
        sel = kind == idx
        if name == RowKind.BITS:
            continue
        src = {
            RowKind.NORMAL: (wa, wb, wc),
            RowKind.CANCEL: (xa, xb, xc),
            RowKind.SPECIAL: (ya, yb, yc),
        }[RowKind(name)]
        a[sel], b[sel], c[sel] = src[0][sel], src[1][sel], src[2][sel]
    return a, b, c


# --- hypothesis strategies -----------------------------------------------------------------


def bits_strategy(fmt: Format) -> st.SearchStrategy[int]:
    """One operand: fully random bits, a special pattern, or a finite value with a small
    exponent field (so that small random rows still overlap)."""
    s = fmt.spec
    specials = special_patterns(fmt)
    top = (1 << s.ebits) - 1
    near = st.builds(
        lambda sg, e, m, low: _pack(s, sg, e, m) | low,
        st.integers(0, 1 if s.signed else 0),
        st.integers(max(0, s.bias - 3), min(top - 1, s.bias + 3)) if s.bias else st.just(0),
        st.integers(0, (1 << s.mbits) - 1),
        st.integers(0, (1 << s.ignored_low) - 1) if s.ignored_low else st.just(0),
    )
    return st.one_of(
        st.integers(0, (1 << s.storage) - 1),
        st.sampled_from(specials),
        near,
    )


@st.composite
def rows_strategy(draw, p: ModelParams, max_rows: int = 4):
    """A batch of rows for model `p` as (a (n,K), b (n,K), c (n,)) uint64 arrays: each
    row either mixes `bits_strategy` operands, or is a numpy mixture row from a drawn seed
    (so windows and cancellations are exercised too)."""
    n = draw(st.integers(1, max_rows))
    a_rows, b_rows, c_rows = [], [], []
    for _ in range(n):
        if draw(st.booleans()):
            a_rows.append(draw(st.lists(bits_strategy(p.a_fmt), min_size=p.K, max_size=p.K)))
            b_rows.append(draw(st.lists(bits_strategy(p.b_fmt), min_size=p.K, max_size=p.K)))
            c_rows.append(draw(bits_strategy(p.c_fmt)))
        else:
            seed = draw(st.integers(0, 2**32 - 1))
            kind = draw(st.sampled_from(ROW_KINDS))
            a, b, c = random_rows(np.random.default_rng(seed), p, 1, [kind])
            a_rows.append([int(x) for x in a[0]])
            b_rows.append([int(x) for x in b[0]])
            c_rows.append(int(c[0]))
    return (
        np.array(a_rows, dtype=np.uint64).reshape(n, p.K),
        np.array(b_rows, dtype=np.uint64).reshape(n, p.K),
        np.array(c_rows, dtype=np.uint64),
    )


# --- worker functions for the slow runs (importable by spawned processes) ------------------


def _lookup(arch: str, name: str) -> ModelParams:
    return PRESETS[arch].instructions[name].params


def compare_concrete_chunk(arch: str, name: str, seed: int, n: int) -> dict:
    """Vector vs concrete on `n` mixture rows; the differing rows (at most 5) as hex."""
    from tensorcore_smt.api import simulate_one, simulate_params

    p = _lookup(arch, name)
    a, b, c = random_rows(np.random.default_rng(seed), p, n)
    vec = simulate_params(p, a, b, c)
    examples = []
    for i in range(n):
        want = simulate_one(p, [int(x) for x in a[i]], [int(x) for x in b[i]], int(c[i]))
        if int(vec[i]) != want and len(examples) < 5:
            examples.append(
                {
                    "a": [hex(int(x)) for x in a[i]],
                    "b": [hex(int(x)) for x in b[i]],
                    "c": hex(int(c[i])),
                    "vector": hex(int(vec[i])),
                    "concrete": hex(want),
                }
            )
    return {"rows": n, "examples": examples}
