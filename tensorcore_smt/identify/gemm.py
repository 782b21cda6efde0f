"""Learning a GEMM's schedule: `identify --gemm` with the loop of `identify.loop`.

A GEMM hypothesis is a point of the instruction's default space (spaces/fda.toml for an
NVIDIA unit) together with values of the schedule fields that spaces/gemm.toml varies
(promote, split_k, split, split_tile, reduce, c_join, epilogue). Everything else is the
instruction-level machinery: rows are a row of A and a column of B (K entries each) and
c, answered by an oracle with the output element's d; the search climbs one parameter at
a time, instruction parameters and schedule fields alike; the solvers are asked GEMM
queries (`smt.gemm_query`, focused first) between survivors the rows cannot split.

- `GemmBase`: the instruction's model, the base schedule and K, read like ModelParams
  (formats, K = the GEMM's K for the rows) and changed with `with_` like it;
- `GemmPoint`: a hypothesis written `ARCH[...]/serial[...]`;
- `GemmSpace`: the space bound to an architecture, an instruction and K;
- oracles `variant:ARCH/SCHEDULE`, `cmd:PROGRAM` (rows as JSONL on stdin: `{"a": [K hex],
  "b": [K hex], "c": hex}`, one d per line, as for instructions), `torch[:fast]` (the
  local GPU: the rows as one GEMM through torch, `_scaled_mm` for FP8) and the CPU
  libraries `numpy:matmul` and `torch:cpu` (fp32: each row output (0, 0) of one call).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..bv.dtypes import UNSIGNED
from ..errors import UserError
from ..formats import Format
from ..gemm.model import GemmModel
from ..model.nan import GEMM_PROPAGATES
from ..model.params import ModelParams
from ..spec.datadirs import data_dir
from ..spec.variants import with_overrides
from .compiled_rows import CompiledRows
from .oracle import CMD_TIMEOUT, ORACLES, Oracle
from .space import _INERT, Family, Hypothesis, Space, inert, resolve_space, value_text
from .stacked import zero_chains

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_GEMM_SPACE = data_dir("spaces") / "gemm.toml"


SCHED = "schedule."
"""Prefix of the schedule fields among a hypothesis's parameters (`order` and `split`
are also instruction parameters)."""


def _schedule_fields() -> set[str]:
    from ..gemm.schedule import field_names

    return set(field_names())


INSTRUCTION_COMPOSED = (
    "asked on the instruction: the GEMM element composes it alike (both hypotheses have "
    "one schedule and plan and differ only inside the instruction's steps)"
)
"""Why an instruction-level answer decides a GEMM pair (`GemmSpace.reduced_query`)."""


def is_sched(key: str) -> bool:
    return key.startswith(SCHED)


@dataclass(frozen=True)
class GemmBase:
    """The model of one GEMM output element: instruction `p`, `schedule`, depth `K`.
    Attributes not its own are the instruction's (formats, F, L, ...) or the schedule's
    (promote, split_k, ...), so space code reads it like a ModelParams."""

    p: ModelParams
    schedule: Any  # gemm.schedule.Schedule
    K: int

    @property
    def d_fmt(self) -> Format:
        """The output element's format (the schedule's `out`, else the instruction's d)."""
        return self.schedule.out or self.p.d_fmt

    @property
    def c_fmt(self) -> Format:
        """The format of c: the instruction's c in the chain, else the output format."""
        from ..gemm.element import c_format

        return c_format(self.p, self.schedule)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if is_sched(name):
            return getattr(self.schedule, name[len(SCHED) :])
        return getattr(self.p, name)

    def with_(self, **changes: Any) -> GemmBase:
        sched = {k[len(SCHED) :]: v for k, v in changes.items() if is_sched(k)}
        inst = {k: v for k, v in changes.items() if not is_sched(k)}
        return GemmBase(
            self.p.with_(**inst) if inst else self.p,
            self.schedule.with_(**sched) if sched else self.schedule,
            self.K,
        )

    def model(self, arch: str, instr: str, text: str = "") -> GemmModel:
        """The resolved model (plan for this K; UserError when the schedule cannot cut K)."""
        from ..gemm.element import c_format
        from ..gemm.plan import make_plan, padded_k

        Kp = padded_k(self.K, self.p.K)
        plan = make_plan(self.schedule, Kp, self.p.K)
        out = self.schedule.out or self.p.d_fmt
        c_fmt = c_format(self.p, self.schedule)
        return GemmModel(text, arch, instr, self.p, self.schedule, plan, self.K, Kp, c_fmt, out)


@dataclass(frozen=True)
class GemmPoint(Hypothesis):
    """A GEMM hypothesis: overrides of instruction parameters and schedule fields."""

    base_schedule: Any = field(default=None, compare=False)

    def variant_expr(self, arch: str) -> str:
        """The instruction-level part over the base variant `arch` (`ARCH[...]`)."""
        inst = [(k, value_text(v)) for k, v in self.overrides if not is_sched(k)]
        return with_overrides(arch, inst)

    def expr(self, arch: str) -> str:
        changes = {k[len(SCHED) :]: v for k, v in self.overrides if is_sched(k)}
        s = self.base_schedule.with_(**changes) if changes else self.base_schedule
        return self.variant_expr(arch) + "/" + s.text()


GEMM_READS = frozenset(("nan_bits", "nan_rule", "K", "a_fmt", "b_fmt", "c_fmt", "d_fmt"))
"""Instruction parameters the GEMM element reads outside the instruction's own steps
(gemm/element.py: the NaN rule and pattern of its fp32 additions, the shape)."""


def _param_names() -> list[str]:
    from ..model.params import param_names

    return param_names()


PLAN_FIELDS = ("split", "split_tile", "promote", "reduce", "split_k", "order")
"""Schedule fields that act only through the plan (`gemm.plan.make_plan`)."""


def schedule_inert(name: str, gb: GemmBase) -> bool:
    """Whether schedule field `name` cannot change any output of `gb` (the space keeps
    it at the base's value): split layout and reduction without split-K; the reduction
    of two partials (p1 + p0 = p0 + p1 in IEEE arithmetic); the epilogue operation when
    alpha is 1 (1·acc is exact, so fma and mul-add round once alike)."""
    s = gb.schedule
    name = name[len(SCHED) :]
    if name in ("split", "split_tile"):
        return s.split_k == 1
    if name == "reduce":
        return s.split_k <= 2
    if name == "epilogue":
        return s.alpha == 1.0
    return False


MEMO_ROWS = 256
"""Row sets at most this long are kept as bit vectors, decoded once (`GemmSpace.run`)."""
MEMO_SETS = 4
ROWS_PER_PASS = 4096
"""Rows of one stacked pass when the rows are not kept (`GemmSpace._run_rows`)."""
"""Row sets kept so (the latest answered rows, and a few others)."""


@dataclass
class GemmSpace(Space):
    """The instruction's default space with the GEMM schedule fields added."""

    schedule_dims: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    _inputs: dict = field(default_factory=dict, repr=False)
    compiled: CompiledRows = field(default_factory=CompiledRows, repr=False)

    reclimb_seeds = False
    """A GEMM row is K products: climbing every family's seed again after each oracle
    call (hundreds of models run on the new rows) is left to the first search and to
    the one after a confirmation round refuted a class."""

    def dims(self, family: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
        return super().dims(family) + self.schedule_dims

    def make(self, family: str, values: dict[str, Any]) -> Hypothesis:
        merged = dict(self.family(family).fixed)
        merged.update(values)
        inst = {k: v for k, v in merged.items() if not is_sched(k) and k not in _INERT}
        core = self.base.with_(**inst, **{k: v for k, v in merged.items() if is_sched(k)})
        for name in list(merged):
            if is_sched(name):
                if schedule_inert(name, core):
                    merged[name] = getattr(self.base, name)
            elif inert(name, core.p):
                merged[name] = getattr(self.base.p, name)
        self._same_plan(merged)
        over = tuple(sorted((k, v) for k, v in merged.items() if getattr(self.base, k) != v))
        return GemmPoint(family, over, self.base.schedule)

    def _same_plan(self, merged: dict[str, Any]) -> None:
        """Layout fields whose value gives the same plan as an earlier value of the space
        (the base's first) take that value: two schedules that cut K alike are one point
        (split_tile=64 and 128 when each split owns whole 128-wide tiles either way;
        contiguous and interleaved with one tile a split; promote at least as long as
        every split; splits of one promoted chain each and one split promoted alike, see
        `gemm.plan.equivalent_plan`). Invalid plans are left as they are (the model
        refuses them)."""
        from ..gemm.plan import equivalent_plan, make_plan, padded_k

        values = dict(self.schedule_dims)
        base = self.base.with_(**{k: v for k, v in merged.items() if is_sched(k)})
        Kp = padded_k(self.base.K, base.p.K)
        try:
            nans = base.p.nan_rule in GEMM_PROPAGATES
            plan = equivalent_plan(make_plan(base.schedule, Kp, base.p.K), nans)
        except UserError:
            return
        for name in PLAN_FIELDS:
            key = SCHED + name
            mine = getattr(base.schedule, name)
            for v in values.get(key, ()):
                if v == mine:
                    break
                other = base.schedule.with_(**{name: v})
                try:
                    same = equivalent_plan(make_plan(other, Kp, base.p.K), nans) == plan
                except UserError:
                    continue
                if same:
                    merged[key] = v
                    base = GemmBase(base.p, other, base.K)
                    break

    def same_model(self, a: Hypothesis, b: Hypothesis) -> bool:
        """Whether `a` and `b` build the same model: the same instruction parameters, the
        same plan for this K (`gemm.plan.equivalent_plan`) and the same epilogue fields
        (equal by construction)."""
        from ..gemm.plan import equivalent_plan

        try:
            ma, mb = self.model(a), self.model(b)
        except (UserError, ValueError):
            return False
        rest = {f: getattr(ma.schedule, f) for f in PLAN_FIELDS}
        nans = ma.p.nan_rule in GEMM_PROPAGATES
        return (
            ma.p == mb.p
            and equivalent_plan(ma.plan, nans) == equivalent_plan(mb.plan, nans)
            and (ma.c_fmt, ma.d_fmt) == (mb.c_fmt, mb.d_fmt)
            and ma.schedule == mb.schedule.with_(**rest)
        )

    def model(self, h: Hypothesis) -> GemmModel:
        base = self.variant or self.arch
        return self.params(h).model(h.variant_expr(base), self.instr, h.expr(base))

    def run(self, h: Hypothesis, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """d bits of `h` on the rows. A few rows (the answered ones the search climbs on)
        are read as the same bit vectors for every hypothesis, each decoded once
        (`formats.decode_memo`): the search runs hundreds of models on them. Many rows,
        or instruction parameters met often, run on the compiled engine
        (`identify.compiled_rows`), the same model code compiled."""
        from ..gemm.model import run_rows

        m = self.model(h)
        if self.compiled.wants(m, len(c)):
            d = self.compiled.run(m, a, b, c)
            if d is not None:
                return d
        stack = zero_chains(m)
        if np.shape(a) != (len(c), m.K) or np.shape(b) != np.shape(a):
            return run_rows(m, a, b, c)
        if len(c) > MEMO_ROWS:
            if stack is None:
                return run_rows(m, a, b, c)
            step = ROWS_PER_PASS
            parts = [
                self._run_rows(m, a[i : i + step], b[i : i + step], c[i : i + step], stack, {})
                for i in range(0, len(c), step)
            ]
            return np.concatenate(parts)
        a = np.asarray(a, dtype=np.uint64)
        b = np.asarray(b, dtype=np.uint64)
        c = np.asarray(c, dtype=np.uint64)
        widths = (m.p.a_fmt.spec.storage, m.p.b_fmt.spec.storage, m.c_fmt.spec.storage)
        key = (widths, a.shape, a.tobytes(), b.tobytes(), c.tobytes())
        entry = self._inputs.pop(key, None) or {}
        self._inputs[key] = entry  # the most recent last
        while len(self._inputs) > MEMO_SETS:
            self._inputs.pop(next(iter(self._inputs)))
        return self._run_rows(m, a, b, c, stack, entry)

    def _run_rows(
        self,
        m: GemmModel,
        a: np.ndarray,
        b: np.ndarray,
        c: np.ndarray,
        stack: list | None,
        memo: dict,
    ) -> np.ndarray:
        """`m` on the rows by the numpy interpreter, its chains from +0 stacked as lanes
        where `stack` names them (`identify.stacked`). `memo` keeps the rows as bit
        vectors, their decodings and their stacked columns across calls on the same rows
        (an empty dict: nothing kept)."""
        from ..bv.chunks import host_bits
        from ..bv.core import BV
        from ..bv.vector import VECTOR
        from ..formats import decode_memo
        from .stacked import layouts, run_stacked, stacked_columns

        wa, wb = m.p.a_fmt.spec.storage, m.p.b_fmt.spec.storage
        wc = m.c_fmt.spec.storage
        a = np.asarray(a, dtype=np.uint64)
        b = np.asarray(b, dtype=np.uint64)
        c = np.asarray(c, dtype=np.uint64)
        if "rows" not in memo:
            memo["rows"] = (
                [BV(VECTOR, col, wa) for col in VECTOR.columns(a, wa)],
                [BV(VECTOR, col, wb) for col in VECTOR.columns(b, wb)],
                BV(VECTOR, VECTOR.lanes(c, wc), wc),
                {},
            )
        ac, bc, cc, decoded = memo["rows"]
        if stack is None:
            with decode_memo(decoded):
                d = m.run(ac, bc, cc)
        else:
            stacks = memo.setdefault(("stacks", m.p.K), {})  # per k-block width
            for lay in layouts(stack):
                if lay not in stacks:
                    stacks[lay] = (*stacked_columns(lay, a, b, m.p.K, wa, wb), {})
            with decode_memo(decoded):
                d = run_stacked(m, ac, bc, cc, len(c), stacks)
        return host_bits(VECTOR, d, len(c)).astype(np.uint64)

    def structured_rows(self, hyps: list[Hypothesis], seed: int = 0):
        """Rows whose partial sums associate differently under the hypotheses' plans
        (`identify.gemm_witness`): +big, a small term and -big where some plan's chains
        start or end. None when no two of them differ in their plans, or a model fails."""
        from .gemm_witness import association_rows

        try:
            models = [self.model(h) for h in hyps]
        except (UserError, ValueError):
            return None
        plans = list(dict.fromkeys(m.plan for m in models))
        if len(plans) < 2:
            return None
        b = self.base
        return association_rows(b.p.a_fmt, b.p.b_fmt, b.c_fmt, b.K, plans, seed=seed)

    def stated_argument(self, a: Hypothesis, b: Hypothesis):
        """A stated argument that `a` and `b` give the same output on every input,
        unchecked: one of `identify.gemm_arguments` (flush_outputs that never acts), or
        for a pair that differs only inside the instruction (`reduced_query`) the
        instruction question's own argument (smt/arguments.py: the zero-exponent floor,
        ...); None where none applies or a model fails."""
        from .gemm_arguments import gemm_argument, instruction_argument

        try:
            got = gemm_argument(self.model(a), self.model(b))
            small = None if got is not None else self.reduced_query(a, b)
        except (UserError, ValueError):
            return None
        if small is None:
            return got
        return instruction_argument(small, INSTRUCTION_COMPOSED)

    def instruction_only(self, a: Hypothesis, b: Hypothesis) -> bool:
        """Whether `a` and `b` have one schedule and plan and differ only in instruction
        parameters the GEMM element reads nowhere but in the instruction's own steps
        (then `reduced_query` asks their question on the instruction)."""
        try:
            ma, mb = self.model(a), self.model(b)
        except (UserError, ValueError):
            return False
        if ma.schedule != mb.schedule or ma.plan != mb.plan or ma.p == mb.p:
            return False
        diff = {f for f in _param_names() if getattr(ma.p, f) != getattr(mb.p, f)}
        return not (diff & GEMM_READS)

    def reduced_query(self, a: Hypothesis, b: Hypothesis, c_zero: bool = False):
        """The instruction-level question in place of the GEMM one, where it decides it:
        `a` and `b` have one schedule and plan and differ only in instruction parameters
        the GEMM element reads nowhere but in the instruction's own steps (not
        `GEMM_READS`). The element then composes the two instructions alike on the same
        operands (c and d in one format: every chained acc is a c the instruction takes),
        so instructions equal on every input make equal GEMM models, and an instruction
        witness placed in a k-block (`lift_witness`, re-run on both) separates them.
        `c_zero`: c fixed to +0 (the acc every chain but C's starts from), for a witness
        to lift where the one with any c did not; its unsat proves nothing of the GEMM.
        None where the reduction does not apply."""
        from ..inputs.constraints import Constraint
        from ..inputs.kinds import ConstraintKind
        from ..smt.query import Goal
        from ..smt.resolve import make_query

        if not self.instruction_only(a, b):
            return None
        base = self.variant or self.arch
        fix = (Constraint(ConstraintKind.FIX, "c", bits=0),) if c_zero else ()
        return make_query(a.variant_expr(base), b.variant_expr(base), self.instr, Goal.DIFFER, fix)

    def lift_witness(
        self, a: Hypothesis, b: Hypothesis, inputs: dict[str, int]
    ) -> tuple[list[int], list[int], int] | None:
        """A GEMM row on which `a` and `b` differ, made from an instruction witness
        (`inputs`: a0.., b0.., c): its operands in one k-block (each chain's first, in
        turn), zeros elsewhere, c as given or +0; the first candidate the two models
        split, re-run on both. None when none does."""
        ma = self.model(a)
        kb, K = ma.p.K, self.base.K
        wa = [int(inputs[f"a{i}"]) for i in range(kb)]
        wb = [int(inputs[f"b{i}"]) for i in range(kb)]
        starts = sorted({ch[0] for sp in ma.plan.splits for ch in sp.chains if ch})
        rows_a, rows_b, rows_c = [], [], []
        for blk in starts:
            if blk * kb + kb > K:
                continue
            ra, rb = [0] * K, [0] * K
            ra[blk * kb : blk * kb + kb], rb[blk * kb : blk * kb + kb] = wa, wb
            for c in (int(inputs["c"]), 0):
                rows_a.append(ra)
                rows_b.append(rb)
                rows_c.append(c)
        if not rows_c:
            return None
        A, B = np.asarray(rows_a, np.uint64), np.asarray(rows_b, np.uint64)
        C = np.asarray(rows_c, np.uint64)
        differ = np.flatnonzero(self.run(a, A, B, C) != self.run(b, A, B, C))
        if not len(differ):
            return None
        i = int(differ[0])
        return rows_a[i], rows_b[i], rows_c[i]

    def query(self, a: Hypothesis, b: Hypothesis):
        from ..smt.gemm_query import GemmQuery
        from ..smt.query import Goal

        ma, mb = self.model(a), self.model(b)
        return GemmQuery((ma.text, mb.text), self.instr, self.base.K, Goal.DIFFER, (), "", (ma, mb))


def load_gemm_space(
    arch: str,
    K: int,
    instr: str | None,
    path: Path | None = None,
    fmt: Format | None = None,
) -> GemmSpace:
    """The GEMM space for `arch` (`ARCH[...]` or `ARCH[...]/SCHEDULE[...]`: the base
    schedule), instruction `instr` (default: the one libraries use for inputs in `fmt`,
    else fp16) and depth K; UserError when the base schedule does not fit K."""
    from ..gemm.hypothesis import parse_gemm
    from ..gemm.plan import make_plan, padded_k
    from ..gemm.schedule import parse_field

    h = parse_gemm(arch, instr)
    inst = h.instruction(fmt)
    h = parse_gemm(arch, inst.name)
    p = h.params()
    try:
        make_plan(h.schedule, padded_k(K, p.K), p.K)
    except UserError as e:
        raise UserError(f"--arch {arch}: the base schedule does not fit K={K}: {e}") from None
    inner = resolve_space(h.variant.text, inst.name, None)
    path = path or DEFAULT_GEMM_SPACE
    try:
        raw = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such space file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"{path}: cannot read ({e})") from None
    for k in raw:
        if k not in ("name", "description", "instruction", "schedule"):
            raise UserError(
                f"{path}: {k}: unknown key (known: name, description, instruction, schedule)"
            )
    learn_instr = raw.get("instruction", True)
    if not isinstance(learn_instr, bool):
        raise UserError(
            f"{path}: instruction: expected true (learn the instruction's "
            "parameters from its default space) or false (the preset's)"
        )
    table = raw.get("schedule")
    if not isinstance(table, dict) or not table:
        raise UserError(f"{path}: schedule: expected a table of field = [values]")
    dims = []
    for name, items in table.items():
        if not isinstance(items, list) or not items:
            raise UserError(f"{path}: schedule.{name}: expected a non-empty list of values")
        if name not in _schedule_fields():
            raise UserError(f"{path}: schedule.{name}: unknown schedule field")
        vals: list[Any] = [getattr(h.schedule, name)]
        for item in items:
            text = "true" if item is True else "false" if item is False else str(item)
            try:
                v = parse_field(name, text)
            except UserError as e:
                raise UserError(f"{path}: schedule.{name}: {e}") from None
            if v not in vals:
                vals.append(v)
        dims.append((SCHED + name, tuple(vals)))
    base = GemmBase(p, h.schedule, K)
    space = GemmSpace(
        f"{raw.get('name', 'gemm')}+{inner.name}",
        " ".join(str(raw.get("description", "")).split()),
        inner.arch,
        inst.name,
        base,
        inner.families if learn_instr else [Family("preset", (), ())],
        inner.shared if learn_instr else (),
        Path(path),
        schedule_dims=tuple(dims),
        variant=h.variant.text,
    )
    space.make(space.families[0].name, {})  # the base point must be a valid model
    return space


# --- oracles -------------------------------------------------------------------------


@dataclass
class GemmVariantOracle(Oracle):
    """A hidden GEMM hypothesis run on the rows by the GEMM element code."""

    hidden: GemmModel | None = None

    def _answer(self, a, b, c) -> np.ndarray:
        from ..gemm.model import run_rows

        return run_rows(self.hidden, a, b, c)


TORCH_DTYPES = {
    Format.FP64: "float64",
    Format.FP32: "float32",
    Format.TF32: "float32",
    Format.FP16: "float16",
    Format.BF16: "bfloat16",
    Format.E4M3: "float8_e4m3fn",
    Format.E5M2: "float8_e5m2",
}


@dataclass
class TorchOracle(Oracle):
    """The local GPU: the N rows as one N×K by K×N product through torch on cuda (the
    diagonal D[i][i] answers row i; C holds c_i on its diagonal). FP8 runs
    `torch._scaled_mm` (use_fast_accum as the spec says; c as its bias, or added by one
    fp32 add for an fp32 output, where torch takes no bias), other formats `torch.addmm`
    (TF32 allowed for a TF32 instruction)."""

    fast: bool = False

    def _answer(self, a, b, c) -> np.ndarray:
        import torch

        p = self.p
        dt = {f: getattr(torch, n) for f, n in TORCH_DTYPES.items()}
        ints = {8: torch.uint8, 16: torch.int16, 32: torch.int32, 64: torch.int64}
        signed = {8: np.uint8, 16: np.int16, 32: np.int32, 64: np.int64}

        def tensor(bits: np.ndarray, fmt: Format):
            w = fmt.spec.storage
            raw = np.ascontiguousarray(bits.astype(UNSIGNED[w]).view(signed[w]))
            return torch.from_numpy(raw).view(ints[w]).view(dt[fmt]).to("cuda")

        A = tensor(np.asarray(a), p.a_fmt)
        B = tensor(np.asarray(b), p.b_fmt).t()
        n = len(c)
        cd = tensor(np.asarray(c), p.c_fmt)
        torch.backends.cuda.matmul.allow_tf32 = p.a_fmt == Format.TF32
        if p.a_fmt.spec.storage == 8:
            from ..probe.torch_rules import scaled_mm_bias_format

            one = torch.tensor(1.0, device="cuda")
            bias_fmt = scaled_mm_bias_format(p.d_fmt)  # None: no bias with an fp32 output
            D = torch._scaled_mm(
                A,
                B.contiguous().t().contiguous().t(),
                scale_a=one,
                scale_b=one,
                bias=None if bias_fmt is None else cd.to(dt[bias_fmt]),
                out_dtype=dt[p.d_fmt],
                use_fast_accum=self.fast,
            )
            if bias_fmt is None:  # c added by one fp32 add: fma(1, acc, c) = RN(acc + c)
                D = D + torch.diag(cd.to(D.dtype))
        else:
            C = torch.zeros(n, n, dtype=dt[p.c_fmt], device="cuda")
            C[range(n), range(n)] = cd
            D = torch.addmm(C.to(A.dtype) if p.d_fmt == p.a_fmt else C, A, B)
        torch.cuda.synchronize()
        w = p.d_fmt.spec.storage
        d = torch.diagonal(D).contiguous().view(ints[w]).cpu().numpy()
        return d.view(UNSIGNED[w]).astype(np.uint64)


LIBRARY_SIDE = 256
"""M and N of a library oracle's calls, at most (K x K below it)."""


@dataclass
class LibraryOracle(Oracle):
    """A CPU library's fp32 GEMM: `numpy:matmul` (numpy.matmul, its BLAS sgemm) or
    `torch:cpu` (torch.matmul on the CPU). Each row is output (0, 0) of one call of
    M = N = min(K, LIBRARY_SIDE) outputs, A and B zero elsewhere: a library may sum the
    outputs of one call in different orders (`tcsmt reveal` finds their classes), so the
    rows are asked at one position. The library reads no C: the space's base schedule must
    have beta=0 (C not read)."""

    library: str = "numpy:matmul"

    def _answer(self, a, b, c) -> np.ndarray:
        k = a.shape[1]
        side = min(k, LIBRARY_SIDE)
        A = np.zeros((side, k), np.float32)
        B = np.zeros((k, side), np.float32)
        out = np.empty(len(a), np.uint64)
        for i in range(len(a)):
            A[0] = np.asarray(a[i]).astype(np.uint32).view(np.float32)
            B[:, 0] = np.asarray(b[i]).astype(np.uint32).view(np.float32)
            d = self._run(A, B)
            out[i] = int(np.float32(d[0, 0]).view(np.uint32))
        return out

    def _run(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        if self.library == "numpy:matmul":
            # probes with infinities, NaNs and overflowing products are the point: the
            # warnings numpy gives on them are expected, not news for the user
            with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
                return np.matmul(A, B)
        import torch

        return torch.matmul(torch.from_numpy(A), torch.from_numpy(B)).numpy()


def _gemm_library(spec: str, space: GemmSpace) -> Oracle:
    b = space.base
    if (b.p.a_fmt, b.p.b_fmt, b.d_fmt) != (Format.FP32, Format.FP32, Format.FP32):
        raise UserError(
            f"oracle {spec!r}: the library is asked fp32 GEMMs; give an instruction of fp32 "
            "operands and output (e.g. --arch hopper --instr fma.rn.f32)"
        )
    if b.schedule.c_beta != 0.0:
        raise UserError(
            f"oracle {spec!r}: the library computes A*B and reads no C; give the base "
            "schedule beta=0 (e.g. --arch hopper/serial[beta=0])"
        )
    if spec == "torch:cpu":
        try:
            import torch  # noqa: F401
        except ImportError:
            raise UserError(f"oracle {spec!r}: torch is not installed") from None
    return LibraryOracle(spec, space.base, library=spec)


def _gemm_variant(spec: str, arg: str, space: GemmSpace) -> Oracle:
    from ..gemm.model import resolve_model

    if not arg:
        raise UserError(
            f"oracle {spec!r}: expected variant:ARCH/SCHEDULE, e.g. variant:hopper/cublas-fp8"
        )
    m = resolve_model(arg if "/" in arg else f"{arg}/serial", space.base.K, space.instr)
    b = space.base
    want = (b.p.a_fmt, b.p.b_fmt, b.c_fmt, b.d_fmt)
    if (m.p.a_fmt, m.p.b_fmt, m.c_fmt, m.d_fmt) != want:
        raise UserError(f"oracle {spec!r}: the hypothesis takes other operands than {space.instr}")
    return GemmVariantOracle(spec, space.base, hidden=m)


def _gemm_torch(spec: str, arg: str, space: GemmSpace) -> Oracle:
    if arg not in ("", "fast"):
        raise UserError(f"oracle {spec!r}: expected torch or torch:fast (use_fast_accum)")
    try:
        import torch
    except ImportError:
        raise UserError(f"oracle {spec!r}: torch is not installed (pip install torch)") from None
    if not torch.cuda.is_available():
        raise UserError(f"oracle {spec!r}: torch sees no CUDA GPU")
    return TorchOracle(spec, space.base, fast=arg == "fast")


def make_gemm_oracle(spec: str, space: GemmSpace, timeout: float = CMD_TIMEOUT) -> Oracle:
    """The oracle a spec names for the GEMM space: variant:, cmd: (`timeout` seconds a
    batch), torch[:fast] (the GPU), or a CPU library (numpy:matmul, torch:cpu)."""
    kind, _, arg = spec.partition(":")
    kind, arg = kind.strip(), arg.strip()
    if f"{kind}:{arg}" in ("numpy:matmul", "torch:cpu"):
        return _gemm_library(f"{kind}:{arg}", space)
    if kind == "variant":
        return _gemm_variant(spec, arg, space)
    if kind == "torch":
        return _gemm_torch(spec, arg, space)
    if kind == "cmd":
        return ORACLES["cmd"][0](spec, arg, space.base, space.arch, space.instr, timeout)
    raise UserError(
        f"unknown GEMM oracle {spec!r}; expected one of: variant:ARCH/SCHEDULE, cmd:PROGRAM, "
        "torch[:fast], numpy:matmul, torch:cpu"
    )


def recovered_gemm(space: GemmSpace, res, hidden: str, rows: int = 4096, seed: int = 99) -> bool:
    """Whether identify recovered a hidden GEMM hypothesis: one class left, every member
    of which predicts the hidden hypothesis's bits on every row of a fresh pool."""
    from ..gemm.model import resolve_model, run_rows
    from .pool import make_pool

    if len(res.classes) != 1:
        return False
    pool = make_pool(space.base, rows, seed)
    want = run_rows(resolve_model(hidden, space.base.K, space.instr), pool.a, pool.b, pool.c)
    return all(np.array_equal(want, space.run(h, pool.a, pool.b, pool.c)) for h in res.classes[0])
