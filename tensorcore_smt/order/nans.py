"""The NaN rule of a revealed hypothesis, learnt from the library's outputs on NaN probes.

An SSE/AVX operation with NaN operands returns the first of them, made quiet (Intel SDM
Vol. 1 §4.8.3.5, Table 4-7: with two sources, the first source operand's NaN; the AMD64
APM Vol. 1's SSE NaN rules likewise). For VFMADD231PS (dest = src2 * src3 + dest), numpy's OpenBLAS and
torch's CPU matmul return the first NaN of the two factors, in the order the kernel passes
them, then that of the addend, the running sum (a NaN of a later product replaces a NaN
sum): measured with single NaNs in a_k, in b_k, in both and at an earlier k. Which of
a_k and b_k the kernel passes first (a broadcast element of B times a vector of A, or the
reverse) is its own choice: OpenBLAS picks a kernel per CPU (Haswell, SkylakeX, Zen),
torch's CPU GEMM has its own. So the NaN priority between a_k, b_k and the running sum is
a property of the library build, not of the ISA alone, and `learn_nan_rules` reads it off
the library: a short batch of calls on inputs with quiet
NaNs of distinct payloads in A only, in B only, in both (at the same k, at an earlier and
at a later one) and two in one row (a NaN earlier in the chain, the running sum), and
takes the first NaN rule the instruction can express (model/params.py NanRule: the
preset's own first) under which the class's hypothesis gives every NaN output's bits.
"""

from __future__ import annotations

import numpy as np

from ..formats import Format
from ..gemm.hypothesis import split_gemm_text

NAN_CALLS = 4
"""Library calls of the NaN probe batch."""
NAN_ROWS = 32
"""Rows (and columns) of a class's outputs compared per call, at most."""


def nan_probes(m: int, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N) in float64, exact in fp32: normal values, with quiet NaNs of
    distinct payloads and random signs, none to two in each row of A and each column of B,
    at k drawn from a few shared positions (so that an a_k and a b_k meet at the same k,
    and each comes before and after the other) and at random ones."""
    rng = np.random.Generator(np.random.PCG64([seed, m, n, k, 11]))
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    shared = np.unique(np.r_[0, k // 2, k - 1, rng.integers(0, k, 2)])
    payloads = iter(rng.choice(1 << 22, size=2 * (m + n) + 8, replace=False))

    def nan() -> int:
        return int(rng.integers(0, 2)) << 31 | 0x7FC00000 | int(next(payloads))

    def place(view: np.ndarray, count: int) -> None:
        for i in range(count):
            for kk in rng.choice(k, size=min(int(rng.integers(0, 3)), k), replace=False):
                kk = int(rng.choice(shared)) if rng.random() < 0.5 else int(kk)
                view[i, kk] = nan()

    place(a.view(np.uint32), m)
    place(b.T.view(np.uint32), n)
    return a.astype(np.float64), b.astype(np.float64)


def with_nan_rule(hyp: str, rule: str) -> str:
    """`ARCH[...]/SCHEDULE` with `nan_rule=rule` in its variant's brackets (in place of
    one there)."""
    variant, sched = split_gemm_text(hyp)
    fields = []
    if variant.endswith("]") and "[" in variant:
        variant, inner = variant[:-1].split("[", 1)
        fields = [f for f in inner.split(",") if f.strip() and not f.strip().startswith("nan_rule")]
    variant = f"{variant}[{','.join([*fields, f'nan_rule={rule}'])}]"
    return variant if sched is None else f"{variant}/{sched}"


def candidates(hyp: str, instr: str) -> list[str]:
    """The NaN rules the hypothesis's instruction reads (model/params.py NanRule, those
    its algorithm reads), its own first."""
    from ..api import resolve
    from ..errors import UserError
    from ..model.params import NanRule

    variant, _ = split_gemm_text(hyp)
    own = resolve(variant, instr).nan_rule
    out = [own.value]
    for rule in NanRule:
        if rule == own:
            continue
        try:
            resolve(split_gemm_text(with_nan_rule(hyp, rule.value))[0], instr)
        except (UserError, ValueError):
            continue
        out.append(rule.value)
    return out


def _reproduces(hyp: str, instr: str, batch: list, rows, cols, mask: np.ndarray) -> bool:
    """Whether `hyp` gives the oracle's bits at every NaN output (the oracle's or its
    own) of the grid rows x cols where `mask` holds, on every call of `batch`."""
    from ..gemm.emulate import matmul

    for a, b, d in batch:
        got = np.asarray(matmul(hyp, a[rows], b[:, cols], instr=instr)).view(np.uint32)
        want = d[np.ix_(rows, cols)].view(np.uint32)
        nan = (np.isnan(got.view(np.float32)) | np.isnan(want.view(np.float32))) & mask
        if (got[nan] != want[nan]).any():
            return False
    return True


def learn_nan_rules(classes, orc, k: int, labels: np.ndarray, seed: int = 0) -> int:
    """Give each class's hypotheses (`ClassResult.hypothesis` and `others`) the NaN rule
    under which its hypothesis reproduces the oracle's NaN outputs on the NaN probe batch
    (`nan_probes`, NAN_CALLS calls), written `ARCH[nan_rule=...]/...` where it is not the
    preset's. Unchanged where the oracle answers only what was recorded, takes other than
    fp32 in and out, or no rule reproduces them (the check on NaN rows shows that). The
    oracle calls made."""
    todo = [c for c in classes if c.hypothesis is not None]
    if not todo or orc.fmt != Format.FP32 or orc.out != Format.FP32:
        return 0
    before = orc.calls
    m, n = orc.check_shape(k)
    if orc.outputs(np.zeros((1, k)), np.zeros((k, 1))) is None:
        orc.calls = before
        return 0
    orc.calls = before
    if labels.shape != (m, n):
        labels = np.zeros((m, n), np.int64)
    rng = np.random.default_rng(seed)
    batch = []
    for call in range(NAN_CALLS):
        a, b = nan_probes(m, k, n, seed + 7919 * call)
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.asarray(orc.outputs(a, b), np.float32)
        batch.append((a.astype(np.float32), b.astype(np.float32), d))
    for c, cls in enumerate(classes):
        if cls.hypothesis is None:
            continue
        rows = np.flatnonzero((labels == c).any(axis=1))
        rows = rng.choice(rows, min(NAN_ROWS, len(rows)), replace=False)
        cols = np.flatnonzero((labels[rows] == c).any(axis=0))
        cols = rng.choice(cols, min(NAN_ROWS, len(cols)), replace=False)
        mask = labels[np.ix_(rows, cols)] == c

        rules = candidates(cls.hypothesis, cls.instr)
        own = rules[0]
        for rule in rules:
            hyp = cls.hypothesis if rule == own else with_nan_rule(cls.hypothesis, rule)
            if _reproduces(hyp, cls.instr, batch, rows, cols, mask):
                if rule != own:
                    cls.hypothesis = hyp
                    cls.others = [with_nan_rule(o, rule) for o in cls.others]
                break
    return orc.calls - before
