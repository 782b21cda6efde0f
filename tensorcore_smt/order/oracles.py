"""The libraries `reveal` can ask, as data (`ORACLES`), and the one way each is called.

An oracle answers pair sizes (probes.py) for K products: a GEMM `sizes_call(k, P, Q)`, the
pair (P[m], Q[n]) in every output (m, n) of one call (classes.py chooses P and Q); a GEMV
`column_call`, one pivot against M rows a call; a dot `query(pivot, others)`, one call a
pair; a recording `full(k)`, every pair of its one K x K call. `random(k, seed)` runs the library on random inputs
for the check of what was learnt. `calls` counts the library calls made.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..formats import Format
from ..spec.datadirs import data_dir
from .probes import (
    EXPONENTS,
    PairValues,
    check_counts_exact,
    counts_to_sizes,
    pair_inputs,
    pair_values,
)

DTYPES = {"fp32": Format.FP32, "fp16": Format.FP16, "bf16": Format.BF16}

CPU_ACC_BITS = 53
"""The widest accumulator a CPU library might keep partial sums in (a C `double`:
OpenBLAS's dot kernels add their tail in double), so the probe holds for any of them."""


@dataclass(frozen=True)
class OracleSpec:
    """One entry of the registry: the call, what it is, the input formats it takes."""

    name: str
    kind: str  # dot, gemv, gemm or recorded
    doc: str
    dtypes: tuple[str, ...]


ORACLES: dict[str, OracleSpec] = {
    s.name: s
    for s in (
        OracleSpec(
            "numpy:dot", "dot", "numpy.dot of two 1-D float32 arrays (BLAS sdot)", ("fp32",)
        ),
        OracleSpec(
            "numpy:gemv",
            "gemv",
            "numpy.matmul of an M x K matrix and a K-vector (BLAS sgemv)",
            ("fp32",),
        ),
        OracleSpec(
            "numpy:matmul",
            "gemm",
            "numpy.matmul of M x K and K x N float32 (BLAS sgemm)",
            ("fp32",),
        ),
        OracleSpec(
            "torch:cpu",
            "gemm",
            "torch.matmul on the CPU (the output in the input's dtype)",
            ("fp32", "bf16", "fp16"),
        ),
        OracleSpec(
            "torch:cuda",
            "gemm",
            "torch.matmul on a CUDA GPU (fp16 and bf16 with an fp32 output)",
            ("fp32", "bf16", "fp16"),
        ),
        OracleSpec(
            "model:HYP",
            "gemm",
            "this project's model of GEMM hypothesis HYP (tc.matmul), e.g. "
            "model:hopper/serial[split_k=2]: the method tried on a known order",
            ("fp32", "bf16", "fp16"),
        ),
        OracleSpec(
            "h100:CALL",
            "recorded",
            "the H100 pair probes recorded in results/hardware/h100/gemm/CALL.npz",
            (),
        ),
    )
}
"""Every oracle by name (`h100:CALL` names one recorded call, e.g. h100:fp16-f32out)."""

H100_CALLS = {
    "fp16-f32out": Format.FP16,
    "bf16-f32out": Format.BF16,
    "tf32": Format.TF32,
    "fp32": Format.FP32,
}
"""The recorded calls whose pair probes read back exactly (fp32 outputs)."""

GPU_ARCH = {
    (7, 0): "volta",
    (7, 5): "turing",
    (8, 0): "ampere",
    (8, 6): "ampere",
    (8, 9): "ada",
    (9, 0): "hopper",
}
"""CUDA compute capability -> the preset of that architecture."""


class Oracle:
    """A library call asked pair probes. `arch` and `instr`: the preset (and instruction,
    None for the default) a GEMM hypothesis is sought in (a CPU library: x86-fma's fp32
    FMA, the operation its SIMD lanes chain), None where the library runs on no modelled
    unit; `fmt` the input format, `out` the output format."""

    name: str
    fmt: Format
    out: Format
    arch: str | None = None
    label: str | None = None  # the variant text hypotheses are written with
    instr: str | None = None
    acc_bits: int = CPU_ACC_BITS
    subnormal_inputs: bool = False
    widen: bool = False  # inputs read as fp32 by the hypothesis (a CPU's bf16 GEMM)
    also: tuple[tuple[str, str], ...] = ()
    """Further (arch, instruction) a hypothesis is sought on where `arch` has none."""
    unfused: str | None = None
    """The variant of `arch` whose steps round each product before adding it (a separate
    multiply and add): its schedules are the hypotheses tried after the fused ones."""

    def __init__(self) -> None:
        self.calls = 0
        self.probe_outputs = 0  # outputs the probe calls computed (each sums K products)
        self._pv: dict[int, PairValues] = {}

    def window(self, k: int) -> int | None:
        """Units one probe call may carry where fewer than K - 2 (None: all of them):
        the oracle then sums each pair's count over calls with units on one window of k
        each (Gemm.windowed_sizes)."""
        return None

    def values(self, k: int) -> PairValues:
        if k not in self._pv:
            try:
                cap = self.window(k)
                if cap is None:
                    check_counts_exact(self.out, k)
                self._pv[k] = pair_values(
                    self.fmt, self.out, cap or k, self.acc_bits, self.subnormal_inputs
                )
            except UserError as e:
                why = (
                    " (it reads subnormal inputs as zero, so the probe must use normal ones)"
                    if isinstance(self, Model) and not self.subnormal_inputs
                    else ""
                )
                raise UserError(
                    f"{self.name} ({self.fmt.spec.name} in, {self.out.spec.name} out): the "
                    f"pair probes cannot read this unit{why}: {e}"
                ) from None
        return self._pv[k]

    def check(self, k: int) -> None:
        """UserError when this oracle cannot be asked about K products."""
        self.values(k)

    def full(self, k: int) -> np.ndarray | None:
        """All pair sizes (K x K) when one call holds them, else None."""
        return None

    def query(self, k: int, pivot: int, others: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def random(self, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A (M x K), B (K x N) random in the input format, and the library's D (M x N)."""
        raise NotImplementedError

    def outputs(self, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        """The library's D (M x N) on A (M x K) and B (K x N) given in float64, exact in
        the input format; None where the oracle answers only what was recorded."""
        return None

    def check_shape(self, k: int) -> tuple[int, int]:
        """M x N of the calls of the check on discriminating inputs."""
        return (k, k)

    def _sizes(self, d: np.ndarray, k: int) -> np.ndarray:
        return counts_to_sizes(d, self.values(k), k, self.name)


def np_dtype(fmt: Format):
    from ..hardware.recordings import NP_DTYPE

    return NP_DTYPE[fmt]


def _random_inputs(fmt: Format, m: int, n: int, k: int, seed: int):
    rng = np.random.Generator(np.random.PCG64([seed, m, n, k]))
    a = rng.standard_normal((m, k)).astype(np.float32).astype(np_dtype(fmt))
    b = rng.standard_normal((k, n)).astype(np.float32).astype(np_dtype(fmt))
    return a, b


DOT_BATCH = 4096
"""Dot products of one random check round (one library call each)."""


CPU_FMA = ("x86-fma", "vfmadd231ps")
"""The unit a CPU library's hypotheses are sought on: x86 FMA3's fp32 fused multiply-add
(archs/x86.toml), which OpenBLAS's and torch's fp32 kernels chain in SIMD lanes."""
CPU_MUL_ADD = "x86-fma[fused_products=false]"
"""x86-fma with each product rounded to fp32 before it is added (VMULPS, then VADDPS):
the arithmetic of a kernel that does not fuse (OpenBLAS's sdot body on some targets,
torch's CPU GEMV for M = 1), the same instruction's schedules otherwise."""
CPU_BF16 = ("x86-avx512bf16", "vdpbf16ps")
"""The unit a CPU's bf16 GEMM is also sought on: one fp32 lane of VDPBF16PS (two FMAs,
the odd product of a pair first), which oneDNN's bf16 kernels chain on AVX512_BF16."""


class NumpyDot(Oracle):
    name, fmt, out = "numpy:dot", Format.FP32, Format.FP32
    arch, instr = CPU_FMA
    unfused = CPU_MUL_ADD

    def query(self, k, pivot, others):
        pv = self.values(k)
        a = np.full(k, pv.t, np.float32)
        b = np.full(k, pv.w, np.float32)
        a[pivot] = pv.s
        out = np.empty(len(others), np.float32)
        for i, j in enumerate(others):
            b[j] = pv.d
            out[i] = np.dot(a, b)
            b[j] = pv.w
        self.calls += len(others)
        return self._sizes(out, k)

    def outputs(self, a, b):
        a = np.ascontiguousarray(a, np.float32)
        cols = [np.ascontiguousarray(b[:, n], np.float32) for n in range(b.shape[1])]
        self.calls += a.shape[0] * len(cols)
        return np.array([[np.dot(row, col) for col in cols] for row in a], np.float32)

    def check_shape(self, k):
        return (1024, 4)

    def random(self, k, seed):
        a, b = _random_inputs(self.fmt, DOT_BATCH, 1, k, seed)
        d = np.array([[np.dot(a[m], b[:, 0])] for m in range(len(a))], np.float32)
        self.calls += len(a)
        return a, b, d


class NumpyGemv(Oracle):
    name, fmt, out = "numpy:gemv", Format.FP32, Format.FP32
    arch, instr = CPU_FMA
    unfused = CPU_MUL_ADD

    def __init__(self, rows: int | None) -> None:
        super().__init__()
        self.rows = rows

    def column_call(self, k: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The pair sizes (M x 1) of one call y = A x whose row m probes (rows[m],
        cols[0]); -1 where they are equal."""
        pv = self.values(k)
        a, b = pair_inputs(pv, rows, cols[:1], k)
        y = np.matmul(a.astype(np.float32), b[:, 0].astype(np.float32))
        self.calls += 1
        s = np.full((len(rows), 1), -1, np.int64)
        ok = rows != cols[0]
        s[ok, 0] = self._sizes(y[ok], k)
        return s

    def outputs(self, a, b):
        a = np.ascontiguousarray(a, np.float32)
        self.calls += b.shape[1]
        return np.stack(
            [np.matmul(a, np.ascontiguousarray(b[:, n], np.float32)) for n in range(b.shape[1])],
            axis=1,
        )

    def check_shape(self, k):
        return (self.rows or k, 1)

    def random(self, k, seed):
        a, b = _random_inputs(self.fmt, self.rows or k, 1, k, seed)
        self.calls += 1
        return a, b, np.matmul(a, b[:, 0])[:, None]


class Gemm(Oracle):
    """An M x N x K GEMM call (`run(a, b)` on float64 inputs rounded to the format)."""

    def __init__(self, shape: tuple[int, int] | None) -> None:
        super().__init__()
        self.shape = shape

    def mn(self, k: int) -> tuple[int, int]:
        """The probe's M x N: the shape asked, else K x K up to K = 4096 and 256 x 256
        above (a K x K call of larger K holds gigabytes)."""
        if self.shape:
            return self.shape
        return (k, k) if k <= 4096 else (256, 256)

    def run(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _call(self, k, rows, cols):
        a, b = pair_inputs(self.values(k), rows, cols, k, np_dtype(self.fmt))
        self.calls += 1
        self.probe_outputs += len(rows) * len(cols)
        return self.run(a, b)

    def window(self, k: int) -> int | None:
        """2^p for an output format of p bits where counts up to K - 2 are not all exact
        in it (a bf16 output above K = 258), else None."""
        cap = 2 ** EXPONENTS[self.out][2]
        return cap if k - 2 > cap else None

    def sizes_call(self, k: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The pair sizes of one M x N call probing (rows[m], cols[n]) in output (m, n);
        -1 where rows[m] = cols[n] (no pair there)."""
        if self.window(k) is not None:
            return self.windowed_sizes(k, rows, cols)
        d = np.asarray(self._call(k, rows, cols), np.float64)
        s = np.full(d.shape, -1, np.int64)
        ok = rows[:, None] != cols[None, :]
        s[ok] = self._sizes(d[ok], k)
        return s

    def windowed_sizes(self, k: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """`sizes_call` for an output format that counts only `window(k)` units exactly:
        each M x N call carries units t·w on one window W of k only (A's row m: s at
        rows[m], t on W and on the columns' pivots, 0 elsewhere; B's column n: d at
        cols[n], w on W and on the rows' pivots, 0 elsewhere), so output (m, n) counts the
        units of W outside the pair's subtree, and the counts of the windows that cut K
        add up to the pair's count. That holds where no pivot of a row is one of a column
        in the same call (a shared pivot would put a unit outside W): the pairs are asked
        in calls whose rows' and columns' pivots differ in one bit of k, for each bit and
        side, the other rows and columns of the call zero."""
        pv = self.values(k)
        cap = self.window(k) or k
        rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
        need = rows[:, None] != cols[None, :]
        count = np.zeros(need.shape, np.float64)
        done = ~need
        dt = np_dtype(self.fmt)
        for bit in range(max(1, (k - 1).bit_length())):
            for side in (0, 1):
                pairs = (((rows >> bit) & 1) == side)[:, None] & (((cols >> bit) & 1) != side)[
                    None, :
                ]
                pairs &= ~done
                if not pairs.any():
                    continue
                ar, ac = pairs.any(1), pairs.any(0)
                total = np.zeros(need.shape, np.float64)
                for lo in range(0, k, cap):
                    a = np.zeros((len(rows), k), dt)
                    b = np.zeros((k, len(cols)), dt)
                    a[np.ix_(ar, np.r_[lo : min(lo + cap, k), cols[ac]])] = pv.t
                    a[np.flatnonzero(ar), rows[ar]] = pv.s
                    b[np.ix_(np.r_[lo : min(lo + cap, k), rows[ar]], ac)] = pv.w
                    b[cols[ac], np.flatnonzero(ac)] = pv.d
                    self.calls += 1
                    self.probe_outputs += int(ar.sum() * ac.sum())
                    total += np.asarray(self.run(a, b), np.float64)
                count[pairs] = total[pairs]
                done |= pairs
        s = np.full(need.shape, -1, np.int64)
        s[need] = self._sizes(count[need], k)
        return s

    def outputs(self, a, b):
        self.calls += 1
        dt = np_dtype(self.fmt)
        return np.asarray(self.run(a.astype(dt), b.astype(dt)))

    def check_shape(self, k):
        return self.mn(k)

    def random(self, k, seed):
        m, n = self.mn(k)
        a, b = _random_inputs(self.fmt, m, n, k, seed)
        self.calls += 1
        return a, b, self.run(a, b)


class NumpyMatmul(Gemm):
    name, fmt, out = "numpy:matmul", Format.FP32, Format.FP32
    arch, instr = CPU_FMA
    unfused = CPU_MUL_ADD

    def run(self, a, b):
        return np.matmul(a, b)


class TorchGemm(Gemm):
    def __init__(self, device: str, fmt: Format, shape) -> None:
        super().__init__(shape)
        import torch

        self.torch = torch
        self.device = device
        self.fmt = fmt
        self.name = f"torch:{device}"
        self.out = fmt if device == "cpu" else Format.FP32
        if device == "cpu":
            self.arch, self.instr = CPU_FMA
            self.unfused = CPU_MUL_ADD
            self.widen = fmt != Format.FP32
            if fmt == Format.BF16:  # oneDNN's bf16 kernels on AVX512_BF16 (VDPBF16PS)
                self.also = (CPU_BF16,)
        if device == "cuda":
            major_minor = torch.cuda.get_device_capability(0)
            self.arch = GPU_ARCH.get(tuple(major_minor))
            self.acc_bits = 24
            self.subnormal_inputs = True
            if fmt == Format.FP32:
                from ..gemm.hypothesis import full_fp32_instruction

                self.instr = full_fp32_instruction(self.arch) if self.arch else None

    def run(self, a, b):
        from ..intake import from_torch as torch_to_numpy
        from ..intake import to_torch as numpy_to_torch

        torch = self.torch
        A = numpy_to_torch(a, self.device)
        B = numpy_to_torch(b, self.device)
        if self.device == "cpu":
            return torch_to_numpy(torch.matmul(A, B))
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 is full fp32 (FFMA)
        try:
            if self.fmt == Format.FP32:
                D = torch.matmul(A, B)
            else:
                D = torch.mm(A, B, out_dtype=torch.float32)
            torch.cuda.synchronize()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32
        return torch_to_numpy(D)


class Model(Gemm):
    """tc.matmul of a GEMM hypothesis: the method asked about an order known in advance."""

    acc_bits = 24
    subnormal_inputs = True
    engine = "compiled"
    """tc.matmul's engine: the compiled one (the default takes the numpy interpreter
    for small calls, 20 to 50 times slower at large K)."""

    def __init__(self, hyp: str, fmt: Format, shape) -> None:
        super().__init__(shape)
        from ..gemm.hypothesis import parse_gemm, split_gemm_text

        self.hyp = parse_gemm(hyp)
        self.name = f"model:{hyp}"
        self.fmt = fmt
        self.arch = self.hyp.arch
        self.label = split_gemm_text(hyp)[0].strip()
        self.out = Format.FP32
        from ..api import resolve
        from .hypothesis import _instruction

        try:
            p = resolve(self.arch, _instruction(self.arch, fmt))
        except UserError:
            p = None
        if p is not None:
            # probe values the unit reads: normal inputs where it flushes subnormal ones,
            # and big/unit wide enough for the fused sum it keeps (F bits)
            self.subnormal_inputs = not p.flush_inputs
            self.acc_bits = max(24, int(p.F or 0))

    def check_shape(self, k):
        """A model sums every output alike whatever the call's shape (tc.matmul runs one
        schedule for every output), so its check calls are kept small."""
        m, n = self.mn(k)
        side = max(8, min(128, (1 << 22) // max(1, k)))
        return (min(m, side), min(n, side))

    def run(self, a, b):
        from ..gemm.emulate import matmul

        d = np.asarray(matmul(self.hyp, a, b, engine=self.engine))
        if d.dtype != np.float32:
            raise UserError(f"{self.name}: its output is {d.dtype}; the probe reads fp32 outputs")
        return d


class Recorded(Oracle):
    """Pair probes recorded on a GPU (hardware/recordings.py): one K x K call each."""

    acc_bits = 24

    def __init__(self, call: str, folder: Path) -> None:
        super().__init__()
        from ..hardware.recordings import PAIR_VALUES

        self.name = f"h100:{call}"
        self.call = call
        self.fmt = H100_CALLS[call]
        self.out = Format.FP32
        self.arch = "hopper"
        if self.fmt == Format.FP32:
            from ..gemm.hypothesis import full_fp32_instruction

            self.instr = full_fp32_instruction("hopper")
        self.path = folder / f"{call}.npz"
        if not self.path.exists():
            raise UserError(f"{self.name}: no recording at {self.path}")
        s, t, w, d = PAIR_VALUES[self.fmt]
        self.pv = PairValues(s, t, w, d)
        self._data = np.load(self.path)

    def values(self, k):
        return self.pv

    def check(self, k):
        if f"pairs_{k}_{k}_{k}_d" not in self._data.files:
            have = sorted(
                int(f.split("_")[1])
                for f in self._data.files
                if f.startswith("pairs_") and f.endswith("_d")
            )
            raise UserError(
                f"{self.name}: no pair probe recorded for K={k}; recorded: K in {', '.join(map(str, have))}"
            )

    def full(self, k):
        self.check(k)
        d = self._data[f"pairs_{k}_{k}_{k}_d"].view(np.float32)
        self.calls += 1
        off = ~np.eye(k, dtype=bool)
        sizes = np.ones((k, k), np.int64)
        sizes[off] = self._sizes(d[off], k)
        return sizes

    def random(self, k, seed):
        """The recorded random call of K x K x K (the probe's shape) when there is one,
        else the smallest recorded M x N x K (a library may pick another kernel for it)."""
        import json

        from ..hardware.recordings import Kind, inputs

        meta = json.loads(str(self._data["meta"]))
        have = sorted(
            (int(f.split("_")[1]), int(f.split("_")[2]))
            for f in self._data.files
            if f.startswith("random_") and f.endswith(f"_{k}_d")
        )
        if not have:
            raise UserError(f"{self.name}: no random call recorded for K={k}")
        m, n = (k, k) if (k, k) in have else have[0]
        self.random_shape = (m, n)
        tag = f"random_{m}_{n}_{k}"
        a, b = inputs(Kind.RANDOM, self.fmt, m, n, k, int(meta.get("seed", 0)))
        rows, cols = self._data[f"{tag}_rows"], self._data[f"{tag}_cols"]
        d = self._data[f"{tag}_d"].view(np.float32)
        return a[rows], b[:, cols], d


_SHAPED = {"numpy:matmul", "numpy:gemv", "torch:cpu", "torch:cuda"}


def make_oracle(name: str, dtype: str = "fp32", shape: tuple[int, int] | None = None) -> Oracle:
    """The oracle `name` for inputs `dtype` and output shape `shape` (M, N); UserError (one
    line) for an unknown or unavailable oracle, a dtype it does not take, a shape it has no
    use for."""
    if dtype not in DTYPES:
        raise UserError(f"--dtype {dtype}: allowed: {', '.join(DTYPES)}")
    fmt = DTYPES[dtype]
    if shape is not None and (min(shape) < 1 or max(shape) > 1 << 16):
        raise UserError(f"--shape {shape[0]},{shape[1]}: M and N from 1 to 65536")
    m = re.fullmatch(r"h100:(.+)", name)
    if m:
        call = m.group(1)
        if call not in H100_CALLS:
            raise UserError(
                f"--oracle {name}: no exact pair probe recorded for {call!r}; "
                f"recorded: {', '.join('h100:' + c for c in H100_CALLS)}"
            )
        if shape is not None:
            raise UserError(f"--shape: {name} answers from K x K recordings; leave --shape out")
        return Recorded(call, data_dir("results") / "hardware" / "h100" / "gemm")
    if name.startswith("model:"):
        if dtype not in ORACLES["model:HYP"].dtypes:
            raise UserError(f"--dtype {dtype}: model:HYP takes fp32, bf16, fp16")
        return Model(name[len("model:") :], fmt, shape)
    spec = ORACLES.get(name)
    if spec is None or spec.kind == "recorded" or spec.name == "model:HYP":
        raise UserError(f"--oracle {name}: unknown; known: {', '.join(ORACLES)}")
    if dtype not in spec.dtypes:
        raise UserError(f"--dtype {dtype}: {name} takes {', '.join(spec.dtypes)}")
    if shape is not None and name not in _SHAPED:
        raise UserError(f"--shape: {name} has no shape to set")
    if name == "numpy:dot":
        return NumpyDot()
    if name == "numpy:gemv":
        if shape is not None and shape[1] != 1:
            raise UserError(f"--shape {shape[0]},{shape[1]}: a GEMV has N = 1")
        return NumpyGemv(shape[0] if shape else None)
    if name == "numpy:matmul":
        return NumpyMatmul(shape)
    try:
        import torch
    except ImportError:
        raise UserError(f"--oracle {name}: torch is not installed") from None
    device = name.split(":")[1]
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--oracle {name}: no CUDA device here")
    return TorchGemm(device, fmt, shape)
