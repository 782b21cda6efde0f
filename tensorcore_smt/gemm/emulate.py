"""`matmul`: whole GEMMs bit-exactly, as a kernel computes them under a GEMM hypothesis.

Every output element runs element.py (one plan of instruction steps, promotions, split
combinations and the epilogue) on the vector interpreter, vectorised over chunks of
output elements: memory stays bounded by the chunk, whatever M, N and K are. Operand
columns are gathered k-block by k-block as the plan reads them. K is zero-padded to a
multiple of the instruction's K, as kernels zero-fill a partial k-tile. A stream-K
schedule has a plan per output tile (plan.stream_k_groups): the outputs of tiles with the
same plan run together, a bounded piece at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..argtypes import Arg, check_all, check_type
from ..bv.chunks import CHUNK_ROWS, host_bits, spans
from ..bv.concrete import CONCRETE
from ..bv.core import BV
from ..bv.devices import array_backend
from ..bv.dtypes import UNSIGNED
from ..bv.vector import VECTOR
from ..engine.choice import Engine, default_engine, parse_engine
from ..errors import UserError
from ..formats import Format
from ..intake import (
    format_of,
    from_bits,
    from_torch,
    is_torch,
    operand_bits,
    operand_formats,
    to_torch,
)
from ..model.ieee import mul
from ..model.params import ModelParams
from .arrays import fits
from .element import RN, acc_format, c_format, element, float_bits
from .hypothesis import GemmHypothesis, parse_gemm
from .outputs import OutputGrid, OutputList, Outputs, TileOutputs
from .plan import (
    Plan,
    TileGrid,
    k_iterations,
    k_positions,
    make_plan,
    padded_k,
    plan_for,
    stream_k_groups,
)
from .profile_call import Decision, call_key, decide, epilogue_of, major, parse_flags
from .profiles import CallKey, Flag, Function, Profile, find_profile
from .schedule import SCALAR_LIMIT, Schedule, parse_schedule

CHUNK = CHUNK_ROWS
"""Output elements per vector pass (the instruction-level optimum, bv/chunks.py)."""
PIECE = 1 << 20
"""Outputs per run of a stream-K tile group: the index arrays made at once are this long."""


class _Columns(Sequence):
    """Operand k of every output element of a chunk, gathered when the plan reads it:
    entry k is src[k][idx] (src: (K_padded, R) bits, idx: the chunk's rows of src)."""

    def __init__(self, be, src: np.ndarray, idx: np.ndarray, w: int):
        self.be, self.src, self.idx, self.w = be, src, idx, w

    def __len__(self) -> int:
        return self.src.shape[0]

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        return BV(self.be, self.be.lanes(self.src[k][self.idx], self.w), self.w)


@dataclass(frozen=True)
class GemmRun:
    """What matmul ran: the hypothesis, the instruction, the plan and the schedule
    actually used (alpha, beta and out filled in)."""

    hypothesis: GemmHypothesis
    instr: str
    params: ModelParams
    plan: Plan
    schedule: Schedule
    K: int
    engine: Engine = Engine.NUMPY  # the engine that ran it
    decision: Decision | None = None  # a library profile's choice of the recipe


def _arrays(x: Any) -> tuple[np.ndarray, Any]:
    """A numpy view of an operand and its torch device (None for numpy input)."""
    if is_torch(x):
        return np.asarray(from_torch(x)), x.device
    return np.asarray(x), None


def scaled_alpha(alpha: float, p: ModelParams, scale_a: Any, scale_b: Any) -> float:
    """alpha = RN(scale_a * scale_b) in the epilogue format (torch._scaled_mm, cuBLASLt
    scale pointers; fp32), times `alpha` (the schedule's) when that is not 1: the
    epilogue's one alpha, as the float it is. `alpha` itself without scales."""
    if scale_a is None and scale_b is None:
        return alpha
    vals = []
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s is None:
            s = 1.0
        arr = np.asarray(from_torch(s))
        if arr.size != 1:
            raise UserError(f"{name}: only a per-tensor (one-element) scale is modelled")
        if arr.dtype.kind not in "biuf":  # ml_dtypes scalars convert; text does not
            try:
                arr = arr.astype(np.float64)
            except (TypeError, ValueError):
                raise UserError(f"{name}: expected a number, got {s!r}") from None
        v = float(arr.reshape(()).astype(np.float64))
        if not np.isfinite(v):
            raise UserError(f"{name}={v} is not finite")
        vals.append(v)
    f = acc_format(p)
    w = f.spec.storage
    prod = mul(
        BV(CONCRETE, float_bits(vals[0], f), w),
        f,
        BV(CONCRETE, float_bits(vals[1], f), w),
        f,
        f,
        RN,
    )
    if alpha != 1.0:
        prod = mul(prod, f, BV(CONCRETE, float_bits(alpha, f), w), f, f, RN)
    value = float(from_bits(np.asarray([int(prod.v)], dtype=np.uint64), f)[0])
    if not np.isfinite(value) or abs(value) > SCALAR_LIMIT:
        raise UserError(
            f"scale_a * scale_b * alpha = {value:g} in {f.spec.name} is not a finite fp32 alpha"
        )
    return value


def prepare(
    hyp: GemmHypothesis,
    fa: Format | None,
    fb: Format | None,
    K: int,
    alpha: float | None,
    beta: float | None,
    out_fmt: Format | None,
    scale_a: Any = None,
    scale_b: Any = None,
) -> GemmRun:
    """Resolve the instruction, schedule and plan of a GEMM with inputs in `fa`, `fb`:
    `alpha`, `beta`, `out_fmt` replace the schedule's when given; per-tensor scales fold
    into alpha (`scaled_alpha`), so the schedule run says the epilogue's one alpha and
    where C joins follows from it (Schedule.c_in_chain)."""
    if (fa is None) != (fb is None) and not (hyp.instr and _integer(fa or fb)):
        raise UserError("A and B: give both as floats or both as bit patterns")
    if (fa is None or fb is None) and hyp.instr is None:
        raise UserError("A, B as bit patterns need instr= (the formats come from it)")
    inst = hyp.instruction(fa, fb)
    p = hyp.params(fa, fb)
    for what, f, want in (("A", fa, p.a_fmt), ("B", fb, p.b_fmt)):
        # a float array of another format is read by value where that format holds it
        # exactly (intake.operand_bits, the rule of mma and simulate too); integers and
        # floats are not mixed, nor two integer formats
        mixed = f is not None and (_integer(f) or _integer(want))
        if mixed and not fits(f, want):
            raise UserError(f"{what} is {f.spec.name} but {inst.name} takes {want.spec.name}")
    sched = hyp.schedule
    changes: dict[str, Any] = {}
    if alpha is not None:
        changes["alpha"] = alpha
    if beta is not None:
        changes["beta"] = beta
    if out_fmt is not None:
        changes["out"] = out_fmt
    scaled = scaled_alpha(changes.get("alpha", sched.alpha), p, scale_a, scale_b)
    if scaled != sched.alpha:
        changes["alpha"] = scaled
    if changes:
        sched = sched.with_(**changes)
    if K < 1:
        raise UserError(f"K={K}: a GEMM needs K >= 1")
    if sched.stream_k is None:
        plan = plan_for(sched, K, p.K)
    else:  # the plan of a tile no worker boundary cuts; matmul runs each tile's own
        Kp = padded_k(K, p.K)
        plan = make_plan(sched, Kp, p.K, ((0, k_iterations(sched, Kp, p.K)),))
    return GemmRun(hyp, inst.name, p, plan, sched, K)


def _integer(f: Format | None) -> bool:
    return f is not None and f.spec.is_integer


def resolve_hypothesis(
    arch: str | GemmHypothesis, instr: str | None, schedule: str | Schedule | None
) -> GemmHypothesis:
    """A GemmHypothesis from text or an object, `instr` and `schedule` replacing its own."""
    if not isinstance(arch, GemmHypothesis):
        return parse_gemm(arch, instr, schedule)
    sched = arch.schedule
    if isinstance(schedule, Schedule):
        sched = schedule
    elif schedule is not None:
        sched = parse_schedule(schedule)
    return GemmHypothesis(arch.variant, sched, instr or arch.instr, arch.text)


def _out_format(out_dtype: Any) -> Format | None:
    if out_dtype is None:
        return None
    if isinstance(out_dtype, Format):
        return out_dtype
    if isinstance(out_dtype, str):
        try:
            return Format.parse(out_dtype)
        except ValueError:
            pass
    if is_torch(out_dtype) or type(out_dtype).__module__ == "torch":
        import torch

        out_dtype = from_torch(torch.zeros(1, dtype=out_dtype)).dtype
    try:
        f = format_of(np.zeros(1, dtype=out_dtype), "out_dtype")
    except TypeError:
        f = None
    if f is None:
        raise UserError(f"out_dtype={out_dtype!r} is not an output format")
    return f


def _operand_format(x: Any, what: str) -> Format:
    """The float format of an operand (numpy or torch) without converting it whole."""
    if is_torch(x):
        x = from_torch(x.new_empty(0))
    f = format_of(np.asarray(x), what)
    if f is None:
        raise UserError(f"{what}: a library profile takes float operands, not bit patterns")
    return f


def _scaled(fa: Format, scale_a: Any, scale_b: Any) -> bool:
    return scale_a is not None or scale_b is not None or fa.spec.storage == 8


def call_key_of(
    function: Function | None,
    A: Any,
    B: Any,
    C: Any = None,
    *,
    alpha: float | None = None,
    beta: float | None = None,
    out_dtype: Any = None,
    scale_a: Any = None,
    scale_b: Any = None,
    flags: dict[Flag, bool] | None = None,
) -> tuple[CallKey, tuple[tuple[int, ...], int, int, int]]:
    """The call class of D = alpha*A@B + beta*C (numpy or torch operands) and its shape
    (batch, M, N, K; an N-D A times a 2-D B is one GEMM of M = A's rows over its batch, as
    torch folds it): the operands' formats and layouts, the output format (None: the
    inputs', as torch), the epilogue, `flags` (torch's precision flags; None: torch's
    defaults) and `function` (None: scaled_mm for FP8 inputs or scales, bmm for batches,
    addmm with C, else mm)."""
    fa, fb = _operand_format(A, "A"), _operand_format(B, "B")
    out = _out_format(out_dtype) or fa
    shape_a, shape_b = tuple(A.shape), tuple(B.shape)
    if len(shape_a) < 2 or len(shape_b) < 2:
        raise UserError(f"A and B must have at least 2 dimensions; got {shape_a} and {shape_b}")
    if function is None:
        if _scaled(fa, scale_a, scale_b):
            function = Function.SCALED_MM
        elif len(shape_b) > 2:
            function = Function.BMM
        elif C is not None:
            function = Function.ADDMM
        else:
            function = Function.MM
    try:
        batch = tuple(np.broadcast_shapes(shape_a[:-2], shape_b[:-2]))
    except ValueError:
        raise UserError(
            f"batch dimensions of A {shape_a} and B {shape_b} do not broadcast"
        ) from None
    m = shape_a[-2]
    if len(shape_b) == 2 and batch:  # torch folds A's batch into M: one GEMM, as cuBLAS sees it
        m, batch = int(np.prod(shape_a[:-1])), ()
    key = call_key(
        function,
        fa.spec.name,
        fb.spec.name,
        out.spec.name,
        flags if flags is not None else parse_flags(None),
        (major(A), major(B)),
        epilogue_of(C, alpha, beta),
    )
    return key, (batch, m, shape_b[-1], shape_a[-1])


def decide_call(
    profile: Profile, function: Function | None, A: Any, B: Any, C: Any = None, **kw
) -> Decision:
    """The recipe `profile` gives the call (`call_key_of` for the arguments)."""
    key, (batch, m, n, k) = call_key_of(function, A, B, C, **kw)
    return decide(profile, key, m, n, k, batch)


def matmul(
    arch: str | GemmHypothesis,
    A: Any,
    B: Any,
    C: Any = None,
    *,
    schedule: str | Schedule | None = None,
    instr: str | None = None,
    scale_a: Any = None,
    scale_b: Any = None,
    alpha: float | None = None,
    beta: float | None = None,
    out_dtype: Any = None,
    device: str | None = None,
    engine: str | Engine | None = None,
    run_info: list | None = None,
    flags: dict | None = None,
) -> Any:
    """D = alpha * A @ B + beta * C, bit for bit as the GEMM hypothesis computes it.

    `arch`: `ARCH[...]` or `ARCH[...]/SCHEDULE[...]` (or a GemmHypothesis); `schedule`
    the schedule when `arch` names none (default `serial`). A (..., M, K), B (..., K, N)
    and C (broadcast to (..., M, N)) are numpy / ml_dtypes arrays or torch tensors
    (leading batch dimensions broadcast), or unsigned bit patterns with `instr` given.
    `instr` None: the instruction libraries run for A's and B's formats. `scale_a`,
    `scale_b`: per-tensor scales (alpha = RN_fp32(scale_a * scale_b), torch._scaled_mm);
    `alpha`, `beta` None: the schedule's (beta unset: 1; beta = 0 does not read C). C
    joins the chain only when the schedule says so and alpha = beta = 1
    (Schedule.c_in_chain), else the epilogue. `out_dtype` None: the
    schedule's `out`, else the instruction's d format. `device`: None (numpy) or a torch
    device ("cpu", "cuda"); `engine` (an Engine or its name): numpy (the vector
    interpreter), compiled (the compiled GEMM runner, `compiled_runner`), torch (the
    vector interpreter on torch, device "cpu" unless given) or None: with a device torch,
    else engine/choice.py's default for a batch of the GEMM's instruction steps
    ($TCSMT_ENGINE when set, else compiled once outputs x steps, with numpy's cost
    of a pass per step, reaches COMPILE_ROWS). Returns D as the output dtype (a torch
    tensor on A's device when A is one); `run_info`, when a list, receives the GemmRun.

    `arch` may name a library profile instead (`h100`, `h100-cublas-13.0`, a profile
    .json; docs/profiles.md): the profile picks the recipe of this call (its class from
    the formats, layouts, C and `flags`, torch's precision flags as a mapping of names
    (tf32, fp16_reduced, bf16_reduced, fast_accum) to booleans, the others at torch's
    defaults; then its shape), `out_dtype` None is the inputs' format as in torch, and
    the GemmRun in `run_info` carries the Decision (recipe and source)."""
    check_type("matmul: arch", arch, (str, GemmHypothesis), "a hypothesis ARCH/SCHEDULE")
    check_type("matmul: schedule", schedule, (str, Schedule), "a schedule", optional=True)
    check_type("matmul: engine", engine, (str, Engine), "an Engine or its name", optional=True)
    check_all(
        "matmul",
        [
            ("instr", instr, Arg.TEXT, True),
            ("device", device, Arg.TEXT, True),
            ("run_info", run_info, Arg.LIST, True),
            ("flags", flags, Arg.MAPPING, True),
        ],
    )
    decision = None
    profile = find_profile(arch) if isinstance(arch, str) else None
    if profile is not None:
        if schedule is not None or instr is not None:
            raise UserError(
                f"{arch!r} is a library profile: it picks the schedule and instruction; "
                "leave schedule= and instr= out"
            )
        decision = decide_call(
            profile,
            None,
            A,
            B,
            C,
            alpha=alpha,
            beta=beta,
            out_dtype=out_dtype,
            scale_a=scale_a,
            scale_b=scale_b,
            flags=parse_flags(flags),
        )
        if out_dtype is None:
            out_dtype = _operand_format(A, "A")
        hyp = decision.hypothesis()
    elif flags is not None:
        raise UserError("flags= applies to a library profile (e.g. 'h100'), not a hypothesis")
    else:
        hyp = resolve_hypothesis(arch, instr, schedule)
    eng = parse_engine(engine)
    if eng == Engine.COMPILED and device is not None:
        raise UserError("engine='compiled' runs on the CPU; leave device out")
    if eng == Engine.NUMPY and device is not None:
        raise UserError(f"engine numpy runs on this machine's CPU; device {device!r} needs torch")
    if eng == Engine.TORCH and device is None:
        device = "cpu"
    a, dev = _arrays(A)
    b, _ = _arrays(B)
    if a.ndim < 2 or b.ndim < 2:
        raise UserError(f"A and B must have at least 2 dimensions; got {a.shape} and {b.shape}")
    M, K = a.shape[-2:]
    K2, N = b.shape[-2:]
    if K != K2:
        raise UserError(f"A is {a.shape} and B is {b.shape}: inner dimensions {K} and {K2} differ")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise UserError(
            f"batch dimensions of A {a.shape} and B {b.shape} do not broadcast"
        ) from None
    fa, fb = operand_formats(a, b)
    run = prepare(hyp, fa, fb, K, alpha, beta, _out_format(out_dtype), scale_a, scale_b)
    p, plan = run.params, run.plan
    sched = run.schedule
    out_fmt = sched.out or p.d_fmt
    Kp = plan.n_blocks * p.K
    a_bits = operand_bits(a, p.a_fmt, "A")
    b_bits = operand_bits(b, p.b_fmt, "B")
    # (K_padded, rows) operand tables: column k of every row of A, every column of B
    pos = k_positions(K, plan.gap, plan.gaps)
    a_t = _table(np.broadcast_to(a_bits, batch + (M, K)).reshape(-1, K), Kp, pos)
    b_t = _table(
        np.swapaxes(np.broadcast_to(b_bits, batch + (K, N)), -1, -2).reshape(-1, K), Kp, pos
    )
    c_bits, c_fmt = _c_bits(C, run, batch, M, N)
    n_out = int(np.prod(batch, dtype=np.int64)) * M * N
    if device is not None:
        eng = Engine.TORCH
    elif eng is None:
        steps = plan.steps()  # numpy: a pass per step and chunk of outputs
        eng = default_engine(False, n_out * steps, steps * -(-n_out // CHUNK))
    runner = compiled_runner() if eng == Engine.COMPILED else None
    if run_info is not None:
        run_info.append(dataclasses.replace(run, engine=eng, decision=decision))
    nb = int(np.prod(batch, dtype=np.int64))
    be = VECTOR if device is None else array_backend(device)
    out = np.empty(n_out, dtype=UNSIGNED[out_fmt.spec.storage])

    def run_plan(plan: Plan, outputs: Outputs, c: np.ndarray | None, dst: np.ndarray) -> None:
        """dst[o] = the bits of output o of `outputs` under `plan` (c: C of each)."""
        if runner is not None:
            runner(p, plan, sched, a_t, b_t, outputs, c, c_fmt, dst)
            return
        wa, wb = p.a_fmt.spec.storage, p.b_fmt.spec.storage
        for lo, hi in spans(len(outputs), CHUNK):
            ia, ib = outputs.rows(lo, hi)
            cbv = None
            if c is not None:
                w = c_fmt.spec.storage
                cbv = BV(be, be.lanes(c[lo:hi], w), w)
            d = element(
                _Columns(be, a_t, ia, wa), _Columns(be, b_t, ib, wb), cbv, p, plan, sched, c_fmt
            )
            dst[lo:hi] = host_bits(be, d, hi - lo)

    if sched.stream_k is None:
        run_plan(plan, OutputGrid(nb, M, N), c_bits, out)
    else:  # a plan per group of tiles with the same cut (plan.stream_k_groups)
        tiles = TileGrid(nb, M, N, sched.tile_m, sched.tile_n, sched.raster)
        for plan_g, t in stream_k_groups(sched, Kp, p.K, tiles):
            outs = TileOutputs(tiles, t)
            for lo, hi in spans(len(outs), PIECE):
                ia, ib, flat = outs.take(lo, hi)
                part = np.empty(hi - lo, dtype=out.dtype)
                run_plan(plan_g, OutputList(ia, ib), None if c_bits is None else c_bits[flat], part)
                out[flat] = part
    return _result(out, out_fmt, batch + (M, N), dev)


def _result(out: np.ndarray, out_fmt: Format, shape: tuple, dev: Any) -> Any:
    res = from_bits(out, out_fmt).reshape(shape)
    return res if dev is None else to_torch(res, dev)


def compiled_runner():
    """The compiled GEMM runner (gemm/compiled.py run_gemm); UserError when the compiled
    engine cannot be loaded here.

    A runner, `run_gemm(p, plan, schedule, a_table, b_table, outputs, c_bits, c_fmt,
    out)`, fills `out` ((n_out,) unsigned, the output format's width) with the output
    bits: output o is element.py on the operands a_table[:, ia[o]] and b_table[:, ib[o]]
    ((K_padded, rows) bit tables, zero rows past K; `outputs.rows(lo, hi)` gives ia, ib
    of a range of outputs, gemm/outputs.py) and c_bits[o] (in c_fmt; None: no C), equal
    to the numpy engine bit for bit."""
    try:
        from .compiled import run_gemm
    except ImportError as e:  # llvmlite missing or unloadable
        raise UserError(f"engine='compiled' is not available here ({e})") from None
    return run_gemm


def _table(rows: np.ndarray, Kp: int, pos: np.ndarray) -> np.ndarray:
    """(R, K) bits -> (K_padded, R) contiguous: element k at row pos[k] (plan.k_positions),
    zero rows elsewhere."""
    R, K = rows.shape
    t = np.zeros((Kp, R), dtype=rows.dtype)
    t[pos] = rows.T
    return t


def _c_bits(C: Any, run: GemmRun, batch, M: int, N: int):
    """C flattened to one entry per output element, and the format it is read in where
    it joins (element.c_format)."""
    if C is None:
        return None, None
    c, _ = _arrays(C)
    try:
        c = np.broadcast_to(c, batch + (M, N))
    except ValueError:
        raise UserError(f"C {c.shape} does not broadcast to {batch + (M, N)}") from None
    fmt = c_format(run.params, run.schedule, format_of(c, "C"))
    return operand_bits(c, fmt, "C").reshape(-1), fmt
